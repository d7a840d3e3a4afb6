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

"use strict";

importScripts("blocks.js", "sites.js", "sites/chatgpt.js", "sites/claude.js", "sites/gemini.js", "sites/genspark.js", "policy.js", "trust.js", "panel-sw.js");

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

// ---------------------------------------------------------------- connection

function httpBase(url) {
  return url.replace(/^ws(s?):\/\//, "http$1://").replace(/\/ws\/?$/, "");
}

function connect() {
  clearTimeout(conn.timer);
  conn.timer = null;
  conn.retryAt = null;
  if (conn.sock) return;
  if (!settings.token) {
    setState("unconfigured", "no token yet: open the extension's options and paste the hub's token (the file state/token beside the hub's config.json)");
    return;
  }
  if (refused && refused.url === settings.hubUrl && refused.tag === tokenTag(settings.token)) {
    setState("refused", refused.message);
    return;
  }
  let ws;
  try {
    ws = new WebSocket(settings.hubUrl, ["toolhub.v1", "toolhub.token." + settings.token]);
  } catch (e) {
    setState("error", `the hub URL ${JSON.stringify(settings.hubUrl)} is not a WebSocket URL (${e.message}); fix it in the options`);
    return;
  }
  const sock = { ws, opened: false, hello: null, resuming: null, settled: false, maxSeq: 0, dead: false };
  conn.sock = sock;
  setState("connecting", `connecting to ${settings.hubUrl}`);
  const helloTimer = setTimeout(() => {
    if (conn.sock === sock && !sock.hello) drop(sock, "the hub sent no hello within 10 s");
  }, HELLO_TIMEOUT_MS);
  ws.onopen = () => {
    sock.opened = true;
    stats.connects++;
    persistMisc();
  };
  ws.onmessage = (ev) => enqueue(sock, ev.data);
  ws.onerror = () => {};
  ws.onclose = (ev) => {
    clearTimeout(helloTimer);
    if (conn.sock !== sock) return;
    closed(sock, ev.code, ev.reason);
  };
}

/** Give a socket up now (no pong, no hello): its close event may come late. */
function drop(sock, why) {
  if (conn.sock !== sock) return;
  try {
    sock.ws.close(4000, why.slice(0, 100));
  } catch {}
  closed(sock, 4000, why);
}

function closed(sock, code, reason) {
  sock.dead = true;
  conn.sock = null;
  stopTimers();
  for (const [, r] of rpcs) r.reject(new Error("the connection to the hub closed"));
  rpcs.clear();
  if (code === 4001) {
    // Another socket took this session over: it is no longer ours.
    session = null;
    persistSession();
  }
  if (!sock.opened) {
    // The browser says nothing about a refused upgrade: ask /health with
    // the same token; 401/403 means refused, anything else means retry.
    conn.probing = true;
    probe().then((p) => {
      conn.probing = false;
      if (conn.sock || conn.timer) return;
      if (p.refused) {
        refused = { url: settings.hubUrl, tag: tokenTag(settings.token), message: p.message };
        stats.refusedAt = Date.now();
        persistMisc();
        setState("refused", p.message);
      } else {
        retryLater(p.message);
      }
    });
    return;
  }
  const why = code === 4001 ? "another connection took this session over" : `the connection closed (code ${code}${reason ? ", " + reason : ""})`;
  retryLater(why);
}

async function probe() {
  const url = httpBase(settings.hubUrl) + "/health";
  try {
    const r = await fetch(url, { headers: { Authorization: "Bearer " + settings.token }, cache: "no-store" });
    if (r.status === 401 || r.status === 403) {
      let detail = "";
      try {
        const body = await r.json();
        detail = body && body.error ? ` The hub says: ${body.error.message}` : "";
      } catch {}
      if (r.status === 401) {
        return {
          refused: true,
          message: `the hub refused this extension's token (HTTP 401). Paste the current token (the file state/token beside the hub's config.json) in the extension's options.${detail}`,
        };
      }
      return {
        refused: true,
        message: `the hub refused this extension (HTTP 403): add "chrome-extension://${chrome.runtime.id}" to server.allowedOrigins in the hub's config.json.${detail}`,
      };
    }
    return { refused: false, message: `the hub at ${settings.hubUrl} did not accept the connection (its /health answered ${r.status})` };
  } catch (e) {
    return { refused: false, message: `no hub answers at ${settings.hubUrl}; is toolhub running?` };
  }
}

function retryLater(why) {
  clearTimeout(conn.timer);
  conn.attempt++;
  const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.min(conn.attempt - 1, 16));
  const delay = Math.round(base / 2 + (Math.random() * base) / 2);
  conn.retryAt = Date.now() + delay;
  conn.timer = setTimeout(connect, delay);
  setState("disconnected", `${why}; retrying in ${(delay / 1000).toFixed(1)} s`);
}

