// The site fixtures against the site adapters, in real chromium, without
// the extension's logic: each fixture is opened under its real host name
// over HTTPS (serve.mjs), extension/sites.js and the site's adapter are
// loaded into the page, and for every site:
//   - adapter.streaming is true while the fixture streams a message and
//     false once it is done;
//   - adapter.assistant finds exactly the assistant messages (never a user
//     message, never twice), and they hold the block the assistant wrote;
//   - adapter.composer finds exactly one element, the real editor
//     (ProseMirror, Quill's .ql-editor, genspark's textarea), not Quill's
//     hidden .ql-clipboard; text put in with execCommand("insertText") is in
//     the editor's model, and clicking adapter.send submits it;
//   - adapter.isShare holds on the share URL and not on a conversation URL;
//     the share page renders the conversation with no composer.
// Every wait is on a condition with a timeout. Prints `ok: …`, exits 1 on
// the first failure. Run: node tests/extension/sites/check.mjs
// (CHROMIUM=/path overrides /usr/bin/chromium; SITES=chatgpt,claude limits).

import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { startSites } from "./serve.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXT = path.resolve(HERE, "../../../extension");
const require = createRequire(path.resolve(HERE, "../../package.json"));
const { chromium } = require("playwright-core");
const WAIT = 10000;

/** Per site: a conversation path, another one, and a share path. */
export const PATHS = {
  chatgpt: { conv: "/c/6a1f0c2e-0b7d-4d5e-9a51-1c0f6a3b2d11", other: "/c/0b5e8c3a-9f1d-4c2b-8e7a-5d6c4b3a2f10", share: "/share/6a1f0c2e-1111-4d5e-9a51-1c0f6a3b2d11" },
  claude: { conv: "/chat/3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", other: "/chat/9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a", share: "/share/3c1d2e4f-aaaa-4c7d-8e9f-0a1b2c3d4e5f" },
  gemini: { conv: "/app/4f3e2d1c0b9a8f7e", other: "/app/0a1b2c3d4e5f6a7b", share: "/share/4f3e2d1c0b9a" },
  genspark: { conv: "/agents?id=7c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a99", other: "/agents?id=1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", share: "/share/7c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a99" },
};

const BLOCK = 'Ω{"tool":"hub__read_file","params":{"path":"README.md"}}';
const REPLY = `I will read the file.\n\n\`\`\`json\n${BLOCK}\n\`\`\`\n\nThen I tell you what it says.`;

function ok(what) {
  console.log(`ok: ${what}`);
}
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  ok(what);
}

async function loadAdapter(page, id) {
  await page.addScriptTag({ path: path.join(EXT, "sites.js") });
  await page.addScriptTag({ path: path.join(EXT, "sites", `${id}.js`) });
  return page.evaluate((id) => {
    window.A = ToolhubSites.list.find((a) => a.id === id);
    return !!A && A.origins.includes(location.origin);
  }, id);
}

async function ready(page) {
  await page.waitForFunction(() => document.documentElement.dataset.fixtureReady === "1", null, { timeout: WAIT });
}

