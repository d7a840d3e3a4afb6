//! MCP sessions count in `server.maxConnections` like `/ws` connections.
//! An `initialize` (the request that opens a session) takes a [`Slot`]
//! first, or is refused with 503 and a JSON-RPC error saying the limit and
//! what to do. The slot rides the request to the session's handler
//! (`handler::HubServer::initialize`), which holds it until rmcp drops the
//! session (DELETE, idle reaping, shutdown, a handshake never finished);
//! a request that never reaches the handler drops it on the way.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;

use super::Endpoint;
use crate::server::slots::Slot;

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
    if req.method() != Method::POST || req.headers().contains_key(super::SESSION_HEADER) {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let bytes: Bytes = match super::read_body(&ep, body).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    if let Some(id) = initialize_id(&bytes) {
        match Slot::reserve(&ep.app.hub) {
            Ok(slot) => {
                parts
                    .extensions
                    .insert(Ticket(Arc::new(Mutex::new(Some(slot)))));
            }
            Err(e) => return super::refusal(StatusCode::SERVICE_UNAVAILABLE, id, e),
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
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
