// Tools: a searchable list with description and input schema, and a form
// generated from the schema that sends a tool_call and shows the result,
// or the classified error with its suggestion.

import { errorBox, fill, h, ms, pre } from "./dom.js";
import { schemaForm } from "./form.js";
import { needCard } from "./need.js";

export function mount(root, { hub, store }) {
  const search = h("input", { id: "tool-search", type: "search", placeholder: "name or description", autocomplete: "off" });
  const count = h("p", { class: "muted", role: "status" });
  const list = h("ul", { class: "tool-list", id: "tool-list" });
  const detail = h("section", { class: "tool-detail", id: "tool-detail", "aria-live": "polite" });
  const notice = h("p", { class: "warn-text", role: "status" });
  let selected = null;

  function render() {
    const q = search.value.trim().toLowerCase();
    const tools = store.tools.filter((t) => !q ||
      t.qualifiedName.toLowerCase().includes(q) || (t.description || "").toLowerCase().includes(q));
    count.textContent = `${tools.length} of ${store.tools.length} tools`;
    fill(list, tools.map((t) => h("li", {},
      h("button", { type: "button", class: "link", "aria-pressed": String(t.qualifiedName === selected),
        dataset: { tool: t.qualifiedName }, onclick: () => select(t.qualifiedName) },
      h("strong", {}, t.qualifiedName), h("span", { class: "desc" }, t.description || "")))));
  }

  function select(name) {
    selected = name;
    render();
    const t = store.tools.find((x) => x.qualifiedName === name);
    if (!t) return;
    const form = schemaForm(t.inputSchema);
    const out = h("div", { class: "result", id: "tool-result", role: "status" });
    const run = h("button", { type: "submit" }, "Run");
    const f = h("form", { "aria-label": `Call ${name}` }, form.el, run);
    f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      let params;
      try {
        params = form.read();
      } catch (e) {
        fill(out, h("p", { class: "error", role: "alert" }, e.message));
        return;
      }
      run.disabled = true;
      // A safety rule may ask first: this call's need_user (a single call
      // has no batchId) is answered right here, as in the Tasks view.
      const asks = h("div", { id: "tool-need" });
      const said = h("p", { class: "muted", role: "status" });
      const showAsks = () => fill(asks, [...store.needUser.values()]
        .filter((n) => !n.batchId && n.tool === name)
        .map((n) => needCard(hub, store, n, (x) => fill(said, x))));
      const offAsks = store.sub("need", showAsks);
      fill(out, h("p", { class: "muted" }, `Calling ${name}…`), asks, said);
      showAsks();
      try {
        const r = await hub.request({ type: "tool_call", tool: name, params });
        fill(out, outcome(r));
      } catch (e) {
        fill(out, errorBox(e.hubError || { errorType: "ERROR", message: e.message }));
      } finally {
        offAsks();
        run.disabled = false;
      }
    });
    fill(notice, "");
    fill(detail,
      h("h3", {}, t.qualifiedName), notice,
      h("p", {}, t.description || "(no description)"),
      t.annotations ? h("p", { class: "muted" }, Object.entries(t.annotations).map(([k, v]) => `${k}: ${v}`).join(" · ")) : null,
      pre("Input schema", t.inputSchema),
      f, out);
    const first = detail.querySelector("input, textarea, select");
    if (first) first.focus();
  }

  search.addEventListener("input", render);
  root.append(
    h("div", { class: "bar" }, h("h2", {}, "Tools"),
      h("label", { for: "tool-search" }, "Search"), search),
    count,
    h("div", { class: "split" }, list, detail));
  render();
  // A list change keeps the open form and its last result; it only says
  // when the chosen tool is gone (its server restarting, or removed).
  return store.sub("tools", () => {
    render();
    const gone = selected && !store.tools.some((t) => t.qualifiedName === selected);
    fill(notice, gone ? `${selected} is not offered right now (its server may be restarting).` : "");
  });
}

/** A tool_result: the value (and images), or the error with its suggestion. */
export function outcome(r) {
  const meta = h("p", { class: "muted" },
    `${r.success ? "Succeeded" : "Failed"} · ${r.attempts ?? 0} attempt(s) · ${ms(r.durationMs)}`,
    r.retries?.length ? ` · retried after ${r.retries.map((x) => x.errorType).join(", ")}` : "");
  const images = (r.raw?.content || []).filter((c) => c.type === "image" && /^image\/(png|jpeg|gif|webp)$/.test(c.mimeType))
    .map((c) => h("img", { src: `data:${c.mimeType};base64,${c.data}`, alt: "image returned by the tool" }));
  return h("div", { class: r.success ? "ok-box" : "fail-box" }, meta,
    r.success ? pre("Result", r.result, true) : errorBox(r.error), images);
}
