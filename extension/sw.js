// toolhub extension: the service worker. It holds the one connection to the
// hub, runs the blocks the content scripts find, and keeps every call's
// result until the page that asked has it.
//
// Chrome stops this worker whenever it likes (after 30 s without events, or
// at any time in tests), and takes its WebSocket with it. Nothing is lost
// or run twice because:
// - the hub session outlives the socket: the worker keeps `sessionId`,
//   `resumeToken` and the last `seq` it processed in chrome.storage.session
//   and resumes the session after a restart or a dropped socket, getting
//   every frame it missed;
// - every call is sent with `callKey` = the block's key, and every pending
//   call is sent again after each (re)connection: the hub runs a key once
//   and answers a repeat with the first run's result (`deduplicated`);
// - a frame's effect (a result stored, a step recorded) is written before
//   its `seq` counts as processed, and handled by key, so a frame seen twice
//   changes nothing;
// - results are kept in chrome.storage.local under the block's key: a
//   re-render or reload of the page shows the stored result.

//
// The worker's code is split by concern: this file (settings, state,
// storage, messages from pages, start), sw-conn.js (the connection and the
// frame queue), sw-frames.js (what each frame does), trust.js (the gate
// before a run), panel-sw.js (the side panel's requests).

"use strict";

importScripts("blocks.js", "sw-conn.js", "sw-frames.js", "sites.js", "sites/chatgpt.js", "sites/claude.js", "sites/gemini.js", "sites/genspark.js", "policy.js", "trust.js", "panel-sw.js");

const DEFAULTS = { hubUrl: "ws://127.0.0.1:8765/ws", token: "" };
/** A frame each way well inside Chrome's 30 s idle rule: the hub's own
 * WebSocket pings do not count as activity for an extension worker. */
const KEEPALIVE_MS = 20000;
const PONG_TIMEOUT_MS = 15000;
const HELLO_TIMEOUT_MS = 10000;
const ACK_EVERY = 50;
const ACK_AFTER_MS = 3000;
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30000;
const RPC_TIMEOUT_MS = 15000;
const RESULTS_MAX = 500;
const TEXT_MAX = 100000;
/** A single call older than this may no longer be known by its key at the
 * hub (callKeyTtlMs is 10 min): it is not sent again blindly. */
const RESEND_MAX_AGE_MS = 9 * 60 * 1000;

let settings = { ...DEFAULTS };

/** The connection: at most one socket. */
const conn = {
  sock: null, // {ws, opened, hello, resuming, settled, maxSeq}
  state: "starting", // starting, connecting, connected, disconnected, refused, unconfigured, error
  message: "",
  attempt: 0,
  timer: null,
  probing: false,
  retryAt: null,
  keepalive: null,
  pingOut: null,
  ackTimer: null,
};

/** {sessionId, resumeToken, lastSeq, url, tokenTag}: the hub session this
 * worker owns, kept in storage.session so a restarted worker resumes it. */
let session = null;
let ackedSeq = 0;
let frames = 0;
/** key → pending call: {key, kind, msg, tool, totalSteps, steps, state,
 * needUser, taskId, tabs:[{tabId, frameId}], createdAt, sentAt, page, title}. */
const pending = new Map();
/** taskId → need_user frame (+ `key` of the block it belongs to). */
const approvals = new Map();
let tools = { tools: [], hash: null };
let servers = [];
let stats = { starts: 0, connects: 0, resumes: 0, resumeRefusals: 0, lastResumeError: null, refusedAt: null };
/** When the hub refused this token (url + token tag): not retried until
 * the settings change or a person presses Retry. */
let refused = null;
const rpcs = new Map();
let rpcSeq = 0;

// ---------------------------------------------------------------- storage

async function persistSession() {
  await chrome.storage.session.set({ session });
}

function persistPending(e) {
  return chrome.storage.session.set({ ["p:" + e.key]: e });
}

function persistMisc() {
  return chrome.storage.session.set({
    approvals: [...approvals.values()],
    tools,
    servers,
    stats,
    refused,
  });
}

/** A short tag of the token, to tell whether a saved session belongs to it
 * (the token itself is never stored twice). */
