//! Tasks no client drives: started for an MCP client that asked for a
//! task (`server::mcp::tasks`), journaled with `unattended` in their
//! header, read by polling, and resumed by the hub itself when a restart
//! finds them stopped mid-run (`resume_all`, from `App::start`).
//!
//! The engine stays blind to MCP: a [`Kind`] only says how the task's
//! result is read, a single call's outcome or the batch's summary.
//!
//! Each runs under the hub-wide cap `server.maxUnattendedTasks` (with the
//! `/ws` batches whose session has ended, which count but run on): its
//! [`place`] is taken before anything is journaled and held until the run
//! ends, with the starting request's place under its caller's cap.

use std::sync::Arc;

use serde_json::json;

use super::questions::TaskQuestions;
use super::service::Engine;
use super::state::{TaskEvent, TaskState};
use super::task::Task;
use crate::caller::Caller;
use crate::client_context::ClientContext;
use crate::errors::{ErrorType, HubError};
use crate::protocol::BatchReq;
use crate::session::Place;

pub use super::task::Unattended as Kind;

/// A place under `server.maxUnattendedTasks` for one more unattended
/// task, or `LIMIT_EXCEEDED` saying the cap and what to do.
/// `/ws` batches whose session has ended run on with no client to drive
/// them, and count too (never stopped for it: they run already).
pub fn place(engine: &Engine) -> Result<Place, HubError> {
    let cap = engine.hub().config().server.max_unattended_tasks;
    let room = cap.saturating_sub(detached(engine));
    engine.unattended.try_take(room).ok_or_else(|| {
        HubError::new(
            ErrorType::LimitExceeded,
            format!("the hub already runs {cap} tasks no client drives (server.maxUnattendedTasks); this task was not started"),
        )
        .with_suggestion("wait for a task to end (tasks/get), cancel one you no longer need (tasks/cancel), call the tool without a task, or raise server.maxUnattendedTasks in config.json")
    })
}

/// Running tasks whose owner's session has ended (a `/ws` batch whose
/// client went away for good); an MCP task is counted by its place.
fn detached(engine: &Engine) -> usize {
    engine
        .tasks
        .iter()
        .filter(|t| {
            t.unattended.get().is_none()
                && t.owner().is_some_and(|o| o.is_closed())
                && t.driving.try_lock().is_err()
        })
        .count()
}

/// Validate `req`, create its task (journaled, the header synced: a
/// restart from here on finds it) and start it in the background, as
/// `caller`'s work in its view and its principal's task (its steps'
/// `need_user` go to that principal's sessions and the main token's); its
/// servers' questions wait in `questions` for the client. `place` (from
/// [`place`], joined with the request's place under its caller's cap) is
/// held until the run ends. The returned task is running.
pub fn start(
    engine: &Engine,
    req: &BatchReq,
    kind: Kind,
    caller: &Caller,
    questions: Arc<TaskQuestions>,
    place: Place,
) -> Result<Arc<Task>, HubError> {
    let batch_id = json!(format!("task-{}", uuid::Uuid::new_v4()));
    let session = &caller.session;
    let context = ClientContext::session(session, req.context.as_deref());
    let task = super::create_task_in(
        engine,
        batch_id,
        req,
        None,
        Some(context),
        caller,
        Some(kind),
    )?;
    task.set_caller(session);
    let _ = task.questions.set(questions);
    // Durable before the caller hears of it.
    engine.flush(&task);
    // Nobody awaits the run: its state is read by polling.
    drop(super::start(
        engine,
        task.clone(),
        0,
        TaskEvent::Start,
        Some(place),
    )?);
    Ok(task)
}

/// Resume every unattended task a restart found stopped mid-run (state
/// `recoverable`): its finished steps never run again, an uncertain one
/// follows `resumeUncertain`. Called once at start, after recovery.
pub fn resume_all(engine: &Engine) {
    let stopped: Vec<Arc<Task>> = engine
        .list()
        .into_iter()
        .filter(|t| t.unattended.get().is_some() && t.state() == TaskState::Recoverable)
        .collect();
    for t in stopped {
        // Accepted before the restart: it counts, and is never refused.
        let place = engine.unattended.enter();
        match super::resume(engine, &t.id, None, None, (None, None), None, Some(place)) {
            Ok(handle) => {
                tracing::info!(task = %t.id, "resuming an unattended task the hub stopped under");
                drop(handle);
            }
            Err(e) => {
                tracing::warn!(task = %t.id, error = %e.message, "an unattended task could not be resumed")
            }
        }
    }
}

/// Stop a running task; a task that already ended is left as it is.
/// `Ok(false)`: it had already ended.
pub fn cancel(task: &Task) -> bool {
    if task.state().is_active() {
        task.cancel_token().cancel();
        return true;
    }
    false
}
