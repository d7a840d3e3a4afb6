//! The end of a step: its variable, its durable result, its streamed
//! message, the owner's recording, and the `need_user` wait around a
//! confirmation.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
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
    let watched = task.session().filter(|s| engine.observer().watches(s));
    if let Some(session) = watched {
        let capture = Capture {
            source: crate::store::recordings::format::Source {
                kind: "batch_step".into(),
                batch_id: Some(task.batch_id.clone()),
                task_id: Some(task.id.clone()),
                step_id: step.id.clone(),
                call_key: task.call_key.get().map(|k| k.key.clone()),
                context: Some(task.context().to_string()),
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
            // The task's principal: a client's steps go only into the run
            // its session chose, also after that session ended.
            client: task.client_name(),
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
    // The outcome's fields join the step's (its result moves, not copied).
    let mut body = base;
    let raw = match body.as_object_mut() {
        Some(fields) => out.into_fields(fields),
        None => out.raw,
    };
    task.with(|d| d.last_success = Some(success));
    let state = if success {
        StepState::Success
    } else {
        StepState::Failed
    };
    finish_step(engine, task, i, state, body, raw, resumed);
    success
}

/// Step `i` ended in `state` with `body` (from [`step_base`]): the task
/// keeps it as the step's outcome and journals it, and its
/// `batch_step_result` (with the full MCP result, `raw`, which the task
/// does not keep) goes to the owner once the record is durable.
pub(super) fn finish_step(
    engine: &Engine,
    task: &Arc<Task>,
    i: usize,
    state: StepState,
    mut body: Value,
    raw: Option<Value>,
    resumed: bool,
) {
    if resumed {
        body["resumed"] = json!(true);
    }
    // Durable before it is sent: written now, synced with the next step's
    // start (or the end, or a flush), and held by the task until then.
    let security = &engine.hub().config().security;
    conclude(task, i, body, raw, Some(state), || {
        engine.persist_step_finished(task, i, security)
    });
}

/// The end every step result shares, in this order: its frame written and
/// the replay observer told (both from the body before it moves: no copy
/// of it is made), the body kept as the step's outcome (with its `state`
/// when the step ended rather than not ran), `persist`, then the
/// observer's message and the `batch_step_result` itself.
fn conclude(
    task: &Arc<Task>,
    i: usize,
    body: Value,
    raw: Option<Value>,
    state: Option<StepState>,
    persist: impl FnOnce(),
) {
    let frame = task.frame(&StepResult {
        kind: "batch_step_result",
        batch_id: &task.batch_id,
        task_id: &task.id,
        body: &body,
        raw: raw.as_ref(),
    });
    let seen = task.observer().and_then(|observe| observe(i, &body));
    task.with(|d| {
        if let Some(state) = state {
            d.steps[i].state = state;
        }
        d.steps[i].outcome = Some(body);
        d.updated_ms = crate::util::now_ms();
    });
    persist();
    if let Some(seen) = seen {
        task.emit(seen);
    }
    if let Some(frame) = frame {
        task.emit_text(frame);
    }
}

/// A step's `batch_step_result` frame: the task's ids, the step's body and
/// the call's `raw` result (which the task does not keep).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StepResult<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    batch_id: &'a Value,
    task_id: &'a str,
    #[serde(flatten)]
    body: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<&'a Value>,
}

/// Step `i` does not run because step `at` failed and `stopOnError` stopped
/// the batch: its `batch_step_result` says so, and it stays pending (not
/// journaled: nothing happened to it), so `resume_task` runs it.
pub(super) fn not_run(task: &Arc<Task>, i: usize, at: usize, resumed: bool) {
    let mut body = step_base(task, i);
    body["success"] = json!(false);
    body["skipped"] = json!(true);
    body["reason"] = json!(format!(
        "not run: step {at} failed and options.stopOnError stopped the batch (only steps whose \"when\" is \"failure\" or \"always\" run after a stop); resume_task runs it"
    ));
    if resumed {
        body["resumed"] = json!(true);
    }
    conclude(task, i, body, None, None, || {});
}

/// A `task_state` frame.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TaskStateFrame<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    task_id: &'a str,
    batch_id: &'a Value,
    state: super::state::TaskState,
    step: Option<usize>,
}

pub fn emit_state(task: &Task, step: Option<usize>) {
    task.emit(TaskStateFrame {
        kind: "task_state",
        task_id: &task.id,
        batch_id: &task.batch_id,
        state: task.state(),
        step,
    });
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
    task.with(|d| {
        d.waiting_step = Some(i);
        d.waiting_reason = Some(reason.to_string());
    });
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
    task.with(|d| {
        d.waiting_step = None;
        d.waiting_reason = None;
    });
    if task.transition(TaskEvent::UserAnswered).is_some() {
        engine.persist_state(task);
        emit_state(task, Some(i));
    }
}

/// A step's body before it ends: its index, id and tool (the frame adds
/// the task's ids, [`finish_step`] the outcome).
pub(super) fn step_base(task: &Task, i: usize) -> Value {
    let step = &task.plan.steps[i].step;
    json!({
        "stepIndex": i,
        "stepId": step.id,
        "tool": step.tool,
    })
}
