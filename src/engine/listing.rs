//! `list_tasks`: the tasks matching a client's filters, newest first, one
//! page: the live ones, and (outside a view) the finished ones known only
//! from the index.

use std::sync::Arc;

use serde_json::{json, Value};

use super::service::Engine;
use super::task::Task;
use super::{durable, state, visible};
use crate::caller::Caller;
use crate::errors::{ErrorType, HubError};
use crate::protocol::ListTasksReq;

/// `{"tasks": [...], "problems": [...], "total", "offset", "limit"}` for
/// list_tasks: the tasks matching the filters, newest first, one page.
/// In a view only the view's tasks (a finished task known only from the
/// index, which keeps no view, is the aggregate's); for a client's token
/// only that client's tasks, the main token's shows every principal's.
pub fn list_json(engine: &Engine, req: &ListTasksReq, caller: &Caller) -> Result<Value, HubError> {
    let view = caller.view.as_deref();
    let state = match &req.state {
        None => None,
        Some(s) => Some(durable::parse_state(s).ok_or_else(|| {
                HubError::new(
                    ErrorType::InvalidMessage,
                    format!("list_tasks: {s:?} is not a task state"),
                )
                .with_suggestion("use one of pending, running, retrying, need_user, success, failed, recoverable, cancelled")
        })?),
    };
    let since = |ms: u64| {
        req.since.as_ref().is_none_or(|s| {
            s.admits(&crate::util::rfc3339(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
            ))
        })
    };
    let live = engine.list();
    let mut hits: Vec<(u64, &str, Hit)> = live
        .iter()
        .filter(|t| state.is_none_or(|s| t.state() == s))
        .filter(|t| visible(t, caller))
        .filter(|t| {
            req.tool.as_deref().is_none_or(|want| {
                t.plan
                    .steps
                    .iter()
                    .any(|p| crate::util::names_tool(&p.step.tool, want))
            })
        })
        .map(|t| (t.with(|d| d.created_ms), t.id.as_str(), Hit::Live(t)))
        .filter(|(ms, _, _)| since(*ms))
        .collect();
    // Tasks that succeeded before this start: from the index alone.
    let ix = engine.store.finished.lock();
    if view.is_none() && state.is_none_or(|s| s == state::TaskState::Success) {
        hits.extend(
            ix.entries()
                .filter(|e| engine.tasks.get(&e.id).is_none())
                .filter(|e| caller.may_see(e.client.as_deref()))
                .filter(|e| req.tool.as_deref().is_none_or(|want| e.uses_tool(want)))
                .filter(|e| since(e.created_ms))
                .map(|e| (e.created_ms, e.id.as_str(), Hit::Indexed(&e.summary))),
        );
    }
    // Newest first (ties by id, so pages never overlap).
    hits.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let tasks: Vec<Value> = hits
        .iter()
        .skip(req.page.offset)
        .take(req.page.limit())
        .map(|(_, _, h)| match h {
            Hit::Live(t) => t.to_json(false),
            // Written by this hub from a `Value`: it parses.
            Hit::Indexed(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        })
        .collect();
    Ok(json!({
        "tasks": tasks,
        "problems": engine.store.problems(),
        "total": hits.len(),
        "offset": req.page.offset,
        "limit": req.page.limit(),
    }))
}

/// A task in a `list_tasks` answer.
enum Hit<'a> {
    Live(&'a Arc<Task>),
    Indexed(&'a str),
}