function tokenTag(t) {
  return ToolhubBlocks.hash64("toolhub-token:" + (t || ""));
}

async function getResult(key) {
  const r = await chrome.storage.local.get("r:" + key);
  return r["r:" + key] || null;
}

let saving = Promise.resolve();

/** Results are written one at a time (their index is read, changed, written). */
function saveResult(record) {
  saving = saving.then(() => writeResult(record), () => writeResult(record));
  return saving;
}

async function writeResult(record) {
  const { rindex = [] } = await chrome.storage.local.get("rindex");
  const idx = rindex.filter((k) => k !== record.key);
  idx.push(record.key);
  const drop = idx.length > RESULTS_MAX ? idx.splice(0, idx.length - RESULTS_MAX) : [];
  await chrome.storage.local.set({ ["r:" + record.key]: record, rindex: idx });
  if (drop.length) await chrome.storage.local.remove(drop.map((k) => "r:" + k));
}

/** A value small enough to keep and show: long text is cut with a note. */
function trimValue(v) {
  if (v === undefined) return undefined;
  const s = typeof v === "string" ? v : JSON.stringify(v);
  if (s === undefined || s.length <= TEXT_MAX) return v;
  return s.slice(0, TEXT_MAX) + `\n… (${s.length - TEXT_MAX} more characters not kept by the extension)`;
}

// ---------------------------------------------------------------- state shown

function setState(state, message) {
  conn.state = state;
  conn.message = message || "";
  updateBadge();
  notifyUi();
}

function liveApprovals() {
  const now = Date.now();
  return [...approvals.values()].filter((a) => !a.expiresAt || Date.parse(a.expiresAt) > now);
}

function updateBadge() {
  const waiting = liveApprovals().length;
  const look = {
    connected: waiting ? [String(waiting), "#d97706"] : ["on", "#15803d"],
    connecting: ["…", "#6b7280"],
    starting: ["…", "#6b7280"],
    disconnected: ["off", "#6b7280"],
    refused: ["!", "#b91c1c"],
    unconfigured: ["!", "#b91c1c"],
    error: ["!", "#b91c1c"],
  }[conn.state] || ["?", "#6b7280"];
  chrome.action.setBadgeText({ text: look[0] }).catch(() => {});
  chrome.action.setBadgeBackgroundColor({ color: look[1] }).catch(() => {});
  chrome.action.setTitle({ title: `toolhub: ${conn.state}${conn.message ? " – " + conn.message : ""}` }).catch(() => {});
}

/** Tell open extension pages (popup, options) that something changed. */
function notifyUi() {
  chrome.runtime.sendMessage({ type: "toolhub-changed" }).catch(() => {});
}

// ---------------------------------------------------------------- messages from pages

async function onRun(msg, sender) {
  if (!sender.tab) throw new Error("run comes from a tab's content script");
  const key = String(msg.key);
  const done = await getResult(key);
  if (done) return { record: done };
  let e = pending.get(key);
  if (e) {
    if (subscribe(e, sender)) await persistPending(e);
    return { record: recordOf(e) };
  }
  const b = msg.block;
  if (!b || (b.kind !== "call" && b.kind !== "batch")) throw new Error("run needs a block of kind call or batch");
  // Nothing runs without the site's consent: a page toolhub is off on is
  // refused, a "never" tool is refused, and a run without a click ("auto")
  // goes ahead only when every tool may run without asking.
  const gate = await Trust.gate(await Trust.page(sender), msg.mode || "auto", tools.tools, b);
  if (!gate.go) return { policy: gate.policy };
  e = {
    key,
    kind: b.kind,
    // The tab is the call's context: a per-context browser server gives
    // each tab its own browser.
    msg: ToolhubBlocks.hubMessage(b, key, `tab-${sender.tab.id}`),
    tool: b.kind === "call" ? b.tool : null,
    totalSteps: b.kind === "batch" ? b.steps.length : 1,
    steps: {},
    state: "running",
    needUser: null,
    taskId: null,
    tabs: [],
    createdAt: Date.now(),
    sentAt: null,
    page: String(msg.page || ""),
    title: String(msg.title || ""),
  };
  subscribe(e, sender);
  pending.set(key, e);
  await persistPending(e);
  if (conn.sock && conn.sock.settled) {
    e.sentAt = Date.now();
    await persistPending(e);
    send(e.msg);
  } else if (!conn.sock && !conn.timer && !conn.probing && conn.state !== "refused") {
    connect();
  }
  notifyUi();
  return { record: recordOf(e) };
}

