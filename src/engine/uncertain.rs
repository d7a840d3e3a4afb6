//! Resuming a step that may already have run: the `resumeUncertain`
//! policy (skip, run again, or ask a person), never a silent repeat.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::service::Engine;
use super::state::StepState;
use super::step_end::{enter_need_user, finish_step, leave_need_user, record, step_base};
use super::task::Task;
use crate::errors::{ErrorType, HubError};
use crate::hub::CallOutcome;

/// How an uncertain step was settled.
pub(super) enum Uncertain {
    Rerun,
    Skipped,
    Failed,
}

/// A step that started before the hub stopped and never finished may or may
/// not have taken effect: never repeat it silently. The policy comes from the
/// tool's override, the server's, or `taskEngine.resumeUncertain`.
pub(super) async fn settle_uncertain(
    engine: &Engine,
    task: &Arc<Task>,
    i: usize,
    cancel: &CancellationToken,
) -> Uncertain {
    let hub = engine.hub();
    // Settling may wait for a server or a person: nothing stays held meanwhile.
    engine.flush(task);
    use crate::config::UncertainPolicy;
    let cfg = hub.config();
    let step = &task.plan.steps[i].step;
    // Right after a restart the step's server may still be starting: wait
    // for it like a new call does (bounded by the step's timeout).
    let planned = &task.plan.steps[i];
    let info = hub
        .resolve_settled(
            &step.tool,
            step.timeout.map(Duration::from_millis),
            &planned.retry,
            cancel,
        )
        .await
        .ok();
    let server = info.as_ref().and_then(|t| cfg.mcp_servers.get(&t.server));
    let tool_policy = server
        .zip(info.as_ref())
        .and_then(|(s, t)| s.tool_overrides.get(&t.name))
        .and_then(|o| o.resume_uncertain);
    let mut policy = tool_policy
        .or_else(|| server.and_then(|s| s.resume_uncertain))
        .unwrap_or(cfg.task_engine.resume_uncertain);
    let safe_to_repeat = info
        .as_ref()
        .and_then(|t| t.annotations.as_ref())
        .is_some_and(|a| {
            a.get("readOnlyHint").and_then(Value::as_bool) == Some(true)
                || a.get("idempotentHint").and_then(Value::as_bool) == Some(true)
        });
    if policy == UncertainPolicy::Confirm && safe_to_repeat && server.is_some_and(|s| s.trusted) {
        policy = UncertainPolicy::Rerun;
    }
    let reason = format!("step {i} may already have run before the hub stopped");
    tracing::warn!(task = %task.id, step = i, ?policy, "{reason}");
    match policy {
        UncertainPolicy::Rerun => Uncertain::Rerun,
        UncertainPolicy::Skip => {
            let base = step_base(task, i);
            let mut msg = base;
            msg["success"] = json!(true);
            msg["skipped"] = json!(true);
            msg["reason"] = json!(format!("{reason}; skipped (resumeUncertain: skip)"));
            finish_step(engine, task, i, StepState::Skipped, msg, None, true);
            Uncertain::Skipped
        }
        UncertainPolicy::Confirm => {
            let Some(info) = info else {
                let e = HubError::new(
                    ErrorType::ServerUnavailable,
                    format!(
                        "{reason}, and its tool {} is not available to confirm it",
                        step.tool
                    ),
                );
                let out = CallOutcome::failed(&step.tool, e, Duration::ZERO);
                record(engine, task, i, step_base(task, i), out, true, None).await;
                return Uncertain::Failed;
            };
            let params = task
                .with(|d| d.steps[i].outcome.clone())
                .and_then(|o| o.get("params").cloned())
                .unwrap_or_else(|| step.params.clone());
            let ask = super::confirm::Confirmation {
                subject: super::confirm::Subject::Step {
                    task_id: &task.id,
                    batch_id: &task.batch_id,
                    step_index: i,
                },
                info: &info,
                params: &params,
                owner: task.owner(),
                client: task.client(),
            };
            enter_need_user(engine, task, i, &reason, &params);
            let verdict = tokio::select! {
                v = super::confirm::request(engine, &ask, &reason) => v,
                _ = cancel.cancelled() => Err(HubError::new(ErrorType::Cancelled, "the task was cancelled while waiting for a confirmation")),
            };
            leave_need_user(engine, task, i);
            match verdict {
                Ok(()) => Uncertain::Rerun,
                Err(e) => {
                    let out = CallOutcome::failed(&step.tool, e, Duration::ZERO);
                    record(engine, task, i, step_base(task, i), out, true, None).await;
                    Uncertain::Failed
                }
            }
        }
    }
}
