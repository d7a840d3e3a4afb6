// What the extension's browser scripts (run.mjs on the local fixture page,
// sites.mjs on the chat-site fixtures) share: Debian's chromium with the
// extension loaded, the options page filled as a person does, the hub's call
// logs, and waits on a condition with a timeout (nothing sleeps to
// synchronise).

import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const EXT = process.env.EXTENSION_DIR || path.resolve(HERE, "../../extension");
export const EXT_ID = "ogalccghdnhlhiecjohlmgmaembolcgn";
export const WAIT = 30000;

export function ok(what) {
  console.log(`ok: ${what}`);
}

export function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  ok(what);
}

/** Wait until `pred()` holds, checking every 50 ms, at most `ms`. */
export async function until(pred, what, ms = WAIT) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The calls test server `server` logged in `hubDir` (one JSON line each). */
export function calls(hubDir, server = "t") {
  try {
    return readFileSync(path.join(hubDir, `${server}.calls.jsonl`), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

/** Chromium with the extension, on a fresh or given profile; `args` adds
 * flags (the site fixtures' host resolver rules). */
export async function launch(profile, args = []) {
  return chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: false, // --headless=new below: the old headless mode has no extensions
    viewport: { width: 1000, height: 800 },
    args: [
      "--headless=new",
      `--disable-extensions-except=${EXT}`,
      `--load-extension=${EXT}`,
      "--no-sandbox",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-gpu",
      ...args,
    ],
  });
}

export async function workerUrl(ctx) {
  let [sw] = ctx.serviceWorkers();
  if (!sw) sw = await ctx.waitForEvent("serviceworker", { timeout: WAIT });
  return sw.url();
}

/** Save the hub URL and token through the options page, as a person does. */
export async function configure(ctx, hubWs, token) {
  const page = await ctx.newPage();
  await page.goto(`chrome-extension://${EXT_ID}/options.html`);
  await page.fill("#hubUrl", hubWs);
  await page.fill("#token", token);
  await page.click('button[type="submit"]');
  await page.waitForSelector("#saved:has-text('Saved.')", { timeout: WAIT });
  return page;
}
