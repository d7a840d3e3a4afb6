// The extension in a real browser: Debian's chromium under playwright-core
// loads extension/ unpacked; a fixture chat page served here on loopback
// streams assistant messages with Ω blocks; the hub is the real binary,
// started by tests/it/extension.rs, which passes
//   HUB_WS   ws://127.0.0.1:PORT/ws      TOKEN    the hub's token
//   HUB_DIR  the hub's folder (config.json, t.calls.jsonl)
//   OUT      where screenshots go        ONLY     scenarios to run (comma list; all when unset)
// and answers requests this script prints as `ask: …` on stdout with one
// line on stdin (`ask: restart-hub`, `ask: crash-hub`, `ask: log-count NEEDLE`).
// Every wait is for a DOM state, a file's content or a message, bounded by
// a timeout; nothing sleeps to synchronise. Prints `ok: …` per check,
// `done` at the end; exit 1 with `FAILED: …` on the first failure.
//
// With SETUP_ONLY=PROFILE_DIR it only saves the hub URL and token into a
// fresh profile and exits (the idle test then runs chromium without any
// debugger attached, see tests/it/extension.rs).

import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { readFileSync, writeFileSync, renameSync, mkdtempSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { EXT_ID, WAIT, ok, check, until, launch, workerUrl, configure as configureAs, calls as callsIn } from "./browser.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const HUB_WS = process.env.HUB_WS;
const TOKEN = process.env.TOKEN;
const HUB_DIR = process.env.HUB_DIR;
const OUT = process.env.OUT || tmpdir();
const ONLY = process.env.ONLY ? new Set(process.env.ONLY.split(",")) : null;

// ------------------------------------------------------------ the Rust side

const stdin = createInterface({ input: process.stdin });
const lines = [];
let lineWaiter = null;
stdin.on("line", (l) => {
  if (lineWaiter) {
    const w = lineWaiter;
    lineWaiter = null;
    w(l);
  } else lines.push(l);
});
async function ask(cmd) {
  console.log(`ask: ${cmd}`);
  if (lines.length) return lines.shift();
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer to ${cmd}`)), 120000);
    lineWaiter = (l) => {
      clearTimeout(t);
      resolve(l);
    };
  });
}
async function logCount(needle) {
  return Number(await ask(`log-count ${needle}`));
}

// ------------------------------------------------------------ hub files

function calls(server = "t") {
  return callsIn(HUB_DIR, server);
}
function callsWhere(pred, server = "t") {
  return calls(server).filter(pred);
}
function editConfig(f) {
  const p = path.join(HUB_DIR, "config.json");
  const c = JSON.parse(readFileSync(p, "utf8"));
  f(c);
  writeFileSync(p + ".tmp", JSON.stringify(c, null, 2));
  renameSync(p + ".tmp", p);
}

// ------------------------------------------------------------ fixture server

function startFixture() {
  const files = {
    "/fixture/chat.js": ["chat.js", "text/javascript"],
    "/fixture/chat.css": ["chat.css", "text/css"],
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (files[url.pathname]) {
      const [f, type] = files[url.pathname];
      res.writeHead(200, { "content-type": type, "cache-control": "no-store" });
      res.end(readFileSync(path.join(HERE, "fixture", f)));
    } else if (url.pathname.startsWith("/chat/")) {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
      res.end(readFileSync(path.join(HERE, "fixture", "chat.html")));
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// ------------------------------------------------------------ the browser

function configure(ctx, token) {
  return configureAs(ctx, HUB_WS, token);
}

if (process.env.SETUP_ONLY) {
  const ctx = await launch(process.env.SETUP_ONLY);
  const url = await workerUrl(ctx);
  const page = await configure(ctx, TOKEN);
  await page.waitForSelector('#conn[data-state="connected"]', { timeout: WAIT });
  ok(`profile ready (${url})`);
  await ctx.close();
  console.log("done");
  process.exit(0);
}

// ------------------------------------------------------------ scenarios

const fixture = await startFixture();
const BASE = `http://127.0.0.1:${fixture.address().port}`;
const profile = mkdtempSync(path.join(tmpdir(), "toolhub-ext-"));
const ctx = await launch(profile);
const errors = [];
let popup; // the popup page, opened in a tab
let optionsPage;

async function newChat(name) {
  const p = await ctx.newPage();
  p.on("pageerror", (e) => errors.push(`${name}: ${e.message}`));
  await p.goto(`${BASE}/chat/${name}`);
  return p;
}

/** Stream `text` as the assistant's next message; resolves when shown. */
async function say(page, text, opts = {}) {
  await page.evaluate(([t, o]) => window.fixture.stream(t, o), [text, opts]);
}

const block = (v) => "Ω" + JSON.stringify(v);
const resultSel = (state) => `.toolhub-result[data-toolhub-state="${state}"]`;

/** The result element whose text has `needle`, once in `state`. */
async function resultWith(page, needle, state = "success", ms = WAIT) {
  const loc = page.locator(resultSel(state), { hasText: needle });
  await loc.first().waitFor({ timeout: ms });
  return loc;
}

async function badgeText() {
  return popup.evaluate(() => chrome.action.getBadgeText({}));
}

async function uiState() {
  return popup.evaluate(() => chrome.runtime.sendMessage({ type: "ui-state" }));
}

/** Stop the extension's service worker, as Chrome does when it likes:
 * CDP Target.closeTarget on its target (the worker and its socket end). */
async function stopWorker() {
  const b = await ctx.browser().newBrowserCDPSession();
  try {
    const { targetInfos } = await b.send("Target.getTargets");
    const sws = targetInfos.filter((t) => t.type === "service_worker" && t.url.startsWith(`chrome-extension://${EXT_ID}/`));
    for (const t of sws) await b.send("Target.closeTarget", { targetId: t.targetId });
    return sws.length;
  } finally {
    await b.detach().catch(() => {});
  }
}

async function workerTargets() {
  const b = await ctx.browser().newBrowserCDPSession();
  try {
    const { targetInfos } = await b.send("Target.getTargets");
    return targetInfos.filter((t) => t.type === "service_worker" && t.url.startsWith(`chrome-extension://${EXT_ID}/`)).length;
  } finally {
    await b.detach().catch(() => {});
  }
}

const scenarios = [];
let chatA; // the main chat tab
function scenario(name, f) {
  scenarios.push({ name, f });
}

scenario("setup", async () => {
  const url = await workerUrl(ctx);
  check(url === `chrome-extension://${EXT_ID}/sw.js`, `the manifest key fixes the extension id (${EXT_ID})`);
  optionsPage = await configure(ctx, TOKEN);
  await optionsPage.waitForSelector('#conn[data-state="connected"]', { timeout: WAIT });
  ok("the options page saves the hub URL and token; the worker connects");
  popup = await ctx.newPage();
  await popup.setViewportSize({ width: 384, height: 600 });
  await popup.goto(`chrome-extension://${EXT_ID}/popup.html`);
  await popup.waitForSelector('#state[data-state="connected"]', { timeout: WAIT });
  await popup.waitForSelector('#servers li[data-server="t"]', { timeout: WAIT });
  const n = Number(await popup.getAttribute("#tool-count", "data-count"));
  check(n > 10, `the popup shows the state, the servers and the tool count (${n} tools)`);
  await until(async () => (await badgeText()) === "on", "the badge to say on");
  ok("the badge says the connection is on");
  // A local page is read only once its origin is turned on in the popup.
  chatA = await newChat("one");
  await say(chatA, block({ tool: "t__echo", params: { message: "before the origin was turned on" } }));
  await popup.fill("#local-origin", "http://example.com:8080");
  await popup.click('button[data-action="add-origin"]');
  await popup.waitForSelector("#local-error:has-text('127.0.0.1')", { timeout: WAIT });
  ok("the popup refuses a non-local origin as a local page, saying what it takes");
  await popup.fill("#local-origin", BASE);
  await popup.click('button[data-action="add-origin"]');
  await popup.waitForSelector(`#sites li[data-origin="${BASE}"][data-local="true"]`, { timeout: WAIT });
  // The tools the fixture's blocks use run without asking on this page:
  // one set in the popup as a person does, the rest as a backup would.
  await popup.selectOption("#policy-site", BASE);
  await popup.selectOption('#policy li[data-tool="t__echo"] select', "auto");
  await until(async () => {
    const { toolPolicy } = await popup.evaluate(() => chrome.storage.local.get("toolPolicy"));
    return toolPolicy && toolPolicy[BASE] && toolPolicy[BASE].t__echo === "auto";
  }, "the popup to store t__echo's policy");
  await popup.evaluate((base) => chrome.storage.local.get("toolPolicy").then(({ toolPolicy }) => {
    const mine = { ...toolPolicy[base] };
    for (const t of ["t__slow", "t__counter", "pc__memo", "u__u_extra", "m__test_input_required_result_elicitation"]) mine[t] = "auto";
    return chrome.storage.local.set({ toolPolicy: { ...toolPolicy, [base]: mine } });
  }), BASE);
  await say(chatA, block({ tool: "t__echo", params: { message: "after the origin was turned on" } }));
  await resultWith(chatA, "after the origin was turned on");
  check(callsWhere((c) => c.arguments.message === "before the origin was turned on").length === 0, "a local page ran nothing until its origin was turned on in the popup; then a new block ran");
  const early = await chatA.locator(".toolhub-result", { hasText: "before the origin was turned on" }).getAttribute("data-toolhub-state");
  check(early === "ready", `the block that was there before is offered, not run (${early})`);
});

scenario("single", async () => {
  const text = "Let me check that for you.\n\n" + block({ tool: "t__echo", params: { message: "hello from the page" } }) + "\n\nThe result will follow.";
  await say(chatA, text, { chunk: 7, everyMs: 15 });
  const r = await resultWith(chatA, "hello from the page");
  const key = await r.first().getAttribute("data-toolhub-call");
  check(/^th-[0-9a-f]{16}-0$/.test(key), `a streamed single call ends in success, keyed ${key}`);
  const ran = () => callsWhere((c) => c.tool === "echo" && c.arguments.message === "hello from the page").length;
  check(ran() === 1, "the tool ran once");
  const placed = await chatA.evaluate((k) => {
    const el = document.querySelector(`[data-toolhub-call="${k}"]`);
    return el.previousElementSibling && el.previousElementSibling.textContent.includes("Ω");
  }, key);
  check(placed, "the result element sits right after the element holding the block");
  await chatA.evaluate(() => window.fixture.rerender());
  await chatA.waitForSelector(`[data-toolhub-call="${key}"][data-toolhub-state="success"]`, { timeout: WAIT });
  check((await chatA.locator(`[data-toolhub-call="${key}"]`).count()) === 1, "after a full re-render the result is shown again, once");
  await chatA.reload();
  await chatA.waitForSelector(`[data-toolhub-call="${key}"][data-toolhub-state="success"]`, { timeout: WAIT });
  check((await chatA.locator(`[data-toolhub-call="${key}"]`).count()) === 1, "after a reload the stored result is shown, once");
  check(ran() === 1, "re-render and reload ran nothing again");
});

scenario("batch", async () => {
  const b = {
    steps: [
      { id: "greet", tool: "t__echo", params: { message: "alpha" }, saveAs: "greet" },
      { id: "wait", tool: "t__slow", params: { ms: 1500, message: "{{greet.result}} then beta" }, saveAs: "w" },
      { id: "count", tool: "t__counter", params: { key: "batch-demo" }, saveAs: "c" },
      { id: "report", tool: "t__echo", params: { message: "count={{c.result.count}} after {{w.result}}" } },
    ],
    options: { stopOnError: true },
  };
  const text = "I'll do this in one batch:\n\n```json\nΩ{\"steps\":[\n" + b.steps.map((x) => "  " + JSON.stringify(x)).join(",\n") + "\n],\n\"options\":" + JSON.stringify(b.options) + "}\n```\n\nWaiting for the steps.";
  await say(chatA, text, { chunk: 11, everyMs: 10 });
  const el = chatA.locator('.toolhub-result:has(.toolhub-step[data-step-index="0"])').last();
  await el.waitFor({ timeout: WAIT });
  check((await el.getAttribute("data-toolhub-state")) === "running", "step 1's result shows while the batch still runs");
  await chatA.locator(`${resultSel("success")}:has(.toolhub-step[data-step-index="3"])`).waitFor({ timeout: WAIT });
  const steps = await el.locator(".toolhub-step").allTextContents();
  check(steps.length === 4, "the finished batch shows its four steps");
  check(steps[3].includes("count=1 after alpha then beta"), `saveAs and {{templates}} carried results from step to step (${JSON.stringify(steps[3].slice(0, 80))})`);
  // The message with its result, without the composer bar over it.
  await chatA.evaluate(() => (document.getElementById("composer").style.display = "none"));
  await chatA.locator(".msg.assistant").last().screenshot({ path: path.join(OUT, "extension-chat.png") });
  await chatA.evaluate(() => (document.getElementById("composer").style.display = ""));
  ok("screenshot of the finished batch saved");
});

scenario("approval", async () => {
  await say(chatA, "This one needs your approval.\n\n" + block({ tool: "t__echo", params: { message: "danger zone" } }));
  await resultWith(chatA, "needs your approval", "need_user");
  ok("a call that a confirm rule holds shows need_user in the page");
  await popup.waitForSelector('#approvals li[data-task-id]:has-text("danger zone")', { timeout: WAIT });
  await until(async () => (await badgeText()) === "1", "the badge to count one approval");
  await popup.screenshot({ path: path.join(OUT, "extension-popup.png"), fullPage: true });
  ok("the badge counts the approval waiting");
  await popup.click('#approvals li:has-text("danger zone") button[data-action="approve"]');
  await resultWith(chatA, "danger zone", "success");
  check(callsWhere((c) => c.arguments.message === "danger zone").length === 1, "approved in the popup, the call ran once");
  await say(chatA, "And this one you will deny.\n\n" + block({ tool: "t__echo", params: { message: "danger denied" } }));
  await popup.waitForSelector('#approvals li[data-task-id]:has-text("danger denied")', { timeout: WAIT });
  await popup.click('#approvals li:has-text("danger denied") button[data-action="deny"]');
  await resultWith(chatA, "SAFETY_BLOCKED", "error");
  check(callsWhere((c) => c.arguments.message === "danger denied").length === 0, "denied in the popup, the call never ran and the page shows SAFETY_BLOCKED");
  // A batch step waiting for approval while the worker is stopped: the
  // approval is still there after the restart, and answering it runs the step.
  await say(chatA, "A batch with a risky step:\n\n" + block({ steps: [
    { id: "safe", tool: "t__echo", params: { message: "safe first" } },
    { id: "risky", tool: "t__echo", params: { message: "danger in a batch" } },
  ] }));
  await resultWith(chatA, "batch of 2 steps", "need_user");
  check((await stopWorker()) === 1, "the worker is stopped while a batch step waits for approval");
  await popup.reload();
  await popup.waitForSelector('#approvals li[data-task-id]:has-text("danger in a batch")', { timeout: WAIT });
  await popup.click('#approvals li:has-text("danger in a batch") button[data-action="approve"]');
  const done = chatA.locator(resultSel("success")).filter({ has: chatA.locator('.toolhub-step[data-step-index="1"]') }).filter({ hasText: "danger in a batch" });
  await done.waitFor({ timeout: WAIT });
  check(callsWhere((c) => c.arguments.message === "danger in a batch").length === 1, "approved after the worker's restart, the step ran once");
  await popup.waitForSelector("#approvals-section[hidden]", { state: "attached", timeout: WAIT });
});

scenario("form", async () => {
  // A server asks the person mid-call (an elicitation form): the popup
  // shows its fields, and what the person types reaches the server.
  await say(chatA, "The server will ask your name.\n\n" + block({ tool: "m__test_input_required_result_elicitation", params: {} }));
  const item = '#approvals li:has-text("What is your name")';
  await popup.waitForSelector(`${item} input[data-field="name"]`, { timeout: WAIT });
  ok("the popup shows the server's form, a text box for its field");
  await popup.fill(`${item} input[data-field="name"]`, "Ada");
  // An update arriving while the person types draws the list anew: what
  // they typed stays.
  await popup.evaluate(() => render(last));
  check((await popup.inputValue(`${item} input[data-field="name"]`)) === "Ada", "what the person typed survives the popup drawing its list anew");
  await popup.click(`${item} button[data-action="approve"]`);
  await resultWith(chatA, "Hello, Ada!");
  ok("the name typed in the popup reached the server, and the call finished with it");
});

scenario("invalid", async () => {
  await say(chatA, 'Oops: Ω{"tool":"t__echo", params: {"message":"x"}}');
  const r = await resultWith(chatA, "not valid JSON", "error");
  const t = await r.first().textContent();
  check(t.includes("⟨here⟩") && t.includes("INVALID_BLOCK"), "invalid JSON gives a readable error in the page, pointing at the spot");
});

scenario("split", async () => {
  // A blank line inside the JSON: the renderer splits the block over two
  // paragraphs, each with highlighted-free plain text.
  await say(chatA, 'Two paragraphs: Ω{"tool":"t__echo",\n\n"params":{"message":"split over paragraphs"}} and on.');
  await resultWith(chatA, "split over paragraphs");
  check(callsWhere((c) => c.arguments.message === "split over paragraphs").length === 1, "a block split over two paragraphs is found whole and runs once");
});

scenario("tabs", async () => {
  const chatB = await newChat("two");
  await Promise.all([
    say(chatA, block({ tool: "t__echo", params: { message: "only in one" } })),
    say(chatB, block({ tool: "t__echo", params: { message: "only in two" } })),
  ]);
  await resultWith(chatA, "only in one");
  await resultWith(chatB, "only in two");
  const inA = await chatA.locator(".toolhub-result", { hasText: "only in two" }).count();
  const inB = await chatB.locator(".toolhub-result", { hasText: "only in one" }).count();
  check(inA === 0 && inB === 0, "each tab shows only the result of its own block");
  const bKeys = await chatB.locator(".toolhub-result").evaluateAll((els) => els.map((e) => e.getAttribute("data-toolhub-call")));
  check(bKeys.length === 1, "the second tab has exactly one result element");
  await chatB.close();
});

scenario("tab-instances", async () => {
  // pc is a `scope: "context"` server: the extension sends each call's tab
  // as its context, so each tab's calls run in an instance of its own (a
  // browser per tab); its memo stands for the tab's page.
  const chatB = await newChat("three");
  await say(chatA, block({ tool: "pc__memo", params: { value: "page-of-one" } }));
  await resultWith(chatA, "page-of-one");
  await say(chatB, block({ tool: "pc__memo", params: { value: "page-of-two" } }));
  await resultWith(chatB, "page-of-two");
  // Read back after the other tab wrote: a shared instance would say two.
  await say(chatA, "What is on my page?\n\n" + block({ tool: "pc__memo", params: {} }));
  await chatA.locator(resultSel("success"), { hasText: "page-of-one" }).nth(1).waitFor({ timeout: WAIT });
  const crossed = await chatA.locator(".toolhub-result", { hasText: "page-of-two" }).count();
  check(crossed === 0, "each tab's calls ran in its own instance of the per-context server (the first tab reads back its own memo)");
  check((await logCount("starting a server instance for a new context")) >= 2, "the hub started one instance per tab");
  await chatB.close();
});

scenario("insert", async () => {
  await optionsPage.check("#insertResult");
  await optionsPage.check("#autoSubmit");
  await optionsPage.click('button[type="submit"]');
  await until(async () => (await popup.evaluate(() => chrome.storage.local.get("autoSubmit"))).autoSubmit === true, "the options stored");
  const chatC = await newChat("insert");
  await say(chatC, block({ tool: "t__echo", params: { message: "send me back Ω{not a block}" } }));
  await chatC.waitForSelector('.msg.user:has-text("[toolhub result")', { timeout: WAIT });
  const sent = await chatC.evaluate(() => window.fixture.submitted);
  check(sent.length === 1 && sent[0].includes("send me back"), "the result went into the input box and was sent");
  check(!/[ΩΩ]\s*\{/.test(sent[0]), "a sent result never holds a runnable block");
  await chatC.reload();
  await chatC.waitForSelector(resultSel("success"), { timeout: WAIT });
  check((await chatC.evaluate(() => document.getElementById("input").value)) === "", "a reload does not insert a stored result again");
  await optionsPage.uncheck("#insertResult");
  await optionsPage.click('button[type="submit"]');
  await until(async () => (await popup.evaluate(() => chrome.storage.local.get("insertResult"))).insertResult === false, "the options stored");
  await chatC.close();
});

scenario("worker-stop", async () => {
  const before = (await uiState()).stats;
  await say(chatA, "This takes a while.\n\n" + block({ tool: "t__slow", params: { ms: 4000, message: "survived a worker stop" } }));
  await resultWith(chatA, "slow", "running");
  await until(() => callsWhere((c) => c.tool === "slow" && c.arguments.message === "survived a worker stop").length === 1, "the slow call to reach the server");
  check((await stopWorker()) === 1, "the service worker is stopped while its call runs");
  await resultWith(chatA, "survived a worker stop", "success", 60000);
  check(callsWhere((c) => c.arguments.message === "survived a worker stop").length === 1, "the result appears and the tool ran once");
  const after = (await uiState()).stats;
  check(after.starts > before.starts, `the worker was restarted (${before.starts} → ${after.starts} starts)`);
  check(after.resumes > before.resumes, `it resumed its hub session (${before.resumes} → ${after.resumes} resumes; last refusal: ${after.lastResumeError})`);
  const n = await chatA.locator(".toolhub-result", { hasText: "survived a worker stop" }).count();
  check(n === 1, "the result shows once");
});

scenario("random-stops", async () => {
  const before = (await uiState()).stats;
  for (let i = 0; i < 10; i++) {
    const tag = `r${i}`;
    const steps = [];
    for (let j = 0; j < 10; j++) steps.push({ id: `s${j}`, tool: "t__slow", params: { ms: 120, message: `${tag}-s${j}` } });
    await say(chatA, `Batch ${i}:\n\n` + block({ steps }), { chunk: 40, everyMs: 5 });
    const loc = chatA.locator(".msg.assistant", { hasText: `Batch ${i}:` }).locator(".toolhub-result");
    await loc.waitFor({ timeout: WAIT });
    const at = Math.floor(Math.random() * 1600);
    await new Promise((r) => setTimeout(r, at)); // the fault's random moment, not a synchronisation
    await stopWorker();
    const key = await loc.getAttribute("data-toolhub-call");
    const done = chatA.locator(`[data-toolhub-call="${key}"][data-toolhub-state="success"]`);
    await done.waitFor({ timeout: 60000 });
    const idx = await done.locator(".toolhub-step").evaluateAll((els) => els.map((e) => e.getAttribute("data-step-index")));
    if (idx.join(",") !== "0,1,2,3,4,5,6,7,8,9") throw new Error(`batch ${i} (stopped at ${at} ms) shows steps ${idx}`);
    for (let j = 0; j < 10; j++) {
      const n = callsWhere((c) => c.arguments.message === `${tag}-s${j}`).length;
      if (n !== 1) throw new Error(`batch ${i} (stopped at ${at} ms): step ${j} ran ${n} times`);
    }
    ok(`batch ${i}: worker stopped at ${at} ms; every step shows once and ran once`);
  }
  const after = (await uiState()).stats;
  ok(`the worker started ${after.starts - before.starts} times, resumed its session ${after.resumes - before.resumes} times, was refused ${after.resumeRefusals - before.resumeRefusals} times`);
});

scenario("hub-restart", async () => {
  const connects = await logCount("client connected");
  check((await ask("restart-hub")) === "ok", "the hub was restarted on the same address");
  await popup.waitForSelector('#state[data-state="connected"]', { timeout: WAIT });
  await until(async () => (await logCount("client connected")) > 0, "a connection to the new hub");
  await say(chatA, "After the restart:\n\n" + block({ tool: "t__echo", params: { message: "after the hub restart" } }));
  await resultWith(chatA, "after the hub restart");
  check(callsWhere((c) => c.arguments.message === "after the hub restart").length === 1, `the next block runs on the restarted hub (${connects} connections before)`);
  // A restart in the middle of a single call: the new hub does not know
  // the call's key, so the extension must not send it again.
  await say(chatA, "Slow again:\n\n" + block({ tool: "t__slow", params: { ms: 5000, message: "cut by a restart" } }));
  await until(() => callsWhere((c) => c.arguments.message === "cut by a restart").length === 1, "the slow call to reach the server");
  // Killed (a clean stop would cancel the call and say so first): the
  // extension learns of the restart from the new hub's uptime.
  check((await ask("crash-hub")) === "ok", "the hub was killed during a call and started again");
  await resultWith(chatA, "may or may not have taken effect", "error");
  ok("the call cut by the crash is reported as uncertain");
  await popup.waitForSelector('#state[data-state="connected"]', { timeout: WAIT });
  check(callsWhere((c) => c.arguments.message === "cut by a restart").length === 1, "and was not run a second time");
});

scenario("server-enabled", async () => {
  const before = Number(await popup.getAttribute("#tool-count", "data-count"));
  await popup.waitForSelector('#servers li[data-server="u"]:has-text("disabled")', { timeout: WAIT });
  ok(`server u is listed as disabled; ${before} tools`);
  editConfig((c) => {
    c.mcpServers.u.disabled = false;
  });
  await popup.waitForSelector('#servers li[data-server="u"]:has-text("running")', { timeout: WAIT });
  await until(async () => Number(await popup.getAttribute("#tool-count", "data-count")) > before, "more tools in the popup");
  const after = Number(await popup.getAttribute("#tool-count", "data-count"));
  check(after > before, `tools_updated reached the popup (${before} → ${after} tools)`);
  await popup.click("#copy");
  await popup.waitForSelector("#copied[data-tools]", { timeout: WAIT });
  const all = await popup.inputValue("#instructions");
  check(all.includes("u__u_extra(") && all.includes("t__echo(message: string)"), "the copied instructions list the new server's tools");
  check(all.includes('{"tool":"NAME","params":{"arg":"value"}}') && !/[ΩΩ][\s\u200b]*\{/.test(all), "they say what a block looks like, and hold no runnable block");
  await popup.uncheck('#servers input[data-server="t"]');
  await popup.click("#copy");
  await until(async () => !(await popup.inputValue("#instructions")).includes("t__echo"), "instructions without server t");
  const some = await popup.inputValue("#instructions");
  check(some.includes("u__u_extra(") && !some.includes("t__"), "the per-server switch leaves server t out");
  await popup.check('#servers input[data-server="t"]');
});

scenario("wrong-token", async () => {
  await optionsPage.fill("#token", "not-the-token");
  await optionsPage.click('button[type="submit"]');
  await popup.waitForSelector('#state[data-state="refused"]', { timeout: WAIT });
  const msg = await popup.textContent("#message");
  check(/401/.test(msg) && /token/.test(msg) && /options/.test(msg), `the popup says the token was refused and what to do: ${msg.slice(0, 120)}…`);
  await until(async () => (await badgeText()) === "!", "the badge to show the refusal");
  ok("the badge shows the refusal");
  const n0 = await logCount("status=401");
  // Observe a window long enough for several backoff retries (0.5, 1, 2, 4 s).
  const t0 = Date.now();
  await until(() => Date.now() - t0 > 8000, "an 8 s observation window", 10000);
  const n1 = await logCount("status=401");
  check(n1 - n0 === 0, `no retry storm: ${n1 - n0} more refused upgrades in 8 s (${n0} in all)`);
  await optionsPage.fill("#token", TOKEN);
  await optionsPage.click('button[type="submit"]');
  await popup.waitForSelector('#state[data-state="connected"]', { timeout: WAIT });
  ok("with the right token pasted it connects again");
});

scenario("view", async () => {
  // The extension as a client of the hub's "clients", with a view of its
  // own: the hub URL names the view, the token is the client's.
  await optionsPage.fill("#hubUrl", `${HUB_WS}/chat`);
  await optionsPage.fill("#token", "extension-view-token-0123456789");
  await optionsPage.click('button[type="submit"]');
  await until(async () => Number(await popup.getAttribute("#tool-count", "data-count")) === 2, "the view's two tools in the popup");
  await popup.waitForSelector('#state[data-state="connected"]', { timeout: WAIT });
  ok("with the view's URL and the client's token the extension sees the view's 2 tools");
  await popup.click("#copy");
  await popup.waitForSelector('#copied[data-tools="2"]', { timeout: WAIT });
  const text = await popup.inputValue("#instructions");
  check(text.includes("t__echo(") && text.includes("hub__read_file(") && !text.includes("t__slow"), "the copied instructions come from the view");
  await say(chatA, "Outside the view:\n\n" + block({ tool: "t__slow", params: { ms: 1, message: "outside the view" } }));
  // t__slow may run without asking on this page (setup), so the block goes
  // to the hub at once, which knows no such tool in the view.
  await resultWith(chatA, 'no tool named "t__slow" in view "chat"', "error");
  check(callsWhere((c) => c.arguments.message === "outside the view").length === 0, "a tool outside the view is TOOL_NOT_FOUND there and never ran");
  await optionsPage.fill("#hubUrl", HUB_WS);
  await optionsPage.fill("#token", TOKEN);
  await optionsPage.click('button[type="submit"]');
  await until(async () => Number(await popup.getAttribute("#tool-count", "data-count")) > 2, "the whole tool list again");
});

// Only with a hub whose sessions end 50 ms after their socket drops
// (tests/it/extension.rs runs it on such a hub, alone).
scenario("grace", async () => {
  await say(chatA, "Slow:\n\n" + block({ tool: "t__slow", params: { ms: 4000, message: "outlived its session" } }));
  await until(() => callsWhere((c) => c.arguments.message === "outlived its session").length === 1, "the slow call to reach the server");
  check((await stopWorker()) === 1, "the worker is stopped while its call runs, longer than the hub's grace");
  const r = await resultWith(chatA, "cancelled this call when its session ended", "error");
  check((await r.count()) === 1, "the call the hub cancelled with the session is reported so");
  check(callsWhere((c) => c.arguments.message === "outlived its session").length === 1, "and is not run a second time");
});

let failed = null;
for (const s of scenarios) {
  if (ONLY ? s.name !== "setup" && !ONLY.has(s.name) : s.name === "grace") continue;
  try {
    await s.f();
  } catch (e) {
    failed = `${s.name}: ${e.stack || e.message}`;
    try {
      const results = await chatA.locator(".toolhub-result").evaluateAll((els) => els.slice(-3).map((e) => `${e.getAttribute("data-toolhub-state")}: ${e.textContent.slice(0, 300)}`));
      failed += `\nlast results in the page:\n${results.join("\n")}\nworker: ${JSON.stringify(await uiState()).slice(0, 1500)}`;
    } catch {}
    try {
      mkdirSync(OUT, { recursive: true });
      for (const [i, p] of ctx.pages().entries()) await p.screenshot({ path: path.join(OUT, `failed-${i}.png`) }).catch(() => {});
    } catch {}
    break;
  }
}
if (!failed && errors.length) failed = `page errors: ${errors.join("; ")}`;
await ctx.close().catch(() => {});
fixture.close();
if (failed) {
  console.log(`FAILED: ${failed}`);
  process.exit(1);
}
console.log("done");
process.exit(0);
