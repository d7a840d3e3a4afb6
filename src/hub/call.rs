//! The call path's parts: resolve a name (waiting for a starting server),
//! run one attempt against the built-in server or an MCP peer (with timeout
//! and cancellation), apply the value rules. `pipeline` puts them together.

use std::time::Duration;

use std::sync::Arc;

use rmcp::service::ServiceError;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::local::{LocalCall, Mounted, OfflineTools};
use super::Hub;
use crate::outcome::{Attempt, Reach};

/// The longest a listing waits for servers still in their first start
/// ([`Hub::settle_first_start`]); past it, the listing says which are
/// still starting.
pub const LIST_HOLD: Duration = Duration::from_secs(20);
use crate::client_context::ClientContext;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::ToolInfo;
use crate::mcp::relay::{CallLink, Inflight};
use crate::mcp::send as mcp_call;
use crate::mcp::supervisor::ServerState;
use crate::retry::RetryOverride;

/// Where one attempt goes.
enum Route {
    /// In-process tools: mounted providers, or a recording-backed server.
    Local {
        tools: Mounted,
        mounted: bool,
    },
    Peer(rmcp::Peer<rmcp::RoleClient>, Inflight),
    /// A `scope: "context"` server: the call goes to its context's
    /// instance (this is the template's handle).
    Instance(crate::mcp::supervisor::ServerHandle),
    /// Starting, restarting, stopped or unknown.
    Down,
}

impl Hub {
    /// Resolve a tool name; when its server is starting or restarting, wait
    /// for it to settle (bounded by the call's timeout) and resolve again.
    pub async fn resolve_settled(
        &self,
        tool: &str,
        timeout: Option<Duration>,
        retry: &RetryOverride,
        cancel: &CancellationToken,
    ) -> Result<Arc<ToolInfo>, HubError> {
        self.resolve_settled_in(None, tool, timeout, retry, cancel)
            .await
    }

    /// A name as it resolves now: in the aggregate, or among a view's tools.
    fn resolve_now(&self, view: Option<&str>, tool: &str) -> Result<Arc<ToolInfo>, HubError> {
        match view {
            None => self.tools().resolve(tool).cloned(),
            Some(v) => self.view(v)?.resolve(tool),
        }
    }

    /// [`Hub::resolve_settled`] within a view (`None`: the aggregate).
    pub async fn resolve_settled_in(
        &self,
        view: Option<&str>,
        tool: &str,
        timeout: Option<Duration>,
        retry: &RetryOverride,
        cancel: &CancellationToken,
    ) -> Result<Arc<ToolInfo>, HubError> {
        let mut resolved = self.resolve_now(view, tool);
        if let Err(e) = &resolved {
            if *retry == RetryOverride::Disabled {
                return resolved;
            }
            let waited = match (e.error_type, e.server.clone()) {
                (ErrorType::ServerUnavailable, Some(server)) => {
                    let wait = timeout.unwrap_or_else(|| self.default_timeout(&server));
                    self.wait_server_settled(&server, wait, cancel).await
                }
                // A bare name names no server: it may belong to one that is
                // still starting (a resume right after a restart), or to
                // one that finished starting since the first look (then
                // there is nothing to wait for, but the name resolves now).
                (ErrorType::ToolNotFound, _) => {
                    self.wait_starting_settled(timeout, cancel).await;
                    true
                }
                _ => false,
            };
            if waited {
                resolved = self.resolve_now(view, tool);
            }
        }
        resolved
    }

    /// Wait for every server that is starting or restarting right now to
    /// settle (each bounded by `timeout` or its default).
    async fn wait_starting_settled(&self, timeout: Option<Duration>, cancel: &CancellationToken) {
        let starting: Vec<String> = self
            .servers
            .iter()
            .filter(|h| {
                h.status().is_some_and(|s| {
                    matches!(s.state, ServerState::Starting | ServerState::Restarting)
                })
            })
            .map(|h| h.key().clone())
            .collect();
        if !starting.is_empty() {
            // Tests wait on this line to start a server only once a call
            // waits for it.
            tracing::debug!(servers = ?starting, "a tool name is not known yet: waiting for the servers that are starting");
        }
        for server in starting {
            let wait = timeout.unwrap_or_else(|| self.default_timeout(&server));
            self.wait_server_settled(&server, wait, cancel).await;
        }
    }

