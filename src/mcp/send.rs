//! Sending one `tools/call` upstream through rmcp's peer (`send_call`),
//! linked to the client call it relays for when there is one, and the
//! MRTR rounds (SEP-2322) of a 2026-07-28 server that asks for input.

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientRequest, ContentBlock, InputRequiredResult, InputResponses, RequestId, RequestMetaObject,
    ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{ErrorData, Peer, RoleClient};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::mcp::input::{self, answer_each};
use crate::mcp::relay::{CallLink, Forward, Inflight};

/// A `tools/call` answer, as the call path needs it.
#[derive(Debug)]
pub enum CallAnswer {
    /// A complete result, as JSON (rmcp's typed result written out once).
    Complete(Value),
    /// The server asked for input (an `InputRequiredResult`) and it was
    /// handed to the stateless client the call serves ([`MrtrRelay`]).
    ///
    /// [`MrtrRelay`]: crate::mcp::relay::MrtrRelay
    Relayed,
    /// The server asked for input this call's client could not give (or
    /// kept asking): why, in words that follow "server X". The hub's own
    /// refusal, never retried as if the server had failed.
    Unanswerable(String),
    /// The server answered with a task of its own (`CreateTaskResult`),
    /// handed to the stateless client the call serves, which declared the
    /// tasks extension; the client follows it with `tasks/*`.
    RelayedTask,
    /// A task, with no client to hand it to.
    Task,
}

/// The most `InputRequiredResult` rounds one call answers before it gives
/// up (rmcp's own default for its clients).
pub const MAX_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// Build the MCP call; arguments must be a JSON object.
pub fn call_params(tool: &str, params: &Value) -> Result<CallToolRequestParams, String> {
    let p = CallToolRequestParams::new(tool.to_string());
    match params {
        Value::Object(m) => Ok(p.with_arguments(m.clone())),
        Value::Null => Ok(p),
        other => Err(params_kind_error(other)),
    }
}

/// The error for params that are neither an object nor absent.
pub fn params_kind_error(other: &Value) -> String {
    format!(
        "params must be a JSON object, got a {}",
        crate::protocol::json_kind(other)
    )
}

/// Send one `tools/call` and wait for its answer. With a `link`, the call
/// is registered in the server's `Inflight` under the request id and
/// progress token rmcp chose, so the relay routes the server's progress,
/// logs and requests to it, and the answer is held until the notifications
/// the server sent before it have been passed on (`ordered`). Dropping the
/// future before the answer sends `notifications/cancelled`, like rmcp's
/// own `call_tool_once`.
///
/// A 2026-07-28 server asks for input by answering `InputRequiredResult`
/// (SEP-2322): for a stateless client the question goes back to it
/// ([`CallAnswer::Relayed`]); a session client is asked here, through the
/// link, and the call is sent again (a new request id) with its answers
/// and the server's `requestState` exactly as minted, up to
/// [`MAX_ROUNDS`] times.
pub async fn send_call(
    peer: &Peer<RoleClient>,
    mut call: CallToolRequestParams,
    link: Option<(&Inflight, &CallLink)>,
) -> Result<CallAnswer, CallFailure> {
    let client = link.map(|(_, l)| l);
    if let Some(retry) = client.and_then(|l| l.mrtr.as_ref()?.take_retry()) {
        call.request_state = retry.request_state;
        call.input_responses = retry.input_responses;
    }
    let meta = request_meta(peer, client);
    let sent = |error| CallFailure { error, sent: true };
    for _ in 0..MAX_ROUNDS {
        let answer = send_once(peer, call.clone(), link, meta.clone()).await?;
        let irr = match answer {
            ServerResult::CallToolResult(r) => return complete(r).map_err(sent),
            ServerResult::InputRequiredResult(irr) => irr,
            ServerResult::CreateTaskResult(t) => {
                return Ok(match client.and_then(|l| l.mrtr.as_ref()) {
                    Some(m) if m.declared.supports_tasks() => {
                        m.hold_task(t);
                        CallAnswer::RelayedTask
                    }
                    _ => CallAnswer::Task,
                })
            }
            _ => return Err(sent(ServiceError::UnexpectedResponse)),
        };
        let Some(client) = client else {
            return Ok(CallAnswer::Unanswerable(format!(
                "asked for {} to finish this call, and no client of this call can answer it",
                input::asked(&irr)
            )));
        };
        if let Some(m) = &client.mrtr {
            m.hold(irr);
            return Ok(CallAnswer::Relayed);
        }
        match answer_all(client, &irr).await {
            Ok(answers) => call.input_responses = Some(answers),
            Err(e) => {
                return Ok(CallAnswer::Unanswerable(format!(
                    "asked for input the client could not give: {}",
                    e.message
                )))
            }
        }
        call.request_state = irr.request_state;
    }
    Ok(CallAnswer::Unanswerable(format!(
        "asked for input {MAX_ROUNDS} times in a row without finishing the call; the hub stopped asking"
    )))
}

