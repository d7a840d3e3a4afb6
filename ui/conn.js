// The page's one WebSocket to /ws: the token as the toolhub.token.<t>
// subprotocol, replies matched by id, events fanned out by type, and a
// reconnect with backoff (0.5 s doubling to 10 s) after the hub goes away.
// A browser learns nothing of why an upgrade failed, so when a socket does
// not open the page asks GET /health, which passes the same gate: a 401 or
// 403 means the hub refused this token (or this page), and retrying cannot
// help: the page stops and says what to do until a new token is entered.

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
    this.attempt = 0; // bumped by connect(); a late answer of an older attempt is ignored
  }

  /** Listen for messages of `type` ("*" for every one); returns an unsubscribe. */
  on(type, fn) {
    if (!this.listeners.has(type)) this.listeners.set(type, new Set());
    this.listeners.get(type).add(fn);
    return () => this.listeners.get(type).delete(fn);
  }

  connect(token) {
    if (token !== undefined) this.token = token;
    const attempt = ++this.attempt;
    clearTimeout(this.timer);
    this.timer = null;
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
      if (opened) this.scheduleRetry(closeReason(ev.code));
      else this.whyRefused(attempt);
    };
  }

  /** The socket never opened: ask /health (same gate) whether the hub is
   * down (retry) or refuses this token (stop until a new one is entered). */
  async whyRefused(attempt) {
    let res;
    try {
      res = await fetch("/health", {
        cache: "no-store",
        headers: this.token ? { Authorization: `Bearer ${this.token}` } : {},
      });
    } catch {
      if (attempt === this.attempt) this.scheduleRetry("the hub is not running or cannot be reached");
      return;
    }
    let body = null;
    try {
      body = await res.json();
    } catch {
      // not the hub's JSON: the reason stays general
    }
    if (attempt !== this.attempt) return; // a new token was entered meanwhile
    if (res.status === 401 || res.status === 403) {
      this.onState("refused", this.token ? "Token refused: not reconnecting" : "No token: not connected", {
        status: res.status,
        message: body?.error?.message || `HTTP ${res.status}`,
        suggestion: body?.error?.suggestion || "",
        hadToken: Boolean(this.token),
      });
      return;
    }
    this.scheduleRetry(res.status === 503 && body?.error
      ? `the hub did not accept the connection: ${body.error.message}`
      : `the hub did not accept the connection (GET /health answered HTTP ${res.status})`);
  }

  scheduleRetry(why) {
    const wait = this.delay;
    this.delay = Math.min(this.delay * 2, MAX_DELAY);
    this.onState("closed", `Disconnected: ${why}. Retrying in ${Math.round(wait / 100) / 10} s…`);
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
