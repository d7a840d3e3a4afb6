//! Sending one `tools/call` upstream: through rmcp's peer for a call with
//! a client to relay to (`send_call`), or on a stdio server's fast lane
//! (`send_lane_call`), with the same answers and errors either way.

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::Value;

use crate::mcp::relay::{CallLink, Inflight};

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
) -> Result<CallToolResponse, ServiceError> {
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
        ServerResult::CallToolResult(r) => Ok(CallToolResponse::Complete(r)),
        ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
        ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// [`send_call`] for a call with no client to relay to, on a stdio
/// server's fast lane (`mcp::lane`): the same answers and errors, without
/// rmcp's service loop.
pub async fn send_lane_call(
    lane: &crate::mcp::lane::Lane,
    tool: &str,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Result<CallToolResponse, ServiceError> {
    use crate::mcp::lane::LaneError;
    use serde::Deserialize;
    let result = match lane.call_tool(tool, arguments).await {
        Ok(v) => v,
        Err(LaneError::Closed) => return Err(ServiceError::TransportClosed),
        Err(LaneError::Rpc(e)) => return Err(ServiceError::McpError(e)),
    };
    if let Ok(r) = rmcp::model::CallToolResult::deserialize(&result) {
        return Ok(CallToolResponse::Complete(r));
    }
    // Not a plain result: decode it the way rmcp would have.
    match ServerResult::deserialize(&result) {
        Ok(ServerResult::InputRequiredResult(r)) => Ok(CallToolResponse::InputRequired(r)),
        Ok(ServerResult::CreateTaskResult(r)) => Ok(CallToolResponse::Task(r)),
        _ => Err(ServiceError::UnexpectedResponse),
    }
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