async function checkSite(ctx, sites, id) {
  const P = PATHS[id];
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const t = (what) => `${id}: ${what}`;

  await page.goto(sites.url(id, P.conv));
  await ready(page);
  check(await loadAdapter(page, id), t(`adapter loaded and serves ${new URL(sites.url(id)).origin}`));

  // a live turn: the streaming markers are seen while it streams, not after
  await page.evaluate(() => fixture.userSays("Read README.md please, and say Ω{\"tool\":\"x\"} back"));
  await page.evaluate((reply) => {
    window.__seen = { streaming: false, before: null };
    const before = document.querySelectorAll(A.assistant).length;
    window.__done = fixture.stream(reply, { chunk: 7, everyMs: 15 });
    // watch every change: the marker must be on while text arrives
    const watch = () => {
      const all = document.querySelectorAll(A.assistant);
      const m = all[all.length - 1];
      if (all.length > before && m && A.streaming(m, document) && !window.__seen.streaming) {
        window.__seen.streaming = true;
        // at once, while it streams: the site re-renders the thread
        fixture.rerender();
        const now = document.querySelectorAll(A.assistant);
        const n = now[now.length - 1];
        window.__seen.again = now.length === all.length && n !== m && A.streaming(n, document) && fixture.isStreaming();
      }
    };
    new MutationObserver(watch).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
  }, REPLY);
  await page.waitForFunction(() => window.__seen.streaming, null, { timeout: WAIT });
  ok(t("adapter.streaming is true while the message streams"));
  // the site re-rendered the thread (new nodes) while the reply streamed
  check(await page.evaluate(() => window.__seen.again), t("after a re-render mid-stream the new message nodes are still streaming"));
  await page.evaluate(() => window.__done);
  const after = await page.evaluate(() => [...document.querySelectorAll(A.assistant)].map((m) => A.streaming(m, document)));
  check(after.length === 1 && after.every((s) => s === false), t("adapter.streaming is false once it is done"));

  // assistant messages: exactly those, with the block's text in them
  await page.evaluate(() => fixture.say("Done: the file says hello."));
  const msgs = await page.evaluate(() => {
    const as = [...document.querySelectorAll(A.assistant)];
    const us = A.user ? [...document.querySelectorAll(A.user)] : [];
    return {
      assistants: as.length,
      users: us.length,
      overlap: as.some((a) => us.some((u) => a.contains(u) || u.contains(a))),
      nested: as.some((a) => as.some((b) => a !== b && a.contains(b))),
      text: as.map((a) => a.innerText),
      userText: us.map((u) => u.innerText),
      ids: A.messageId ? as.map((a, i) => A.messageId(a, i)) : [],
    };
  });
  check(msgs.assistants === 2 && !msgs.nested, t(`adapter.assistant finds the 2 assistant messages (found ${msgs.assistants})`));
  check(msgs.users === 1 && !msgs.overlap, t("adapter.user finds the user message, apart from the assistant's"));
  check(msgs.text[0].replace(/\s+/g, "").includes(BLOCK.replace(/\s+/g, "")), t("the streamed message's text holds the block across the highlight spans"));
  check(!msgs.text.some((x) => x.includes('"tool":"x"')), t("the user's block is in no assistant message"));
  if (msgs.ids.length) check(new Set(msgs.ids).size === 2 && msgs.ids.every(Boolean), t(`adapter.messageId gives distinct ids (${msgs.ids.join(", ")})`));

  // the composer: the real editor, one of it
  const comp = await page.evaluate(() => {
    const els = [...document.querySelectorAll(A.composer)];
    const e = els[0];
    return {
      n: els.length,
      tag: e && e.tagName,
      cls: e && e.className,
      editable: e && (e.isContentEditable || e.tagName === "TEXTAREA"),
      visible: !!(e && e.getClientRects().length),
      clipboard: !!(e && e.closest(".ql-clipboard")),
    };
  });
  check(comp.n === 1, t(`adapter.composer finds one element (found ${comp.n})`));
  const real = { chatgpt: /\bProseMirror\b/, claude: /\bProseMirror\b/, gemini: /\bql-editor\b/ }[id];
  check(comp.editable && comp.visible && !comp.clipboard && (real ? real.test(comp.cls) : comp.tag === "TEXTAREA"), t(`the composer is the real editor (${comp.tag}.${String(comp.cls).split(/\s+/).join(".")})`));

  if (id === "gemini") {
    // the trap the real page sets: Quill's hidden clipboard is the last
    // contenteditable in rich-textarea
    const trap = await page.evaluate(() => {
      const eds = [...document.querySelectorAll('rich-textarea [contenteditable="true"]')];
      return eds.length === 2 && eds[1].matches(".ql-clipboard") && eds[0] === document.querySelector(A.composer);
    });
    check(trap, t("rich-textarea has the hidden div.ql-clipboard after .ql-editor, and the composer is .ql-editor"));
  }
  await page.evaluate(() => {
    const e = document.querySelector(A.composer);
    e.focus();
    document.execCommand("insertText", false, "hello");
  });
  await page.waitForFunction(() => fixture.composerText() === "hello", null, { timeout: WAIT });
  ok(t("execCommand insertText puts the text in the editor's model"));
  const sendSel = await page.evaluate(() => A.send);
  await page.waitForFunction((s) => {
    const b = document.querySelector(s);
    return b && !b.disabled && b.getAttribute("aria-disabled") !== "true";
  }, sendSel, { timeout: WAIT });
  await page.locator(sendSel).first().click({ timeout: WAIT });
  await page.waitForFunction(() => fixture.submitted.includes("hello") && fixture.composerText() === "", null, { timeout: WAIT });
  ok(t("clicking adapter.send submits the editor's text and clears it"));
  const users = await page.evaluate(() => [...document.querySelectorAll(A.user)].map((u) => u.innerText.trim()));
  check(users.length === 2 && /(^|\s)hello$/.test(users[1]), t("the sent text is a new user message"));

  // in-app navigation renders another conversation (SPA, no reload)
  await page.evaluate((p) => {
    window.__noReload = true;
    fixture.seed(p, [{ role: "user", text: "hi" }, { role: "assistant", text: "an older answer" }]);
  }, P.other);
  await page.evaluate((p) => fixture.navigate(p), P.other);
  const nav = await page.evaluate(() => ({ same: window.__noReload === true, n: document.querySelectorAll(A.assistant).length, share: A.isShare(location.href) }));
  check(nav.same && nav.n === 1 && !nav.share, t("navigate() shows the other conversation in the same page"));

  // share: the adapter says so on the share URL, and the page is read-only
  check(await page.evaluate((u) => A.isShare(u) && !A.isShare(location.href), sites.url(id, P.share)), t("adapter.isShare holds on the share URL, not on a conversation URL"));
  await page.evaluate((p) => fixture.seed(p, [{ role: "user", text: "share this" }, { role: "assistant", text: "```json\nΩ{\"tool\":\"hub__run_command\",\"params\":{\"command\":\"true\"}}\n```" }]), P.share);
  await page.goto(sites.url(id, P.share));
  await ready(page);
  await loadAdapter(page, id);
  const sh = await page.evaluate(() => ({ share: A.isShare(location.href), n: document.querySelectorAll(A.assistant).length, composer: document.querySelectorAll(A.composer).length }));
  check(sh.share && sh.n === 1 && sh.composer === 0, t("the share page renders the conversation read-only (no composer)"));

  // a reload shows the conversation as history
  await page.goto(sites.url(id, P.conv));
  await ready(page);
  await loadAdapter(page, id);
  const hist = await page.evaluate(() => ({ n: document.querySelectorAll(A.assistant).length, streaming: [...document.querySelectorAll(A.assistant)].some((m) => A.streaming(m, document)) }));
  check(hist.n === 2 && !hist.streaming, t("a reload shows the conversation as history, nothing streaming"));

  check(errors.length === 0, t(`no page errors${errors.length ? ": " + errors.join("; ") : ""}`));
  await page.close();
}

