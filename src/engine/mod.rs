//! The batch task engine: `tool_batch` → validated [`validate::Plan`] →
//! a [`task::Task`] driven by [`runner::drive`]; task messages
//! (`cancel_task`, `task_status`, `list_tasks`, `resume_task`).
//!
//! `template`, `condition`, `expect` and `state` are pure; the runner is the
//! only writer of a task's state.

pub mod approvals;
pub mod condition;
pub mod confirm;
pub mod durable;
pub mod expect;
pub mod finished;
pub mod health;
mod journal_mask;
pub mod keyed;
mod listing;
pub mod questions;
pub mod redacted;
pub mod runner;
pub mod service;
pub mod state;
pub mod step_end;
pub mod store;
pub mod task;
pub mod template;
pub mod unattended;
pub mod uncertain;
pub mod validate;

use std::sync::Arc;

use serde_json::{json, Value};

use crate::caller::Caller;
use crate::client_context::{check_label, ClientContext};
use crate::errors::{ErrorType, HubError};
use crate::protocol::{self, BatchReq, ClientMsg, MsgId};
use crate::session::Place;
use crate::session::{Outbox, SessionId};
pub use listing::list_json;
pub use service::Engine;
use state::{TaskEvent, TaskState};
use task::Task;

/// Longest a `task_status` with `wait: true` is held before answering.
const STATUS_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Validate a batch and create its task (not yet started), in the view of
/// the connection that owns it, as its principal's.
pub fn create_task(
    engine: &Engine,
    batch_id: Value,
    req: &BatchReq,
    owner: &Outbox,
) -> Result<Arc<Task>, HubError> {
    let caller = owner.caller();
    create_task_in(
        engine,
        batch_id,
        req,
        Some(owner.clone()),
        None,
        &caller,
        None,
    )
}

/// [`create_task`] for `caller`: in its view (every step is validated
/// against the view's tools before anything runs, and called within it),
/// as its principal's task (journaled). `unattended`: a task no client
/// drives, and how its result is read (journaled before anything runs).
pub fn create_task_in(
    engine: &Engine,
    batch_id: Value,
    req: &BatchReq,
    owner: Option<Outbox>,
    context: Option<ClientContext>,
    caller: &Caller,
    unattended: Option<task::Unattended>,
) -> Result<Arc<Task>, HubError> {
    let view = caller.view.clone();
    let hub = engine.hub();
    if let Some(Err(m)) = req.context.as_deref().map(check_label) {
        return Err(HubError::new(
            ErrorType::InvalidMessage,
            format!("tool_batch: {m}"),
        ));
    }
    let cfg = hub.config();
    let in_view = view.as_deref().map(|v| hub.view(v)).transpose()?;
    let all = hub.tools();
    let tools = in_view.as_ref().map_or(&*all, |v| v.snapshot());
    let plan = validate::validate(
        &req.steps,
        &req.options,
        tools,
        engine.templates(),
        cfg.task_engine.max_batch_steps,
    )
    .map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
        HubError::new(
            ErrorType::InvalidMessage,
            format!(
                "tool_batch is invalid ({} problem{}); nothing ran: {}",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" },
                lines.join("; ")
            ),
        )
        .with_suggestion("fix every listed step and send the batch again")
    })?;
    let id = uuid::Uuid::new_v4().to_string();
    let task = Arc::new(Task::new(
        id.clone(),
        batch_id,
        plan,
        owner,
        hub.shutdown.child_token(),
    ));
    if let Some(k) = keyed::mark(req) {
        let _ = task.call_key.set(k);
    }
    if let Some(v) = view {
        let _ = task.view.set(v);
    }
    task.set_client(caller.owner());
    if let Some(k) = unattended {
        let _ = task.unattended.set(k);
    }
    let context = context.or_else(|| {
        owner_session(&task).map(|s| ClientContext::session(&s, req.context.as_deref()))
    });
    if let Some(c) = context {
        task.set_context(c);
    }
    // Before anything is written: the journal's header is masked too.
    note_secrets(
        &cfg.security,
        req.options.variables.as_ref(),
        &req.options.secrets,
    );
    engine.create_journal(&task, req, &cfg.security);
    engine.tasks.insert(id, task.clone());
    Ok(task)
}

