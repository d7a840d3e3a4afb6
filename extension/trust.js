// The service worker's side of trust: which pages may ask for a run, what a
// run may do without a person's click, local origins turned on at run time,
// and big results kept at the hub. Loaded by sw.js with importScripts after
// sites.js, the site files and policy.js.
//
// chrome.storage.local keys (a test or a backup may set them):
//   localOrigins  ["http://127.0.0.1:3000", …]: local pages toolhub reads
//                 (off by default; each gets a content script registered at
//                 run time, which needs no prompt: the manifest already has
//                 host permission for 127.0.0.1 and localhost)
//   sitesOff      [origin, …]: supported chat sites the person turned off
//   toolPolicy    {origin: {qualifiedToolName: "auto" | "ask" | "never"}}
//   foldChars     results longer than this are folded (default 20000)
"use strict";

const SITE_FILES = ["sites/chatgpt.js", "sites/claude.js", "sites/gemini.js", "sites/genspark.js"];
/** The content script's files, in order (the manifest lists the same). */
const CONTENT_JS = ["blocks.js", "scan.js", "sites.js", ...SITE_FILES, "render.js", "content.js"];
const LOCAL_SCRIPT_ID = "toolhub-local";
const LOCAL_ORIGIN = /^https?:\/\/(127\.0\.0\.1|localhost)(:\d{1,5})?$/;
const FOLD_DEFAULT = 20000;
/** A replay of a longer recording is not looked into: it asks. */
const RECORDING_STEPS_MAX = 10000;