/// A complete result as JSON; a large one's tree is built off the async
/// worker.
fn complete(r: rmcp::model::CallToolResult) -> Result<CallAnswer, ServiceError> {
    let bytes = r
        .content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(t) => t.text.len(),
            ContentBlock::Image(i) => i.data.len(),
            _ => 0,
        })
        .sum();
    crate::util::heavy(bytes, || serde_json::to_value(&r))
        .map(CallAnswer::Complete)
        .map_err(|_| ServiceError::UnexpectedResponse)
}

/// For a 2026-07-28 server, the client capabilities this call can answer
/// with (the client's own, else none): the server asks only for those.
fn request_meta(peer: &Peer<RoleClient>, link: Option<&CallLink>) -> Option<RequestMetaObject> {
    if !crate::mcp::upstream::is_stateless(peer) {
        return None;
    }
    let mut caps = ClientCapabilities::default();
    match link {
        Some(CallLink { mrtr: Some(m), .. }) => caps = m.declared.clone(),
        Some(l) => {
            caps.sampling = l.can_sample.then(Default::default);
            caps.elicitation = l.can_elicit.then(Default::default);
            caps.roots = l.can_list_roots.then(Default::default);
        }
        None => {}
    }
    let mut meta = RequestMetaObject::new();
    meta.set_client_capabilities(caps);
    Some(meta)
}

/// One request of the call, registered with the link while it runs.
async fn send_once(
    peer: &Peer<RoleClient>,
    call: CallToolRequestParams,
    link: Option<(&Inflight, &CallLink)>,
    meta: Option<RequestMetaObject>,
) -> Result<ServerResult, CallFailure> {
    // Counted in before the request leaves: the server may ask for
    // sampling or elicitation as soon as it reads it.
    let linked = link.map(|(inflight, l)| (inflight, inflight.reserve(l.clone())));
    let mut options = PeerRequestOptions::no_options();
    options.meta = meta;
    let handle = peer
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(call)),
            options,
        )
        .await
        .map_err(|error| CallFailure { error, sent: false })?;
    let id = handle.id.clone();
    // The answer waits for the progress sent before it only when the
    // client hears progress (a `/ws` call's link carries questions only).
    let fenced = link.is_some_and(|(_, l)| l.hears_progress);
    if let Some((inflight, guard)) = &linked {
        if fenced {
            inflight.order.watch(&id);
        }
        guard.bind(id.clone(), handle.progress_token.clone());
    }
    let mut abandon = Abandon {
        peer: peer.clone(),
        id: Some(id.clone()),
    };
    let answer = handle.await_response().await;
    abandon.id = None;
    if let Some((inflight, guard)) = linked {
        if fenced {
            inflight.order.settled(&id).await;
        }
        drop(guard);
    }
    answer.map_err(|error| CallFailure { error, sent: true })
}

/// Ask the linked client each of the server's input requests, in order.
async fn answer_all(
    link: &CallLink,
    irr: &InputRequiredResult,
) -> Result<InputResponses, ErrorData> {
    answer_each(irr, |ask| async move {
        let what = ask.capability();
        if !link.can_answer(&ask) {
            return Err(ErrorData::internal_error(
                format!("the server asked for {what}, but the MCP client whose call it serves does not support {what}"),
                None,
            ));
        }
        let (reply, answer) = oneshot::channel();
        if !link.send(Forward::Ask { ask, reply }).await {
            return Err(ErrorData::internal_error(
                "the client call this request belongs to has already returned",
                None,
            ));
        }
        answer.await.unwrap_or_else(|_| {
            Err(ErrorData::internal_error(
                format!("the client call ended before it answered {what}"),
                None,
            ))
        })
    })
    .await
}

/// A `tools/call` that got no answer of its own: rmcp's error, and whether
/// the request had been handed to the transport (`false`: it never left,
/// so the server did not see it).
#[derive(Debug)]
pub struct CallFailure {
    pub error: ServiceError,
    pub sent: bool,
}

/// The value a complete result stands for: its `structuredContent`, else
/// its text blocks joined (what `tool_result.result` carries).
pub fn result_value(raw: &Value) -> Value {
    match raw.get("structuredContent") {
        Some(v) => v.clone(),
        None => Value::String(result_text(raw)),
    }
}

/// The text of a complete result's text blocks, one per line.
pub fn result_text(result: &Value) -> String {
    let blocks = result.get("content").and_then(Value::as_array);
    let mut text = String::new();
    for (i, t) in blocks.into_iter().flatten().filter_map(text_of).enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(t);
    }
    text
}

fn text_of(block: &Value) -> Option<&str> {
    if block.get("type").and_then(Value::as_str) != Some("text") {
        return None;
    }
    block.get("text").and_then(Value::as_str)
}

/// Sends `notifications/cancelled` for a request nobody waits for anymore.
struct Abandon {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        rt.spawn(async move {
            let reason = Some("request abandoned by the caller".to_string());
            let _ = peer
                .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_text_joins_text_blocks_only_one_per_line() {
        let r = json!({"content": [
            {"type": "text", "text": ""},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "text", "text": "b"},
            {"type": "text", "text": "c"},
        ]});
        assert_eq!(result_text(&r), "\nb\nc");
        assert_eq!(result_text(&json!({"isError": true})), "");
    }
}
