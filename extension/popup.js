// The popup: connection state, servers and tools, running calls, approvals
// (need_user) with Approve and Deny, and the instructions for the AI. The
// sites, local pages and per-site tool policy are in popup-sites.js.
"use strict";

const $ = (id) => document.getElementById(id);
let last = null;
let filter = {};


const STATE_TEXT = {
  starting: "starting…",
  connecting: "connecting…",
  connected: "connected",
  disconnected: "disconnected",
  refused: "refused",
  unconfigured: "not set up",
  error: "error",
};

async function ask(msg) {
  const r = await chrome.runtime.sendMessage(msg);
  if (r && r.error) throw new Error(r.error);
  return r;
}

function serverList(s) {
  const names = new Map();
  for (const sv of s.servers || []) names.set(sv.name, { name: sv.name, state: sv.state, toolCount: 0 });
  for (const t of s.tools || []) {
    if (!names.has(t.server)) names.set(t.server, { name: t.server, state: "running", toolCount: 0 });
    names.get(t.server).toolCount++;
  }
  return [...names.values()].sort((a, b) => a.name.localeCompare(b.name));
}

function render(s) {
  last = s;
  const st = $("state");
  st.textContent = STATE_TEXT[s.state] || s.state;
  st.dataset.state = s.state;
  $("dot").dataset.state = s.state;
  $("message").textContent = s.state === "connected" ? `${s.hubUrl}` : s.message || "";
  $("message").dataset.state = s.state;
  $("refused-actions").hidden = !["refused", "unconfigured", "error", "disconnected"].includes(s.state);

  // Approvals. The list is drawn anew on every update (an event may come
  // while the person types into a server's form): what they typed, and
  // the field they were in, carry over to the new fields.
  const ap = $("approvals");
  const keyOf = (box) => `${box.closest("li[data-task-id]")?.dataset.taskId}\u0000${box.dataset.field}`;
  const typed = new Map();
  for (const box of ap.querySelectorAll("li[data-task-id] [data-field]")) {
    typed.set(keyOf(box), box.type === "checkbox" ? box.checked : box.value);
  }
  const active = document.activeElement;
  const focused = active && ap.contains(active) && active.dataset.field ? keyOf(active) : null;
  ap.replaceChildren();
  for (const a of s.approvals) {
    const li = el(
      "li",
      { "data-task-id": a.taskId, class: "approval" },
      el("div", { class: "tool" }, a.tool + (a.batchId ? ` (step ${a.stepIndex + 1})` : "")),
      el("div", { class: "reason" }, a.reason || ""),
      el("pre", { class: "params" }, JSON.stringify(a.params, null, 1)),
    );
    const form = formOf(a.input);
    if (form) li.append(form.node);
    const approve = el("button", { type: "button", class: "approve", "data-action": "approve" }, form ? "Send" : "Approve");
    const deny = el("button", { type: "button", class: "deny", "data-action": "deny" }, form ? "Decline" : "Deny");
    approve.onclick = () => answer(a.taskId, true, li, form && form.read());
    deny.onclick = () => answer(a.taskId, false, li);
    li.append(el("div", { class: "actions" }, approve, deny));
    ap.append(li);
    for (const box of li.querySelectorAll("[data-field]")) {
      const k = keyOf(box);
      if (typed.has(k)) {
        if (box.type === "checkbox") box.checked = typed.get(k);
        else box.value = typed.get(k);
      }
      if (k === focused) box.focus();
    }
  }
  $("approvals-section").hidden = s.approvals.length === 0;

  // Servers with their on/off switch for the instructions.
  const sv = $("servers");
  sv.replaceChildren();
  for (const x of serverList(s)) {
    const box = el("input", { type: "checkbox", checked: !filter[x.name], "data-server": x.name, title: "include in the instructions" });
    box.onchange = async () => {
      filter[x.name] = !box.checked;
      await chrome.storage.local.set({ serverFilter: filter });
    };
    sv.append(
      el(
        "li",
        { "data-server": x.name },
        el("label", {}, box, el("span", { class: "name" }, x.name)),
        el("span", { class: "muted" }, ` ${x.state} · ${x.toolCount} tools`),
      ),
    );
  }
  $("tool-count").textContent = `${s.tools.length} tools`;
  $("tool-count").dataset.count = String(s.tools.length);

  // Calls of this extension still running.
  const run = $("running");
  run.replaceChildren();
  for (const p of s.pending) {
    const what = p.kind === "batch" ? `batch ${p.stepsDone}/${p.totalSteps} steps` : p.tool;
    run.append(el("li", { "data-key": p.key, "data-state": p.state }, el("span", {}, what), el("span", { class: "muted" }, ` · ${p.state} · ${p.title || p.page}`)));
  }
  if (!s.pending.length) run.append(el("li", { class: "muted" }, "nothing running from this browser"));
  $("session").textContent = s.sessionId ? `session ${s.sessionId.slice(0, 8)}` : "";
  if (typeof PopupSites !== "undefined") PopupSites.renderPolicy(s.tools || []);
}

