//! `server.maxConnections`: one count of the clients the hub serves, `/ws`
//! connections and `/mcp` sessions alike. A [`Slot`] is taken before a
//! client is let in and given back when it is dropped, however the client
//! ends (closed, evicted, a failed upgrade, a DELETEd or reaped session).

use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::errors::{ErrorType, HubError};
use crate::hub::Hub;

/// One client's place in `server.maxConnections`, and its token in
/// `Hub::clients`, which shutdown waits on.
pub struct Slot {
    hub: Hub,
    _client: tokio_util::task::task_tracker::TaskTrackerToken,
}

impl Slot {
    /// Take a place, or say why not: the limit is reached.
    pub fn reserve(hub: &Hub) -> Result<Slot, HubError> {
        let max = hub.config().server.max_connections;
        let prev = hub.connections.fetch_add(1, Ordering::SeqCst);
        if prev >= max {
            hub.connections.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                limit = max,
                "connection refused: server.maxConnections reached"
            );
            return Err(full(max));
        }
        Ok(Slot {
            hub: hub.clone(),
            _client: hub.clients.token(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.hub.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The error of a refused client.
fn full(max: usize) -> HubError {
    HubError::new(
        ErrorType::LimitExceeded,
        format!(
            "the hub already serves {max} clients (server.maxConnections counts /ws connections and /mcp sessions)"
        ),
    )
    .with_suggestion(format!(
        "close a client the hub serves (a /ws connection, or an MCP session: DELETE /mcp with its Mcp-Session-Id), or raise server.maxConnections above {max} in config.json, then try again"
    ))
}

/// A `/ws` refusal: HTTP 503 with the error object.
pub fn refused(err: HubError) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(serde_json::json!({ "error": err })),
    )
        .into_response()
}