    /// Wait (at most `limit`) for every enabled server still in its first
    /// start, so a listing is not a partial aggregate passed off as whole;
    /// the names of those still starting after that. Servers that are
    /// restarting are not waited for (a crash loop must not stall lists),
    /// and once every server has started this returns at once.
    pub async fn settle_first_start(&self) -> Vec<String> {
        let limit = LIST_HOLD;
        let starting = || -> Vec<String> {
            self.servers
                .iter()
                .filter(|h| {
                    h.status()
                        .is_some_and(|s| matches!(s.state, ServerState::Starting))
                })
                .map(|h| h.key().clone())
                .collect()
        };
        let now = starting();
        if now.is_empty() {
            return now;
        }
        let never = CancellationToken::new();
        let waits = now
            .iter()
            .map(|s| self.wait_server_settled(s, limit, &never));
        futures::future::join_all(waits).await;
        starting()
    }

    /// Wait until `server` is running (true) or settles in another state
    /// (false), for at most `limit`. Event-driven: no polling.
    pub async fn wait_server_settled(
        &self,
        server: &str,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> bool {
        let mut events = self.subscribe();
        let state = |h: &Hub| h.server(server).and_then(|s| s.status()).map(|s| s.state);
        let wait = async {
            loop {
                match state(self) {
                    Some(ServerState::Running) => {
                        // Running, but its tools may not be published yet.
                        if self.tools().by_server(server).is_empty() {
                            let _ = events.recv().await;
                            continue;
                        }
                        return true;
                    }
                    // No handle: a reload is replacing the server right now.
                    Some(ServerState::Starting | ServerState::Restarting) | None => {}
                    _ => return false,
                }
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = events.recv().await {
                    return false;
                }
            }
        };
        tokio::select! {
            r = tokio::time::timeout(limit, wait) => r.unwrap_or(false),
            _ = cancel.cancelled() => false,
        }
    }

    /// The in-process tools answering for `server`: mounted providers, or a
    /// recording-backed server's recording.
    fn route(&self, server: &str) -> Route {
        if let Some(tools) = self.mounted(server) {
            return Route::Local {
                tools,
                mounted: true,
            };
        }
        // One map lookup, no handle clone: this is on every call.
        let Some(h) = self.servers.get(server) else {
            return Route::Down;
        };
        if let Some(Ok(offline)) = &h.offline {
            return Route::Local {
                tools: Mounted::of(Arc::new(OfflineTools(offline.clone()))),
                mounted: false,
            };
        }
        if h.spec.scope == crate::config::Scope::Context {
            return Route::Instance(h.clone());
        }
        match h.peer() {
            Some(live) => Route::Peer(live, h.inflight.clone()),
            None => Route::Down,
        }
    }

    /// The timeout of one attempt when the caller gave none.
    pub fn default_timeout(&self, server: &str) -> Duration {
        let cfg = self.config();
        cfg.mcp_servers
            .get(server)
            .and_then(|s| s.timeout)
            .unwrap_or(cfg.task_engine.default_timeout)
    }

    /// One attempt, bounded by `timeout` and `cancel`. Giving up sends
    /// `notifications/cancelled` to the server.
    pub async fn attempt(
        &self,
        info: &ToolInfo,
        params: &Value,
        timeout: Duration,
        cancel: &CancellationToken,
        caller: AttemptFor<'_>,
    ) -> Attempt {
        self.attempt_linked(info, params, timeout, cancel, caller, None)
            .await
    }

    /// [`Hub::attempt`] for a client call with a [`CallLink`]: while the
    /// server works on it, its progress, sampling and elicitation requests
    /// go to that call (`mcp::relay`).
    pub async fn attempt_linked(
        &self,
        info: &ToolInfo,
        params: &Value,
        timeout: Duration,
        cancel: &CancellationToken,
        caller: AttemptFor<'_>,
        link: Option<&CallLink>,
    ) -> Attempt {
        let tag = |e: HubError| e.with_server(&info.server).with_tool(&info.name);
        // Held for the whole attempt: the instance is busy while it runs.
        let mut instance = None;
        let mut timeout = timeout;
        let peer = match self.route(&info.server) {
            Route::Peer(p, inflight) => Some((p, inflight)),
            Route::Down => None,
            Route::Instance(template) => {
                let started = tokio::time::Instant::now();
                match self
                    .instance(&template, caller.context, timeout, cancel)
                    .await
                {
                    // No instance to send it to: the tool was not reached.
                    Err(e) => {
                        return Attempt {
                            result: Err(tag(e)),
                            raw: None,
                            reach: Reach::Before,
                        }
                    }
                    Ok(active) => {
                        let inflight = active.slot.handle.inflight.clone();
                        let peer = active.slot.handle.peer().map(|p| (p, inflight));
                        instance = Some(active);
                        // The start-up came out of this attempt's time.
                        timeout = timeout.saturating_sub(started.elapsed());
                        peer
                    }
                }
            }
            Route::Local { tools, mounted } => {
                let call = LocalCall {
                    params,
                    cancel,
                    session: caller.session,
                    client: caller.client,
                    context: caller.context,
                    view: caller.view,
                };
                let (result, reach) = match tools.call(&info.name, call) {
                    None => (
                        Err(HubError::new(
                            ErrorType::ToolNotFound,
                            format!("server {} has no tool \"{}\"", info.server, info.name),
                        )),
                        Reach::Before,
                    ),
                    Some(work) => tokio::select! {
                        r = tokio::time::timeout(timeout, work) => match r {
                            // A tool that stopped its own work (run_command
                            // at its timeout) may have acted before it did.
                            Ok(Err(e)) if matches!(e.error_type, ErrorType::Timeout | ErrorType::Cancelled) => {
                                (Err(e), Reach::Unknown)
                            }
                            Ok(r) => (r, Reach::Answered),
                            Err(_) => (Err(timeout_error(timeout)), Reach::Unknown),
                        },
                        _ = cancel.cancelled() => (Err(cancelled_error()), Reach::Unknown),
                    },
                };
                // Mounted providers may answer in the ToolResult shape; a
                // recording-backed server's values are replayed as they were.
                let (result, raw) = if mounted {
                    super::local::tool_result(result)
                } else {
                    (result, None)
                };
                return Attempt {
                    result: result.map_err(tag),
                    raw,
                    reach,
                };
            }
        };
        let Some((peer, inflight)) = peer else {
            return Attempt {
                result: Err(tag(HubError::new(
                    ErrorType::ServerUnavailable,
                    format!(
                        "server {} is not running (it is starting, restarting or stopped)",
                        info.server
                    ),
                ))),
                raw: None,
                reach: Reach::Before,
            };
        };
        let call = match mcp_call::call_params(&info.name, params) {
            Ok(c) => c,
            Err(m) => {
                return Attempt {
                    result: Err(tag(HubError::new(ErrorType::InvalidParams, m))),
                    raw: None,
                    reach: Reach::Before,
                }
            }
        };
        // A stateless client's retry carries a state minted by one server:
        // it goes to that server or nowhere.
        let minted_by = link.and_then(|l| l.mrtr.as_ref()?.retry_server());
        if let Some(minted) = minted_by.filter(|s| *s != info.server) {
            return Attempt {
                result: Err(tag(HubError::new(
                    ErrorType::InvalidParams,
                    format!(
                        "requestState was issued for server {minted}, but {} is served by {}",
                        info.qualified_name, info.server
                    ),
                ))),
                raw: None,
                reach: Reach::Before,
            };
        }
        let linked = link.map(|l| (&inflight, l));
        // rmcp's request future is several KB: boxed, not moved around.
        let send = Box::pin(mcp_call::send_call(&peer, call, linked));
        let response = tokio::select! {
            r = tokio::time::timeout(timeout, send) => match r {
                Ok(r) => r,
                Err(_) => return Attempt { result: Err(tag(timeout_error(timeout))), raw: None, reach: Reach::Unknown },
            },
            _ = cancel.cancelled() => return Attempt { result: Err(tag(cancelled_error())), raw: None, reach: Reach::Unknown },
        };
        match response {
            Ok(mcp_call::CallAnswer::Complete(raw)) => {
                // A large result is walked off the async worker.
                let bytes = crate::util::json_bytes(&raw);
                crate::util::heavy(bytes, || complete(raw, tag))
            }
            Ok(mcp_call::CallAnswer::Relayed) => Attempt {
                // The endpoint answers the client with the server's
                // question; nothing for history to call a result yet.
                result: Err(tag(HubError::new(
                    ErrorType::SafetyBlocked,
                    "waiting for the client's answers: the server asked for input (InputRequiredResult), handed to the client",
                )
                .with_suggestion("answer the inputRequests and send the call again with inputResponses and the requestState"))),
                raw: None,
                reach: Reach::Answered,
            },
            Ok(mcp_call::CallAnswer::Unanswerable(why)) => Attempt {
                result: Err(tag(HubError::new(
                    ErrorType::Permission,
                    format!("server {} {why}", info.server),
                )
                .with_suggestion("call the tool from an MCP client that supports these requests (at /mcp), or use a tool that needs no client input"))),
                raw: None,
                reach: Reach::Answered,
            },
            Ok(mcp_call::CallAnswer::RelayedTask) => Attempt {
                // The endpoint answers the client with the server's task;
                // its result is the server's to give, by tasks/get.
                result: Err(tag(HubError::new(
                    ErrorType::SafetyBlocked,
                    format!("server {} answered with a task of its own (CreateTaskResult), handed to the client", info.server),
                )
                .with_suggestion("follow the task with tasks/get (its id is the hub's, routed to the server)"))),
                raw: None,
                reach: Reach::Answered,
            },
            Ok(mcp_call::CallAnswer::Task) => Attempt {
                result: Err(tag(HubError::new(
                    ErrorType::Unknown,
                    format!("server {} answered with a task, which the hub does not relay yet", info.server),
                ))),
                raw: None,
                reach: Reach::Answered,
            },
            Err(mcp_call::CallFailure { error: e, sent }) => {
                let reach = failure_reach(&e, sent);
                if matches!(
                    e,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) {
                    // The first to see the server gone says so (health too).
                    match &instance {
                        Some(active) => active.slot.handle.observe_exit(),
                        None => {
                            if let Some(h) = self.servers.get(&info.server) {
                                h.observe_exit();
                            }
                        }
                    }
                }
                Attempt {
                    result: Err(tag(service_error(&info.server, e))),
                    raw: None,
                    reach,
                }
            }
        }
    }
}

/// Who a call is made for: the session (history, observers) and the
/// client context (which instance of a per-context server runs it).
#[derive(Clone, Copy)]
pub struct AttemptFor<'a> {
    pub session: &'a str,
    /// The client of `clients` that made the call (`None`: the main token).
    pub client: Option<&'a str>,
    pub context: &'a ClientContext,
    /// The view the call is made in: a local tool that calls further
    /// (`hub__tool_batch`, `hub__call_tool`) calls within it.
    pub view: Option<&'a str>,
}

