// Drives the dashboard (GET /ui) in headless Chromium against a running hub.
// Started by tests/it/ui.rs, which prepares the hub (a test server `t`, a
// confirm rule on echo "danger", a recording of t__counter, a run) and
// passes HUB (http://127.0.0.1:PORT), TOKEN, OUT (screenshot folder) and
// RECORDING / RUN (names to open). SCENARIO=reconnect instead checks that
// the page reconnects by itself after the hub restarts: it prints
// `restart-now` and waits for `restarted` on stdin; SCENARIO=token that it
// stops when the restarted hub refuses its token and connects with the new
// one given as `restarted <token>`. Every wait is for an
// element or an event, bounded; nothing sleeps. Prints `ok: …` per check;
// exit 1 on the first failure.

import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const HUB = process.env.HUB;
const TOKEN = process.env.TOKEN;
const OUT = process.env.OUT;
const WAIT = 30000;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
const errors = [];
let page;

function ok(what) {
  console.log(`ok: ${what}`);
}

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  ok(what);
}

async function shot(name) {
  await page.screenshot({ path: `${OUT}/${name}.png`, fullPage: true });
}

async function view(name) {
  await page.click(`#nav a[data-view="${name}"]`);
  await page.waitForSelector(`#nav a[data-view="${name}"][aria-current="page"]`, { timeout: WAIT });
}

/** Choose `tool` in the Tools view, fill `fields` (name → text), press Run. */
async function callFromForm(tool, fields = {}) {
  await page.fill("#tool-search", tool);
  await page.click(`button[data-tool="${tool}"]`);
  for (const [name, value] of Object.entries(fields)) {
    await page.fill(`#tool-detail [name="${name}"]`, value);
  }
  await page.click('#tool-detail button[type="submit"]');
}

/** Wait until the image `selector` has loaded and decoded (naturalWidth > 0). */
async function imageShown(selector) {
  await page.waitForFunction((sel) => {
    const img = document.querySelector(sel);
    return img && img.complete && img.naturalWidth > 0;
  }, selector, { timeout: WAIT });
}

/** A 1280×800 page on the dashboard, connected; console errors are kept
 * unless `expected(text)` says this one is part of the scenario. */
async function openDashboard(expected = () => false) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await ctx.newPage();
  page.on("console", (m) => {
    if (m.type() === "error" && !expected(m.text())) errors.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  // Access: the token in the fragment, removed from the address bar once read.
  await page.goto(`${HUB}/ui#token=${TOKEN}`);
  await page.waitForSelector('#conn[data-state="open"]', { timeout: WAIT });
  return ctx;
}

/** Another client of the hub: its own socket, opened from a document of
 * the hub's origin, for changes the dashboard hears of through no event.
 * `ask(msg)` resolves with the reply (a tool_batch: with its batch_complete). */
async function otherClient() {
  const ctx = await browser.newContext();
  const p = await ctx.newPage();
  // Any document of the hub's origin will do; the style sheet holds no script.
  await p.goto(`${HUB}/ui/style.css`);
  const wsUrl = HUB.replace("http://", "ws://") + "/ws";
  await p.evaluate(([url, token]) => new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ["toolhub.v1", "toolhub.token." + token]);
    const pending = new Map();
    let n = 0;
    ws.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.type === "hello") resolve();
      // A reply, or a batch's end (its events carry the batch id).
      const key = m.type === "batch_complete" ? m.batchId : m.replyTo;
      const f = pending.get(key);
      if (f) {
        pending.delete(key);
        f(m);
      }
    };
    ws.onclose = (e) => reject(new Error(`the other client's socket closed (${e.code})`));
    window.ask = (msg) => new Promise((res) => {
      const id = `other-${++n}`;
      pending.set(id, res);
      ws.send(JSON.stringify({ ...msg, id }));
    });
  }), [wsUrl, TOKEN]);
  return {
    ask: (msg) => p.evaluate((m) => window.ask(m), msg),
    close: () => ctx.close(),
  };
}

