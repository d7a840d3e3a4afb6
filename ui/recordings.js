// Recordings: the list, one recording's flowchart (drawn by the hub) and
// steps (conditions, expectations and images per step), start/stop
// recording this page's own calls, replay live / dry / offline with the
// differences highlighted, export.

import { artifactFigure } from "./artifact.js";
import { badge, brief, errorBox, fill, h, ms, pre, show } from "./dom.js";

export function mount(root, { hub, store }) {
  const status = h("p", { class: "muted", role: "status", id: "rec-status" });
  const list = h("table", { class: "grid", id: "rec-list" });
  const detail = h("section", { id: "rec-detail", "aria-live": "polite" });
  const recBtn = h("button", { type: "button", id: "rec-toggle" });
  // Whether this page's connection records lives in the store: it outlasts the view.
  const label = () => {
    recBtn.textContent = store.recording ? "Stop recording" : "Start recording this page's calls";
  };

  async function refresh() {
    try {
      const r = await hub.request({ type: "list_recordings" });
      const recs = r.recordings || [];
      status.textContent = `${recs.length} recording(s)` + (r.problems?.length ? `; ${r.problems.length} could not be read` : "");
      fill(list,
        h("thead", {}, h("tr", {}, ["Name", "Created", "By", "Steps", "Success", "Duration"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, recs.map((x) => h("tr", { dataset: { rec: x.recordingId } },
          h("td", {}, h("button", { type: "button", class: "link", onclick: () => open(x.recordingId) }, x.name || x.recordingId)),
          h("td", {}, new Date(x.createdAt).toLocaleString()),
          h("td", { class: "client" }, x.client || "–"),
          h("td", {}, x.incomplete ? "recording…" : String(x.stepCount)),
          h("td", {}, x.metadata ? `${Math.round(x.metadata.successRate * 100)} %` : "–"),
          h("td", {}, ms(x.metadata?.totalDuration))))));
    } catch (e) {
      status.textContent = `Cannot list recordings: ${e.message}`;
    }
  }

  async function toggleRecording() {
    let said;
    try {
      if (store.recording) {
        const r = await hub.request({ type: "stop_recording" });
        said = `Stopped: ${r.stepCount} step(s) saved.`;
        store.recording = null;
      } else {
        const r = await hub.request({ type: "start_recording", name: `dashboard ${new Date().toLocaleString()}` });
        store.recording = r.recordingId;
        said = `Recording ${r.recordingId}: calls made from the Tools and Tasks views are kept.`;
      }
    } catch (e) {
      said = errorBox(e.hubError || { message: e.message });
    }
    label();
    await refresh();
    fill(status, said);
  }

  async function open(id) {
    fill(detail, h("p", { class: "muted" }, "Loading…"));
    let rec;
    try {
      rec = (await hub.request({ type: "get_recording", recordingId: id })).recording;
    } catch (e) {
      fill(detail, errorBox(e.hubError || { message: e.message }));
      return;
    }
    const steps = rec.steps || [];
    const replayOut = h("div", { id: "replay-out", "aria-live": "polite" });
    const exportOut = h("div", { id: "export-out" });
    const mode = h("select", { id: "replay-mode" },
      ["live", "dry", "offline"].map((m) => h("option", { value: m }, m)));
    const vars = h("textarea", { id: "replay-vars", rows: 2, class: "json", placeholder: "{\"NAME\": \"value\"}" });
    const format = h("select", { id: "export-format" },
      ["markdown", "json", "html", "batch"].map((m) => h("option", { value: m }, m)));
    fill(detail,
      h("h3", {}, rec.header?.name || id),
      rec.header?.description ? h("p", {}, rec.header.description) : null,
      h("p", { class: "muted" }, `${steps.length} step(s) · ${rec.incomplete ? "incomplete" : `stopped: ${rec.end?.reason}`}`),
      h("h4", {}, "Flowchart"),
      flowchart(hub, id),
      h("h4", {}, "Steps"),
      h("ol", { class: "flow", id: "rec-steps" }, steps.map((s, i) => flowStep(s, i, hub, id))),
      h("h4", {}, "Replay"),
      h("div", { class: "row" },
        h("label", { for: "replay-mode" }, "Mode"), mode,
        h("label", { for: "replay-vars" }, "Variables"), vars,
        h("button", { type: "button", class: "primary", onclick: () => replay(id, mode.value, vars.value, steps, replayOut) }, "Replay")),
      replayOut,
      h("h4", {}, "Export"),
      h("div", { class: "row" },
        h("label", { for: "export-format" }, "Format"), format,
        h("button", { type: "button", onclick: () => doExport(id, format.value, exportOut) }, "Export")),
      exportOut);
  }

  async function replay(id, mode, varsText, steps, out) {
    let variables;
    if (varsText.trim()) {
      try {
        variables = JSON.parse(varsText);
      } catch (e) {
        fill(out, h("p", { class: "error", role: "alert" }, `Variables are not valid JSON: ${e.message}`));
        return;
      }
    }
    const rows = h("tbody", {});
    fill(out, h("table", { class: "grid replay", id: "replay-steps" },
      h("thead", {}, h("tr", {}, ["#", "Tool", "Outcome", "Differences"].map((c) => h("th", { scope: "col" }, c)))), rows),
    h("p", { class: "muted", id: "replay-summary" }, `Replaying ${steps.length} step(s) (${mode})…`));
    let replayId = null;
    const off = hub.on("replay_step_result", (m) => {
      if (m.recordingId !== id || (replayId && m.replayId !== replayId)) return;
      replayId = m.replayId;
      rows.append(replayRow(m));
    });
    try {
      const done = await hub.request({ type: "replay_recording", recordingId: id, mode, variables });
      const n = (done.differences || []).length;
      fill(out.querySelector("#replay-summary"),
        h("span", { class: done.success ? "ok-box" : "fail-box" },
          `${done.success ? "Passed" : "Did not pass"} (${done.mode}): ${done.successCount} of ${done.totalSteps} steps succeeded; ` +
          `${n ? `${n} step(s) with differences` : "no differences"}.`));
    } catch (e) {
      fill(out.querySelector("#replay-summary"), errorBox(e.hubError || { message: e.message }));
    } finally {
      off();
    }
  }

  async function doExport(id, format, out) {
    try {
      const r = await hub.request({ type: "export_recording", recordingId: id, format });
      const text = show(r.content);
      const type = { markdown: "text/markdown", html: "text/html", json: "application/json", batch: "application/json" }[format];
      const ext = { markdown: "md", html: "html", json: "json", batch: "json" }[format];
      const url = URL.createObjectURL(new Blob([text], { type }));
      fill(out,
        h("p", {}, h("a", { href: url, download: `${id}.${ext}` }, `Download ${id}.${ext}`),
          r.requiredVariables?.length ? ` · needs variables: ${r.requiredVariables.join(", ")}` : ""),
        h("pre", { class: "export" }, text.length > 20000 ? text.slice(0, 20000) + "\n…" : text));
    } catch (e) {
      fill(out, errorBox(e.hubError || { message: e.message }));
    }
  }

  label();
  recBtn.addEventListener("click", toggleRecording);
  root.append(
    h("div", { class: "bar" }, h("h2", {}, "Recordings"), recBtn,
      h("button", { type: "button", onclick: refresh }, "Refresh")),
    status,
    h("div", { class: "split" }, h("div", { class: "scroll" }, list), detail));
  refresh();
  // A recording ends when its connection does (or hits a limit).
  const ended = () => {
    store.recording = null;
    label();
    refresh();
  };
  const offs = [hub.on("recording_stopped", ended), store.sub("reconnected", ended)];
  return () => offs.forEach((f) => f());
}

/** The hub's drawing of the sequence (export_recording "flowchart": where
 * conditions and cleanup steps branch), shown as an SVG image. */
function flowchart(hub, recordingId) {
  const box = h("div", { class: "chart", id: "rec-chart" }, h("p", { class: "muted" }, "Drawing…"));
  hub.request({ type: "export_recording", recordingId, format: "flowchart" }).then((r) => {
    const svg = r.content?.svg;
    fill(box, svg
      ? h("img", {
        src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`,
        alt: "Flowchart of the recorded steps: decisions for conditions, dashed cleanup steps and failure edges",
      })
      : h("p", { class: "muted" }, "No steps to draw."));
  }).catch((e) => fill(box, errorBox(e.hubError || { message: e.message })));
  return box;
}

function flowStep(s, i, hub, recordingId) {
  const when = s.when !== undefined ? h("p", { class: "cond" }, "◇ only if ", h("code", {}, brief(s.when, 100)), " — otherwise skipped, next step") : null;
  return h("li", { class: `flow-step ${s.success ? "" : "failed"}`, dataset: { step: i } },
    when,
    h("div", { class: "box" },
      h("strong", {}, `${i}. ${s.tool}`), " ", badge(s.success ? "success" : "failed"),
      h("span", { class: "muted" }, ` · ${ms(s.durationMs)} · ${s.source?.type === "batch_step" ? `batch ${s.source.batchId}` : "tool_call"}`),
      s.saveAs ? h("p", { class: "muted" }, `saved as ${s.saveAs}`) : null,
      s.expect !== undefined ? h("p", { class: "muted" }, "expects ", h("code", {}, brief(s.expect, 100))) : null,
      pre("Params", s.paramsTemplate ?? s.params),
      s.success ? pre("Result", s.result) : errorBox(s.error),
      stepImages(s, hub, recordingId)));
}

/** The step's images and its screenshot, inline. */
function stepImages(s, hub, recordingId) {
  const names = [...(s.images || []), s.screenshot].filter((x) => typeof x === "string");
  if (!names.length) return null;
  return h("div", { class: "gallery step-images" },
    names.map((n) => artifactFigure(hub, { recordingId }, n, n === s.screenshot ? `screenshot ${n}` : n)));
}

function replayRow(m) {
  const diffs = m.diff || [];
  const problems = m.problems || [];
  return h("tr", { class: diffs.length || problems.length || !m.success ? "diff" : "", dataset: { step: m.stepIndex } },
    h("td", {}, String(m.stepIndex)),
    h("td", {}, h("code", {}, m.tool)),
    h("td", {}, m.skipped ? badge("skipped") : badge(m.success ? "success" : "failed")),
    h("td", {}, diffs.length
      ? h("ul", { class: "diffs" }, diffs.map((d) => h("li", {},
        h("code", {}, d.path || "/"), ` ${d.kind}: `,
        h("del", { "aria-label": "recorded" }, brief(d.recorded, 80)), " → ",
        h("ins", { "aria-label": "now" }, brief(d.actual, 80)))))
      : problems.length ? h("ul", { class: "diffs" }, problems.map((p) => h("li", {}, p))) : "none"));
}
