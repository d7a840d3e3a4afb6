//! Sending one `tools/call` upstream: through rmcp's peer for a call with
//! a client to relay to (`send_call`), or on a stdio server's fast lane
//! (`send_lane_call`), with the same answers and errors either way.

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::Value;

use crate::mcp::relay::{CallLink, Inflight};

/// A `tools/call` answer, as the call path needs it.
#[derive(Debug)]
pub enum CallAnswer {
    /// A complete result, as JSON: what the server sent on the fast lane,
    /// rmcp's typed result written out once on the other path.
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
) -> Result<CallAnswer, ServiceError> {
    // Counted in before the request leaves: the server may ask for
    // sampling or elicitation as soon as it reads it.
    let linked = link.map(|(inflight, l)| (inflight, inflight.reserve(l.clone())));
    let handle = peer
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(call)),
            PeerRequestOptions::no_options(),
        )
        .await?;
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
    match answer? {
        ServerResult::CallToolResult(r) => serde_json::to_value(&r)
            .map(CallAnswer::Complete)
            .map_err(|_| ServiceError::UnexpectedResponse),
        ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_) => {
            Ok(CallAnswer::Deferred)
        }
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// [`send_call`] for a call with no client to relay to, on a stdio
/// server's fast lane (`mcp::lane`): the same answers and errors, without
/// rmcp's service loop. A complete result is handed on as the server sent
/// it, checked for the shape rmcp would have required but never decoded
/// into rmcp's types and written out again.
pub async fn send_lane_call(
    lane: &crate::mcp::lane::Lane,
    tool: &str,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Result<CallAnswer, ServiceError> {
    use crate::mcp::lane::LaneError;
    use serde::Deserialize;
    let result = match lane.call_tool(tool, arguments).await {
        Ok(v) => v,
        Err(LaneError::Closed) => return Err(ServiceError::TransportClosed),
        Err(LaneError::Rpc(e)) => return Err(ServiceError::McpError(e)),
    };
    if is_complete_result(&result) {
        return Ok(CallAnswer::Complete(result));
    }
    // Not a plain result: decode it the way rmcp would have.
    match ServerResult::deserialize(&result) {
        Ok(ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_)) => {
            Ok(CallAnswer::Deferred)
        }
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// What rmcp's `CallToolResult` accepts: an object with `content`,
/// `structuredContent` or `isError`, no `resultType` but "complete", and
/// content blocks that each name their type (a text block with its text).
fn is_complete_result(v: &Value) -> bool {
    let Some(m) = v.as_object() else {
        return false;
    };
    if !(m.contains_key("content")
        || m.contains_key("structuredContent")
        || m.contains_key("isError"))
    {
        return false;
    }
    if m.get("resultType")
        .is_some_and(|t| t.as_str() != Some("complete"))
    {
        return false;
    }
    if m.get("isError").is_some_and(|e| !e.is_boolean()) {
        return false;
    }
    match m.get("content") {
        None => true,
        Some(Value::Array(blocks)) => {
            blocks
                .iter()
                .all(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b.get("text").is_some_and(Value::is_string),
                    Some(_) => true,
                    None => false,
                })
        }
        Some(_) => false,
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
    use serde::Deserialize;
    use serde_json::json;

    #[test]
    fn a_complete_result_is_what_rmcp_would_accept() {
        let accepted = [
            json!({"content": [{"type": "text", "text": "hi"}]}),
            json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}], "isError": false}),
            json!({"structuredContent": null}),
            json!({"isError": true}),
            json!({"content": [], "resultType": "complete", "_meta": {"x": 1}}),
        ];
        for v in accepted {
            assert!(is_complete_result(&v), "{v}");
            assert!(rmcp::model::CallToolResult::deserialize(&v).is_ok(), "{v}");
        }
        let refused = [
            json!({}),
            json!({"_meta": {}}),
            json!("text"),
            json!({"content": "hi"}),
            json!({"content": [{"text": "no type"}]}),
            json!({"content": [{"type": "text"}]}),
            json!({"content": [], "resultType": "input_required"}),
            json!({"isError": "yes"}),
        ];
        for v in refused {
            assert!(!is_complete_result(&v), "{v}");
            assert!(rmcp::model::CallToolResult::deserialize(&v).is_err(), "{v}");
        }
    }

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