/** The Refresh and Reload buttons pick up what changed behind the page's back. */
async function refreshButtons() {
  await view("servers");
  await page.waitForSelector("#view p[role=status] >> text=connection(s)", { timeout: WAIT });
  // A new connection changes the hub's health but sends no event.
  const other = await otherClient();
  const now = (await other.ask({ type: "health_check" })).connections;
  check(await page.$(`#view p[role=status] >> text=${now} connection(s)`) === null, "the servers view does not know of the new connection yet");
  await page.click('#view .bar button:has-text("Refresh")');
  await page.waitForSelector(`#view p[role=status] >> text=${now} connection(s)`, { timeout: WAIT });
  ok("Refresh in the servers view reads the hub's health again (one more connection)");
  await page.click('#view .bar button:has-text("Reload tools")');
  await page.waitForSelector("#server-note >> text=/Tools reloaded: \\d+ tools/", { timeout: WAIT });
  ok("Reload tools re-lists every server's tools");

  await view("recordings");
  await page.waitForSelector("#rec-list tbody tr", { timeout: WAIT });
  await other.ask({ type: "start_recording", name: "made elsewhere" });
  await other.ask({ type: "tool_call", tool: "t__echo", params: { message: "elsewhere" } });
  await other.ask({ type: "stop_recording" });
  check(await page.$('#rec-list button:has-text("made elsewhere")') === null, "another client's new recording is not listed before Refresh");
  await page.click('#view .bar button:has-text("Refresh")');
  await page.waitForSelector('#rec-list button:has-text("made elsewhere")', { timeout: WAIT });
  ok("Refresh lists a recording another client made");

  await view("runs");
  await page.waitForSelector("#run-list tbody tr", { timeout: WAIT });
  await other.ask({ type: "create_run", theme: "made elsewhere", runId: "made-elsewhere" });
  check(await page.$('#run-list button:has-text("made-elsewhere")') === null, "another client's new run is not listed before Refresh");
  await page.click('#view .bar button:has-text("Refresh")');
  await page.waitForSelector('#run-list button:has-text("made-elsewhere")', { timeout: WAIT });
  ok("Refresh lists a run another client made");

  await view("history");
  await page.waitForSelector("#hist-table tbody tr", { timeout: WAIT });
  await other.ask({ type: "tool_call", tool: "t__echo", params: { message: "called elsewhere" } });
  check(await page.$('#hist-table td.params >> text=called elsewhere') === null, "another client's call is not in the history before Refresh");
  await page.click('#view .bar button:has-text("Refresh")');
  await page.waitForSelector('#hist-table td.params >> text=called elsewhere', { timeout: WAIT });
  ok("Refresh shows another client's call in the history");

  await view("tasks");
  await page.waitForSelector("#task-list tbody tr", { timeout: WAIT });
  const done = await other.ask({ type: "tool_batch", steps: [{ tool: "t__echo", params: { message: "batch elsewhere" } }] });
  check(done.state === "success", `another client's batch finished (${done.state})`);
  check(await page.$(`#task-list td:text-is("${done.batchId}")`) === null, "another client's finished task is not listed before Refresh");
  await page.click('#view .bar button:has-text("Refresh")');
  await page.waitForSelector(`#task-list td:text-is("${done.batchId}")`, { timeout: WAIT });
  ok("Refresh lists a task another client ran");
  await other.close();
}

async function otherOriginIsRefused() {
  const ctx = await browser.newContext();
  const evil = await ctx.newPage();
  await evil.route("http://evil.test/**", (r) =>
    r.fulfill({ contentType: "text/html", body: "<!doctype html><title>evil</title><p>evil page</p>" }));
  await evil.goto("http://evil.test/");
  const wsUrl = HUB.replace("http://", "ws://") + "/ws";
  const outcome = await evil.evaluate(([url, token]) => new Promise((resolve) => {
    const ws = new WebSocket(url, ["toolhub.v1", "toolhub.token." + token]);
    ws.onopen = () => resolve("open");
    ws.onclose = (e) => resolve(`closed ${e.code}`);
  }), [wsUrl, TOKEN]);
  check(outcome !== "open", `a page from another origin cannot open the socket (${outcome})`);
  await ctx.close();
}

