//! Asking a person about a call the safety gate (`hub::pipeline`) wants
//! confirmed, or an uncertain step on resume: register the wait, send
//! `need_user`, wait for the client's `confirm`.
//!
//! A question belongs to the principal whose call or task asks it. It goes
//! to the call's or task's own session while that lives; a batch's
//! question whose session has no socket (or that has no session:
//! `hub__tool_batch`, an MCP task, a replay by tool) goes to every session
//! of that principal and every main-token session (the person's dashboard
//! and popup), in any view, and never to another client's. Only those may
//! answer it (`Approvals::decide`).

use serde_json::{json, Value};

use super::approvals::{params_hash, Refused};
use super::service::Engine;
use crate::caller::Owner;
use crate::errors::HubError;
use crate::hub::{Confirmer, Decision, Question};
use crate::mcp::registry::ToolInfo;
use crate::safety::blocked;
use crate::session::Outbox;

/// What a confirmation asks about.
pub enum Subject<'a> {
    /// A batch step: the client confirms with the task's id and the step.
    Step {
        task_id: &'a str,
        batch_id: &'a Value,
        step_index: usize,
    },
    /// A single `tool_call`, named by its own `id` and `callKey` so its
    /// client can tell which call asks. The pending confirmation is given
    /// a name of its own (`call-<run>-<n>`, the `need_user`'s `taskId`).
    Call {
        request_id: Option<&'a Value>,
        call_key: Option<&'a str>,
    },
}

/// A question for a person: which call, with what, and who is asked.
pub struct Confirmation<'a> {
    pub subject: Subject<'a>,
    pub info: &'a ToolInfo,
    pub params: &'a Value,
    pub owner: Option<Outbox>,
    /// The principal whose call or task asks: who may receive and answer.
    pub client: Owner,
}

/// The confirmer of a single `tool_call`: its `need_user` goes to its own
/// session (which cancels the call, and so the question, if it ends).
pub struct SingleCall<'a> {
    pub engine: &'a Engine,
    pub owner: &'a Outbox,
    pub request_id: Option<&'a Value>,
    pub call_key: Option<&'a str>,
}

impl Confirmer for SingleCall<'_> {
    fn confirm<'a>(&'a self, q: Question<'a>) -> Decision<'a> {
        Box::pin(async move {
            let (info, params, reason) = (q.info, q.params, q.reason);
            let ask = Confirmation {
                subject: Subject::Call {
                    request_id: self.request_id,
                    call_key: self.call_key,
                },
                info,
                params,
                owner: Some(self.owner.clone()),
                client: self.owner.client.clone(),
            };
            request(self.engine, &ask, &reason).await
        })
    }
}

/// Ask for a decision on a call (also used for uncertain steps on resume).
pub async fn request(
    engine: &Engine,
    ask: &Confirmation<'_>,
    reason: &str,
) -> Result<(), HubError> {
    let hub = engine.hub();
    let cfg = hub.config();
    let hash = params_hash(ask.params);
    let (key, step_index, batch_id) = match &ask.subject {
        Subject::Step {
            task_id,
            batch_id,
            step_index,
        } => (task_id.to_string(), *step_index, Some(*batch_id)),
        Subject::Call { .. } => (crate::util::call_id(), 0, None),
    };
    let waiting = engine
        .approvals
        .register(&key, step_index, hash.clone(), ask.client.clone());
    let expires_ms = crate::util::now_ms() + cfg.safety.confirm_timeout.as_millis() as u64;
    let redacted = crate::history::redact(ask.params, &cfg.security);
    let mut msg = json!({
        "type": "need_user",
        "taskId": key,
        "stepIndex": step_index,
        "tool": ask.info.qualified_name,
        "params": redacted,
        "reason": reason,
        "paramsHash": hash,
        "expiresAt": crate::util::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_millis(expires_ms)),
    });
    match &ask.subject {
        Subject::Step { batch_id, .. } => msg["batchId"] = (*batch_id).clone(),
        Subject::Call {
            request_id,
            call_key,
        } => {
            if let Some(r) = request_id {
                msg["requestId"] = (*r).clone();
            }
            if let Some(k) = call_key {
                msg["callKey"] = json!(k);
            }
        }
    }
    tracing::warn!(task = %key, step = step_index, tool = %ask.info.qualified_name, %reason, "waiting for a person to confirm");
    // The owner while its session lives. A batch whose owner's socket is
    // gone (its session waits for a resume) or that has no owner is put to
    // the principal's other sessions and the main token's: a task outlives
    // its client, and the person may answer; the owner still gets it when
    // it resumes. A single call's prompt stays with its session, which
    // cancels it if it ends.
    let for_principal = |mut m: Value| {
        m[PRINCIPAL] = json!(ask.client.as_deref());
        m
    };
    match ask.owner.as_ref().filter(|o| !o.is_closed()) {
        Some(o) => {
            if batch_id.is_some() && !o.is_attached() {
                let mut others = for_principal(msg.clone());
                others["_except"] = json!(o.session);
                hub.broadcast(others);
            }
            o.send(msg);
        }
        None => hub.broadcast(for_principal(msg)),
    }
    match waiting.wait(cfg.safety.confirm_timeout).await {
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

/// The private field of a hub-wide event that only the main token's
/// sessions and the named client's receive (`null`: the main token's
/// only); see `server::session`.
pub const PRINCIPAL: &str = "_principal";

/// A server's question during a single `tool_call`: its
/// `elicitation/create` form, put to the call's person as a `need_user`
/// that carries it (`input`). The person's `confirm` answers it:
/// `approve: true` with the form's fields in `content` accepts, `false`
/// declines; no answer within `safety.confirmTimeout` cancels. What comes
/// back is the `ElicitResult` for the server.
pub struct FormQuestion<'a> {
    pub owner: &'a Outbox,
    pub request_id: Option<&'a Value>,
    pub call_key: Option<&'a str>,
    /// The call's tool (its name as the client knows it) and params.
    pub tool: &'a str,
    pub params: &'a Value,
    /// The server's `elicitation/create` params.
    pub form: &'a Value,
}

pub async fn ask_form(engine: &Engine, q: FormQuestion<'_>) -> Value {
    let hub = engine.hub();
    let cfg = hub.config();
    let key = crate::util::call_id();
    let hash = params_hash(q.form);
    let waiting = engine
        .approvals
        .register(&key, 0, hash.clone(), q.owner.client.clone());
    let expires_ms = crate::util::now_ms() + cfg.safety.confirm_timeout.as_millis() as u64;
    let message = q.form.get("message").and_then(Value::as_str).unwrap_or("");
    let mut msg = json!({
        "type": "need_user",
        "taskId": key,
        "stepIndex": 0,
        "tool": q.tool,
        "params": crate::history::redact(q.params, &cfg.security),
        "reason": format!("the tool's server asks: {message}"),
        "input": {"method": "elicitation/create", "params": q.form},
        "paramsHash": hash,
        "expiresAt": crate::util::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_millis(expires_ms)),
    });
    if let Some(r) = q.request_id {
        msg["requestId"] = r.clone();
    }
    if let Some(k) = q.call_key {
        msg["callKey"] = json!(k);
    }
    tracing::warn!(task = %key, tool = %q.tool, "a server asks the person of a tool_call (need_user with input)");
    q.owner.send(msg);
    match waiting.wait_content(cfg.safety.confirm_timeout).await {
        Ok(content) => json!({"action": "accept", "content": content.unwrap_or_else(|| json!({}))}),
        Err(Refused::Denied) => json!({"action": "decline"}),
        Err(Refused::Expired) => json!({"action": "cancel"}),
    }
}