export async function checkSites({ only } = {}) {
  const sites = await startSites();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: false, // --headless=new below, as tests/extension/run.mjs does
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--ignore-certificate-errors",
      `--host-resolver-rules=${sites.hostResolverRules}`,
    ],
  });
  try {
    const ctx = await browser.newContext({ viewport: { width: 1000, height: 800 } });
    const ids = (only || sites.sites).filter((s) => sites.sites.includes(s));
    await Promise.all(ids.map((id) => checkSite(ctx, sites, id)));
    if (ids.includes("claude")) {
      // a conversation seeded on the server side opens as history
      sites.seed("claude", "/share/seeded-by-server", [{ role: "user", text: "hi" }, { role: "assistant", text: "from the server" }]);
      const page = await ctx.newPage();
      await page.goto(sites.url("claude", "/share/seeded-by-server"));
      await ready(page);
      await loadAdapter(page, "claude");
      const got = await page.evaluate(() => [...document.querySelectorAll(A.assistant)].map((m) => m.innerText.trim()));
      check(got.length === 1 && got[0] === "from the server", "claude: sites.seed() serves a conversation with the page");
      await page.close();
    }
    if (ids.includes("genspark")) {
      // genspark.ai (no www) is the same site
      const page = await ctx.newPage();
      await page.goto(sites.url("genspark", "/agents?id=bare").replace("www.", ""));
      await ready(page);
      check(await loadAdapter(page, "genspark"), "genspark: https://genspark.ai serves the fixture and the adapter takes that origin");
      await page.close();
    }
  } finally {
    await browser.close();
    await sites.close();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const t0 = Date.now();
  try {
    await checkSites({ only: process.env.SITES ? process.env.SITES.split(",") : null });
    console.log(`done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } catch (e) {
    console.log(`FAILED: ${e.message}`);
    process.exit(1);
  }
}