/** Without a token in the link the page asks for one; a pasted token connects. */
async function pastedToken() {
  const ctx = await browser.newContext();
  const p = await ctx.newPage();
  await p.goto(`${HUB}/ui`);
  await p.waitForSelector('#conn[data-state="refused"]', { timeout: WAIT });
  await p.waitForSelector("#token-box:not([hidden])", { timeout: WAIT });
  await p.fill("#token-input", TOKEN);
  await p.click('#token-form button[type="submit"]');
  await p.waitForSelector('#conn[data-state="open"]', { timeout: WAIT });
  check(await p.isHidden("#token-box"), "a pasted token connects the page and the field goes away");
  await ctx.close();
}

async function main() {
  await otherOriginIsRefused();
  await pastedToken();

  const ctx = await openDashboard();
  check(!page.url().includes(TOKEN), "the token is gone from the address bar");
  check(await page.evaluate(() => sessionStorage.getItem("toolhub.token")) === TOKEN, "the token is kept in sessionStorage");

  // Servers.
  await page.waitForSelector('[data-server="t"][data-state="running"]', { timeout: WAIT });
  await page.waitForSelector("#checks li", { timeout: WAIT });
  ok("servers view shows t running and the health checks");
  await page.waitForFunction(() => {
    const chat = document.querySelector('#view-table tr[data-view="chat"]');
    return chat && chat.textContent.includes("1 session(s): ext");
  }, null, { timeout: WAIT });
  check((await page.textContent("#client-list")).includes("ext (views chat; 1 connected)"), "the client list names ext and its connection");
  ok("the servers view shows the views and which client is connected to which");
  await shot("servers");

  // Tools: the form from the schema, a result.
  await view("tools");
  await callFromForm("t__echo", { message: "hello from the page" });
  await page.waitForSelector('#tool-result .ok-box >> text=hello from the page', { timeout: WAIT });
  ok("a tool run from the form returns its result");
  await shot("tools");

  // A classified error with its suggestion.
  await callFromForm("t__fail", { message: "ENOENT: no such file or directory, open '/nope'" });
  await page.waitForSelector("#tool-result .error >> text=NOT_FOUND", { timeout: WAIT });
  await page.waitForSelector("#tool-result .suggestion", { timeout: WAIT });
  ok("a failed call shows its error class and suggestion");

  // A single tool_call a safety rule holds: asked and approved right in
  // the Tools view (the banner says so meanwhile); the call then returns.
  await callFromForm("t__echo", { message: "danger single" });
  await page.waitForSelector("#tool-need article.need >> text=dangerous echo", { timeout: WAIT });
  await page.waitForSelector("#need-banner:not([hidden])", { timeout: WAIT });
  ok("a single tool_call's need_user is shown in the Tools view and the banner");
  await shot("tools-need-user");
  await page.click('#tool-need button:has-text("Approve")');
  await page.waitForSelector("#tool-result .ok-box >> text=danger single", { timeout: WAIT });
  await page.waitForSelector("#need-banner", { state: "hidden", timeout: WAIT });
  ok("the single call approved from the page returns its result");

  // Crash the server from the page, then watch it come back.
  await callFromForm("t__crash");
  await page.waitForSelector("#tool-result .error >> text=SERVER_UNAVAILABLE", { timeout: WAIT });
  await view("servers");
  await page.waitForFunction(() => {
    const card = document.querySelector('[data-server="t"]');
    if (!card || card.dataset.state !== "running") return false;
    const dts = [...card.querySelectorAll("dt")];
    const restarts = dts.find((d) => d.textContent === "Restarts");
    return restarts && Number(restarts.nextElementSibling.textContent) >= 1 && card.querySelector(".last-error");
  }, null, { timeout: WAIT });
  ok("the servers view shows the crashed server running again, with its restart and last error");
  await shot("servers-after-crash");

  // A per-context server: the page's call starts an instance for the
  // page's session, the servers view lists it, and Stop ends it.
  await view("tools");
  await callFromForm("pc__memo", { value: "from the page" });
  await page.waitForSelector("#tool-result .ok-box >> text=from the page", { timeout: WAIT });
  await view("servers");
  await page.waitForSelector('[data-instances-of="pc"] tr[data-context]', { timeout: WAIT });
  ok("the servers view lists the per-context server's instance for the page's session");
  await shot("servers-instances");
  await page.click('[data-instances-of="pc"] tr[data-context] button:has-text("Stop")');
  await page.waitForSelector("#server-note >> text=/Stopped pc's instance/", { timeout: WAIT });
  await page.waitForFunction(() => !document.querySelector('[data-instances-of="pc"] tr[data-context]'), null, { timeout: WAIT });
  ok("Stop ends the instance and the list no longer shows it");

  // A tool whose definition changes is shown for approval, and approved.
  await view("tools");
  await callFromForm("t__add_tool", { name: "dyn", description: "first" });
  await page.waitForSelector("#tool-result .ok-box", { timeout: WAIT });
  await callFromForm("t__change_tool", { name: "dyn", description: "second" });
  await page.waitForSelector("#tool-result .ok-box", { timeout: WAIT });
  await view("servers");
  await page.waitForSelector("#pins >> text=t__dyn", { timeout: WAIT });
  await page.click('#pins button:has-text("Approve changed tools")');
  await page.waitForFunction(() => document.querySelector("#pins").childElementCount === 0, null, { timeout: WAIT });
  ok("a changed tool definition is listed and approved from the servers view");

  // Tasks: a batch streams its steps; a need_user approved from the page.
  await view("tasks");
  const steps = [
    { id: "first", tool: "t__echo", params: { message: "first" } },
    { id: "wait", tool: "t__slow", params: { ms: 200, message: "waited" } },
    { id: "danger", tool: "t__echo", params: { message: "danger zone" } },
    { id: "after", tool: "t__echo", params: { message: "after approval" } },
  ];
  await page.fill("#batch-steps", JSON.stringify(steps));
  await page.click('#batch-form button[type="submit"]');
  await page.waitForSelector('#steps li[data-step="0"][data-state="success"]', { timeout: WAIT });
  await page.waitForSelector('#need-user article.need', { timeout: WAIT });
  check(await page.$('#steps li[data-step="1"][data-state="success"]') !== null, "steps before the confirmation are in the timeline");
  check(await page.$('#steps li[data-step="3"][data-state="pending"]') !== null, "a later step is still pending while the batch waits");
  ok("a batch streams its steps into the timeline and asks for approval");
  await shot("tasks-need-user");
  await page.click('#need-user button:has-text("Approve")');
  await page.waitForSelector("#batch-done >> text=Finished success", { timeout: WAIT });
  await page.waitForSelector('#steps li[data-step="3"][data-state="success"]', { timeout: WAIT });
  check(await page.$("#need-user article.need") === null, "the approval is gone once answered");
  ok("the approved batch finishes");
  await shot("tasks");

  // Another client's running task: its state from task_status, cancelled
  // from here, its end seen through task_status with wait.
  const other = '#task-list tr:has-text("elsewhere")';
  await page.click(`${other} button.link`, { timeout: WAIT });
  // (running, or retrying: the page crashed its server above)
  await page.waitForSelector("#timeline h3 :is(.state-running, .state-retrying)", { timeout: WAIT });
  await page.click(`${other} button:has-text("Cancel")`);
  await page.waitForSelector("#timeline h3 .state-cancelled", { timeout: WAIT });
  await page.waitForSelector(`${other} .state-cancelled`, { timeout: WAIT });
  ok("another client's task is shown, cancelled from the page, and its end seen");

  // A denied step fails the batch with SAFETY_BLOCKED.
  await page.fill("#batch-steps", JSON.stringify([{ id: "nope", tool: "t__echo", params: { message: "danger again" } }]));
  await page.click('#batch-form button[type="submit"]');
  await page.click('#need-user button:has-text("Deny")', { timeout: WAIT });
  await page.waitForSelector("#batch-done >> text=Finished failed", { timeout: WAIT });
  await page.waitForSelector('#steps li[data-step="0"] .error >> text=SAFETY_BLOCKED', { timeout: WAIT });
  ok("a step denied from the page fails with SAFETY_BLOCKED");

  // Cancel a running batch, resume it (it runs again), cancel it again.
  await page.fill("#batch-steps", JSON.stringify([{ id: "stuck", tool: "t__hang", params: {} }]));
  await page.click('#batch-form button[type="submit"]');
  await page.click('#task-list tr.selected button:has-text("Cancel")', { timeout: WAIT });
  await page.waitForSelector("#batch-done >> text=Finished cancelled", { timeout: WAIT });
  await page.waitForSelector("#timeline .error >> text=CANCELLED", { timeout: WAIT });
  ok("Cancel stops a running batch");
  await page.click('#task-list tr.selected button:has-text("Resume")', { timeout: WAIT });
  await page.click('#task-list tr.selected button:has-text("Cancel")', { timeout: WAIT });
  await page.waitForSelector("#batch-done >> text=Finished cancelled", { timeout: WAIT });
  ok("Resume runs the cancelled task again, live in the timeline");

  // Recordings: replay live, the difference highlighted; export.
  await view("recordings");
  await page.click(`#rec-list button:has-text("${process.env.RECORDING}")`);
  await page.waitForSelector("#rec-steps li", { timeout: WAIT });
  await imageShown("#rec-chart img");
  ok("the recording's flowchart is drawn");
  await imageShown("#rec-steps figure.shot img");
  ok("a recorded step's image is shown inline (get_artifact)");
  await page.selectOption("#replay-mode", "live");
  await page.click('#rec-detail button:has-text("Replay")');
  await page.waitForSelector("#replay-steps tr.diff ins", { timeout: WAIT });
  await page.waitForSelector("#replay-summary >> text=with differences", { timeout: WAIT });
  ok("a recording replayed from the page shows a difference");
  await page.selectOption("#export-format", "markdown");
  await page.click('#rec-detail button:has-text("Export")');
  await page.waitForSelector(`#export-out pre >> text=# ${process.env.RECORDING}`, { timeout: WAIT });
  ok("the recording exports as Markdown");
  await shot("recordings");
  await page.selectOption("#replay-mode", "offline");
  await page.click('#rec-detail button:has-text("Replay")');
  await page.waitForSelector("#replay-summary >> text=Passed (offline)", { timeout: WAIT });
  ok("an offline replay passes with the recorded answers");

  // A dry replay: nothing runs; a recorded step whose params no longer fit
  // the tool's schema is highlighted with the problem.
  await page.click(`#rec-list button:has-text("${process.env.RECORDING_DRY}")`);
  await page.waitForSelector(`#rec-detail h3 >> text=${process.env.RECORDING_DRY}`, { timeout: WAIT });
  await page.selectOption("#replay-mode", "dry");
  await page.click('#rec-detail button:has-text("Replay")');
  await page.waitForSelector('#replay-steps tr.diff[data-step="0"] .diffs li >> text=missing required property', { timeout: WAIT });
  await page.waitForSelector("#replay-summary .fail-box >> text=Did not pass (dry)", { timeout: WAIT });
  ok("a dry replay from the page highlights the step that would not run");
  await shot("recordings-dry");

  // Record this page's own call, then find it in the list.
  await page.click("#rec-toggle");
  await page.waitForSelector("#rec-toggle >> text=Stop recording", { timeout: WAIT });
  await view("tools");
  await callFromForm("t__echo", { message: "recorded from the page" });
  await page.waitForSelector("#tool-result .ok-box >> text=recorded from the page", { timeout: WAIT });
  await view("recordings");
  await page.click("#rec-toggle >> text=Stop recording");
  await page.waitForSelector("#rec-status >> text=Stopped: 1 step(s) saved.", { timeout: WAIT });
  ok("a recording of the page's own call is started and stopped from the page");

  // Runs: the log as a timeline.
  await view("runs");
  await page.click(`#run-list button:has-text("${process.env.RUN}")`);
  await page.waitForSelector("#run-log li", { timeout: WAIT });
  ok("a run's log shows as a timeline");
  await imageShown('#run-shots figure[data-path="screenshots/001_dashboard-shot.png"] img');
  ok("the run's saved image is shown in its gallery (get_artifact)");
  await shot("runs");

  // History: filter by outcome and server.
  await view("history");
  await page.waitForSelector("#hist-table tbody tr", { timeout: WAIT });
  await page.waitForSelector('#hist-table td.client >> text=ext', { timeout: WAIT });
  ok("history names the client of a call");
  await page.selectOption("#hist-outcome", "failure");
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#hist-table tbody tr")];
    return rows.length > 0 && rows.every((r) => r.textContent.includes("failed"))
      && rows.some((r) => r.textContent.includes("t__crash"));
  }, null, { timeout: WAIT });
  ok("history filters by outcome");
  await page.selectOption("#hist-outcome", "");
  await page.selectOption("#hist-server", "hub");
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#hist-table tbody tr")];
    return rows.length > 0 && rows.every((r) => r.querySelector("code").textContent.startsWith("hub__"));
  }, null, { timeout: WAIT });
  await page.selectOption("#hist-server", "t");
  await page.fill("#hist-tool", "counter");
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#hist-table tbody tr")];
    return rows.length > 0 && rows.every((r) => r.querySelector("code").textContent === "t__counter");
  }, null, { timeout: WAIT });
  ok("history filters by server and tool");
  await shot("history");

  await refreshButtons();

  // Keyboard: Tab from the skip link reaches the first view's link.
  await page.focus("a.skip");
  await page.keyboard.press("Tab");
  check(await page.evaluate(() => document.activeElement?.dataset?.view) === "servers", "the views are reachable by keyboard");
  await page.keyboard.press("Enter");
  await page.waitForSelector('#nav a[data-view="servers"][aria-current="page"]', { timeout: WAIT });
  ok("Enter on a view link opens it");

  // Phone size: nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  for (const v of ["servers", "tools", "tasks"]) {
    await view(v);
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    check(wide <= 390, `${v} fits a 390 px wide screen (${wide})`);
    await shot(`${v}-phone`);
  }

  check(errors.length === 0, `no console errors${errors.length ? `: ${errors.join(" | ")}` : ""}`);
  await ctx.close();
}

