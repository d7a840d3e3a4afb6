// Instructions that tell an AI how to write Ω blocks for the tools in
// force, in a compact form: one line per tool, `name(param: type, opt?: type) – summary`.
// Used by the popup's "Copy instructions" button; a classic script (sets
// globalThis.ToolhubInstructions) that node can require() for tests.
(function (root) {
  "use strict";

  const SUMMARY_MAX = 110;

  function typeOf(s, depth = 0) {
    if (!s || typeof s !== "object") return "any";
    if (Array.isArray(s.enum) && s.enum.length && s.enum.length <= 6) return s.enum.map((v) => JSON.stringify(v)).join("|");
    if (s.const !== undefined) return JSON.stringify(s.const);
    const variants = s.anyOf || s.oneOf;
    if (Array.isArray(variants) && variants.length) {
      const ts = variants.map((v) => typeOf(v, depth)).filter((t) => t !== "null");
      return [...new Set(ts)].join("|") || "any";
    }
    let t = s.type;
    if (Array.isArray(t)) t = t.filter((x) => x !== "null")[0] || "any";
    if (t === "array") return depth > 1 ? "array" : `${typeOf(s.items, depth + 1)}[]`;
    if (t === "object") {
      const props = s.properties && Object.keys(s.properties);
      if (!props || !props.length || depth > 0) return "object";
      const req = new Set(s.required || []);
      return "{" + props.slice(0, 6).map((p) => `${p}${req.has(p) ? "" : "?"}: ${typeOf(s.properties[p], depth + 1)}`).join(", ") + (props.length > 6 ? ", …" : "") + "}";
    }
    if (t === "integer") return "int";
    return t || "any";
  }

  /** `name(a: string, b?: int)` from a tool's inputSchema. */
  function signature(tool) {
    const s = tool.inputSchema || {};
    const props = (s.properties && Object.keys(s.properties)) || [];
    const req = new Set(s.required || []);
    const ordered = props.filter((p) => req.has(p)).concat(props.filter((p) => !req.has(p)));
    const args = ordered.map((p) => `${p}${req.has(p) ? "" : "?"}: ${typeOf(s.properties[p])}`);
    return `${tool.qualifiedName || tool.name}(${args.join(", ")})`;
  }

  /** The first sentence of a description, shortened. */
  function summary(d) {
    if (!d) return "";
    const one = String(d).replace(/\s+/g, " ").trim();
    const m = /^(.+?[.!?])(\s|$)/.exec(one);
    const s = m ? m[1] : one;
    return s.length > SUMMARY_MAX ? s.slice(0, SUMMARY_MAX - 1) + "…" : s;
  }

  /** Servers in the tool list, sorted, with their tool counts. */
  function serversOf(tools) {
    const m = new Map();
    for (const t of tools) m.set(t.server, (m.get(t.server) || 0) + 1);
    return [...m.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([name, count]) => ({ name, count }));
  }

  /**
   * The instructions for `tools`, leaving out servers for which
   * `off[server]` is true and tools whose policy (`policyOf(tool)`: "auto",
   * "ask" or "never"; all "ask" when not given) is "never". No example in
   * them is a runnable block (the Ω sign is never followed by `{`), so
   * pasting them into a chat runs nothing.
   *
   * `catalog` (a discovery view's tools, `{name, server}` each): the tools
   * are listed by name only, one line each, to be found with
   * hub__search_tools, read with hub__describe_tool and called with
   * hub__call_tool, so the text stays small with any number of servers.
   */
  function build(tools, off = {}, policyOf = () => "ask", catalog = null) {
    const kept = tools.filter((t) => !off[t.server] && policyOf(t) !== "never");
    const byServer = new Map();
    for (const t of kept) {
      if (!byServer.has(t.server)) byServer.set(t.server, []);
      byServer.get(t.server).push(t);
    }
    const name = (t) => t.qualifiedName || t.name;
    const auto = kept.filter((t) => policyOf(t) === "auto").map(name).sort();
    const ask = kept.filter((t) => policyOf(t) !== "auto").map(name).sort();
    const lines = [
      "You can use tools on my computer through toolhub. To call a tool, write a block in your reply: the Ω sign (Greek capital omega), immediately followed by a JSON object. The object for one call looks like this (written here without the Ω sign in front, so that this text itself calls nothing):",
      "",
      '    {"tool":"NAME","params":{"arg":"value"}}',
      "",
      "Several steps in one block (they run in order; saveAs keeps a step's result for later steps), again with the Ω sign to put in front:",
      "",
      '    {"steps":[{"tool":"NAME","params":{…},"saveAs":"a"},{"tool":"NAME","params":{"x":"{{a.result}}"},"when":"{{a.success}}"}],"options":{"stopOnError":true}}',
      "",
      "Rules:",
      "- Strict JSON: double quotes, no comments, no trailing commas. Use the exact tool names below.",
      "- {{a.result}} is the result of the step saved as a ({{a.result.field}} inside a structured result); {{a.success}} is true or false.",
      "- After a block, stop and wait: the result is shown under your block and sent back to you. Never invent a result.",
      "- One block runs once. To run the same call again, write it again in a new message.",
      "- Write the Ω sign only to call a tool; to mention the syntax, leave out the Ω.",
      "- A long result comes back as its start and its end, with the file that holds all of it: read that file with a tool if you need the middle.",
      "",
      "Which tools run at once and which wait for me:",
      `- Run at once when you write them: ${auto.length ? auto.join(", ") : "none"}.`,
      `- Wait until I click Run (so tell me why you need them): ${ask.length ? ask.join(", ") : "none"}.`,
      "",
      `Tools (${kept.length}), as name(param: type, optional?: type) – what it does:`,
    ];
    for (const [server, ts] of [...byServer.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
      lines.push(`[${server}]`);
      for (const t of ts.slice().sort((a, b) => name(a).localeCompare(name(b)))) {
        const s = summary(t.description);
        lines.push(`${signature(t)}${s ? " – " + s : ""}`);
      }
    }
    const reach = (catalog || []).filter((c) => !off[c.server]);
    if (reach.length) {
      lines.push(
        "",
        `More tools (${reach.length}), by name only. To find one for a task, use hub__search_tools {"query":"words"}; before you call one, read its parameters with hub__describe_tool {"name":"NAME"}; then call it with hub__call_tool {"name":"NAME","arguments":{…}}:`,
      );
      for (const c of reach.slice().sort((a, b) => a.name.localeCompare(b.name))) lines.push(c.name);
    }
    return lines.join("\n");
  }

  /** A short fingerprint of an instructions text, to tell whether the
   * instructions a chat was given are still the ones in force. */
  function fingerprint(text) {
    let h = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
    return h.toString(16).padStart(8, "0") + ":" + text.length;
  }

  const api = { build, signature, summary, serversOf, fingerprint };
  root.ToolhubInstructions = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