/** What a complete block is to this extension: already run or running (its
 * record), or how the site's policy treats its tools. Runs nothing. */
async function onCheck(msg, sender) {
  if (!sender.tab) throw new Error("check comes from a tab's content script");
  const page = await Trust.page(sender);
  if (!page.on) return { off: true, why: page.why };
  const key = String(msg.key);
  const done = await getResult(key);
  if (done) return { record: done };
  const e = pending.get(key);
  if (e) {
    if (subscribe(e, sender)) await persistPending(e);
    return { record: recordOf(e) };
  }
  return { policy: await Trust.policyOf(page.origin, tools.tools, msg.block) };
}

async function onStatus(msg, sender) {
  const out = [];
  for (const key of msg.keys || []) {
    const e = pending.get(key);
    if (e) {
      if (sender.tab && subscribe(e, sender)) await persistPending(e);
      out.push(recordOf(e));
      continue;
    }
    const r = await getResult(key);
    if (r) out.push(r);
  }
  return { records: out };
}

function uiState() {
  return {
    state: conn.state,
    message: conn.message,
    hubUrl: settings.hubUrl,
    hasToken: !!settings.token,
    extensionId: chrome.runtime.id,
    sessionId: session && session.sessionId,
    resumable: !!(session && session.resumeToken),
    lastSeq: session ? session.lastSeq : 0,
    retryAt: conn.retryAt,
    servers,
    tools: tools.tools,
    toolsHash: tools.hash,
    catalog: tools.catalog || null,
    pending: [...pending.values()].map((e) => ({
      key: e.key,
      kind: e.kind,
      tool: e.tool,
      totalSteps: e.totalSteps,
      stepsDone: Object.keys(e.steps).length,
      state: e.state,
      title: e.title,
      page: e.page,
      createdAt: e.createdAt,
    })),
    approvals: liveApprovals().map((a) => ({
      taskId: a.taskId,
      batchId: a.batchId || null,
      stepIndex: a.stepIndex,
      tool: a.tool,
      params: a.params,
      reason: a.reason,
      expiresAt: a.expiresAt,
      key: a.key,
      input: a.input || null,
    })),
    stats,
  };
}

async function onConfirm(msg) {
  const a = approvals.get(msg.taskId);
  if (!a) throw new Error("this approval is no longer pending");
  const reply = await request({
    type: "confirm",
    taskId: a.taskId,
    approve: !!msg.approve,
    stepIndex: a.stepIndex,
    // A server's form, as the person filled it in.
    ...(a.input && msg.approve && msg.content && typeof msg.content === "object" ? { content: msg.content } : {}),
    ...(a.paramsHash ? { paramsHash: a.paramsHash } : {}),
  });
  if (reply.type === "error") {
    // Not waiting any more (answered elsewhere, expired): forget it.
    approvals.delete(a.taskId);
    await persistMisc();
    updateBadge();
    notifyUi();
    throw new Error(reply.error ? reply.error.message : "the hub refused the answer");
  }
  return { ok: true };
}

/** The extension's own pages (popup, options), not a content script in a
 * web page: only they may answer approvals or read the worker's state. */
function fromExtensionPage(sender) {
  return sender.id === chrome.runtime.id && typeof sender.url === "string" && sender.url.startsWith(`chrome-extension://${chrome.runtime.id}/`);
}

const PAGE_ONLY = new Set(["ui-state", "confirm", "retry", "hub-tasks", "health", ...PanelSw.types]);

