// The page's one WebSocket to /ws: the token as the toolhub.token.<t>
// subprotocol, replies matched by id, events fanned out by type, and a
// reconnect with backoff (0.5 s doubling to 10 s) after the hub goes away.

const MIN_DELAY = 500;
const MAX_DELAY = 10000;

export class Hub {
  constructor(url, onState) {
    this.url = url;
    this.onState = onState;
    this.token = "";
    this.ws = null;
    this.nextId = 0;
    this.pending = new Map();
    this.listeners = new Map();
    this.delay = MIN_DELAY;
    this.timer = null;
    this.everOpened = false;
  }

  /** Listen for messages of `type` ("*" for every one); returns an unsubscribe. */
  on(type, fn) {
    if (!this.listeners.has(type)) this.listeners.set(type, new Set());
    this.listeners.get(type).add(fn);
    return () => this.listeners.get(type).delete(fn);
  }

  connect(token) {
    if (token !== undefined) this.token = token;
    clearTimeout(this.timer);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.close();
    }
    const protocols = ["toolhub.v1"];
    if (this.token) protocols.push("toolhub.token." + this.token);
    this.onState("connecting", "Connecting…");
    let ws;
    try {
      ws = new WebSocket(this.url, protocols);
    } catch (e) {
      this.onState("closed", `Cannot connect: ${e.message}`);
      return;
    }
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
    };
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const [, p] of this.pending) p.reject(new Error("the connection closed"));
      this.pending.clear();
      const why = opened
        ? closeReason(ev.code)
        : "the hub refused the connection or is not running (a wrong token is refused too)";
      this.scheduleRetry(why, !opened);
    };
  }

  scheduleRetry(why, refused) {
    const wait = this.delay;
    this.delay = Math.min(this.delay * 2, MAX_DELAY);
    this.onState(refused ? "refused" : "closed",
      `Disconnected: ${why}. Retrying in ${Math.round(wait / 100) / 10} s…`);
    this.timer = setTimeout(() => this.connect(), wait);
  }

  receive(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg.type === "hello") {
      this.delay = MIN_DELAY;
      this.everOpened = true;
      this.onState("open", `Connected to toolhub ${msg.version}`);
    }
    if (msg.replyTo !== undefined && this.pending.has(msg.replyTo)) {
      const p = this.pending.get(msg.replyTo);
      this.pending.delete(msg.replyTo);
      if (msg.type === "error") p.reject(Object.assign(new Error(msg.error?.message), { hubError: msg.error }));
      else p.resolve(msg);
    }
    for (const key of [msg.type, "*"]) {
      for (const fn of this.listeners.get(key) || []) {
        try {
          fn(msg);
        } catch (e) {
          console.warn("listener failed", e);
        }
      }
    }
  }

  get open() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  /** Send without waiting for a reply (tool_batch answers with events). */
  send(msg) {
    if (!this.open) throw new Error("not connected to the hub");
    this.ws.send(JSON.stringify(msg));
  }

  /** Send with a fresh id; resolves with the reply, rejects with an `error` reply. */
  request(msg) {
    const id = `ui-${++this.nextId}`;
    return new Promise((resolve, reject) => {
      if (!this.open) {
        reject(new Error("not connected to the hub"));
        return;
      }
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ ...msg, id }));
    });
  }

  newId(prefix) {
    return `${prefix}-${Date.now().toString(36)}-${++this.nextId}`;
  }
}

function closeReason(code) {
  switch (code) {
    case 1000: return "the connection was idle too long";
    case 1001: return "the hub is shutting down";
    case 1008: return "this page fell behind the hub's messages";
    case 1009: return "a message was too large";
    default: return `the connection closed (code ${code})`;
  }
}