/// A complete `tools/call` result: `isError` makes it a classified error
/// with its text; else its `structuredContent`, or its text blocks joined.
/// The server's JSON stays whole as `raw`.
fn complete(raw: Value, tag: impl Fn(HubError) -> HubError) -> Attempt {
    let text = mcp_call::result_text(&raw);
    if raw.get("isError").and_then(Value::as_bool) == Some(true) {
        let msg = if text.is_empty() {
            "the tool reported an error without text".to_string()
        } else {
            text
        };
        return Attempt {
            result: Err(tag(HubError::classified(msg))),
            raw: Some(raw),
            reach: Reach::Answered,
        };
    }
    let value = match raw.get("structuredContent") {
        Some(_) => mcp_call::result_value(&raw),
        None => Value::String(text),
    };
    Attempt {
        result: Ok(value),
        raw: Some(raw),
        reach: Reach::Answered,
    }
}

/// How far a failed `tools/call` got. Not handed to rmcp's loop, or a send
/// that never connected (refused, no such host): the server never read it.
/// An answer (a JSON-RPC error, a reply of the wrong shape) is the
/// server's own. Anything else (the connection lost while waiting, a send
/// that failed midway) may have been read and acted on.
fn failure_reach(e: &ServiceError, sent: bool) -> Reach {
    match e {
        _ if !sent => Reach::Before,
        ServiceError::McpError(_) | ServiceError::UnexpectedResponse => Reach::Answered,
        ServiceError::TransportSend(t) if crate::errors::never_connected(&t.to_string()) => {
            Reach::Before
        }
        _ => Reach::Unknown,
    }
}