async function onMessage(msg, sender) {
  await ready;
  if (PAGE_ONLY.has(msg.type) && !fromExtensionPage(sender)) throw new Error(`${msg.type} is for the extension's own pages`);
  switch (msg && msg.type) {
    case "run":
      return onRun(msg, sender);
    case "check":
      return onCheck(msg, sender);
    case "panel-state":
    case "record-start":
    case "record-stop":
    case "recordings":
    case "recording-export":
    case "recording-delete":
    case "replay":
      return PanelSw.handle(msg);
    case "status":
      return onStatus(msg, sender);
    case "ui-state":
      return uiState();
    case "confirm":
      return onConfirm(msg);
    case "retry":
      refused = null;
      conn.attempt = 0;
      await persistMisc();
      if (!conn.sock) connect();
      return uiState();
    case "hub-tasks": {
      const r = await request({ type: "list_tasks", state: msg.state || "running", limit: 20 });
      return { tasks: r.tasks || [], total: r.total };
    }
    case "health": {
      const r = await request({ type: "health_check" });
      if (Array.isArray(r.servers)) servers = r.servers.map((s) => ({ name: s.name, state: s.state, toolCount: s.toolCount }));
      return r;
    }
    default:
      return undefined;
  }
}

// ---------------------------------------------------------------- start

chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
  if (!msg || typeof msg.type !== "string" || msg.type === "toolhub-changed") return false;
  onMessage(msg, sender).then(
    (r) => sendResponse(r),
    (e) => sendResponse({ error: String((e && e.message) || e) }),
  );
  return true;
});

chrome.storage.onChanged.addListener((changes, area) => {
  if (area !== "local" || !("localOrigins" in changes)) return;
  const before = changes.localOrigins.oldValue || [];
  const added = (changes.localOrigins.newValue || []).filter((o) => !before.includes(o));
  Trust.syncLocal(added).catch((e) => console.warn("toolhub: registering the local pages' script failed:", e));
});

chrome.storage.onChanged.addListener((changes, area) => {
  if (area !== "local" || !("hubUrl" in changes || "token" in changes)) return;
  ready.then(async () => {
    const s = await chrome.storage.local.get(Object.keys(DEFAULTS));
    const next = { ...DEFAULTS, ...s };
    if (next.hubUrl === settings.hubUrl && next.token === settings.token) return;
    settings = next;
    refused = null;
    session = null;
    await persistSession();
    await persistMisc();
    conn.attempt = 0;
    if (conn.sock) {
      const old = conn.sock;
      conn.sock = null;
      old.dead = true;
      stopTimers();
      try {
        old.ws.close(1000, "settings changed");
      } catch {}
    }
    connect();
  });
});

chrome.tabs.onRemoved.addListener((tabId) => {
  ready.then(async () => {
    for (const e of pending.values()) {
      const n = e.tabs.length;
      e.tabs = e.tabs.filter((t) => t.tabId !== tabId);
      if (e.tabs.length !== n) await persistPending(e);
    }
    // A closed tab's recording is saved as it is.
    await tabRecordingsReady;
    if (tabRecordings[tabId]) {
      await PanelSw.handle({ type: "record-stop", tabId }).catch(() => PanelSw.forgetTab(tabId));
    }
  });
});

// A worker stopped while away from the hub (between retries) is woken to
// try again; while connected, the keepalive holds it up.
chrome.alarms.onAlarm.addListener((a) => {
  if (a.name !== "toolhub-wake") return;
  ready.then(() => {
    if (!conn.sock && !conn.timer && !conn.probing && conn.state !== "refused") connect();
  });
});
chrome.runtime.onStartup.addListener(() => {});
chrome.runtime.onInstalled.addListener(() => {});

const ready = (async () => {
  const local = await chrome.storage.local.get(Object.keys(DEFAULTS));
  settings = { ...DEFAULTS, ...local };
  const s = await chrome.storage.session.get(null);
  session = s.session || null;
  ackedSeq = session ? session.lastSeq : 0;
  for (const [k, v] of Object.entries(s)) if (k.startsWith("p:")) pending.set(k.slice(2), v);
  for (const a of s.approvals || []) approvals.set(a.taskId, a);
  if (s.tools) tools = s.tools;
  if (s.servers) servers = s.servers;
  if (s.stats) stats = s.stats;
  refused = s.refused || null;
  stats.starts++;
  await persistMisc();
  chrome.alarms.create("toolhub-wake", { periodInMinutes: 0.5 });
  Trust.syncLocal().catch((e) => console.warn("toolhub: registering the local pages' script failed:", e));
  connect();
})();
