//! The direct path for `tools/call` at `/mcp`.
//!
//! rmcp serves every request of a session through the session's worker task
//! and answers it as an SSE stream (a priming event, the response, the end
//! of the stream), which costs several task hops and writes per call. The
//! spec lets a server answer a POSTed request with one `application/json`
//! object instead, so the plainest and most frequent request, a `tools/call`
//! that asks for no progress from a client that offers neither sampling nor
//! elicitation, is answered here, in the connection's own task, through the
//! same call path (`call::run`: resolve, safety gate, `Hub::call`, history,
//! recorder, runs). Everything else (initialize, lists, resources, a call
//! with a progress token, any request of a client that can be asked
//! something back, headers rmcp must validate) goes to rmcp unchanged.
//!
//! What rmcp would have done for such a call is done here too:
//! - `notifications/cancelled` naming a call in flight here cancels it (and
//!   the upstream call with it); a client that drops the connection cancels
//!   it likewise;
//! - a server's log message during the call goes to the session's
//!   standalone stream (there is no request stream to carry it);
//! - a session is ended after `server.mcpSessionIdle` without any request
//!   (5 minutes by default), the rule rmcp
//!   applies to its own sessions (whose idle clock no longer sees the calls
//!   answered here, so rmcp's own one is off and this one replaces it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dashmap::DashMap;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::{Peer, RoleServer};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::sessions::SessionState;
use super::Endpoint;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The first protocol version without sessions.
const STATELESS_ERA: &str = "2026-07-28";

/// A session the direct path may serve.
struct Known {
    state: Arc<SessionState>,
    peer: Peer<RoleServer>,
    /// The client can be asked nothing back (no sampling, no elicitation):
    /// its calls need no request stream.
    plain: bool,
    /// Milliseconds since `FastPath::epoch` of the last request.
    last_seen: AtomicU64,
}

/// The sessions the direct path knows and the calls it has in flight.
pub struct FastPath {
    epoch: Instant,
    known: DashMap<Arc<str>, Known>,
    /// (session id, JSON-RPC id as JSON text) → the call's cancel token.
    inflight: DashMap<(Arc<str>, String), CancellationToken>,
    /// Told when a session is added.
    added: tokio::sync::Notify,
}

