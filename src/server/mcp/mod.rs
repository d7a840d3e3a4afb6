//! `/mcp`: the whole aggregate as one MCP server over Streamable HTTP, on
//! the same listener as `/ws` (rmcp's `StreamableHttpService`).
//!
//! - `handler`: the `ServerHandler` (tools, resources, prompts, completion,
//!   logging, subscriptions); `call`: `tools/call` through the hub's call
//!   path; `sessions`: open sessions and what reaches them unasked (the
//!   hub's `Relay`); `names`: the names tools and prompts have here;
//!   `in_view`: what `/mcp/<view>` serves beyond tools; `caps`: the cap
//!   each `tools/call` (and each task) takes its place under.
//! - The gate (`server::gate`) runs on every request before rmcp sees it:
//!   Host, Origin, `Authorization: Bearer`. rmcp's own Host check is off
//!   (the gate's is the hub's rule); its Origin check stays off likewise.

mod caps;
mod handler;
mod idle;
mod in_view;
mod limit;
mod mrtr;
pub mod names;
mod paging;
mod polls;
mod prompt_input;
mod revoke;
mod sessions;
mod stateless;
mod stateless_call;
mod tasks;
mod tools_call;
mod view;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use rmcp::model::Prompt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ErrorData;
use serde_json::Value;

use super::gate::Gate;
use crate::app::App;
use crate::mcp::registry::assign_qualified_names;
use names::{exposed_names, NameCache, ToolNames};
use sessions::McpSessions;

/// JSON-RPC error code of a request the gate or the connection limit
/// refused (implementation-defined server error range).
const REFUSED: i64 = -32001;
const SESSION_HEADER: &str = "mcp-session-id";

/// What every handler instance shares.
pub struct Endpoint {
    pub app: App,
    sessions: Arc<McpSessions>,
    /// The sessions' idleness (`server.mcpSessionIdle`), kept by `limit`.
    idle: Arc<idle::Idle>,
    names: NameCache,
    /// Exposed prompt name -> (server, the server's own name), as last listed.
    prompt_names: Mutex<BTreeMap<String, (String, String)>>,
    /// The `requestState`s of the hub's own questions to stateless clients.
    mrtr: mrtr::States,
    /// Stateless clients' calls held open for their answers.
    held: stateless_call::HeldCalls,
    /// Stateless requests' calls in flight, per principal.
    stateless: caps::StatelessInFlight,
    /// Long calls' streams, ended for the client to resume (SEP-1699).
    polls: polls::Polls,
}

impl Endpoint {
    /// The tool names `/mcp` shows for the current snapshot.
    pub fn tool_names(&self) -> Arc<ToolNames> {
        let bare = self.app.hub.config().server.mcp_bare_names;
        self.names.get(&self.app.hub.tools(), bare)
    }

    /// The name a `tools/call` names, as the call path resolves it: in a
    /// view the view's own (`hub::views` resolves it), else the aggregate's.
    pub fn call_name(
        &self,
        name: &str,
        cx: &rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> String {
        match view::of(cx) {
            Some(_) => name.to_string(),
            None => self.tool_names().to_call(name),
        }
    }

    /// Every server's prompts under their exposed names (remembered for
    /// `prompts/get` and completion), with the server's name.
    pub async fn prompts(&self) -> Vec<(String, Prompt)> {
        let listed = self.app.hub.list_prompts().await;
        let pairs: Vec<(&str, &str)> = listed
            .iter()
            .map(|(s, p)| (s.as_str(), p.name.as_str()))
            .collect();
        let qualified = assign_qualified_names(&pairs);
        let items: Vec<(&str, &str)> = listed
            .iter()
            .zip(&qualified)
            .map(|((_, p), q)| (p.name.as_str(), q.as_str()))
            .collect();
        let bare = self.app.hub.config().server.mcp_bare_names;
        let exposed = exposed_names(&items, bare);
        let mut map = BTreeMap::new();
        let mut out = Vec::with_capacity(listed.len());
        for ((server, prompt), name) in listed.into_iter().zip(exposed) {
            map.insert(name.clone(), (server.clone(), prompt.name.clone()));
            let mut p = prompt;
            p.name = name;
            out.push((server, p));
        }
        if let Ok(mut m) = self.prompt_names.lock() {
            *m = map;
        }
        out
    }

    /// The server and own name of an exposed prompt name.
    pub async fn prompt_route(&self, exposed: &str) -> Result<(String, String), ErrorData> {
        let known = |ep: &Endpoint| {
            ep.prompt_names
                .lock()
                .ok()
                .and_then(|m| m.get(exposed).cloned())
        };
        if let Some(r) = known(self) {
            return Ok(r);
        }
        self.prompts().await;
        known(self).ok_or_else(|| no_prompt(exposed))
    }
}

/// The error for a prompt name nobody lists (also what a view answers for
/// another server's prompt).
fn no_prompt(exposed: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("no prompt named {exposed:?}; call prompts/list to see the prompts (named server__prompt)"),
        None,
    )
}

