//! MCP sessions count in `server.maxConnections` like `/ws` connections.
//! An `initialize` (the request that opens a session) takes a [`Slot`]
//! first, or is refused with 503 and a JSON-RPC error saying the limit and
//! what to do. The slot rides the request to the session's handler
//! (`handler::HubServer::initialize`), which holds it until rmcp drops the
//! session (DELETE, idle reaping, shutdown, a handshake never finished);
//! a request that never reaches the handler drops it on the way.
//!
//! It also keeps each session's idleness for the reaper (`idle`): the
//! sessions an `initialize` opens, and each request of a session while it
//! is in flight.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::model::ProtocolVersion;
use serde_json::Value;

use super::Endpoint;
use crate::errors::{ErrorType, HubError};
use crate::server::slots::Slot;

const VERSION_HEADER: &str = "mcp-protocol-version";

/// A session's slot on its way to the handler (request extensions must be
/// `Clone`; the slot is taken out once).
#[derive(Clone)]
pub struct Ticket(Arc<Mutex<Option<Slot>>>);

impl Ticket {
    pub fn take(&self) -> Option<Slot> {
        self.0.lock().ok().and_then(|mut s| s.take())
    }
}

/// The middleware in front of rmcp (inside the gate): only a POST without
/// `Mcp-Session-Id` can open a session, so only those are read here.
pub async fn limit(State(ep): State<Arc<Endpoint>>, req: Request, next: Next) -> Response {
    if let Some(sid) = req.headers().get(super::SESSION_HEADER) {
        if let Some(refused) = era_mismatch(&ep, sid, req.headers()) {
            return refused;
        }
        let busy = sid.to_str().ok().and_then(|id| ep.idle.busy(id));
        return super::idle::hold(next.run(req).await, busy);
    }
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let bytes: Bytes = match super::read_body(&ep, body).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let Some(id) = initialize_id(&bytes) else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    match Slot::reserve(&ep.app.hub) {
        Ok(slot) => {
            parts
                .extensions
                .insert(Ticket(Arc::new(Mutex::new(Some(slot)))));
        }
        Err(e) => return super::refusal(StatusCode::SERVICE_UNAVAILABLE, id, e),
    }
    let resp = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    // The session it opened is idle from now on until its next request.
    if let Some(sid) = resp
        .headers()
        .get(super::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        ep.idle.opened(sid);
    }
    resp
}

/// A request of a session (whose `initialize` negotiated a version with a
/// handshake, 2025-11-25 at the newest) that names a sessionless version
/// (2026-07-28 on) in `MCP-Protocol-Version`: the session's spec wants 400
/// for a version it does not speak, and rmcp's would say only that
/// 2026-07-28 `_meta` fields are missing. Other versions are rmcp's to judge.
fn era_mismatch(ep: &Endpoint, sid: &HeaderValue, headers: &HeaderMap) -> Option<Response> {
    let asked = headers.get(VERSION_HEADER)?.to_str().ok()?;
    // The dates order as strings (as in rmcp's `has_initialize`).
    if asked < ProtocolVersion::NO_INITIALIZE.as_str() {
        return None;
    }
    let negotiated = ep.sessions.negotiated(sid.to_str().ok()?)?;
    let err = HubError::new(
        ErrorType::InvalidMessage,
        format!(
            "this session negotiated MCP {negotiated} at initialize, but the request says MCP-Protocol-Version: {asked}"
        ),
    )
    .with_suggestion(format!(
        "send MCP-Protocol-Version: {negotiated} with every request of this session; to speak {asked}, send requests without initialize and without Mcp-Session-Id"
    ));
    Some(super::refusal(StatusCode::BAD_REQUEST, Value::Null, err))
}

/// The JSON-RPC id of an `initialize` request; `None` for anything else.
fn initialize_id(body: &[u8]) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(default)]
        id: Value,
    }
    let p: Probe = serde_json::from_slice(body).ok()?;
    (p.method.as_deref() == Some("initialize")).then_some(p.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_initialize_takes_a_slot() {
        let init = br#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}"#;
        assert_eq!(initialize_id(init), Some(json!(7)));
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert_eq!(initialize_id(list), None);
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#;
        assert_eq!(initialize_id(batch), None);
        assert_eq!(initialize_id(b"not json"), None);
    }
}