const stdin = createInterface({ input: process.stdin });

function line(expected) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no "${expected}" on stdin`)), 120000);
    stdin.on("line", (l) => {
      if (l.trim() === expected) {
        clearTimeout(t);
        resolve();
      }
    });
  });
}

/** The next stdin line starting with `prefix`; resolves with the rest. */
function lineStarting(prefix) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no "${prefix}…" on stdin`)), 120000);
    stdin.on("line", (l) => {
      if (l.startsWith(prefix)) {
        clearTimeout(t);
        resolve(l.slice(prefix.length).trim());
      }
    });
  });
}

/** The hub comes back with another token: the page stops reconnecting,
 * says the token was refused and what to do, and connects again once the
 * new token is pasted. The page's timers run on Playwright's clock, so
 * "no more attempts" is checked by running two minutes of them, not by
 * waiting. */
async function tokenRefused() {
  let refusing = false;
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await ctx.newPage();
  page.on("console", (m) => {
    const expected = refusing && /WebSocket connection to .* failed|status of 401/.test(m.text());
    if (m.type() === "error" && !expected) errors.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  // Count every socket the page opens.
  await page.addInitScript(() => {
    window.socketsOpened = 0;
    const Base = window.WebSocket;
    window.WebSocket = class extends Base {
      constructor(...args) {
        super(...args);
        window.socketsOpened += 1;
      }
    };
  });
  await page.clock.install();
  await page.goto(`${HUB}/ui#token=${TOKEN}`);
  await page.waitForSelector('#conn[data-state="open"]', { timeout: WAIT });
  refusing = true;
  console.log("restart-now");
  const fresh = await lineStarting("restarted ");
  // The hub is back with another token; the pending retry (10 s at most) fires.
  await page.clock.runFor(11000);
  await page.waitForSelector('#conn[data-state="refused"]', { timeout: WAIT });
  const why = await page.textContent("#token-box:not([hidden]) #token-why");
  check(/refused the token/.test(why) && /HTTP 401/.test(why) && why.includes("toolhub ui"),
    `the page says the token was refused and what to do (${why})`);
  check(/Token refused/.test(await page.textContent("#conn")), "the connection state says the token was refused");
  await shot("token-refused");
  const before = await page.evaluate(() => window.socketsOpened);
  await page.clock.runFor(120000);
  const after = await page.evaluate(() => window.socketsOpened);
  check(after === before, `no socket is opened while the token is refused (${before} → ${after})`);
  await page.fill("#token-input", fresh);
  await page.click('#token-form button[type="submit"]');
  await page.waitForSelector('#conn[data-state="open"]', { timeout: WAIT });
  refusing = false;
  check(await page.isHidden("#token-box"), "the new token connects the page and the field goes away");
  check(await page.evaluate(() => sessionStorage.getItem("toolhub.token")) === fresh, "the new token is kept");
  await view("tools");
  await callFromForm("t__echo", { message: "with the new token" });
  await page.waitForSelector("#tool-result .ok-box >> text=with the new token", { timeout: WAIT });
  ok("a call works with the new token");
  check(errors.length === 0, `no console errors${errors.length ? `: ${errors.join(" | ")}` : ""}`);
  await ctx.close();
}

async function reconnect() {
  let restarting = false;
  // While the hub is down each retry is refused, and Chromium logs it.
  const ctx = await openDashboard((text) => restarting && /WebSocket connection to .* failed/.test(text));
  await page.waitForSelector('[data-server="t"][data-state="running"]', { timeout: WAIT });
  await page.evaluate(() => {
    const el = document.getElementById("conn");
    window.seenStates = [];
    new MutationObserver(() => window.seenStates.push(el.dataset.state))
      .observe(el, { attributes: true, attributeFilter: ["data-state"] });
  });
  restarting = true;
  console.log("restart-now");
  await line("restarted");
  await page.waitForSelector('#conn[data-state="open"]', { timeout: WAIT });
  restarting = false;
  const states = await page.evaluate(() => window.seenStates);
  check(states.includes("closed") && states.at(-1) === "open", `the page saw the hub go and come back (${states.join(" → ")})`);
  await shot("reconnected");
  // The new connection carries requests: a call from the form.
  await view("tools");
  await callFromForm("t__echo", { message: "after the restart" });
  await page.waitForSelector("#tool-result .ok-box >> text=after the restart", { timeout: WAIT });
  ok("a call works over the new connection");
  check(errors.length === 0, `no console errors${errors.length ? `: ${errors.join(" | ")}` : ""}`);
  await ctx.close();
}

try {
  const scenarios = { reconnect, token: tokenRefused };
  await (scenarios[process.env.SCENARIO] || main)();
  stdin.close();
  await browser.close();
  console.log("done");
} catch (e) {
  console.log(`FAILED: ${e.stack || e}`);
  if (page) await page.screenshot({ path: `${OUT}/failure.png`, fullPage: true }).catch(() => {});
  await browser.close();
  process.exit(1);
}