impl FastPath {
    pub fn new() -> FastPath {
        FastPath {
            epoch: Instant::now(),
            known: DashMap::new(),
            inflight: DashMap::new(),
            added: tokio::sync::Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A session finished its handshake; `headers` are those of its
    /// `notifications/initialized` POST, which carry its id.
    pub fn add(
        &self,
        headers: Option<&HeaderMap>,
        state: Arc<SessionState>,
        peer: Peer<RoleServer>,
    ) {
        let Some(id) = headers
            .and_then(|h| h.get(SESSION_HEADER))
            .and_then(|v| v.to_str().ok())
        else {
            return; // not a legacy HTTP session: rmcp serves all of it
        };
        let Some(info) = peer.peer_info() else {
            return;
        };
        let caps = &info.capabilities;
        let plain = caps.sampling.is_none() && caps.elicitation.is_none();
        let id: Arc<str> = id.into();
        state.set_http_id(id.clone());
        self.known.insert(
            id,
            Known {
                state,
                peer,
                plain,
                last_seen: AtomicU64::new(self.now_ms()),
            },
        );
        self.added.notify_waiters();
    }

    /// Wait (at most `limit`) until rmcp's handler has seen the session's
    /// `notifications/initialized`, so the session's first call after the
    /// `202` can already take the direct path.
    async fn wait_added(&self, id: &str, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let added = self.added.notified();
            tokio::pin!(added);
            added.as_mut().enable();
            if self.known.contains_key(id) {
                return;
            }
            if tokio::time::timeout_at(deadline, added).await.is_err() {
                return; // served by rmcp until it is known
            }
        }
    }

    /// The session ended (its last handler was dropped).
    pub fn remove(&self, http_id: &str) {
        self.known.remove(http_id);
    }

    fn touch(&self, id: &str) -> bool {
        match self.known.get(id) {
            Some(k) => {
                k.last_seen.store(self.now_ms(), Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// End the sessions idle for longer than `idle`, every `idle / 10`,
    /// until `shutdown`.
    pub fn spawn_reaper(
        self: &Arc<Self>,
        manager: Arc<LocalSessionManager>,
        idle: Duration,
        shutdown: CancellationToken,
    ) {
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(idle / 10);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.cancelled() => return,
                }
                let limit = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
                let now = me.now_ms();
                let stale: Vec<Arc<str>> = me
                    .known
                    .iter()
                    .filter(|k| now.saturating_sub(k.last_seen.load(Ordering::Relaxed)) > limit)
                    .map(|k| k.key().clone())
                    .collect();
                for id in stale {
                    let key = me.known.remove(&id).map(|(_, k)| k.state.key.clone());
                    tracing::info!(session = ?key, idle_secs = idle.as_secs(), "MCP session ended: idle");
                    if let Err(e) = manager.close_session(&id.to_string().into()).await {
                        tracing::warn!(session = ?key, error = %e, "an idle MCP session could not be closed");
                    }
                }
            }
        });
    }
}

impl Default for FastPath {
    fn default() -> Self {
        FastPath::new()
    }
}

/// What one POST is, as far as the direct path cares.
enum Plan {
    Call {
        id: Value,
        params: CallToolRequestParams,
    },
    Cancel(String),
    Initialized,
    Pass,
}

fn plan(body: &[u8]) -> Plan {
    let Ok(Value::Object(mut m)) = serde_json::from_slice::<Value>(body) else {
        return Plan::Pass;
    };
    match m.get("method").and_then(Value::as_str) {
        Some("tools/call") => {
            let id = match m.remove("id") {
                Some(id @ (Value::Number(_) | Value::String(_))) => id,
                _ => return Plan::Pass,
            };
            let params = m.remove("params").unwrap_or(Value::Null);
            let wants_progress = params
                .pointer("/_meta/progressToken")
                .is_some_and(|t| !t.is_null());
            if wants_progress {
                return Plan::Pass;
            }
            match serde_json::from_value::<CallToolRequestParams>(params) {
                Ok(params) => Plan::Call { id, params },
                Err(_) => Plan::Pass, // rmcp says what is wrong with it
            }
        }
        Some("notifications/initialized") => Plan::Initialized,
        Some("notifications/cancelled") => match m.get("params").and_then(|p| p.get("requestId")) {
            Some(id) => Plan::Cancel(id.to_string()),
            None => Plan::Pass,
        },
        _ => Plan::Pass,
    }
}

/// Removes a call from `inflight` when its answer is sent or its client
/// went away, and cancels it in the second case.
struct InFlight<'a> {
    fast: &'a FastPath,
    key: (Arc<str>, String),
    token: CancellationToken,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.fast.inflight.remove(&self.key);
        self.token.cancel(); // a no-op once the call has finished
    }
}

/// The middleware in front of rmcp (inside the gate).
pub async fn direct(State(ep): State<Arc<Endpoint>>, req: Request, next: Next) -> Response {
    let fast = &ep.fast;
    let sid = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(Arc::<str>::from);
    let Some(sid) = sid else {
        return next.run(req).await;
    };
    let known = fast.touch(&sid);
    if req.method() != Method::POST || (known && !servable_headers(fast, &sid, req.headers())) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let limit = ep.app.hub.config().server.max_message_bytes.max(64 * 1024);
    let bytes: Bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(e) => {
            let msg = format!(
                "the request body could not be read ({e}); a request may be at most {limit} bytes (server.maxMessageBytes)"
            );
            return (StatusCode::PAYLOAD_TOO_LARGE, msg).into_response();
        }
    };
    let pass = |parts, bytes| next.run(Request::from_parts(parts, Body::from(bytes)));
    match plan(&bytes) {
        Plan::Call { id, params } if known && name_agrees(&parts.headers, &params) => {
            call(&ep, sid, id, params).await
        }
        Plan::Cancel(id) => match fast.inflight.get(&(sid.clone(), id)).map(|t| t.clone()) {
            Some(token) => {
                token.cancel();
                StatusCode::ACCEPTED.into_response()
            }
            None => pass(parts, bytes).await,
        },
        Plan::Initialized if !known => {
            let resp = pass(parts, bytes).await;
            if resp.status().is_success() {
                fast.wait_added(&sid, Duration::from_secs(2)).await;
            }
            resp
        }
        Plan::Call { .. } | Plan::Initialized | Plan::Pass => pass(parts, bytes).await,
    }
}

