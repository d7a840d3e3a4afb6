//! The safety gate in front of every call (batch steps and single
//! `tool_call`s): deny at once, or ask a person and wait for `confirm`.

use serde_json::{json, Value};

use super::approvals::{params_hash, Refused};
use super::service::Engine;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::ToolInfo;
use crate::protocol::Outbox;
use crate::safety::{self, Verdict};

/// What the gate needs to know about the call it guards.
pub struct Ask<'a> {
    pub task_id: &'a str,
    pub batch_id: Option<&'a Value>,
    pub step_index: usize,
    pub info: &'a ToolInfo,
    pub params: &'a Value,
    pub owner: Option<Outbox>,
    /// A single `tool_call`'s own `id` and `callKey`, so its client can
    /// tell which call asks.
    pub request_id: Option<&'a Value>,
    pub call_key: Option<&'a str>,
}

/// `Ok` when the call may run; `Err(SAFETY_BLOCKED)` when a rule denies it
/// or the person declines or does not answer in time.
pub async fn gate(
    engine: &Engine,
    ask: Ask<'_>,
    on_wait: impl FnOnce(&str),
) -> Result<(), HubError> {
    let hub = engine.hub();
    let cfg = hub.config();
    match safety::check(&cfg.safety, ask.info, ask.params) {
        Verdict::Allow => Ok(()),
        Verdict::Deny(reason) => Err(blocked(
            ask.info,
            format!("denied by a safety rule: {reason}"),
        )),
        Verdict::Confirm(reason) => {
            on_wait(&reason);
            request(engine, &ask, &reason).await
        }
    }
}

/// Ask for a decision on a call (also used for uncertain steps on resume).
pub async fn request(engine: &Engine, ask: &Ask<'_>, reason: &str) -> Result<(), HubError> {
    let hub = engine.hub();
    let cfg = hub.config();
    let hash = params_hash(ask.params);
    let rx = engine
        .approvals
        .register(ask.task_id, ask.step_index, hash.clone());
    let expires_ms = crate::util::now_ms() + cfg.safety.confirm_timeout.as_millis() as u64;
    let redacted = crate::history::redact(ask.params, &cfg.security);
    let mut msg = json!({
        "type": "need_user",
        "taskId": ask.task_id,
        "stepIndex": ask.step_index,
        "tool": ask.info.qualified_name,
        "params": redacted,
        "reason": reason,
        "paramsHash": hash,
        "expiresAt": crate::util::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_millis(expires_ms)),
    });
    if let Some(b) = ask.batch_id {
        msg["batchId"] = b.clone();
    }
    if let Some(r) = ask.request_id {
        msg["requestId"] = r.clone();
    }
    if let Some(k) = ask.call_key {
        msg["callKey"] = json!(k);
    }
    tracing::warn!(task = ask.task_id, step = ask.step_index, tool = %ask.info.qualified_name, %reason, "waiting for a person to confirm");
    // The owner while its session lives, else every connection. A batch
    // whose owner's socket is gone (its session waits for a resume) is put
    // to every other connection too: a task outlives its client, and anyone
    // may answer; the owner still gets it when it resumes. A single call's
    // prompt stays with its session, which cancels it if it ends.
    match ask.owner.as_ref().filter(|o| !o.is_closed()) {
        Some(o) => {
            if ask.batch_id.is_some() && !o.is_attached() {
                let mut others = msg.clone();
                others["_except"] = json!(o.session);
                hub.broadcast(others);
            }
            o.send(msg);
        }
        None => hub.broadcast(msg),
    }
    match engine
        .approvals
        .wait(ask.task_id, rx, cfg.safety.confirm_timeout)
        .await
    {
        Ok(()) => Ok(()),
        Err(Refused::Denied) => Err(blocked(ask.info, format!("the user declined: {reason}"))),
        Err(Refused::Expired) => Err(blocked(
            ask.info,
            format!(
                "no confirmation within {} ms (safety.confirmTimeout): {reason}",
                cfg.safety.confirm_timeout.as_millis()
            ),
        )),
    }
}

fn blocked(info: &ToolInfo, message: String) -> HubError {
    HubError::new(ErrorType::SafetyBlocked, message)
        .with_server(&info.server)
        .with_tool(&info.name)
}

/// The gate for a caller that asks its person itself (an MCP client, by
/// elicitation): `deny` fails at once; on `confirm`, `ask` is given the
/// reason and answers `Ok(true)` (approved), `Ok(false)` (declined) or
/// `Err(why nobody could be asked)`. Same rules as [`gate`].
pub async fn gate_asking<Fut>(
    engine: &Engine,
    info: &ToolInfo,
    params: &Value,
    ask: impl FnOnce(String) -> Fut,
) -> Result<(), HubError>
where
    Fut: std::future::Future<Output = Result<bool, String>>,
{
    let cfg = engine.hub().config();
    match safety::check(&cfg.safety, info, params) {
        Verdict::Allow => Ok(()),
        Verdict::Deny(reason) => Err(blocked(info, format!("denied by a safety rule: {reason}"))),
        Verdict::Confirm(reason) => {
            tracing::warn!(tool = %info.qualified_name, %reason, "asking the MCP client's user to confirm");
            match ask(reason.clone()).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(blocked(info, format!("the user declined: {reason}"))),
                Err(why) => Err(blocked(
                    info,
                    format!("this call needs a person's confirmation ({reason}), but {why}"),
                )
                .with_suggestion(
                    "use an MCP client that supports elicitation, send the call over /ws where need_user/confirm applies, or change safety.rules in config.json",
                )),
            }
        }
    }
}
