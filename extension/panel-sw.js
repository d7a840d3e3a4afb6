// The service worker's side of the side panel (panel.html): the state of
// one tab (connection, its approvals, its recording), recording that tab
// (a hub recording in the tab's context, so only its calls are kept), and
// the saved recordings: list, replay into the tab, export, delete. Loaded
// by sw.js with importScripts; uses its `request`, `pending`, `approvals`,
// `conn` and `tools`. Only the extension's own pages may send these.
"use strict";

/** tabId → {recordingId, name, startedAt}: the tab recordings under way,
 * kept in storage.session so a restarted worker still knows them. */
let tabRecordings = {};
const tabRecordingsReady = chrome.storage.session.get("tabRecordings").then((s) => {
  tabRecordings = s.tabRecordings || {};
});

const REPLAY_TIMEOUT_MS = 30 * 60 * 1000;

function tabContext(tabId) {
  const n = Number(tabId);
  if (!Number.isInteger(n) || n < 0) throw new Error(`a tab id is a whole number, not ${JSON.stringify(tabId)}`);
  return `tab-${n}`;
}

/** The approvals waiting for a block of `tabId`. */
function approvalsOfTab(tabId) {
  return liveApprovals()
    .filter((a) => {
      const e = a.key && pending.get(a.key);
      return !!e && e.tabs.some((t) => t.tabId === Number(tabId));
    })
    .map((a) => ({ taskId: a.taskId, batchId: a.batchId || null, stepIndex: a.stepIndex, tool: a.tool, params: a.params, reason: a.reason, key: a.key }));
}

/** An answer from the hub, or its error as an exception. */
async function hubAsk(msg, timeoutMs) {
  const r = await request(msg, timeoutMs);
  if (r.type === "error") throw new Error(r.error ? `${r.error.errorType}: ${r.error.message}` : "the hub refused it");
  return r;
}

const PanelSw = {
  types: new Set(["panel-state", "record-start", "record-stop", "recordings", "recording-export", "recording-delete", "replay"]),

  async handle(msg) {
    await tabRecordingsReady;
    switch (msg.type) {
      case "panel-state":
        return {
          state: conn.state,
          message: conn.message,
          hubUrl: settings.hubUrl,
          tools: tools.tools,
          catalog: tools.catalog || null,
          approvals: approvalsOfTab(msg.tabId),
          recording: tabRecordings[msg.tabId] || null,
        };
      case "record-start": {
        const name = String(msg.name || "").trim() || `tab ${msg.tabId} at ${new Date().toISOString().slice(0, 16).replace("T", " ")}`;
        const r = await hubAsk({ type: "start_recording", name, context: tabContext(msg.tabId), tags: ["extension"] });
        tabRecordings[msg.tabId] = { recordingId: r.recordingId, name: r.name || name, startedAt: Date.now() };
        await chrome.storage.session.set({ tabRecordings });
        notifyUi();
        return tabRecordings[msg.tabId];
      }
      case "record-stop": {
        let r;
        try {
          r = await hubAsk({ type: "stop_recording", context: tabContext(msg.tabId) });
        } catch (e) {
          // The hub no longer records it (its session ended, the hub
          // restarted): what was recorded is saved there; forget it here.
          if (/not recording/.test(e.message)) PanelSw.forgetTab(msg.tabId);
          notifyUi();
          throw e;
        }
        delete tabRecordings[msg.tabId];
        await chrome.storage.session.set({ tabRecordings });
        notifyUi();
        return r;
      }
      case "recordings":
        return hubAsk({ type: "list_recordings", query: msg.query || undefined, sort: "newest", limit: 100 });
      case "recording-export":
        return hubAsk({ type: "export_recording", recordingId: msg.recordingId, format: msg.format });
      case "recording-delete":
        return hubAsk({ type: "delete_recording", recordingId: msg.recordingId });
      case "replay":
        // Live, in the tab's context: a per-context browser is the tab's own.
        return hubAsk({ type: "replay_recording", recordingId: msg.recordingId, mode: "live", context: tabContext(msg.tabId) }, REPLAY_TIMEOUT_MS);
      default:
        return undefined;
    }
  },

  /** A step of a replay, passed on to the panel that shows it. */
  step(m) {
    chrome.runtime.sendMessage({ type: "toolhub-replay-step", step: m }).catch(() => {});
  },

  forgetTab(tabId) {
    if (!tabRecordings[tabId]) return;
    delete tabRecordings[tabId];
    chrome.storage.session.set({ tabRecordings }).catch(() => {});
  },
};