fn timeout_error(t: Duration) -> HubError {
    HubError::new(
        ErrorType::Timeout,
        format!("the call did not finish within {} ms", t.as_millis()),
    )
}

fn cancelled_error() -> HubError {
    HubError::new(ErrorType::Cancelled, "the call was cancelled")
}

/// Map an rmcp error to the wire classes.
fn service_error(server: &str, e: ServiceError) -> HubError {
    match e {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => HubError::new(
            ErrorType::ServerUnavailable,
            format!("server {server} closed its connection during the call (it exited or crashed); it is being restarted"),
        ),
        ServiceError::Timeout { timeout } => timeout_error(timeout),
        ServiceError::Cancelled { reason } => HubError::new(
            ErrorType::Cancelled,
            format!("the call was cancelled: {}", reason.unwrap_or_default()),
        ),
        ServiceError::McpError(data) => {
            let msg = format!("MCP error {}: {}", data.code.0, data.message);
            // An answer too large to read (`mcp::pipes`), said by the hub.
            let oversized = data
                .data
                .as_ref()
                .is_some_and(|d| d.get(crate::mcp::pipes::OVERSIZED).is_some());
            if oversized {
                return HubError::new(ErrorType::LimitExceeded, data.message);
            }
            match data.code.0 {
                -32602 => HubError::new(ErrorType::InvalidParams, msg),
                _ => HubError::classified(msg),
            }
        }
        other => HubError::classified(other.to_string()),
    }
}
