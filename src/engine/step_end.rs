//! The end of a step: its variable, its durable result, its streamed
//! message, the owner's recording, and the `need_user` wait around a
//! confirmation.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::service::Engine;
use super::state::{StepState, TaskEvent};
use super::task::Task;
use crate::hub::observe::Capture;
use crate::hub::CallOutcome;

/// Save the step's variable, make its result durable, then send it.
pub(super) async fn record(
    engine: &Engine,
    task: &Arc<Task>,
    i: usize,
    base: Value,
    out: CallOutcome,
    resumed: bool,
    rendered: Option<&Value>,
) -> bool {
    let step = &task.plan.steps[i].step;
    let success = out.success;
    // The owner connection's recording and run, or, for a task a control
    // tool started, the calling session's run (its recording keeps the
    // control tool's own call, so the steps are `nested`).
    let owner = task.owner();
    if let Some(session) = task.session() {
        let capture = Capture {
            source: crate::store::recordings::format::Source {
                kind: "batch_step".into(),
                batch_id: Some(task.batch_id.clone()),
                task_id: Some(task.id.clone()),
                step_id: step.id.clone(),
            },
            params: rendered.unwrap_or(&step.params),
            params_template: Some(&step.params),
            save_as: step.save_as.as_deref(),
            when: step.when.as_ref(),
            expect: step.expect.as_ref(),
            variables: task
                .plan
                .options
                .variables
                .as_ref()
                .map(|v| (v, task.plan.options.secrets.as_slice())),
            outcome: &out,
            started_at: std::time::SystemTime::now() - Duration::from_millis(out.duration_ms),
            nested: owner.is_none(),
            save_images: step.save_images.as_ref(),
        };
        let finished = engine.observer().finished(&session, capture);
        if let Some(ev) = engine.flushed_if_waiting(task, finished).await {
            match &owner {
                // Through the task: behind the messages it holds.
                Some(_) => task.emit(ev),
                None => {
                    tracing::info!(%session, event = %ev, "an event for a control tool's caller")
                }
            }
        }
    }
    if let Some(name) = &step.save_as {
        let var = json!({
            "result": out.result,
            "success": success,
            "error": out.error,
        });
        task.with(|d| d.ctx.insert(name.clone(), var));
    }
    let mut msg = base;
    if let (Some(obj), Value::Object(o)) = (msg.as_object_mut(), out.to_json()) {
        for (k, v) in o {
            if k != "tool" {
                obj.insert(k, v);
            }
        }
    }
    task.with(|d| d.last_success = Some(success));
    let state = if success {
        StepState::Success
    } else {
        StepState::Failed
    };
    finish_step(engine, task, i, state, msg, resumed);
    success
}

pub(super) fn finish_step(
    engine: &Engine,
    task: &Arc<Task>,
    i: usize,
    state: StepState,
    mut msg: Value,
    resumed: bool,
) {
    let hub = engine.hub();
    if resumed {
        msg["resumed"] = json!(true);
    }
    // The full MCP result (`raw`) goes out with the step; the task keeps
    // (and journals) the value only, so task_status stays small. Copied
    // without it, not copied whole and then cut.
    let body = match &msg {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "type" | "batchId" | "taskId" | "raw"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    };
    task.with(|d| {
        d.steps[i].state = state;
        d.steps[i].outcome = Some(body);
        d.updated_ms = crate::util::now_ms();
    });
    // Durable before it is sent: written now, synced with the next step's
    // start (or the end, or a flush), and held by the task until then.
    engine.persist_step_finished(task, i, &hub.config().security);
    if let Some(seen) = task.observer().and_then(|observe| observe(i, &msg)) {
        task.emit(seen);
    }
    task.emit(msg);
}

/// Step `i` does not run because step `at` failed and `stopOnError` stopped
/// the batch: its `batch_step_result` says so, and it stays pending (not
/// journaled: nothing happened to it), so `resume_task` runs it.
pub(super) fn not_run(task: &Arc<Task>, i: usize, at: usize, resumed: bool) {
    let mut msg = step_base(task, i);
    msg["success"] = json!(false);
    msg["skipped"] = json!(true);
    msg["reason"] = json!(format!(
        "not run: step {at} failed and options.stopOnError stopped the batch (only steps whose \"when\" is \"failure\" or \"always\" run after a stop); resume_task runs it"
    ));
    if resumed {
        msg["resumed"] = json!(true);
    }
    task.with(|d| {
        let mut body = msg.clone();
        if let Some(o) = body.as_object_mut() {
            o.remove("type");
            o.remove("batchId");
            o.remove("taskId");
        }
        d.steps[i].outcome = Some(body);
        d.updated_ms = crate::util::now_ms();
    });
    if let Some(seen) = task.observer().and_then(|observe| observe(i, &msg)) {
        task.emit(seen);
    }
    task.emit(msg);
}

pub fn emit_state(task: &Task, step: Option<usize>) {
    let state = task.state();
    task.emit(json!({"type": "task_state", "taskId": task.id, "batchId": task.batch_id, "state": state, "step": step}));
}

/// The task waits for a person's decision on step `i`.
pub(super) fn enter_need_user(
    engine: &Engine,
    task: &Arc<Task>,
    i: usize,
    reason: &str,
    params: &Value,
) {
    engine.persist_need_user(task, i, reason, &super::approvals::params_hash(params));
    task.with(|d| d.waiting_step = Some(i));
    if task.transition(TaskEvent::AskUser).is_some() {
        engine.persist_state(task);
        emit_state(task, Some(i));
    }
    // The wait may be long, and `need_user` itself goes out past the task's
    // queue: sync and send what is held first.
    engine.flush(task);
}

/// The decision came (or the wait ended): back to running.
pub(super) fn leave_need_user(engine: &Engine, task: &Arc<Task>, i: usize) {
    engine.approvals.forget(&task.id);
    task.with(|d| d.waiting_step = None);
    if task.transition(TaskEvent::UserAnswered).is_some() {
        engine.persist_state(task);
        emit_state(task, Some(i));
    }
}

pub(super) fn step_base(task: &Task, i: usize) -> Value {
    let step = &task.plan.steps[i].step;
    json!({
        "type": "batch_step_result",
        "batchId": task.batch_id,
        "taskId": task.id,
        "stepIndex": i,
        "stepId": step.id,
        "tool": step.tool,
    })
}
