// The side panel: where the person sees, approves, records and replays the
// work of one tab. `panel.html?tab=<tabId>` names its tab (a detached
// window, a test); without it, the panel follows the active tab.
//   - the tab's blocks, newest first, with their states and folded results,
//     and Run for a block waiting in `ready` (the content script runs it);
//   - the tab's approvals (need_user) with Approve and Deny;
//   - record this tab (a hub recording in the tab's context), the saved
//     recordings with search, replay into this tab with each step's diff,
//     export (Markdown, HTML) and delete (which asks first);
//   - the instructions for the AI: says when they changed since the chat
//     got them, and puts the current ones into the composer (not sent);
//   - this site's tool policy (popup-sites.js).
"use strict";

const $ = (id) => document.getElementById(id);
const fixedTab = new URLSearchParams(location.search).get("tab");
let tabId = fixedTab !== null ? Number(fixedTab) : null;
let last = null; // panel-state from the worker
let page = null; // panel-blocks from the tab's content script
/** recordingId → {state, replayId, steps: {index: step}, result} */
const replays = new Map();
let foldChars = 20000;


async function ask(msg) {
  const r = await chrome.runtime.sendMessage(msg);
  if (r && r.error) throw new Error(r.error);
  return r;
}

async function askTab(msg) {
  if (tabId === null) return null;
  return chrome.tabs.sendMessage(tabId, msg, { frameId: 0 }).catch(() => null);
}

// ------------------------------------------------------------ state

let refreshing = null;
let again = false;
function refresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    if (tabId === null) {
      const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
      tabId = tab ? tab.id : null;
    }
    [last, page] = await Promise.all([ask({ type: "panel-state", tabId }).catch((e) => ({ state: "error", message: e.message, tools: [], approvals: [] })), askTab({ type: "panel-blocks" })]);
    render();
  })().finally(() => {
    refreshing = null;
    if (again) {
      again = false;
      refresh();
    }
  });
  return refreshing;
}

function render() {
  const st = $("state");
  st.textContent = last.state;
  st.dataset.state = last.state;
  $("dot").dataset.state = last.state;
  $("message").textContent = last.state === "connected" ? "" : last.message || "";
  $("tab-site").textContent = page ? `· ${page.site || page.origin}${page.on ? "" : " (off)"}` : "· no chat page in this tab";
  renderApprovals();
  renderBlocks();
  renderRecording();
  if (page && page.origin) PopupSites.choose(page.origin);
  PopupSites.renderPolicy(last.tools || []);
  renderInstructions();
}

function renderApprovals() {
  const ul = $("approvals");
  ul.replaceChildren();
  for (const a of last.approvals || []) {
    const li = el("li", { class: "approval", "data-task-id": a.taskId }, el("div", { class: "tool" }, a.tool + (a.batchId ? ` (step ${a.stepIndex + 1})` : "")), el("div", { class: "reason" }, a.reason || ""), el("pre", { class: "params" }, JSON.stringify(a.params, null, 1)));
    const form = formOf(a.input);
    if (form) li.append(form.node);
    const approve = el("button", { type: "button", class: "approve", "data-action": "approve" }, form ? "Send" : "Approve");
    const deny = el("button", { type: "button", class: "deny", "data-action": "deny" }, form ? "Decline" : "Deny");
    const answer = (yes) => async () => {
      approve.disabled = deny.disabled = true;
      try {
        const content = yes && form ? { content: form.read() } : {};
        await ask({ type: "confirm", taskId: a.taskId, approve: yes, ...content });
        li.dataset.answered = yes ? "approved" : "denied";
      } catch (e) {
        li.append(el("div", { class: "error" }, e.message));
      }
      refresh();
    };
    approve.onclick = answer(true);
    deny.onclick = answer(false);
    li.append(el("div", { class: "actions" }, approve, deny));
    ul.append(li);
  }
  $("approvals-section").hidden = !(last.approvals || []).length;
}

function renderBlocks() {
  const ul = $("blocks");
  ul.replaceChildren();
  const blocks = (page && page.blocks) || [];
  for (const b of blocks) {
    const box = el("div", { class: "toolhub-result" });
    ToolhubRender.render(box, b.record, foldChars, {
      run: () => askTab({ type: "panel-run", key: b.key }).then(refresh),
      allow: () => askTab({ type: "panel-run", key: b.key }).then(refresh),
    });
    ul.append(el("li", { "data-key": b.key, "data-state": b.record.state }, box));
  }
  if (!blocks.length) ul.append(el("li", { class: "muted" }, page ? "no tool calls in this tab yet" : "open a chat page in this tab"));
}

