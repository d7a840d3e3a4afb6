// Per-site tool policy: which tools a live turn may run without asking.
//
// chrome.storage.local `toolPolicy` = {origin: {qualifiedToolName: "auto" |
// "ask" | "never"}}. A tool the person has not set follows its definition:
// it runs without asking ("auto") only when it declares `readOnlyHint: true`
// AND its server is trusted (the hub lists `trustedServers` with its tools:
// `mcpServers.<name>.trusted` in its config, and its own built-ins, server
// `hub`; MCP calls another server's annotations untrusted hints) AND it is
// not a hub tool that shows other sessions' data (SHARED). Every other tool
// waits for a click ("ask"). A block that names a tool by its bare name gets
// the policy of the tool that name resolves to (the same rule as the hub: an
// exact qualified name first, else the one tool of that name). A batch is
// as strict as its strictest step.
//
// A meta-tool (META) is judged by what it would run, never by itself:
// `hub__tool_batch` by every step's tool, `hub__call_tool` by its target
// (`name`), `hub__record_replay` by its recording's tools (the caller
// passes them in `ctx.recordings`; a recording it could not read asks),
// `hub__resume_task` always asks. A step or target whose tool cannot be
// known (a template, an unknown name, deeper than MAX_DEPTH) asks. A
// person's "auto" for a meta-tool means just that (an older version could
// store one; it does not let it run by itself), their "ask" or "never" holds
// whatever it runs, and "always allow" is never offered for one
// (`allowable`).
//
// A classic script (sets globalThis.ToolhubPolicy) that the service worker
// and the popup load and node can require() for tests. No chrome.* here.
(function (root) {
  "use strict";

  const POLICIES = ["auto", "ask", "never"];
  const RANK = { auto: 0, ask: 1, never: 2 };
  /** Hub tools that run other tools. */
  const META = ["hub__tool_batch", "hub__call_tool", "hub__record_replay", "hub__resume_task"];
  /** Read-only hub tools that show other sessions' data (calls, recordings,
   * tasks, runs, the health report): a live turn could paste it into the
   * chat, so they wait for a click. */
  const SHARED = ["hub__history", "hub__record_list", "hub__record_get", "hub__task_status", "hub__list_tasks", "hub__health_check", "hub__run_list", "hub__run_get"];
  /** Meta-tools inside meta-tools deeper than this ask. */
  const MAX_DEPTH = 4;

  /** The tool `name` resolves to in `tools` (list_tools entries), or null. */
  function resolve(tools, name) {
    if (typeof name !== "string" || !name) return null;
    const exact = tools.find((t) => t.qualifiedName === name);
    if (exact) return exact;
    const bare = tools.filter((t) => t.name === name);
    return bare.length === 1 ? bare[0] : null;
  }

  /** What a tool really is: its real qualified name when a view renamed it. */
  function identity(tool) {
    return (tool && (tool.realTool || tool.qualifiedName)) || "";
  }

  function isMeta(tool) {
    return META.includes(identity(tool));
  }

  /** The policy a tool has by its own definition. */
  function byDefinition(tool) {
    if (!tool || isMeta(tool) || SHARED.includes(identity(tool))) return "ask";
    const readOnly = !!(tool.annotations && tool.annotations.readOnlyHint === true);
    return readOnly && tool.trusted === true ? "auto" : "ask";
  }

  function chosenFor(toolPolicy, origin, q) {
    const mine = (toolPolicy && toolPolicy[origin]) || {};
    return Object.prototype.hasOwnProperty.call(mine, q) && POLICIES.includes(mine[q]) ? mine[q] : null;
  }

  /**
   * The policy of tool `name` on `origin` by itself: {policy, qualifiedName,
   * set, known, meta} (`set`: the person chose it; else it comes from the
   * definition). An unknown tool waits for a click (the hub then says what
   * is wrong); so does a meta-tool, whatever was stored for it, unless it
   * is set to "never" (forBlock looks inside it).
   */
  function forTool(toolPolicy, origin, tools, name) {
    const t = resolve(tools, name);
    const q = t ? t.qualifiedName : String(name || "");
    const meta = isMeta(t);
    const chosen = chosenFor(toolPolicy, origin, q);
    if (chosen && !(meta && chosen === "auto")) return { policy: chosen, qualifiedName: q, set: true, known: !!t, meta };
    return { policy: t ? byDefinition(t) : "ask", qualifiedName: q, set: false, known: !!t, meta };
  }

  function isObject(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v);
  }

  /**
   * Every tool a call of `name` with `params` would run, as entries
   * {name, qualifiedName, policy, set, known, meta, why?} pushed to `out`;
   * recording ids it would need and `ctx.recordings` lacks go to `need`.
   */
  function walk(toolPolicy, origin, tools, name, params, ctx, depth, out, need) {
    const e = { name, ...forTool(toolPolicy, origin, tools, name) };
    // A meta-tool the person set to "never" or "ask" is that, whatever it runs.
    if (!e.meta || e.policy === "never" || (e.set && e.policy === "ask")) {
      out.push(e);
      return;
    }
    const id = identity(resolve(tools, name));
    const p = isObject(params) ? params : {};
    const unknown = (what, why) => out.push({ name: what, qualifiedName: what, policy: "ask", set: false, known: false, meta: false, why });
    if (depth >= MAX_DEPTH) {
      out.push({ ...e, policy: "ask", why: "nested too deep to judge" });
      return;
    }
    if (id === "hub__resume_task") {
      out.push({ ...e, policy: "ask", why: "resumes a task whose steps it does not show" });
      return;
    }
    // The meta-tool itself neither allows nor refuses: its inner tools do.
    out.push({ ...e, policy: "auto" });
    if (id === "hub__tool_batch") {
      const steps = Array.isArray(p.steps) ? p.steps : [];
      if (!steps.length) unknown(`${e.qualifiedName} steps`, "has no steps to judge");
      for (const s of steps) {
        const tool = isObject(s) && typeof s.tool === "string" ? s.tool : "";
        walk(toolPolicy, origin, tools, tool, isObject(s) ? s.params : {}, ctx, depth + 1, out, need);
      }
    } else if (id === "hub__call_tool") {
      const target = typeof p.name === "string" ? p.name : typeof p.tool === "string" ? p.tool : "";
      walk(toolPolicy, origin, tools, target, p.arguments, ctx, depth + 1, out, need);
    } else if (id === "hub__record_replay") {
      const rid = typeof p.recordingId === "string" ? p.recordingId : "";
      const rec = rid && ctx.recordings ? ctx.recordings[rid] : undefined;
      if (rec === undefined && rid && !rid.includes("{{")) need.add(rid);
      if (!rec) {
        unknown(`recording ${rid || "?"}`, "its recording's tools could not be read");
        return;
      }
      for (const step of rec) {
        // The tool the hub will run: the step's qualified name, its tool
        // only when it has none (recording::export), never a fallback.
        const t = resolve(tools, step.qualifiedName || step.tool);
        const name2 = t ? t.qualifiedName : step.qualifiedName || step.tool || "";
        // A recorded meta-tool's params may be templates or redacted: ask.
        if (isMeta(t)) unknown(name2, "a recorded meta-tool step");
        else walk(toolPolicy, origin, tools, name2, {}, ctx, depth + 1, out, need);
      }
    }
  }

  /** The tool names a block calls: its tool, or each step's (not looking
   * inside meta-tools; forBlock does). */
  function toolsOf(block) {
    if (!block) return [];
    if (block.kind === "batch") return (block.steps || []).map((s) => (s && typeof s.tool === "string" ? s.tool : ""));
    return [block.tool];
  }

  /**
   * A block's policy on `origin`: the strictest of every tool it would run
   * (inside meta-tools too), with each: {policy, tools: [{name,
   * qualifiedName, policy, set, known, meta, why?}], allow: [qualified names
   * "always allow" may remember], need: [recording ids to read first]}.
   * `ctx.recordings`: recording id → its steps ([{tool, qualifiedName}]),
   * or null when it could not be read.
   */
  function forBlock(toolPolicy, origin, tools, block, ctx = {}) {
    const each = [];
    const need = new Set();
    if (block && block.kind === "batch") {
      for (const s of block.steps || []) {
        const tool = s && typeof s.tool === "string" ? s.tool : "";
        walk(toolPolicy, origin, tools, tool, s && s.params, ctx, 1, each, need);
      }
    } else if (block) {
      walk(toolPolicy, origin, tools, block.tool, block.params, ctx, 0, each, need);
    }
    let policy = "auto";
    for (const e of each) if (RANK[e.policy] > RANK[policy]) policy = e.policy;
    if (!each.length) policy = "ask";
    return { policy, tools: each, allow: allowable(each), need: [...need] };
  }

  /** Of a block's entries, the tools "always allow" may remember: known,
   * asking, never a meta-tool. */
  function allowable(entries) {
    const out = [];
    for (const e of entries) if (e.policy === "ask" && e.known && !e.meta && !out.includes(e.qualifiedName)) out.push(e.qualifiedName);
    return out;
  }

  /** `toolPolicy` with `qualifiedNames` set to `policy` on `origin`. */
  function withPolicy(toolPolicy, origin, qualifiedNames, policy) {
    if (!POLICIES.includes(policy)) throw new Error(`a tool policy is one of ${POLICIES.join(", ")}, not ${policy}`);
    const next = { ...(toolPolicy || {}) };
    next[origin] = { ...(next[origin] || {}) };
    for (const q of qualifiedNames) next[origin][q] = policy;
    return next;
  }

  /** `tools` (a list_tools reply's) each marked `trusted` when its server
   * is one of `trustedServers` (a hub too old to send them: its own `hub`). */
  function markTrusted(tools, trustedServers) {
    const trusted = Array.isArray(trustedServers) ? trustedServers : ["hub"];
    return tools.map((t) => ({ ...t, trusted: trusted.includes(t.server) }));
  }

  const api = { POLICIES, META, SHARED, resolve, identity, isMeta, byDefinition, forTool, forBlock, allowable, toolsOf, withPolicy, markTrusted };
  root.ToolhubPolicy = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