function stopTimers() {
  clearInterval(conn.keepalive);
  conn.keepalive = null;
  clearTimeout(conn.ackTimer);
  conn.ackTimer = null;
  conn.pingOut = null;
}

function rawSend(sock, msg) {
  if (!sock || sock.dead || sock.ws.readyState !== WebSocket.OPEN) return false;
  sock.ws.send(JSON.stringify(msg));
  return true;
}

/** Send on the settled connection (never before a resume is answered). */
function send(msg) {
  const sock = conn.sock;
  if (!sock || !sock.settled) return false;
  return rawSend(sock, msg);
}

function request(msg, timeoutMs = RPC_TIMEOUT_MS) {
  return new Promise((resolve, reject) => {
    const id = `x-${Date.now().toString(36)}-${++rpcSeq}`;
    const t = setTimeout(() => {
      rpcs.delete(id);
      reject(new Error(`the hub did not answer ${msg.type} within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    rpcs.set(id, {
      resolve: (v) => {
        clearTimeout(t);
        resolve(v);
      },
      reject: (e) => {
        clearTimeout(t);
        reject(e);
      },
    });
    if (!send({ ...msg, id })) {
      clearTimeout(t);
      rpcs.delete(id);
      reject(new Error(`not connected to the hub (${conn.state}: ${conn.message})`));
    }
  });
}

function startKeepalive(sock) {
  stopTimers();
  conn.keepalive = setInterval(() => {
    if (conn.sock !== sock) return;
    if (conn.pingOut && Date.now() - conn.pingOut > PONG_TIMEOUT_MS) {
      drop(sock, "the hub did not answer a ping");
      return;
    }
    if (!conn.pingOut) conn.pingOut = Date.now();
    rawSend(sock, { type: "ping", id: "keepalive" });
    sendAck();
  }, KEEPALIVE_MS);
}

/** Acknowledge every frame processed so far, freeing the hub's buffer. */
function sendAck() {
  clearTimeout(conn.ackTimer);
  conn.ackTimer = null;
  if (!session || !session.resumeToken || session.lastSeq <= ackedSeq) return;
  if (send({ type: "ack", seq: session.lastSeq })) ackedSeq = session.lastSeq;
}

// ---------------------------------------------------------------- frames

let queue = Promise.resolve();

/** Frames are handled one at a time, in order, each fully (storage
 * included) before the next. */
function enqueue(sock, data) {
  // A reply the worker awaits is delivered at once, not in turn: a frame's
  // handler may itself wait on a request (finish() keeps a long result at
  // the hub), and would otherwise wait on its own queue. The frame still
  // goes through the queue for its seq.
  if (rpcs.size && typeof data === "string" && data.includes('"replyTo"')) {
    try {
      const m = JSON.parse(data);
      const r = m.replyTo !== undefined && rpcs.get(m.replyTo);
      if (r) {
        rpcs.delete(m.replyTo);
        r.resolve(m);
      }
    } catch {}
  }
  queue = queue.then(() => onFrame(sock, data)).catch((e) => console.error("toolhub: frame handling failed", e));
}

async function onFrame(sock, data) {
  let m;
  try {
    m = JSON.parse(data);
  } catch {
    return;
  }
  if (typeof m.seq === "number" && m.seq > sock.maxSeq) sock.maxSeq = m.seq;
  if (m.type === "hello") return onHello(sock, m);
  if (sock.resuming && m.replyTo === sock.resuming) {
    if (m.type === "session_resumed") {
      stats.resumes++;
      await settle(sock, true);
    } else {
      // Refused (unknown or expired session, token, lastSeq): this socket
      // goes on as the new session its hello named.
      stats.resumeRefusals++;
      stats.lastResumeError = (m.error && `${m.error.errorType}: ${m.error.message}`) || JSON.stringify(m);
      await adopt(sock, sock.hello);
      await settle(sock, false);
    }
    return;
  }
  if (m.type === "session_resumed") return;
  if (sock.settled && session && typeof m.seq === "number" && session.resumeToken) {
    if (m.seq <= session.lastSeq) return; // processed before (a replay overlap)
    await handle(m);
    session.lastSeq = m.seq;
    await persistSession();
    if (++frames % ACK_EVERY === 0) sendAck();
    else if (!conn.ackTimer) conn.ackTimer = setTimeout(sendAck, ACK_AFTER_MS);
  } else {
    await handle(m);
  }
}

async function onHello(sock, m) {
  sock.hello = m;
  if (m.servers) servers = m.servers;
  const mine = session && session.url === settings.hubUrl && session.tokenTag === tokenTag(settings.token);
  if (mine && session.resumeToken && m.resumeToken) {
    sock.resuming = "resume-" + Date.now().toString(36);
    setState("connecting", "resuming the hub session");
    rawSend(sock, {
      type: "resume_session",
      id: sock.resuming,
      sessionId: session.sessionId,
      resumeToken: session.resumeToken,
      lastSeq: session.lastSeq,
    });
    return;
  }
  await adopt(sock, m);
  await settle(sock, false);
}

async function adopt(sock, hello) {
  session = {
    sessionId: hello.sessionId,
    resumeToken: hello.resumeToken || null,
    lastSeq: sock.maxSeq,
    url: settings.hubUrl,
    tokenTag: tokenTag(settings.token),
  };
  ackedSeq = 0;
  await persistSession();
}

async function settle(sock, resumed) {
  sock.resuming = null;
  sock.settled = true;
  conn.attempt = 0;
  refused = null;
  await persistMisc();
  setState("connected", resumed ? `session ${short(session.sessionId)} resumed` : `session ${short(session.sessionId)}`);
  startKeepalive(sock);
  rawSend(sock, { type: "list_tools", id: "tools-" + Date.now().toString(36) });
  // Not awaited: its health_check's answer comes through this same frame queue.
  resendPending(sock, resumed).catch((e) => console.error("toolhub: resending failed", e));
}

/**
 * Every call still open goes out again with its key: the hub runs a key
 * once, so a call it already has is answered (`deduplicated`), not run
 * again. Keys live in the hub's memory, so a hub that restarted after a
 * single call was sent no longer knows it: such a call may or may not
 * have run, and is reported so instead of being run a second time (a
 * batch's key is in its task journal and survives the restart).
 */
async function resendPending(sock, resumed) {
  const now = Date.now();
  let hubStartedAt = 0;
  const ended = new Map(); // callKey → history entry of a call that ended cancelled
  const sentCalls = [...pending.values()].some((e) => e.kind === "call" && e.sentAt);
  if (!resumed && sentCalls) {
    // The old session is gone: its single calls were either answered (the
    // key store answers a repeat), cancelled with the session (history says
    // so: a repeat would run them again), or never reached the hub.
    try {
      const h = await request({ type: "health_check" });
      if (typeof h.uptimeMs === "number") hubStartedAt = Date.now() - h.uptimeMs;
    } catch {}
    try {
      const h = await request({ type: "history", limit: 1000 });
      for (const x of h.entries || []) if (x.callKey && x.errorType === "CANCELLED") ended.set(x.callKey, x);
    } catch {}
  }
  if (conn.sock !== sock) return;
  for (const e of [...pending.values()].sort((a, b) => a.createdAt - b.createdAt)) {
    if (!pending.has(e.key)) continue;
    if (e.kind === "call" && e.sentAt && hubStartedAt && e.sentAt < hubStartedAt) {
      await finish(e.key, {
        success: false,
        error: {
          errorType: "UNKNOWN",
          message: "the hub restarted while this call was running: it may or may not have taken effect, and its result is gone",
          suggestion: "check whether the call took effect before asking for it again",
          recoverable: false,
        },
      });
      continue;
    }
    if (e.kind === "call" && ended.has(e.key)) {
      await finish(e.key, {
        success: false,
        error: {
          errorType: "CANCELLED",
          message: "the hub cancelled this call when its session ended (the extension was away longer than the hub's server.sessionGraceMs); it may have partly taken effect",
          suggestion: "check whether the call took effect before asking for it again",
          recoverable: false,
        },
      });
      continue;
    }
    if (e.sentAt && now - e.sentAt > RESEND_MAX_AGE_MS) {
      if (e.kind === "batch" && e.taskId) {
        rawSend(sock, { type: "task_status", id: e.key, taskId: e.taskId, wait: true });
      } else {
        await finish(e.key, {
          success: false,
          error: {
            errorType: "UNKNOWN",
            message: "the hub's answer to this call was lost: the extension was away longer than the hub keeps a session or a call key",
            suggestion: "check whether the call took effect before asking for it again (a single call's result is gone; a batch can be found with list_tasks)",
            recoverable: false,
          },
        });
      }
      continue;
    }
    if (!e.sentAt) {
      e.sentAt = now;
      await persistPending(e);
    }
    rawSend(sock, e.msg);
  }
}

function short(id) {
  return String(id || "").slice(0, 8);
}

/** The effect of one frame. Idempotent: a frame handled twice changes nothing more. */
async function handle(m) {
  if (m.replyTo !== undefined && rpcs.has(m.replyTo)) {
    const r = rpcs.get(m.replyTo);
    rpcs.delete(m.replyTo);
    r.resolve(m);
  }
  switch (m.type) {
    case "pong":
      if (m.replyTo === "keepalive") conn.pingOut = null;
      return;
    case "tools":
    case "tools_updated":
      if (Array.isArray(m.tools)) {
        tools = { tools: m.tools.map(slimTool), hash: m.hash || null };
        await persistMisc();
        notifyUi();
      }
      return;
    case "server_status": {
      const i = servers.findIndex((s) => s.name === m.name);
      const s = { name: m.name, state: m.state, toolCount: m.toolCount };
      if (i >= 0) servers[i] = s;
      else servers.push(s);
      await persistMisc();
      notifyUi();
      return;
    }
    case "health_status":
      if (Array.isArray(m.servers)) {
        servers = m.servers.map((s) => ({ name: s.name, state: s.state, toolCount: s.toolCount }));
        await persistMisc();
      }
      return;
    case "tool_result":
      if (pending.has(m.replyTo)) await finish(m.replyTo, m);
      return;
    case "task_state": {
      const e = pending.get(m.batchId);
      if (!e) return;
      e.taskId = m.taskId;
      e.state = m.state === "need_user" ? "need_user" : "running";
      if (m.state !== "need_user") e.needUser = null;
      await persistPending(e);
      push(e);
      return;
    }
    case "batch_step_result": {
      const e = pending.get(m.batchId);
      if (!e) return;
      e.taskId = m.taskId || e.taskId;
      const step = slimStep(m);
      if (m.success && !m.skipped) {
        const kept = await Trust.keep(`${e.key}-s${m.stepIndex}`, m.result, request);
        if (kept) step.kept = kept;
      }
      e.steps[m.stepIndex] = step;
      await persistPending(e);
      push(e);
      return;
    }
    case "batch_complete":
      if (pending.has(m.batchId)) await finish(m.batchId, m);
      return;
    case "task":
      // A repeated tool_batch (deduplicated) or a task_status asked after a
      // long absence: the task as the hub has it.
      if (pending.has(m.replyTo) && m.task) await finish(m.replyTo, fromTask(m));
      return;
    case "need_user": {
      const key = needUserKey(m);
      approvals.set(m.taskId, { ...m, key });
      await persistMisc();
      const e = key && pending.get(key);
      if (e) {
        e.state = "need_user";
        e.needUser = { taskId: m.taskId, stepIndex: m.stepIndex, tool: m.tool, reason: m.reason, expiresAt: m.expiresAt };
        if (m.batchId) e.taskId = m.taskId;
        await persistPending(e);
      }
      updateBadge();
      if (e) push(e);
      notifyUi();
      return;
    }
    case "replay_step_result":
      PanelSw.step(m);
      return;
    case "confirmed":
      if (approvals.delete(m.taskId)) {
        await persistMisc();
        updateBadge();
        notifyUi();
      }
      return;
    case "error":
      if (pending.has(m.replyTo)) await finish(m.replyTo, { success: false, error: m.error });
      return;
    default:
      return;
  }
}

function slimTool(t) {
  const s = { name: t.name, server: t.server, qualifiedName: t.qualifiedName, description: t.description, inputSchema: t.inputSchema };
  if (t.annotations) s.annotations = t.annotations;
  return s;
}

function slimStep(m) {
  const s = { stepIndex: m.stepIndex, stepId: m.stepId ?? null, tool: m.tool, success: !!m.success };
  if (m.skipped) {
    s.skipped = true;
    s.reason = m.reason;
  }
  if (m.result !== undefined) s.result = trimValue(m.result);
  if (m.error) s.error = m.error;
  if (m.attempts !== undefined) s.attempts = m.attempts;
  if (m.durationMs !== undefined) s.durationMs = m.durationMs;
  return s;
}

/** A `task` (task_status's shape) as a batch's end. */
function fromTask(m) {
  const t = m.task;
  const active = ["pending", "running", "retrying", "need_user"].includes(t.state);
  return {
    success: t.state === "success",
    state: t.state,
    steps: (t.steps || []).filter((s) => s.state && s.state !== "pending" && s.state !== "running").map((s) => slimStep({ ...s, success: s.success ?? s.state === "success", skipped: s.state === "skipped" || s.skipped })),
    deduplicated: !!m.deduplicated,
    stillActive: active,
    error: t.error,
    taskId: t.taskId,
  };
}

/** The block a need_user belongs to: a batch by its batchId; a single call
 * (whose need_user names no key) by its tool and params. */
function needUserKey(m) {
  if (m.batchId && pending.has(m.batchId)) return m.batchId;
  if (m.batchId) return null;
  const same = (e) => e.kind === "call" && (e.tool === m.tool || (m.tool || "").endsWith("__" + e.tool));
  const cands = [...pending.values()].filter((e) => same(e) && !e.needUser);
  const exact = cands.find((e) => canonical(e.msg.params) === canonical(m.params));
  return (exact || cands[0] || {}).key || null;
}

function canonical(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
}

/** A call or batch is over: store its record, then forget it as pending
 * (in that order: a worker stopped in between sends it again, and the
 * repeat is answered from the hub's key store), then tell its tabs. */
async function finish(key, m) {
  const e = pending.get(key);
  if (!e) return;
  if (m.stillActive) {
    // A task_status that came back early (should not happen with wait).
    return;
  }
  const steps = { ...e.steps };
  for (const s of m.steps || []) if (steps[s.stepIndex] === undefined) steps[s.stepIndex] = s;
  const record = {
    key,
    kind: e.kind,
    tool: e.tool,
    totalSteps: e.totalSteps,
    state: m.success ? "success" : "error",
    result: m.result !== undefined ? trimValue(m.result) : undefined,
    error: m.error || null,
    steps,
    stepsCompleted: m.stepsCompleted,
    taskState: m.state || null,
    deduplicated: !!m.deduplicated,
    attempts: m.attempts,
    durationMs: m.durationMs,
    finishedAt: Date.now(),
  };
  if (m.success && m.result !== undefined) {
    const kept = await Trust.keep(key, m.result, request);
    if (kept) record.kept = kept;
  }
  await saveResult(record);
  pending.delete(key);
  await chrome.storage.session.remove("p:" + key);
  let changed = false;
  for (const [taskId, a] of approvals) {
    if (a.key === key) {
      approvals.delete(taskId);
      changed = true;
    }
  }
  if (changed) await persistMisc();
  for (const t of e.tabs) deliver(t, record);
  updateBadge();
  notifyUi();
}

function recordOf(e) {
  return {
    key: e.key,
    kind: e.kind,
    tool: e.tool,
    totalSteps: e.totalSteps,
    state: e.state,
    steps: e.steps,
    needUser: e.needUser || null,
    note: conn.state === "connected" ? null : `waiting for the hub: ${conn.message || conn.state}`,
  };
}

function push(e) {
  const record = recordOf(e);
  for (const t of e.tabs) deliver(t, record);
  notifyUi();
}

/** Results go only to the tabs that asked for this block. */
function deliver(t, record) {
  chrome.tabs.sendMessage(t.tabId, { type: "toolhub-update", record }, { frameId: t.frameId }).catch(() => {});
}

function subscribe(e, sender) {
  const t = { tabId: sender.tab.id, frameId: sender.frameId || 0 };
  if (!e.tabs.some((x) => x.tabId === t.tabId && x.frameId === t.frameId)) {
    e.tabs.push(t);
    return true;
  }
  return false;
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
