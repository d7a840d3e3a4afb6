//! The call path: resolve a name, run one attempt against the built-in
//! server or an MCP peer (with timeout and cancellation), apply the value
//! rules, and let the retry manager decide about further attempts.

use std::time::Duration;

use std::sync::Arc;

use rmcp::model::CallToolResponse;
use rmcp::service::ServiceError;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::local::{LocalCall, Mounted, OfflineTools};
use super::outcome::{Attempt, CallOutcome, CallRequest};
use super::Hub;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::ToolInfo;
use crate::mcp::relay::CallLink;
use crate::mcp::supervisor::ServerState;
use crate::mcp::upstream;
use crate::retry::RetryOverride;

impl Hub {
    /// Resolve, gate, call with retries, and record in history.
    pub async fn call(&self, req: CallRequest) -> CallOutcome {
        self.call_with(req, |r| r).await
    }

    /// Like [`Hub::call`], with `post` judging each attempt's result (a
    /// batch step's `expect` turns a miss into ASSERTION_FAILED, retried).
    pub async fn call_with<F>(&self, req: CallRequest, post: F) -> CallOutcome
    where
        F: Fn(Result<Value, HubError>) -> Result<Value, HubError>,
    {
        let started = tokio::time::Instant::now();
        let resolved = self
            .resolve_settled(&req.tool, req.timeout, &req.retry, &req.cancel)
            .await;
        let info = match resolved {
            Ok(info) => info,
            Err(e) => {
                let out = CallOutcome::failed(&req.tool, e, started.elapsed());
                self.history
                    .record(&req.session, &req.params, &out, &self.config().security);
                return out;
            }
        };
        if let Err(e) = self.pin_check(&info) {
            let mut out = CallOutcome::failed(&req.tool, e, started.elapsed());
            out.qualified_name = Some(info.qualified_name.clone());
            out.server = Some(info.server.clone());
            self.history
                .record(&req.session, &req.params, &out, &self.config().security);
            return out;
        }
        let mut out = self.run_with(&info, &req, post).await;
        out.duration_ms = started.elapsed().as_millis() as u64;
        self.history
            .record(&req.session, &req.params, &out, &self.config().security);
        out
    }

    /// Resolve a tool name; when its server is starting or restarting, wait
    /// for it to settle (bounded by the call's timeout) and resolve again.
    pub async fn resolve_settled(
        &self,
        tool: &str,
        timeout: Option<Duration>,
        retry: &RetryOverride,
        cancel: &CancellationToken,
    ) -> Result<ToolInfo, HubError> {
        let mut resolved = self.tools().resolve(tool).cloned();
        if let Err(e) = &resolved {
            if let (ErrorType::ServerUnavailable, Some(server)) = (e.error_type, e.server.clone()) {
                if *retry != RetryOverride::Disabled {
                    let wait = timeout.unwrap_or_else(|| self.default_timeout(&server));
                    if self.wait_server_settled(&server, wait, cancel).await {
                        resolved = self.tools().resolve(tool).cloned();
                    }
                }
            }
        }
        resolved
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
    fn local_for(&self, server: &str) -> Option<Mounted> {
        if let Some(m) = self.mounted(server) {
            return Some(m);
        }
        let offline = self.server(server)?.offline.clone()?.ok()?;
        Some(Mounted::of(Arc::new(OfflineTools(offline))))
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
        session: &str,
    ) -> Attempt {
        self.attempt_linked(info, params, timeout, cancel, session, None)
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
        session: &str,
        link: Option<&CallLink>,
    ) -> Attempt {
        let tag = |e: HubError| e.with_server(&info.server).with_tool(&info.name);
        if let Some(local) = self.local_for(&info.server) {
            let call = LocalCall {
                params,
                cancel,
                session,
            };
            let result = match local.call(&info.name, call) {
                None => Err(HubError::new(
                    ErrorType::ToolNotFound,
                    format!("server {} has no tool \"{}\"", info.server, info.name),
                )),
                Some(work) => tokio::select! {
                    r = tokio::time::timeout(timeout, work) => match r {
                        Ok(r) => r,
                        Err(_) => Err(timeout_error(timeout)),
                    },
                    _ = cancel.cancelled() => Err(cancelled_error()),
                },
            };
            return Attempt {
                result: result.map_err(tag),
                raw: None,
            };
        }
        let handle = self.server(&info.server);
        let Some(peer) = handle.as_ref().and_then(|h| h.peer()) else {
            return Attempt {
                result: Err(tag(HubError::new(
                    ErrorType::ServerUnavailable,
                    format!(
                        "server {} is not running (it is starting, restarting or stopped)",
                        info.server
                    ),
                ))),
                raw: None,
            };
        };
        let call = match upstream::call_params(&info.name, params) {
            Ok(c) => c,
            Err(m) => {
                return Attempt {
                    result: Err(tag(HubError::new(ErrorType::InvalidParams, m))),
                    raw: None,
                }
            }
        };
        let inflight = handle.map(|h| h.inflight.clone());
        let linked = match (link, &inflight) {
            (Some(l), Some(i)) => Some((i, l)),
            _ => None,
        };
        let send = upstream::send_call(&peer, call, linked);
        let response = tokio::select! {
            r = tokio::time::timeout(timeout, send) => match r {
                Ok(r) => r,
                Err(_) => return Attempt { result: Err(tag(timeout_error(timeout))), raw: None },
            },
            _ = cancel.cancelled() => return Attempt { result: Err(tag(cancelled_error())), raw: None },
        };
        match response {
            Ok(CallToolResponse::Complete(r)) => {
                let raw = serde_json::to_value(&r).ok();
                let text = r
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n");
                if r.is_error == Some(true) {
                    let msg = if text.is_empty() {
                        "the tool reported an error without text".to_string()
                    } else {
                        text
                    };
                    return Attempt {
                        result: Err(tag(HubError::classified(msg))),
                        raw,
                    };
                }
                let value = match r.structured_content {
                    Some(v) => v,
                    None => Value::String(text),
                };
                Attempt {
                    result: Ok(value),
                    raw,
                }
            }
            Ok(_) => Attempt {
                result: Err(tag(HubError::new(
                    ErrorType::Unknown,
                    "the server answered with an input request or a task, which the hub does not relay",
                ))),
                raw: None,
            },
            Err(e) => Attempt {
                result: Err(tag(service_error(&info.server, e))),
                raw: None,
            },
        }
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
            match data.code.0 {
                -32602 => HubError::new(ErrorType::InvalidParams, msg),
                _ => HubError::classified(msg),
            }
        }
        other => HubError::classified(other.to_string()),
    }
}