const Trust = {
  isLocalOrigin(o) {
    return typeof o === "string" && LOCAL_ORIGIN.test(o);
  },

  /** The page a message came from: {origin, on, why}. Only a content
   * script of a supported site the person did not turn off, or of a local
   * origin they turned on, is `on`. */
  async page(sender) {
    let origin = sender.origin;
    if (!origin || origin === "null") {
      try {
        origin = new URL(sender.url).origin;
      } catch {
        origin = "";
      }
    }
    const { localOrigins = [], sitesOff = [] } = await chrome.storage.local.get(["localOrigins", "sitesOff"]);
    if (ToolhubSites.forOrigin(origin)) {
      const on = !sitesOff.includes(origin);
      return { origin, on, why: on ? "" : `toolhub is turned off on ${origin}: turn it on in the toolhub popup` };
    }
    const on = Trust.isLocalOrigin(origin) && localOrigins.includes(origin);
    return { origin, on, why: on ? "" : `toolhub does not read ${origin || "this page"}: turn the origin on in the toolhub popup (local pages) to use it` };
  },

  /** A block's policy on `origin` (policy.js), looking inside meta-tools:
   * a replay's recording is read from the hub first (each time: a recording
   * can be changed between two replays); one it cannot read asks. */
  async policyOf(origin, toolList, block) {
    const { toolPolicy = {} } = await chrome.storage.local.get("toolPolicy");
    const ctx = { recordings: {} };
    for (let round = 0; round < 4; round++) {
      const p = ToolhubPolicy.forBlock(toolPolicy, origin, toolList, block, ctx);
      if (!p.need.length) return p;
      for (const id of p.need) ctx.recordings[id] = await Trust.recordingTools(id);
    }
    return ToolhubPolicy.forBlock(toolPolicy, origin, toolList, block, ctx);
  },

  /** The steps ({tool, qualifiedName}) of recording `id` at the hub, or
   * null when it cannot be read whole (not connected, not found, refused,
   * longer than RECORDING_STEPS_MAX). */
  async recordingTools(id) {
    const steps = [];
    let offset = 0;
    try {
      while (steps.length <= RECORDING_STEPS_MAX) {
        const r = await request({ type: "get_recording", recordingId: id, offset, limit: 1000 });
        const rec = r.type === "recording" && r.recording;
        if (!rec || !Array.isArray(rec.steps)) return null;
        for (const s of rec.steps) steps.push({ tool: String(s.tool || ""), qualifiedName: String(s.qualifiedName || "") });
        const next = rec.stepsPage && rec.stepsPage.nextOffset;
        if (next === null || next === undefined) return steps;
        offset = next;
      }
    } catch {
      return null;
    }
    return null;
  },

  /** Remember "run without asking" for `names` on `origin`. */
  async allow(origin, names) {
    if (!names.length) return;
    const { toolPolicy = {} } = await chrome.storage.local.get("toolPolicy");
    await chrome.storage.local.set({ toolPolicy: ToolhubPolicy.withPolicy(toolPolicy, origin, names, "auto") });
  },

  /**
   * May this run go ahead? `mode`: "auto" (a live turn, no click), "click"
   * (the person pressed Run), "allow" (pressed "always allow"). Returns
   * {go: true} or {go: false, policy} (it waits for the person: the content
   * script shows it ready) or throws (refused).
   */
  async gate(page, mode, toolList, block) {
    if (!page.on) throw new Error(page.why);
    const policy = await Trust.policyOf(page.origin, toolList, block);
    if (policy.policy === "never") {
      const never = policy.tools.filter((t) => t.policy === "never").map((t) => t.qualifiedName);
      throw new Error(`${never.join(", ")} is set to never run on ${page.origin}; change it in the toolhub popup`);
    }
    if (mode === "allow") {
      // Never a meta-tool: what it runs is judged each time (policy.js).
      await Trust.allow(page.origin, policy.allow);
      return { go: true };
    }
    if (mode === "click") return { go: true };
    return policy.policy === "auto" ? { go: true } : { go: false, policy };
  },

  /** Register the content script for the local origins turned on, and put
   * it into their tabs already open (a script already there does nothing). */
  async syncLocal(added = []) {
    const { localOrigins = [] } = await chrome.storage.local.get("localOrigins");
    const origins = localOrigins.filter(Trust.isLocalOrigin);
    const have = await chrome.scripting.getRegisteredContentScripts({ ids: [LOCAL_SCRIPT_ID] });
    if (have.length) await chrome.scripting.unregisterContentScripts({ ids: [LOCAL_SCRIPT_ID] });
    if (origins.length) {
      await chrome.scripting.registerContentScripts([
        {
          id: LOCAL_SCRIPT_ID,
          matches: origins.map((o) => o + "/*"),
          js: CONTENT_JS,
          css: ["content.css"],
          runAt: "document_idle",
          persistAcrossSessions: true,
        },
      ]);
    }
    for (const o of added.filter((x) => origins.includes(x))) {
      const tabs = await chrome.tabs.query({ url: o + "/*" }).catch(() => []);
      for (const t of tabs) {
        await chrome.scripting.insertCSS({ target: { tabId: t.id }, files: ["content.css"] }).catch(() => {});
        await chrome.scripting.executeScript({ target: { tabId: t.id }, files: CONTENT_JS }).catch(() => {});
      }
    }
  },

  async foldChars() {
    const { foldChars } = await chrome.storage.local.get("foldChars");
    return Number(foldChars) > 0 ? Number(foldChars) : FOLD_DEFAULT;
  },

  /**
   * A result longer than the fold limit is kept whole at the hub (in its
   * workspace, where hub__read_file reads it) under `name`: returns
   * {path, chars}, {error, chars}, or null for a short result.
   */
  async keep(name, value, request) {
    if (value === undefined || value === null) return null;
    const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    if (text === undefined || text.length <= (await Trust.foldChars())) return null;
    try {
      const r = await request({ type: "keep_result", name, text }, 60000);
      if (r.type === "result_kept" && r.path) return { path: r.path, chars: text.length };
      return { error: (r.error && r.error.message) || `the hub answered ${r.type}`, chars: text.length };
    } catch (e) {
      return { error: String((e && e.message) || e), chars: text.length };
    }
  },
};