/// The `/mcp` routes, gated; installs the endpoint as the hub's relay.
pub fn router(app: App, gate: Gate) -> Router {
    let hub = app.hub.clone();
    let sessions = McpSessions::new(hub.clone());
    hub.set_relay(sessions.clone());
    sessions::spawn_tool_watch(hub.clone(), sessions.clone());
    // The hub, not rmcp, ends a session idle for `server.mcpSessionIdle`
    // (read at start): rmcp's clock would end it during a long call.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let idle = idle::Idle::new(hub.config().server.mcp_session_idle);
    idle::spawn_reaper(idle.clone(), manager.clone(), hub.shutdown.child_token());
    revoke::spawn(hub.clone(), sessions.clone(), manager.clone());
    let streams = polls::Streams::new(manager);
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_json_response(true)
        .with_max_request_body_bytes(hub.config().server.max_message_bytes.max(64 * 1024))
        .with_cancellation_token(hub.shutdown.child_token());
    let ep = Arc::new(Endpoint {
        app,
        sessions,
        idle,
        names: NameCache::default(),
        prompt_names: Mutex::new(BTreeMap::new()),
        mrtr: mrtr::States::default(),
        held: stateless_call::HeldCalls::default(),
        stateless: caps::StatelessInFlight::default(),
        polls: polls::Polls::new(streams.clone(), config.sse_retry),
    });
    let handlers = ep.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler::HubServer::new(handlers.clone())),
        streams,
        config,
    );
    Router::new()
        .route_service("/mcp", service.clone())
        .route_service("/mcp/{view}", service)
        .route_layer(axum::middleware::from_fn_with_state(
            ep.clone(),
            limit::limit,
        ))
        .route_layer(axum::middleware::from_fn_with_state(gate, gated))
}

/// The gate in front of rmcp; a refusal is a JSON-RPC error body that says
/// how to get in.
async fn gated(State(gate): State<Gate>, mut req: Request, next: Next) -> Response {
    let opened = gate.check_mcp(req.headers()).and_then(|who| {
        let view = gate.open(&who, view::in_path(req.uri().path()))?;
        Ok((view, who.client_name().map(Arc::from)))
    });
    match opened {
        Ok((view, client)) => {
            if let Some(v) = view {
                req.extensions_mut().insert(view::McpView(v.into()));
            }
            if let Some(c) = client {
                req.extensions_mut().insert(view::McpClient(c));
            }
            next.run(req).await
        }
        Err(r) => {
            tracing::warn!(status = %r.status, reason = %r.message, "MCP request refused by the gate");
            let mut err = crate::errors::HubError::new(
                crate::errors::ErrorType::Unauthorized,
                r.message.clone(),
            );
            if let Some(s) = r.suggestion.clone() {
                err = err.with_suggestion(s);
            }
            let mut resp = refusal(r.status, Value::Null, err);
            if r.status == StatusCode::UNAUTHORIZED {
                resp.headers_mut().insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Bearer realm=\"toolhub\""),
                );
            }
            resp
        }
    }
}

/// A refused request: `status` with a JSON-RPC error whose message is the
/// error's and whose `data` is the hub's error object, so MCP clients show
/// what happened and what to do.
fn refusal(status: StatusCode, id: Value, err: crate::errors::HubError) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": REFUSED, "message": err.message, "data": err},
    });
    (status, Json(body)).into_response()
}

/// A request body, read whole up to `server.maxMessageBytes` (at least
/// 64 KiB); a larger one is answered 413.
async fn read_body(ep: &Endpoint, body: axum::body::Body) -> Result<axum::body::Bytes, Response> {
    let limit = ep.app.hub.config().server.max_message_bytes.max(64 * 1024);
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let msg = format!(
            "the request body could not be read ({e}); a request may be at most {limit} bytes (server.maxMessageBytes)"
        );
        (StatusCode::PAYLOAD_TOO_LARGE, msg).into_response()
    })
}