/// Headers the direct path can answer for: a known plain session, a
/// session-era version (or none), and SEP-2243 routing headers only as far as
/// they are checked here (`Mcp-Method: tools/call`, `Mcp-Name` in `names`);
/// `Mcp-Param-*` headers go to rmcp, which validates them against the schema.
fn servable_headers(fast: &FastPath, sid: &str, h: &HeaderMap) -> bool {
    let Some(k) = fast.known.get(sid) else {
        return false;
    };
    let method_ok = h
        .get("mcp-method")
        .is_none_or(|m| m.as_bytes() == b"tools/call");
    let params_in_headers = h.keys().any(|k| k.as_str().starts_with("mcp-param-"));
    if !k.plain || !method_ok || params_in_headers {
        return false;
    }
    let accepts_json = h
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json") || v.contains("*/*"));
    let version_ok = match h.get(VERSION_HEADER).map(|v| v.to_str()) {
        None => true,
        Some(Ok(v)) => legacy_version(v),
        Some(Err(_)) => false,
    };
    accepts_json && version_ok
}

/// A version rmcp knows that has sessions (before 2026-07-28, whose
/// requests rmcp always serves statelessly); the dates order as strings.
fn legacy_version(v: &str) -> bool {
    v < STATELESS_ERA
        && rmcp::model::ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|k| k.as_str() == v)
}

/// An `Mcp-Name` header, when present, names the tool the body calls (a
/// plain value; an encoded or differing one is rmcp's to judge).
fn name_agrees(h: &HeaderMap, params: &CallToolRequestParams) -> bool {
    h.get("mcp-name")
        .is_none_or(|n| n.as_bytes() == params.name.as_bytes())
}

async fn call(ep: &Endpoint, sid: Arc<str>, id: Value, params: CallToolRequestParams) -> Response {
    let Some((state, peer)) = ep
        .fast
        .known
        .get(&sid)
        .map(|k| (k.state.clone(), k.peer.clone()))
    else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let token = ep.app.hub.shutdown.child_token();
    let key = (sid, id.to_string());
    ep.fast.inflight.insert(key.clone(), token.clone());
    let _guard = InFlight {
        fast: &ep.fast,
        key,
        token: token.clone(),
    };
    let result = super::call::call_direct(ep, &state.key, &peer, params, token).await;
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
    let mut resp = Response::new(Body::from(body.to_string()));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_call_or_a_cancel_is_taken() {
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t__echo","arguments":{"message":"m"}}}"#;
        assert!(matches!(plan(call), Plan::Call { .. }));
        let progress = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e","_meta":{"progressToken":1}}}"#;
        assert!(matches!(plan(progress), Plan::Pass));
        let no_id = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"e"}}"#;
        assert!(matches!(plan(no_id), Plan::Pass));
        let bad = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#;
        assert!(
            matches!(plan(bad), Plan::Pass),
            "rmcp answers a malformed call"
        );
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert!(matches!(plan(list), Plan::Pass));
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e"}}]"#;
        assert!(matches!(plan(batch), Plan::Pass));
        let cancel =
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#;
        assert!(matches!(plan(cancel), Plan::Cancel(id) if id == "\"a\""));
    }

    #[test]
    fn only_session_era_versions_are_served_directly() {
        assert!(legacy_version("2025-06-18"));
        assert!(legacy_version("2025-11-25"));
        assert!(!legacy_version("2026-07-28"), "served statelessly by rmcp");
        assert!(!legacy_version("1999-01-01"), "unknown: rmcp says so");
    }
}