/// The session of the connection that owns `task`, if any.
fn owner_session(task: &Task) -> Option<SessionId> {
    task.owner().map(|o| o.session.clone())
}

/// Add the values of secret variables (names matching `security.redactKeys`
/// or listed in `options.secrets`) to the values masked everywhere.
pub fn note_secrets(
    security: &crate::config::SecurityConfig,
    vars: Option<&serde_json::Map<String, Value>>,
    secret_names: &[String],
) {
    for (name, v) in vars.into_iter().flatten() {
        if security.is_secret_key(name) || secret_names.contains(name) {
            security.secrets.add_value(v);
        }
    }
}

/// Start driving a task in the background; returns a handle to await it.
/// `place` (the starting request's place under its session's cap) is held
/// while the task runs, need_user waits included, and dropped right
/// before `batch_complete`.
pub fn start(
    engine: &Engine,
    task: Arc<Task>,
    from: usize,
    event: TaskEvent,
    place: Option<Place>,
) -> Result<tokio::task::JoinHandle<()>, HubError> {
    let hub = engine.hub();
    let guard = task.driving.clone().try_lock_owned().map_err(|_| {
        HubError::new(
            ErrorType::InvalidMessage,
            format!("task {} is already running", task.id),
        )
        .with_suggestion("wait for batch_complete, or cancel it with cancel_task")
    })?;
    task.set_cancel_token(hub.shutdown.child_token());
    let engine = engine.clone();
    Ok(tokio::spawn(async move {
        let span = tracing::info_span!("task", id = %task.id);
        let hold = runner::Hold {
            driving: guard,
            place,
        };
        tracing::Instrument::instrument(runner::drive(engine, task, from, event, hold), span).await;
    }))
}

/// Handle a task message from a connection.
/// `place` is the message's place under its session's cap (a message that
/// starts work has one): held by the task it starts, or until the reply.
pub fn handle(engine: &Engine, out: Outbox, id: MsgId, msg: ClientMsg, place: Option<Place>) {
    // A finished task asked for by id that is not in memory: read its
    // journal back off the runtime's thread first, then answer as usual.
    let named = match &msg {
        ClientMsg::CancelTask(r) => Some(r.task_id.clone()),
        ClientMsg::TaskStatus(r) => Some(r.task_id.clone()),
        ClientMsg::ResumeTask(r) => Some(r.task_id.clone()),
        _ => None,
    };
    if let Some(task_id) = named.filter(|t| !engine.tasks.contains_key(t)) {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine.load(&task_id).await;
            handle_loaded(&engine, out, id, msg, place);
        });
        return;
    }
    handle_loaded(engine, out, id, msg, place)
}