// ------------------------------------------------------------ recording

/** What the last start or stop said, shown while nothing records. */
let recordingNote = "";

function renderRecording() {
  const r = last.recording;
  const form = $("record-form");
  form.querySelector('[data-action="record"]').hidden = !!r;
  form.querySelector('input[name="recording-name"]').disabled = !!r;
  form.querySelector('[data-action="stop-recording"]').hidden = !r;
  $("recording-state").textContent = r ? `Recording this tab as “${r.name}” since ${new Date(r.startedAt).toLocaleTimeString()}.` : recordingNote;
  $("recording-state").dataset.recording = r ? r.recordingId : "";
}

$("record-form").onsubmit = async (ev) => {
  ev.preventDefault();
  const input = $("record-form").querySelector('input[name="recording-name"]');
  try {
    await ask({ type: "record-start", tabId, name: input.value });
    input.value = "";
    recordingNote = "";
  } catch (e) {
    recordingNote = e.message;
  }
  refresh();
};

$("record-form").querySelector('[data-action="stop-recording"]').onclick = async () => {
  try {
    const r = await ask({ type: "record-stop", tabId });
    recordingNote = `Saved: ${r.stepCount} steps.`;
  } catch (e) {
    recordingNote = e.message;
  }
  await refresh();
  listRecordings();
};

// ------------------------------------------------------------ recordings

async function listRecordings() {
  const ul = $("recordings");
  let r;
  try {
    r = await ask({ type: "recordings", query: $("recordings-search").value.trim() });
  } catch (e) {
    ul.replaceChildren(el("li", { class: "error" }, e.message));
    return;
  }
  ul.replaceChildren();
  for (const x of r.recordings || []) ul.append(entry(x));
  if (!(r.recordings || []).length) ul.append(el("li", { class: "muted" }, "no recordings"));
}

function entry(x) {
  const li = el("li", { "data-recording-id": x.recordingId });
  const when = new Date(x.createdAt);
  li.append(
    el("div", { class: "name" }, x.name || x.recordingId),
    el("div", { class: "muted" }, `${x.stepCount} steps · ${isNaN(when) ? x.createdAt : when.toLocaleString()}`),
  );
  const replay = el("button", { type: "button", "data-action": "replay" }, "Replay in this tab");
  replay.onclick = () => runReplay(x, li);
  const md = el("a", { href: "#", "data-action": "export-markdown" }, "Markdown");
  const html = el("a", { href: "#", "data-action": "export-html" }, "HTML");
  md.onclick = (ev) => exportAs(ev, x, "markdown", "md", "text/markdown");
  html.onclick = (ev) => exportAs(ev, x, "html", "html", "text/html");
  const del = el("button", { type: "button", "data-action": "delete" }, "Delete");
  del.onclick = async () => {
    if (del.dataset.action === "delete") {
      // Asks first: a second click confirms.
      del.dataset.action = "confirm-delete";
      del.textContent = "Delete for good?";
      return;
    }
    try {
      await ask({ type: "recording-delete", recordingId: x.recordingId });
      li.remove();
    } catch (e) {
      li.append(el("div", { class: "error" }, e.message));
    }
  };
  li.append(el("div", { class: "entry-actions" }, replay, md, html, del));
  const rp = replays.get(x.recordingId);
  if (rp) showReplay(li, rp);
  return li;
}

async function exportAs(ev, x, format, ext, type) {
  ev.preventDefault();
  const r = await ask({ type: "recording-export", recordingId: x.recordingId, format });
  const a = el("a", { href: URL.createObjectURL(new Blob([r.content], { type })), download: `${(x.name || x.recordingId).replace(/[^\w.-]+/g, "-")}.${ext}` });
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
}

/** same: every step as recorded; changed: every step ran, some differ;
 * failed: a step failed or was not reached. */
function verdict(done) {
  if (done.failureCount > 0) return "failed";
  return (done.differences || []).length ? "changed" : "same";
}

