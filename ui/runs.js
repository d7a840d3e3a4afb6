// Runs: the list, one run's execution log as a timeline, and its
// screenshots as a gallery (each image fetched with get_artifact).

import { artifactFigure } from "./artifact.js";
import { badge, brief, errorBox, fill, h, ms, pre } from "./dom.js";

export function mount(root, { hub }) {
  const status = h("p", { class: "muted", role: "status" });
  const list = h("table", { class: "grid", id: "run-list" });
  const detail = h("section", { id: "run-detail", "aria-live": "polite" });
  const filter = h("select", { id: "run-filter" },
    h("option", { value: "" }, "all"), h("option", { value: "active" }, "active"), h("option", { value: "archived" }, "archived"));

  async function refresh() {
    try {
      const r = await hub.request({ type: "list_runs", ...(filter.value ? { status: filter.value } : {}) });
      const runs = r.runs || [];
      status.textContent = `${runs.length} run(s)` + (r.problems?.length ? `; problems: ${r.problems.join("; ")}` : "");
      fill(list,
        h("thead", {}, h("tr", {}, ["Run", "Theme", "Status", "Last accessed"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, runs.map((x) => h("tr", { dataset: { run: x.runId } },
          h("td", {}, h("button", { type: "button", class: "link", onclick: () => open(x.runId) }, x.runId)),
          h("td", {}, x.theme),
          h("td", {}, badge(x.status)),
          h("td", {}, x.lastAccessed ? new Date(x.lastAccessed).toLocaleString() : "–")))));
    } catch (e) {
      fill(status, errorBox(e.hubError || { message: e.message }));
    }
  }

  async function open(runId) {
    try {
      const r = await hub.request({ type: "get_run", runId, tail: 200 });
      const entries = r.entries || [];
      // Every image an entry names, once, oldest first.
      const shots = [...new Set(entries.flatMap((e) => [e.data?.screenshot, ...(e.data?.screenshots || [])])
        .filter((s) => typeof s === "string"))];
      fill(detail,
        h("h3", {}, r.run?.theme || runId),
        h("p", { class: "muted" }, `${runId} · ${r.run?.status} · last ${entries.length} log entries`),
        (r.warnings || []).map((w) => h("p", { class: "warn" }, w)),
        h("ol", { class: "timeline", id: "run-log" }, entries.map(entry)),
        h("h4", {}, "Screenshots"),
        shots.length
          ? h("div", { class: "gallery", id: "run-shots" }, shots.map((s) => artifactFigure(hub, { runId }, s)))
          : h("p", { class: "muted" }, "No screenshots in these entries."));
    } catch (e) {
      fill(detail, errorBox(e.hubError || { message: e.message }));
    }
  }

  filter.addEventListener("change", refresh);
  root.append(
    h("div", { class: "bar" }, h("h2", {}, "Runs"),
      h("label", { for: "run-filter" }, "Status"), filter,
      h("button", { type: "button", onclick: refresh }, "Refresh")),
    status,
    h("div", { class: "split" }, h("div", { class: "scroll" }, list), detail));
  refresh();
  return null;
}

function entry(e) {
  const state = e.status === "error" ? "failed" : e.status;
  return h("li", { class: `step step-${state}` },
    h("div", { class: "step-head" },
      h("time", { datetime: e.timestamp }, new Date(e.timestamp).toLocaleTimeString()), " ",
      h("strong", {}, e.step), " ", badge(e.status),
      h("span", { class: "muted" }, ` · ${e.action_type} · ${e.execution_method}`),
      e.data?.durationMs !== undefined ? h("span", { class: "muted" }, ` · ${ms(e.data.durationMs)}`) : null),
    e.data?.error ? h("p", { class: "error" }, `${e.data.errorType || ""} ${brief(e.data.error, 300)}`) : null,
    pre("Data", e.data));
}
