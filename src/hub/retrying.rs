//! The retry loop of the call path: run attempts, ask `retry::decide`
//! what to do after a failure, and carry out its action (wait, extend the
//! timeout, rebuild the server's context, refresh a snapshot).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::pipeline::Approval;
use super::Hub;
use crate::config::RetryAction;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::ToolInfo;
use crate::outcome::{CallOutcome, CallRequest, Reach};
use crate::retry::{action_name, decide, RetryOverride, RetryRecord, MAX_EXTENDED_TIMEOUT};

/// The longest one helper call may take.
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `rebuild_context` waits for a restarted server to come back.
const REBUILD_WAIT: Duration = Duration::from_secs(30);

/// Run a call with retries; `post` turns a raw attempt result into the
/// step's verdict (e.g. an `expect` check that yields ASSERTION_FAILED).
impl Hub {
    pub(crate) async fn run_with<F>(
        &self,
        info: &ToolInfo,
        req: &CallRequest,
        post: F,
    ) -> CallOutcome
    where
        F: Fn(Result<Value, HubError>) -> Result<Value, HubError>,
    {
        let hub = self;
        let cfg = hub.config();
        let mut timeout = req
            .timeout
            .unwrap_or_else(|| hub.default_timeout(&info.server));
        let mut retries = Vec::new();
        let mut attempts = 0u32;
        let mut reached = false;
        let spender = super::budget::Spender {
            server: &info.server,
            client: req.client.as_deref(),
            session: &req.session,
        };
        hub.retry_budget.call(spender);
        loop {
            attempts += 1;
            let a = hub
                .attempt_linked(
                    info,
                    &req.params,
                    timeout,
                    &req.cancel,
                    super::AttemptFor {
                        session: &req.session,
                        client: req.client.as_deref(),
                        context: &req.context,
                        view: req.view.as_deref(),
                    },
                    req.link.as_ref(),
                )
                .await;
            reached |= a.reach != Reach::Before;
            let verdict = post(a.result);
            let error = match verdict {
                Ok(value) => {
                    let out = outcome(info, req, true, value, a.raw, None, attempts, retries);
                    return CallOutcome { reached, ..out };
                }
                Err(e) => e,
            };
            let strategy = match &req.retry {
                RetryOverride::Disabled => None,
                RetryOverride::Custom(s) => Some(s.clone()),
                RetryOverride::Default => cfg.retry.strategies.get(&error.error_type).cloned(),
            };
            let blocked = a.reach == Reach::Unknown
                && error.error_type.recoverable()
                && !safe_to_repeat(info, req, &cfg.retry, error.error_type);
            let decision = decide(
                strategy.as_ref(),
                error.error_type,
                attempts - 1,
                false,
                rand::random::<f64>(),
            );
            // Stopped only by the rule: say so.
            let stopped = blocked && decision.is_some();
            let decision = decision.filter(|_| !blocked);
            // A retry the rules allow still needs the budget of its server
            // for its principal and of its session (`budget`): a failing
            // server is not hammered by every call's retries at once.
            let spent = match decision {
                Some(_) => hub.retry_budget.retry(spender).err(),
                None => None,
            };
            let decision = decision.filter(|_| spent.is_none());
            let Some((mut delay, action)) = decision else {
                let mut error = error;
                if stopped {
                    outcome_unknown(&mut error, info);
                }
                if let Some(why) = spent {
                    tracing::warn!(tool = %info.qualified_name, attempt = attempts, "not retried: {why}");
                    error.message = format!("{} (not retried: {why})", error.message);
                    error.suggestion = format!(
                        "the server {} is failing for many calls at once: check it (hub__health_check) before calling again; {}",
                        info.server, error.suggestion
                    );
                }
                let out = outcome(
                    info,
                    req,
                    false,
                    Value::Null,
                    a.raw,
                    Some(error),
                    attempts,
                    retries,
                );
                return CallOutcome { reached, ..out };
            };
            // A rate-limited server that says when to come back is obeyed.
            if error.error_type == ErrorType::RateLimited {
                if let Some(after) = crate::errors::retry_after(&error.message) {
                    delay = delay.max(after);
                }
            }
            tracing::warn!(tool = %info.qualified_name, attempt = attempts, error_type = %error.error_type,
            delay_ms = delay.as_millis() as u64, action = action_name(action), error = %error.message, "retrying");
            let record = RetryRecord {
                attempt: attempts,
                error_type: error.error_type,
                delay_ms: delay.as_millis() as u64,
                action: action_name(action),
                note: None,
            };
            if let Some(hook) = &req.on_retry {
                (hook.0)(&record);
            }
            retries.push(record);
            let note = match action {
                RetryAction::None => None,
                RetryAction::ExtendTimeout => {
                    timeout = (timeout * 2).min(MAX_EXTENDED_TIMEOUT);
                    None
                }
                RetryAction::RebuildContext => rebuild_context(hub, info, req).await,
                RetryAction::RefreshSnapshot => refresh_snapshot(hub, info, req).await,
            };
            if let Some(last) = retries.last_mut() {
                last.note = note;
            }
            let settle = async {
                tokio::time::sleep(delay).await;
                // A server that is restarting (crash, reload): wait until it is
                // back (or has settled otherwise) instead of failing again.
                if error.error_type == ErrorType::ServerUnavailable {
                    hub.wait_server_settled(&info.server, timeout.max(REBUILD_WAIT), &req.cancel)
                        .await;
                }
            };
            tokio::select! {
                _ = settle => {}
                _ = req.cancel.cancelled() => {
                    let e = HubError::new(ErrorType::Cancelled, "the call was cancelled while waiting to retry")
                        .with_server(&info.server).with_tool(&info.name);
                    let out = outcome(info, req, false, Value::Null, None, Some(e), attempts, retries);
                    return CallOutcome { reached, ..out };
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn outcome(
    info: &ToolInfo,
    req: &CallRequest,
    success: bool,
    result: Value,
    raw: Option<Value>,
    error: Option<HubError>,
    attempts: u32,
    retries: Vec<RetryRecord>,
) -> CallOutcome {
    CallOutcome {
        tool: req.tool.clone(),
        qualified_name: Some(info.qualified_name.clone()),
        server: Some(info.server.clone()),
        success,
        result,
        raw,
        error,
        attempts,
        retries,
        duration_ms: 0,
        call_key: req.call_key.clone(),
        context: Some(req.context.clone()),
        reached: true,
        view: None,
        real_tool: None,
    }
}

/// Call a configured helper tool of the same server (recovery or snapshot)
/// through the call pipeline as the hub's own call; `Some(what happened)`
/// unless it ran and succeeded.
///
/// A boxed future of a named type: the pipeline runs the attempt loop
/// again for the helper (whose retries are off, so it goes no deeper), and
/// an `async fn` here would make the loop's future contain itself.
fn helper_call<'a>(
    hub: &'a Hub,
    info: &'a ToolInfo,
    role: &'a str,
    tool: &'a str,
    outer: &'a CallRequest,
) -> BoxFuture<'a, Option<String>> {
    Box::pin(async move {
        let Some(helper) = hub.helper_tool(&info.server, tool) else {
            tracing::warn!(server = %info.server, tool, "configured helper tool is not offered by the server");
            return Some(format!(
                "{role} \"{tool}\" is not offered by server \"{}\"",
                info.server
            ));
        };
        // In the context of the call it serves: that call's instance of a
        // per-context server.
        let mut req = Hub::helper_request(&helper, outer.cancel.child_token());
        req.context = outer.context.clone();
        let out = hub
            .call_resolved(&helper, &req, Approval::Helper, |r| r)
            .await;
        let e = out.error?;
        let q = &helper.qualified_name;
        if e.error_type == ErrorType::SafetyBlocked {
            tracing::warn!(server = %info.server, tool, reason = %e.message, "helper tool not called: refused by the safety gate");
            return Some(format!("{role} {q} was not called: {}", e.message));
        }
        tracing::warn!(server = %info.server, tool, error = %e, "helper tool failed");
        Some(format!("{role} {q} failed: {}", e.message))
    })
}

impl Hub {
    /// A server's configured helper tool (`recoveryTool`, `snapshotTool`,
    /// `screenshotTool`): its bare name among that server's tools.
    pub fn helper_tool(&self, server: &str, tool: &str) -> Option<Arc<ToolInfo>> {
        self.tools()
            .by_server(server)
            .into_iter()
            .find(|t| t.name == tool)
            .cloned()
    }

    /// The request of a helper call: `{}` as the hub itself, one attempt of
    /// at most 30 s. It passes the gate with [`Approval::Helper`].
    pub fn helper_request(helper: &ToolInfo, cancel: CancellationToken) -> CallRequest {
        let mut req = CallRequest::new(
            helper.qualified_name.clone(),
            Value::Object(Default::default()),
            "hub".into(),
            cancel,
        );
        req.timeout = Some(HELPER_TIMEOUT);
        req.retry = RetryOverride::Disabled;
        req
    }
}

/// `rebuild_context`: the server's recovery tool if configured, else a restart.
async fn rebuild_context(hub: &Hub, info: &ToolInfo, req: &CallRequest) -> Option<String> {
    let cfg = hub.config();
    let recovery = cfg
        .mcp_servers
        .get(&info.server)
        .and_then(|s| s.recovery_tool.clone());
    if let Some(tool) = recovery {
        return helper_call(hub, info, "recoveryTool", &tool, req).await;
    }
    if info.server == super::BUILTIN_SERVER {
        return None;
    }
    let handle = hub.server(&info.server)?;
    if handle.spec.scope == crate::config::Scope::Context {
        // Restart the call's own instance; the next attempt waits for it.
        hub.instances()
            .restart(&info.server, &req.context, "retry action rebuild_context");
        return None;
    }
    let mut events = hub.subscribe();
    handle.restart("retry action rebuild_context");
    let name = info.server.clone();
    let back = async {
        loop {
            match events.recv().await {
                Ok(ev) => {
                    if ev.get("type").and_then(Value::as_str) == Some("server_status")
                        && ev.get("name").and_then(Value::as_str) == Some(name.as_str())
                        && ev.get("state").and_then(Value::as_str) == Some("running")
                    {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    };
    let _ = tokio::time::timeout(REBUILD_WAIT, back).await;
    None
}

/// `refresh_snapshot`: call the server's snapshot tool if configured.
async fn refresh_snapshot(hub: &Hub, info: &ToolInfo, req: &CallRequest) -> Option<String> {
    let cfg = hub.config();
    let tool = cfg
        .mcp_servers
        .get(&info.server)
        .and_then(|s| s.snapshot_tool.clone())?;
    helper_call(hub, info, "snapshotTool", &tool, req).await
}

/// May a call whose outcome is unknown run again? Only a tool that says
/// running it twice is harmless (`readOnlyHint` or `idempotentHint`; MCP's
/// defaults for a tool that says nothing are destructive and not
/// idempotent), one `retry.safeToRepeat` names, a `TIMEOUT` under
/// `retry.retryDestructiveOnTimeout`, or a call that brought its own retry
/// strategy (the caller's explicit policy).
fn safe_to_repeat(
    info: &ToolInfo,
    req: &CallRequest,
    cfg: &crate::config::RetryConfig,
    class: ErrorType,
) -> bool {
    let hint = |k: &str| {
        info.annotations
            .as_ref()
            .and_then(|a| a.get(k))
            .and_then(Value::as_bool)
            == Some(true)
    };
    hint("readOnlyHint")
        || hint("idempotentHint")
        || matches!(req.retry, RetryOverride::Custom(_))
        || (class == ErrorType::Timeout && cfg.retry_destructive_on_timeout)
        || cfg
            .safe_to_repeat
            .iter()
            .any(|g| crate::config::glob_match(g, &info.qualified_name))
}

/// Say in `error` that the call's outcome is unknown and why it was not
/// run again; the suggestion says what to check.
fn outcome_unknown(error: &mut HubError, info: &ToolInfo) {
    error.message.push_str(
        " (outcome unknown: the request may have reached the tool, which may already have acted; not retried, because the tool is not marked readOnlyHint or idempotentHint and MCP's default for it is destructive)",
    );
    error.suggestion = format!(
        "check whether {} took effect before running it again; if running it twice is harmless, list it in retry.safeToRepeat or give the call its own retry strategy",
        info.qualified_name
    );
    // Not to be sent again as it is: the suggestion says check first.
    error.recoverable = false;
}
