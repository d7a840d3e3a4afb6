//! Sending one `tools/call` upstream through rmcp's peer (`send_call`),
//! linked to the client call it relays for when there is one.

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    ContentBlock, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::Value;

use crate::mcp::relay::{CallLink, Inflight};

/// A `tools/call` answer, as the call path needs it.
#[derive(Debug)]
pub enum CallAnswer {
    /// A complete result, as JSON (rmcp's typed result written out once).
    Complete(Value),
    /// An input request or a task, which the hub does not relay.
    Deferred,
}

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
pub async fn send_call(
    peer: &Peer<RoleClient>,
    call: CallToolRequestParams,
    link: Option<(&Inflight, &CallLink)>,
) -> Result<CallAnswer, CallFailure> {
    // Counted in before the request leaves: the server may ask for
    // sampling or elicitation as soon as it reads it.
    let linked = link.map(|(inflight, l)| (inflight, inflight.reserve(l.clone())));
    let handle = peer
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(call)),
            PeerRequestOptions::no_options(),
        )
        .await
        .map_err(|error| CallFailure { error, sent: false })?;
    let id = handle.id.clone();
    if let Some((inflight, guard)) = &linked {
        inflight.order.watch(&id);
        guard.bind(id.clone(), handle.progress_token.clone());
    }
    let mut abandon = Abandon {
        peer: peer.clone(),
        id: Some(id.clone()),
    };
    let answer = handle.await_response().await;
    abandon.id = None;
    if let Some((inflight, guard)) = linked {
        inflight.order.settled(&id).await;
        drop(guard);
    }
    let sent = |error| CallFailure { error, sent: true };
    match answer.map_err(sent)? {
        ServerResult::CallToolResult(r) => {
            // A large result's tree is built off the async worker.
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
                .map_err(|_| sent(ServiceError::UnexpectedResponse))
        }
        ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_) => {
            Ok(CallAnswer::Deferred)
        }
        _ => Err(sent(ServiceError::UnexpectedResponse)),
    }
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
