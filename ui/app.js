// The dashboard's entry: the token (URL fragment or the field), the one
// connection, the shared store fed by events, and the view switcher.

import { Hub } from "./conn.js";
import { fill, h } from "./dom.js";
import * as servers from "./servers.js";
import * as tools from "./tools.js";
import * as tasks from "./tasks.js";
import * as recordings from "./recordings.js";
import * as runs from "./runs.js";
import * as historyView from "./history.js";

const VIEWS = { servers, tools, tasks, recordings, runs, history: historyView };
const TOKEN_KEY = "toolhub.token";

/** State every view reads; `notify(topic)` tells the views that care. */
class Store {
  constructor() {
    this.health = null;
    this.servers = new Map();
    this.tools = [];
    this.tasks = new Map();
    this.needUser = new Map();
    this.recording = null; // the recordingId while this page's connection records
    this.subs = new Map();
  }

  sub(topic, fn) {
    if (!this.subs.has(topic)) this.subs.set(topic, new Set());
    this.subs.get(topic).add(fn);
    return () => this.subs.get(topic).delete(fn);
  }

  notify(topic) {
    for (const fn of this.subs.get(topic) || []) fn();
  }

  /** The live record of a task this page owns or was told about. */
  task(taskId) {
    if (!this.tasks.has(taskId)) {
      this.tasks.set(taskId, { taskId, batchId: null, state: "pending", steps: [] });
    }
    return this.tasks.get(taskId);
  }
}

function readToken() {
  const frag = new URLSearchParams(location.hash.slice(1));
  const fromUrl = frag.get("token");
  if (fromUrl) {
    sessionStorage.setItem(TOKEN_KEY, fromUrl);
    // The token leaves the address bar (and so the history) at once.
    history.replaceState(null, "", location.pathname + "#servers");
  }
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

const store = new Store();
const connEl = document.getElementById("conn");
const tokenBox = document.getElementById("token-box");
const scheme = location.protocol === "https:" ? "wss:" : "ws:";
const tokenWhy = document.getElementById("token-why");
const hub = new Hub(`${scheme}//${location.host}/ws`, (state, text, refusal) => {
  connEl.dataset.state = state;
  connEl.textContent = text;
  // Refused: the page no longer retries; it says why and waits for a token.
  tokenBox.hidden = state !== "refused";
  if (refusal) {
    const what = refusal.status === 401 ? "the token this page has" : "this page";
    tokenWhy.textContent = refusal.hadToken || refusal.status !== 401
      ? `The hub refused ${what} (HTTP ${refusal.status}): ${refusal.message}. ` +
        "The page stopped reconnecting. Paste the hub's current token below, or run `toolhub ui` for a link that carries it."
      : "Paste the hub's token to connect.";
  }
});

function wireEvents() {
  hub.on("hello", () => {
    // After a reconnect the hub is the truth again (a task that was running
    // when it stopped is now recoverable): list_tasks and task_status tell.
    store.tasks.clear();
    store.recording = null; // a recording ends with its connection
    store.needUser.clear();
    refreshBasics();
    store.notify("reconnected");
  });
  hub.on("server_status", (m) => {
    const s = store.servers.get(m.name) || { name: m.name, stderrTail: [] };
    Object.assign(s, m);
    store.servers.set(m.name, s);
    store.notify("servers");
  });
  hub.on("tools_updated", (m) => {
    store.tools = m.tools || [];
    store.notify("tools");
  });
  hub.on("task_state", (m) => {
    const t = store.task(m.taskId);
    t.batchId = m.batchId ?? t.batchId;
    t.state = m.state;
    if (m.state !== "need_user") store.needUser.delete(m.taskId);
    store.notify("tasks");
    store.notify("need");
  });
  hub.on("batch_step_result", (m) => {
    const t = store.task(m.taskId);
    t.batchId = m.batchId ?? t.batchId;
    t.steps[m.stepIndex] = { ...m, state: m.skipped ? "skipped" : m.success ? "success" : "failed" };
    store.notify("tasks");
  });
  hub.on("batch_complete", (m) => {
    const t = store.task(m.taskId);
    Object.assign(t, { state: m.state, complete: m });
    store.notify("tasks");
  });
  hub.on("need_user", (m) => {
    store.needUser.set(m.taskId, m);
    if (m.batchId) {
      const t = store.task(m.taskId);
      t.batchId = m.batchId;
      t.steps[m.stepIndex] = { ...(t.steps[m.stepIndex] || {}), stepIndex: m.stepIndex, tool: m.tool, state: "need_user" };
    }
    store.notify("tasks");
    store.notify("need");
  });
  store.sub("need", showNeedBanner);
}

async function refreshBasics() {
  try {
    const [health, list] = await Promise.all([
      hub.request({ type: "health_check" }),
      hub.request({ type: "list_tools" }),
    ]);
    setHealth(health);
    store.tools = list.tools || [];
    store.notify("tools");
  } catch (e) {
    console.warn("refresh failed", e);
  }
}

export function setHealth(health) {
  store.health = health;
  store.servers = new Map((health.servers || []).map((s) => [s.name, s]));
  store.notify("servers");
}

function showNeedBanner() {
  const n = store.needUser.size;
  const count = document.getElementById("need-count");
  count.hidden = n === 0;
  count.textContent = n ? String(n) : "";
  count.setAttribute("aria-label", `${n} waiting for approval`);
  const banner = document.getElementById("need-banner");
  banner.hidden = n === 0 || current === "tasks";
  fill(banner, n ? [`${n} call${n > 1 ? "s" : ""} waiting for your approval. `,
    h("a", { href: "#tasks" }, "Open Tasks")] : []);
}

let current = null;
let unmount = null;

function route() {
  const name = location.hash.slice(1).split(/[?=&]/)[0];
  const view = VIEWS[name] ? name : "servers";
  if (view === current) return;
  if (unmount) unmount();
  current = view;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.view === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const root = document.getElementById("view");
  root.replaceChildren();
  unmount = VIEWS[view].mount(root, { hub, store, setHealth }) || null;
  document.title = `toolhub · ${view}`;
  showNeedBanner();
}

document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("token-input");
  const token = input.value.trim();
  input.value = "";
  sessionStorage.setItem(TOKEN_KEY, token);
  hub.connect(token);
});

const token = readToken();
wireEvents();
window.addEventListener("hashchange", route);
route();
hub.connect(token);
