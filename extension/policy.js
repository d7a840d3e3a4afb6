// Per-site tool policy: which tools a live turn may run without asking.
//
// chrome.storage.local `toolPolicy` = {origin: {qualifiedToolName: "auto" |
// "ask" | "never"}}. A tool the person has not set follows its definition: a
// tool that declares `readOnlyHint: true` runs without asking ("auto"),
// every other tool waits for a click ("ask"). A block that names a tool by
// its bare name gets the policy of the tool that name resolves to (the same
// rule as the hub: an exact qualified name first, else the one tool of that
// name). A batch is as strict as its strictest step.
//
// A classic script (sets globalThis.ToolhubPolicy) that the service worker
// and the popup load and node can require() for tests. No chrome.* here.
(function (root) {
  "use strict";

  const POLICIES = ["auto", "ask", "never"];
  const RANK = { auto: 0, ask: 1, never: 2 };

  /** The tool `name` resolves to in `tools` (list_tools entries), or null. */
  function resolve(tools, name) {
    if (typeof name !== "string" || !name) return null;
    const exact = tools.find((t) => t.qualifiedName === name);
    if (exact) return exact;
    const bare = tools.filter((t) => t.name === name);
    return bare.length === 1 ? bare[0] : null;
  }

  /** The policy a tool has by its own definition. */
  function byDefinition(tool) {
    return tool && tool.annotations && tool.annotations.readOnlyHint === true ? "auto" : "ask";
  }

  /**
   * The policy of tool `name` on `origin`: {policy, qualifiedName, set}
   * (`set`: the person chose it; else it comes from the definition). An
   * unknown tool waits for a click (the hub then says what is wrong).
   */
  function forTool(toolPolicy, origin, tools, name) {
    const t = resolve(tools, name);
    const q = t ? t.qualifiedName : String(name || "");
    const mine = (toolPolicy && toolPolicy[origin]) || {};
    const chosen = Object.prototype.hasOwnProperty.call(mine, q) && POLICIES.includes(mine[q]) ? mine[q] : null;
    if (chosen) return { policy: chosen, qualifiedName: q, set: true, known: !!t };
    return { policy: t ? byDefinition(t) : "ask", qualifiedName: q, set: false, known: !!t };
  }

  /** The tool names a block calls: its tool, or each step's. */
  function toolsOf(block) {
    if (!block) return [];
    if (block.kind === "batch") return (block.steps || []).map((s) => (s && typeof s.tool === "string" ? s.tool : ""));
    return [block.tool];
  }

  /**
   * A block's policy on `origin`: the strictest of its tools', with each
   * tool's own: {policy, tools: [{name, qualifiedName, policy, set, known}]}.
   */
  function forBlock(toolPolicy, origin, tools, block) {
    const each = toolsOf(block).map((name) => ({ name, ...forTool(toolPolicy, origin, tools, name) }));
    let policy = "auto";
    for (const e of each) if (RANK[e.policy] > RANK[policy]) policy = e.policy;
    if (!each.length) policy = "ask";
    return { policy, tools: each };
  }

  /** `toolPolicy` with `qualifiedNames` set to `policy` on `origin`. */
  function withPolicy(toolPolicy, origin, qualifiedNames, policy) {
    if (!POLICIES.includes(policy)) throw new Error(`a tool policy is one of ${POLICIES.join(", ")}, not ${policy}`);
    const next = { ...(toolPolicy || {}) };
    next[origin] = { ...(next[origin] || {}) };
    for (const q of qualifiedNames) next[origin][q] = policy;
    return next;
  }

  const api = { POLICIES, resolve, byDefinition, forTool, forBlock, toolsOf, withPolicy };
  root.ToolhubPolicy = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