/// [`handle`], with any task the message names already in memory (or
/// unknown).
fn handle_loaded(engine: &Engine, out: Outbox, id: MsgId, msg: ClientMsg, place: Option<Place>) {
    let reply_err = |out: &Outbox, id: &MsgId, e: HubError| {
        out.send(protocol::error_msg(id, &e));
    };
    let caller = out.caller();
    match msg {
        ClientMsg::ToolBatch(req) => {
            if let Some(key) = req.call_key.clone() {
                return keyed::batch(engine, out, id, req, key, place);
            }
            let batch_id = id
                .clone()
                .unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
            match create_task(engine, batch_id, &req, &out) {
                Ok(task) => {
                    if let Err(e) = start(engine, task, 0, TaskEvent::Start, place) {
                        reply_err(&out, &id, e);
                    }
                }
                Err(e) => reply_err(&out, &id, e),
            }
        }
        // A task of another view, or another client's, is unknown here.
        ClientMsg::CancelTask(r) | ClientMsg::TaskStatus(r)
            if engine
                .get(&r.task_id)
                .is_some_and(|t| !visible(&t, &caller)) =>
        {
            reply_err(&out, &id, unknown_task(&r.task_id))
        }
        ClientMsg::CancelTask(r) => match engine.get(&r.task_id) {
            Some(t) if t.state().is_active() => {
                t.cancel_token().cancel();
                out.send(protocol::reply(
                    "task_cancelling",
                    &id,
                    json!({"taskId": r.task_id}),
                ));
            }
            Some(t) => reply_err(
                &out,
                &id,
                HubError::new(
                    ErrorType::InvalidMessage,
                    format!(
                        "task {} is {}, not running; nothing to cancel",
                        r.task_id,
                        serde_json::to_value(t.state())
                            .ok()
                            .and_then(|v| v.as_str().map(String::from))
                            .unwrap_or_default()
                    ),
                ),
            ),
            None => reply_err(&out, &id, unknown_task(&r.task_id)),
        },
        ClientMsg::TaskStatus(r) => match engine.get(&r.task_id) {
            Some(t) if r.wait => {
                tokio::spawn(async move {
                    t.wait_inactive(STATUS_WAIT_LIMIT).await;
                    drop(place);
                    out.send(protocol::reply(
                        "task",
                        &id,
                        json!({"task": t.status_json(r.page())}),
                    ));
                });
            }
            Some(t) => {
                out.send(protocol::reply(
                    "task",
                    &id,
                    json!({"task": t.status_json(r.page())}),
                ));
            }
            None => reply_err(&out, &id, unknown_task(&r.task_id)),
        },
        ClientMsg::ListTasks(r) => match list_json(engine, &r, &caller) {
            Ok(v) => {
                out.send(protocol::reply("tasks", &id, v));
            }
            Err(e) => reply_err(&out, &id, e),
        },
        ClientMsg::ResumeTask(r) => {
            let by = Some(&caller);
            if let Err(e) = resume(
                engine,
                &r.task_id,
                r.from_step,
                r.variables.clone(),
                (by, Some(out.clone())),
                r.context.as_deref(),
                place,
            ) {
                reply_err(&out, &id, e);
            }
        }
        ClientMsg::Confirm(r) => {
            match engine.approvals.decide(
                &caller,
                &r.task_id,
                r.approve,
                r.step_index,
                r.params_hash.as_deref(),
                r.content.clone(),
            ) {
                Ok(()) => {
                    out.send(protocol::reply(
                        "confirmed",
                        &id,
                        json!({"taskId": r.task_id, "approve": r.approve}),
                    ));
                }
                Err(e) => reply_err(&out, &id, e),
            }
        }
        other => reply_err(
            &out,
            &id,
            HubError::new(
                ErrorType::InvalidMessage,
                format!("{other:?} is not a task message"),
            ),
        ),
    }
}

/// Cancels a task's current run when dropped (unless it already ended).
pub struct StopOnDrop(pub Option<Arc<Task>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            if t.state().is_active() {
                t.cancel_token().cancel();
            }
        }
    }
}

/// Continue a failed, recoverable or cancelled task from its first
/// unfinished step (or `from`), with its saved variables. `by`: who asks
/// (`None`: the hub itself, after a restart); a task another caller may
/// not see is unknown to it. `owner`: the connection that drives it now.
pub fn resume(
    engine: &Engine,
    task_id: &str,
    from: Option<usize>,
    variables: Option<serde_json::Map<String, Value>>,
    (by, owner): (Option<&Caller>, Option<Outbox>),
    context: Option<&str>,
    place: Option<Place>,
) -> Result<tokio::task::JoinHandle<()>, HubError> {
    let hub = engine.hub();
    if !crate::store::valid_id(task_id) {
        return Err(unknown_task(task_id));
    }
    if let Some(Err(m)) = context.map(check_label) {
        return Err(HubError::new(
            ErrorType::InvalidMessage,
            format!("resume_task: {m}"),
        ));
    }
    let t = engine.get(task_id).ok_or_else(|| unknown_task(task_id))?;
    // A task stays in the view it was started in: another view's session
    // (or the aggregate's) does not find it, nor does another client.
    if by.is_some_and(|c| !visible(&t, c)) {
        return Err(unknown_task(task_id));
    }
    if let Err(why) = t.state().resumable() {
        return Err(HubError::new(
            ErrorType::InvalidMessage,
            format!("task {task_id} cannot be resumed: {why}"),
        )
        .with_suggestion("task_status shows whether a task can be resumed"));
    }
    // One resume wins: the driving lock is taken before anything changes.
    let guard = t.driving.clone().try_lock_owned().map_err(|_| {
        HubError::new(
            ErrorType::InvalidMessage,
            format!("task {task_id} is already being resumed"),
        )
    })?;
    note_secrets(
        &hub.config().security,
        variables.as_ref(),
        &t.plan.options.secrets,
    );
    let from = from.unwrap_or(0).min(t.plan.steps.len());
    t.with(|d| {
        d.resumed = true;
        d.error = None;
        // Values given again (secrets are never journaled) override saved ones.
        if let (Some(vars), Some(Value::Object(saved))) =
            (&variables, d.ctx.get_mut(validate::VARS))
        {
            saved.extend(vars.clone());
        }
        // Failed steps run again; uncertain ones follow the resumeUncertain
        // policy in the runner; finished ones never run again.
        for s in d.steps.iter_mut().skip(from) {
            if s.state == state::StepState::Failed {
                if let Some(n) = s.state.next(state::StepEvent::Reset) {
                    s.state = n;
                }
            }
        }
    });
    // A new context is asked for; else the task keeps the one it had.
    if let (Some(label), Some(o)) = (context, &owner) {
        t.set_context(ClientContext::session(&o.session, Some(label)));
    }
    if owner.is_some() {
        t.set_owner(owner);
    }
    t.set_cancel_token(hub.shutdown.child_token());
    let engine = engine.clone();
    Ok(tokio::spawn(async move {
        let span = tracing::info_span!("task", id = %t.id);
        tracing::Instrument::instrument(
            runner::drive(
                engine,
                t,
                from,
                TaskEvent::Resume,
                runner::Hold {
                    driving: guard,
                    place,
                },
            ),
            span,
        )
        .await;
    }))
}

