// toolhub extension, service worker: the connection to the hub. Connect
// with backoff, the hello, resuming the session (sessionId, resumeToken,
// the last processed seq), keepalive and acks, and the frames queue: frames
// are handled one at a time, each fully before the next. Loaded by sw.js
// with importScripts; shares its globals (conn, session, pending, rpcs…).
"use strict";
// ---------------------------------------------------------------- connection

/** The hub's HTTP base from its WebSocket URL: `ws://H/ws` and a view's
 * `ws://H/ws/<view>` both give `http://H`. */
function httpBase(url) {
  return url.replace(/^ws(s?):\/\//, "http$1://").replace(/\/ws(\/[A-Za-z0-9_-]+)?\/?$/, "");
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