async function answer(taskId, approve, li, content) {
  for (const b of li.querySelectorAll("button")) b.disabled = true;
  try {
    await ask({ type: "confirm", taskId, approve, ...(content ? { content } : {}) });
    li.dataset.answered = approve ? "approved" : "denied";
  } catch (e) {
    li.append(el("div", { class: "error" }, e.message));
  }
  refresh();
}

async function hubTasks() {
  if (!last || last.state !== "connected") {
    $("hub-tasks").textContent = "";
    return;
  }
  try {
    const r = await ask({ type: "hub-tasks", state: "running" });
    $("hub-tasks").textContent = `Batches running at the hub (from any client): ${r.total ?? r.tasks.length}`;
  } catch {
    $("hub-tasks").textContent = "";
  }
}

let pendingRefresh = null;
function refresh() {
  if (pendingRefresh) return pendingRefresh;
  pendingRefresh = ask({ type: "ui-state" })
    .then(render)
    .catch((e) => {
      $("message").textContent = `the extension's worker did not answer: ${e.message}`;
    })
    .finally(() => {
      pendingRefresh = null;
    });
  return pendingRefresh;
}

async function copyInstructions() {
  const s = last || (await ask({ type: "ui-state" }));
  const policyOf = (t) => PopupSites.policyOf(t, s.tools || []);
  const text = ToolhubInstructions.build(s.tools || [], filter, policyOf, s.catalog);
  const ta = $("instructions");
  ta.value = text;
  ta.hidden = false;
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    ta.select();
    ok = document.execCommand("copy");
  }
  const n = (s.tools || []).filter((t) => !filter[t.server] && policyOf(t) !== "never").length;
  $("copied").textContent = ok ? `Copied: instructions for ${n} tools.` : `Select and copy the text below (${n} tools).`;
  $("copied").dataset.tools = String(n);
  // What this site's chats were given, so the side panel can tell when it
  // is out of date.
  const origin = PopupSites.origin();
  if (origin) {
    const { instructionsGiven = {} } = await chrome.storage.local.get("instructionsGiven");
    await chrome.storage.local.set({ instructionsGiven: { ...instructionsGiven, [origin]: ToolhubInstructions.fingerprint(text) } });
  }
}

function openOptions(ev) {
  if (ev) ev.preventDefault();
  chrome.runtime.openOptionsPage();
}

chrome.runtime.onMessage.addListener((m) => {
  if (m && m.type === "toolhub-changed") refresh();
});

$("copy").onclick = copyInstructions;
$("open-panel").onclick = async () => {
  // The side panel of the tab the popup was opened over (a user gesture).
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  if (tab && chrome.sidePanel) await chrome.sidePanel.open({ tabId: tab.id }).catch(() => chrome.tabs.create({ url: `panel.html?tab=${tab.id}` }));
};
$("open-options").onclick = openOptions;
$("options-link").onclick = openOptions;
$("retry").onclick = () => ask({ type: "retry" }).then(render, () => {});

chrome.storage.local.get("serverFilter").then(({ serverFilter }) => {
  filter = serverFilter || {};
  refresh().then(hubTasks);
});