/// Whether `task` was started in `view` (`None`: the aggregate).
pub fn same_view(task: &Task, view: Option<&str>) -> bool {
    task.view.get().map(|v| &**v) == view
}

/// Whether `caller` may see (list, read, resume, cancel) `task`: one of
/// its view, and its own unless it holds the main token.
pub fn visible(task: &Task, caller: &Caller) -> bool {
    same_view(task, caller.view.as_deref()) && caller.may_see(task.client_name())
}

/// `hub__tool_batch`: run a batch for an agent that can only emit tool
/// calls; the result is the batch summary with each step's outcome.
pub async fn run_inline(
    engine: &Engine,
    params: &Value,
    caller: &Caller,
    context: &ClientContext,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Value, HubError> {
    let req: BatchReq = serde_path_to_error::deserialize(params.clone()).map_err(|e| {
        HubError::new(
            ErrorType::InvalidParams,
            format!(
                "tool_batch params: {} at {}; expected {{\"steps\": [...], \"options\"?: {{...}}}}",
                e.inner(),
                e.path()
            ),
        )
    })?;
    let batch_id = json!(format!("hub-{}", uuid::Uuid::new_v4()));
    // The steps run in the calling tool's context (its tab's browser), as
    // the caller's calls; its questions are the caller's principal's.
    let task = create_task_in(
        engine,
        batch_id,
        &req,
        None,
        Some(context.clone()),
        caller,
        None,
    )?;
    // Its steps are the calling session's work (its run logs them).
    task.set_caller(&caller.session);
    // Its calling tool call holds the session's place.
    let handle = start(engine, task.clone(), 0, TaskEvent::Start, None)?;
    // If the calling tool call gives up (timeout, cancel, dropped future),
    // so does the batch: never a second copy running behind a retry.
    let _stop = StopOnDrop(Some(task.clone()));
    tokio::select! {
        _ = handle => {}
        _ = cancel.cancelled() => {}
    }
    let mut summary = task.to_json(true);
    summary["success"] = json!(task.state() == TaskState::Success);
    Ok(summary)
}

/// The error for a task id no task has: a value that cannot be a task id
/// (the hub makes every one a UUID) says what an id looks like; a UUID
/// that names no task is `NOT_FOUND`.
pub fn unknown_task(id: &str) -> HubError {
    if uuid::Uuid::try_parse(id).is_err() {
        return HubError::new(
            ErrorType::InvalidMessage,
            format!(
                "{:?} is not a task id: task ids are UUIDs, see list_tasks",
                crate::util::truncate(id, 80)
            ),
        )
        .with_suggestion(
            "use a taskId from tool_batch's task_state, or send {\"type\":\"list_tasks\"}",
        );
    }
    HubError::new(ErrorType::NotFound, format!("no task with id {id:?}"))
        .with_suggestion("send {\"type\":\"list_tasks\"} to see the known tasks")
}

/// Is the task in a state where a user decision is pending?
pub fn waiting_for_user(t: &Task) -> bool {
    t.state() == TaskState::NeedUser
}
