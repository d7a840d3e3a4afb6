// History: the latest calls (single calls and batch steps) with a filter
// by tool, server and outcome. Refreshed when this page's own calls end.

import { badge, brief, fill, h, ms } from "./dom.js";

export function mount(root, { hub }) {
  const status = h("p", { class: "muted", role: "status" });
  const tool = h("input", { id: "hist-tool", type: "search", autocomplete: "off" });
  const server = h("select", { id: "hist-server" }, h("option", { value: "" }, "any"));
  const outcome = h("select", { id: "hist-outcome" },
    h("option", { value: "" }, "any"), h("option", { value: "success" }, "succeeded"), h("option", { value: "failure" }, "failed"));
  const table = h("table", { class: "grid", id: "hist-table" });
  let entries = [];

  async function refresh() {
    try {
      entries = (await hub.request({ type: "history", limit: 500 })).entries || [];
    } catch (e) {
      status.textContent = `Cannot read history: ${e.message}`;
      return;
    }
    const servers = [...new Set(entries.map(serverOf))].sort();
    const keep = server.value;
    fill(server, h("option", { value: "" }, "any"), servers.map((s) => h("option", { value: s }, s)));
    server.value = servers.includes(keep) ? keep : "";
    render();
  }

  function render() {
    const q = tool.value.trim().toLowerCase();
    const shown = entries.filter((e) =>
      (!q || e.tool.toLowerCase().includes(q)) &&
      (!server.value || serverOf(e) === server.value) &&
      (!outcome.value || (outcome.value === "success") === e.success)).reverse();
    status.textContent = `${shown.length} of ${entries.length} calls`;
    fill(table,
      h("thead", {}, h("tr", {}, ["Time", "Client", "Tool", "Outcome", "Attempts", "Duration", "Params"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, shown.map((e) => h("tr", { class: e.success ? "" : "diff" },
        h("td", {}, h("time", { datetime: e.ts }, new Date(e.ts).toLocaleTimeString())),
        h("td", { class: "client" }, e.client || (e.view ? `(${e.view})` : "–")),
        h("td", {}, h("code", {}, e.tool)),
        h("td", {}, badge(e.success ? "success" : "failed"), e.errorType ? ` ${e.errorType}` : ""),
        h("td", {}, String(e.attempts ?? "")),
        h("td", {}, ms(e.durationMs)),
        h("td", { class: "params" }, brief(e.params, 100))))));
  }

  for (const el of [tool, server, outcome]) el.addEventListener("input", render);
  root.append(
    h("div", { class: "bar" }, h("h2", {}, "History"),
      h("button", { type: "button", onclick: refresh }, "Refresh")),
    h("div", { class: "row filters" },
      h("label", { for: "hist-tool" }, "Tool"), tool,
      h("label", { for: "hist-server" }, "Server"), server,
      h("label", { for: "hist-outcome" }, "Outcome"), outcome),
    status, h("div", { class: "scroll" }, table));
  refresh();
  // A burst of finished calls costs one history request.
  let pending = null;
  const soon = () => {
    if (!pending) pending = setTimeout(() => { pending = null; refresh(); }, 300);
  };
  const offs = [hub.on("tool_result", soon), hub.on("batch_complete", soon)];
  return () => {
    clearTimeout(pending);
    offs.forEach((f) => f());
  };
}

/** History names tools by qualified name, `server__tool`. */
function serverOf(e) {
  const i = e.tool.indexOf("__");
  return i > 0 ? e.tool.slice(0, i) : "";
}
