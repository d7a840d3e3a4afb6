// Tasks: the hub's tasks (list_tasks), a batch run from here, the live
// timeline of a task's steps (from task_state / batch_step_result /
// batch_complete, or task_status for one this page does not own),
// need_user confirmations with Approve / Deny, Cancel and Resume.

import { badge, brief, errorBox, fill, h, ms, pre } from "./dom.js";
import { needCard } from "./need.js";

const ACTIVE = new Set(["pending", "running", "retrying", "need_user"]);
const EXAMPLE = `[
  {"id": "write", "tool": "write_file", "params": {"path": "demo.txt", "content": "hello"}},
  {"id": "read", "tool": "read_file", "params": {"path": "demo.txt"}}
]`;

export function mount(root, { hub, store }) {
  const status = h("p", { class: "muted", role: "status", id: "task-status" });
  const needs = h("section", { id: "need-user", "aria-label": "Waiting for approval" });
  const list = h("table", { class: "grid", id: "task-list" });
  const timeline = h("section", { id: "timeline", "aria-label": "Step timeline" });
  const stepsInput = h("textarea", { id: "batch-steps", rows: 6, class: "json", spellcheck: "false", placeholder: EXAMPLE });
  const stopOnError = h("input", { id: "batch-stop", type: "checkbox", checked: true });
  let known = [];
  let selected = null;
  let snapshot = null; // task_status of a task with no live record

  async function refresh() {
    try {
      const r = await hub.request({ type: "list_tasks" });
      known = r.tasks || [];
      status.textContent = `${known.length} task(s) known to the hub` +
        (r.problems?.length ? `; ${r.problems.length} journal(s) could not be read` : "");
    } catch (e) {
      status.textContent = `Cannot list tasks: ${e.message}`;
    }
    render();
  }

  function rows() {
    const byId = new Map(known.map((t) => [t.taskId, { ...t }]));
    for (const t of store.tasks.values()) {
      const row = byId.get(t.taskId) || { taskId: t.taskId };
      byId.set(t.taskId, Object.assign(row, {
        batchId: t.batchId ?? row.batchId,
        state: t.state,
        totalSteps: t.totalSteps ?? t.complete?.totalSteps ?? row.totalSteps,
        stepsCompleted: t.complete?.stepsCompleted ?? t.steps.filter(Boolean).filter((s) => s.state !== "need_user").length,
      }));
    }
    return [...byId.values()].reverse();
  }

  function render() {
    fill(needs, [...store.needUser.values()].map((n) => needCard(hub, store, n, (said) => {
      fill(status, said);
      render();
    })));
    const all = rows();
    fill(list,
      h("thead", {}, h("tr", {}, ["Task", "Batch", "State", "Steps", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, all.length ? all.map(taskRow) : h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No tasks yet."))));
    renderTimeline();
  }

  function taskRow(t) {
    const resumable = t.resumable ?? ["failed", "recoverable", "cancelled"].includes(t.state);
    return h("tr", { dataset: { task: t.taskId }, class: t.taskId === selected ? "selected" : "" },
      h("td", {}, h("button", { type: "button", class: "link", onclick: () => select(t.taskId) }, brief(t.taskId, 14))),
      h("td", {}, t.batchId || "–"),
      h("td", {}, badge(t.state)),
      h("td", {}, `${t.stepsCompleted ?? "?"} / ${t.totalSteps ?? "?"}`),
      h("td", {}, h("div", { class: "actions" },
        ACTIVE.has(t.state) ? h("button", { type: "button", onclick: () => cancel(t.taskId) }, "Cancel") : null,
        !ACTIVE.has(t.state) && resumable ? h("button", { type: "button", onclick: () => resume(t.taskId) }, "Resume") : null)));
  }

  async function select(taskId) {
    selected = taskId;
    snapshot = null;
    render();
    try {
      const r = await hub.request({ type: "task_status", taskId });
      if (selected === taskId) snapshot = r.task;
    } catch (e) {
      status.textContent = `task_status: ${e.message}`;
    }
    renderTimeline();
    // Another client's task sends its events to that client only: ask
    // again with `wait`, answered once the task is no longer active.
    if (snapshot && ACTIVE.has(snapshot.state) && !store.tasks.has(taskId)) {
      hub.request({ type: "task_status", taskId, wait: true }).then((r) => {
        if (selected === taskId && !store.tasks.has(taskId)) {
          snapshot = r.task;
          refresh();
        }
      }, () => {});
    }
  }

  function renderTimeline() {
    if (!selected) {
      fill(timeline, h("p", { class: "muted" }, "Choose a task to see its steps."));
      return;
    }
    const live = store.tasks.get(selected);
    const state = live?.state ?? snapshot?.state;
    const total = Math.max(live?.totalSteps ?? 0, snapshot?.totalSteps ?? 0, live?.steps.length ?? 0);
    const steps = [];
    for (let i = 0; i < total; i++) {
      steps.push(live?.steps[i] || snapshot?.steps?.[i] || { stepIndex: i, state: "pending" });
    }
    const done = live?.complete;
    fill(timeline,
      h("h3", {}, "Task ", h("code", {}, selected), " ", badge(state || "unknown")),
      h("ol", { class: "timeline", id: "steps" }, steps.map(stepItem)),
      done ? h("p", { class: done.success ? "ok-box" : "fail-box", id: "batch-done" },
        `Finished ${done.state}: ${done.stepsCompleted} of ${done.totalSteps} steps.`) : null,
      done?.error ? errorBox(done.error) : snapshot?.error ? errorBox(snapshot.error) : null);
  }

  function stepItem(s) {
    const state = s.state || (s.skipped ? "skipped" : s.success === false ? "failed" : s.success ? "success" : "pending");
    return h("li", { class: `step step-${state}`, dataset: { step: s.stepIndex, state } },
      h("div", { class: "step-head" },
        h("span", { class: "idx" }, `#${s.stepIndex}`), " ",
        h("strong", {}, s.stepId || s.tool || ""), " ",
        s.tool && s.stepId ? h("code", {}, s.qualifiedName || s.tool) : null, " ",
        badge(state),
        s.attempts !== undefined ? h("span", { class: "muted" }, ` ${s.attempts} attempt(s)`) : null,
        s.retries?.length ? h("span", { class: "muted" }, ` · retries: ${s.retries.map((r) => `${r.errorType} (${r.action})`).join(", ")}`) : null,
        s.durationMs !== undefined ? h("span", { class: "muted" }, ` · ${ms(s.durationMs)}`) : null),
      s.skipped ? h("p", { class: "muted" }, s.reason) : null,
      s.success && !s.skipped && s.result !== undefined ? pre(brief(s.result, 80), s.result) : null,
      s.error ? errorBox(s.error) : null);
  }

  async function cancel(taskId) {
    try {
      await hub.request({ type: "cancel_task", taskId });
      status.textContent = `Cancelling ${taskId}…`;
    } catch (e) {
      status.textContent = `cancel_task: ${e.message}`;
    }
  }

  // resume_task and tool_batch have no direct reply when accepted: only an
  // error carries their id; the task's events are the answer.
  function sendTask(msg, onError) {
    const id = hub.newId(msg.type === "tool_batch" ? "ui-batch" : "ui-resume");
    const off = hub.on("error", (m) => {
      if (m.replyTo === id) {
        off();
        onError(m.error);
      }
    });
    const offStart = hub.on("task_state", (m) => {
      if (m.batchId === id || m.taskId === msg.taskId) {
        offStart();
        off();
        select(m.taskId);
      }
    });
    try {
      hub.send({ ...msg, id });
    } catch (e) {
      off();
      offStart();
      onError({ errorType: "ERROR", message: e.message });
    }
    return id;
  }

  function resume(taskId) {
    const t = store.task(taskId);
    t.steps = [];
    t.complete = null;
    sendTask({ type: "resume_task", taskId }, (err) => fill(status, errorBox(err)));
  }

  const form = h("form", { id: "batch-form", "aria-label": "Run a batch" },
    h("label", { for: "batch-steps" }, "Batch steps (JSON array, or {\"steps\", \"options\"})"),
    stepsInput,
    h("div", { class: "row" },
      stopOnError, h("label", { for: "batch-stop" }, "Stop at the first failed step"),
      h("button", { type: "submit", class: "primary" }, "Run batch")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    let body;
    try {
      body = JSON.parse(stepsInput.value || EXAMPLE);
    } catch (e) {
      fill(status, h("span", { class: "error", role: "alert" }, `The steps are not valid JSON: ${e.message}`));
      return;
    }
    const steps = Array.isArray(body) ? body : body.steps;
    const options = { stopOnError: stopOnError.checked, ...(Array.isArray(body) ? {} : body.options) };
    const id = sendTask({ type: "tool_batch", steps, options }, (err) => fill(status, errorBox(err)));
    const off = hub.on("task_state", (m) => {
      if (m.batchId === id) {
        off();
        store.task(m.taskId).totalSteps = Array.isArray(steps) ? steps.length : 0;
        render();
      }
    });
    status.textContent = "Batch sent.";
  });

  root.append(
    h("div", { class: "bar" }, h("h2", {}, "Tasks"),
      h("button", { type: "button", onclick: refresh }, "Refresh")),
    status, needs,
    h("details", { class: "pre", open: true }, h("summary", {}, "Run a batch"), form),
    h("div", { class: "split" }, h("div", { class: "scroll" }, list), timeline));
  refresh();
  const offs = [store.sub("tasks", render), store.sub("need", render), store.sub("reconnected", refresh),
    hub.on("batch_complete", refresh)];
  return () => offs.forEach((f) => f());
}
