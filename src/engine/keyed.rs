//! A `tool_batch` with a `callKey`: the first one with a key runs; a
//! repeat (same key, same steps and options, same token) does not start a
//! second task. It is answered with the first task's `task` object, marked
//! `deduplicated`, once that task is no longer running. The key is
//! journaled with the task, so a repeat after a hub restart finds it too.

use std::sync::Arc;

use serde_json::json;

use super::service::Engine;
use super::state::TaskEvent;
use super::task::Task;
use crate::callkeys::{self, Claim};
use crate::errors::{ErrorType, HubError};
use crate::protocol::{self, BatchReq, MsgId, StepPage};
use crate::session::Outbox;
use crate::session::Place;
use crate::store::journal::CallKeyMark;

/// The hash a batch's key is held to: its steps and options.
pub fn batch_hash(req: &BatchReq) -> String {
    callkeys::hash_of(&json!({"steps": req.steps, "options": req.options}))
}

/// The key a new task carries into its journal.
pub(super) fn mark(req: &BatchReq) -> Option<CallKeyMark> {
    req.call_key.as_ref().map(|key| CallKeyMark {
        key: key.clone(),
        hash: batch_hash(req),
    })
}

/// Run `req` unless its key says it already ran (or runs). `place` is held
/// by the task it starts, or until a repeat's answer.
pub(super) fn batch(
    engine: &Engine,
    out: Outbox,
    id: MsgId,
    req: BatchReq,
    key: String,
    place: Option<Place>,
) {
    if let Err(m) = callkeys::check_key(&key) {
        return reply_err(&out, &id, invalid(format!("tool_batch: {m}")));
    }
    let hash = batch_hash(&req);
    match claim(engine, &out, &key, &hash) {
        Claim::Conflict => reply_err(&out, &id, conflict(&key)),
        Claim::Repeat(first) => {
            let engine = engine.clone();
            tokio::spawn(async move {
                let task = first
                    .answer()
                    .await
                    .and_then(|v| v.get("taskId").and_then(|t| t.as_str()).map(String::from))
                    .and_then(|t| engine.get(&t));
                match task {
                    Some(t) => answer_repeat(out, id, t, place).await,
                    None => reply_err(
                        &out,
                        &id,
                        HubError::new(
                            ErrorType::InvalidMessage,
                            format!(
                                "the first tool_batch with callKey \"{key}\" did not start a task"
                            ),
                        )
                        .with_suggestion("send the batch again: nothing ran under this key"),
                    ),
                }
            });
        }
        Claim::New(guard) => {
            // Known from a journal (a restart, or the key left memory).
            if let Some((task_id, mark)) = engine.by_call_key(&key, out.client.as_deref()) {
                if mark.hash != hash {
                    return reply_err(&out, &id, conflict(&key));
                }
                guard.finish(json!({"taskId": task_id}));
                // A finished task's journal is read off the runtime's thread.
                let engine = engine.clone();
                tokio::spawn(async move {
                    match engine.load(&task_id).await {
                        Some(t) => answer_repeat(out, id, t, place).await,
                        None => reply_err(&out, &id, gone(&key, &task_id)),
                    }
                });
                return;
            }
            let batch_id = id
                .clone()
                .unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
            match super::create_task(engine, batch_id, &req, &out) {
                Ok(task) => {
                    guard.finish(json!({"taskId": task.id}));
                    if let Err(e) = super::start(engine, task, 0, TaskEvent::Start, place) {
                        reply_err(&out, &id, e);
                    }
                }
                Err(e) => reply_err(&out, &id, e),
            }
        }
    }
}

/// Look `key` up for a request of `out`'s session (its token's keys), with
/// the bounds in force.
pub fn claim(engine: &Engine, out: &Outbox, key: &str, hash: &str) -> Claim {
    let cfg = engine.hub().config();
    let bounds = callkeys::Bounds {
        ttl: cfg.server.call_key_ttl,
        max: cfg.server.call_key_max,
        max_bytes: cfg.server.call_key_max_bytes,
        max_client_bytes: cfg.server.call_key_client_max_bytes,
    };
    engine.call_keys.claim(&out.scope, key, hash, bounds)
}

/// The first task's `task` object once it stops running, as the reply to
/// a repeat.
async fn answer_repeat(out: Outbox, id: MsgId, task: Arc<Task>, place: Option<Place>) {
    task.wait_inactive(super::STATUS_WAIT_LIMIT).await;
    drop(place);
    let page = StepPage {
        offset: None,
        limit: Some(StepPage::MAX_LIMIT),
    };
    out.send(protocol::reply(
        "task",
        &id,
        json!({"task": task.status_json(page), "deduplicated": true}),
    ));
}

fn reply_err(out: &Outbox, id: &MsgId, e: HubError) {
    out.send(protocol::error_msg(id, &e));
}

fn invalid(m: String) -> HubError {
    HubError::new(ErrorType::InvalidMessage, m)
}

/// The task a key names is no longer kept (pruned between the lookup
/// and the read).
fn gone(key: &str, task_id: &str) -> HubError {
    HubError::new(
        ErrorType::NotFound,
        format!("the task {task_id} that callKey \"{key}\" started is no longer kept"),
    )
    .with_suggestion("send the batch again with a new callKey to run it again")
}

/// A key sent again with another request.
pub fn conflict(key: &str) -> HubError {
    invalid(format!(
        "callKey \"{key}\" was already used with other params; a callKey names one request"
    ))
    .with_suggestion("choose a new callKey for a different request, or send the first request's params unchanged to get its answer")
}