async function runReplay(x, li) {
  const rp = { state: "running", steps: {}, result: null };
  replays.set(x.recordingId, rp);
  showReplay(li, rp);
  try {
    rp.result = await ask({ type: "replay", tabId, recordingId: x.recordingId });
    // The result names every step that differs: shown even when its
    // step event came after the result (or not at all).
    for (const d of rp.result.differences || []) {
      const s = rp.steps[d.stepIndex];
      if (!s) rp.steps[d.stepIndex] = { tool: d.tool, success: true, diff: d.diff };
      else if (!(s.diff || []).length) s.diff = d.diff;
    }
    rp.state = verdict(rp.result);
  } catch (e) {
    rp.state = "failed";
    rp.error = e.message;
  }
  showReplay(li, rp);
}

function diffText(d) {
  return d.map((x) => `${x.path || "/"} ${x.kind}: ${JSON.stringify(x.recorded)} → ${JSON.stringify(x.actual)}`).join("\n");
}

function showReplay(li, rp) {
  li.dataset.replayState = rp.state;
  let box = li.querySelector(".replay");
  if (!box) {
    box = el("div", { class: "replay" });
    li.append(box);
  }
  const ol = el("ol", { class: "replay-steps" });
  for (const i of Object.keys(rp.steps).map(Number).sort((a, b) => a - b)) {
    const s = rp.steps[i];
    const mark = s.skipped ? "not run" : !s.success ? "failed" : (s.diff || []).length ? "changed" : "same";
    const item = el("li", { "data-step-index": String(i), "data-step-state": mark }, `${s.tool}: ${mark}`);
    if ((s.diff || []).length) item.append(el("pre", {}, diffText(s.diff)));
    ol.append(item);
  }
  const label = { running: "replaying…", same: "same as recorded", changed: "changed", failed: "failed" }[rp.state];
  box.replaceChildren(el("div", { class: "verdict" }, `Replay: ${label}${rp.error ? " – " + rp.error : ""}`), ol);
}

chrome.runtime.onMessage.addListener((m) => {
  if (!m) return;
  if (m.type === "toolhub-replay-step" && m.step) {
    const rp = replays.get(m.step.recordingId);
    if (!rp || rp.state !== "running") return;
    rp.steps[m.step.stepIndex] = m.step;
    const li = document.querySelector(`#recordings li[data-recording-id="${CSS.escape(m.step.recordingId)}"]`);
    if (li) showReplay(li, rp);
  } else if (m.type === "toolhub-changed") {
    refresh();
  }
});

let searchTimer = null;
$("recordings-search").oninput = () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(listRecordings, 150);
};

// ------------------------------------------------------------ instructions

async function currentInstructions() {
  const { serverFilter = {} } = await chrome.storage.local.get("serverFilter");
  const tools = last.tools || [];
  return ToolhubInstructions.build(tools, serverFilter, (t) => PopupSites.policyOf(t, tools), last.catalog);
}

async function renderInstructions() {
  const origin = page && page.origin;
  if (!origin || !last) return;
  const text = await currentInstructions();
  const { instructionsGiven = {} } = await chrome.storage.local.get("instructionsGiven");
  const given = instructionsGiven[origin];
  $("instructions-stale").hidden = !given || given === ToolhubInstructions.fingerprint(text);
}

document.querySelector('[data-action="insert-instructions"]').onclick = async () => {
  const origin = page && page.origin;
  const text = await currentInstructions();
  const r = await askTab({ type: "panel-insert", text });
  if (!r || !r.ok) {
    $("inserted").textContent = "No chat composer in this tab (is toolhub on for this page?).";
    return;
  }
  const { instructionsGiven = {} } = await chrome.storage.local.get("instructionsGiven");
  await chrome.storage.local.set({ instructionsGiven: { ...instructionsGiven, [origin]: ToolhubInstructions.fingerprint(text) } });
  $("inserted").textContent = "Put into the chat's composer: check it and send it.";
  $("inserted").dataset.done = "true";
  renderInstructions();
};

chrome.storage.onChanged.addListener((ch, area) => {
  if (area !== "local") return;
  if ("foldChars" in ch) foldChars = Number(ch.foldChars.newValue) || 20000;
  if (["toolPolicy", "serverFilter", "instructionsGiven"].some((k) => k in ch)) setTimeout(renderInstructions, 0);
});

if (fixedTab === null) {
  chrome.tabs.onActivated.addListener((info) => {
    tabId = info.tabId;
    refresh();
  });
}

chrome.storage.local.get("foldChars").then(({ foldChars: f }) => {
  foldChars = Number(f) || 20000;
  refresh().then(listRecordings);
});
