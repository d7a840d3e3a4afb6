//! The retry manager, used by `tool_call` and by every batch step.
//!
//! Decisions look at the [`ErrorType`] only, never at error text: the
//! classifier in `errors` is the one place that reads text. Strategies come
//! from `retry.strategies` (class defaults from PROTOCOL.md, merged in
//! `config`); a call or step may disable retries or bring its own strategy.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::config::{RetryAction, Strategy};
use crate::errors::{ErrorType, HubError};
use crate::hub::{CallOutcome, CallRequest, Hub};
use crate::mcp::registry::ToolInfo;

/// Longest timeout `extend_timeout` will grow an attempt to.
const MAX_EXTENDED_TIMEOUT: Duration = Duration::from_secs(600);
/// How long `rebuild_context` waits for a restarted server to come back.
const REBUILD_WAIT: Duration = Duration::from_secs(30);

/// A call's or step's own retry setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum RetryOverride {
    #[default]
    Default,
    Disabled,
    Custom(Strategy),
}

impl RetryOverride {
    /// `false` disables; an object `{maxRetries, delay, backoff, jitter, action}`
    /// replaces the class strategy (missing fields take the defaults).
    pub fn parse(v: Option<&Value>) -> Result<RetryOverride, String> {
        match v {
            None | Some(Value::Null) | Some(Value::Bool(true)) => Ok(RetryOverride::Default),
            Some(Value::Bool(false)) => Ok(RetryOverride::Disabled),
            Some(Value::Object(o)) => {
                let mut s = Strategy {
                    max_retries: 1,
                    delay: Duration::from_millis(1000),
                    backoff: 2.0,
                    jitter: 0.2,
                    action: RetryAction::None,
                };
                for (k, v) in o {
                    match (k.as_str(), v) {
                        ("maxRetries", Value::Number(n)) => {
                            s.max_retries = n.as_u64().ok_or("retry.maxRetries must be a non-negative integer")?.min(20) as u32
                        }
                        ("delay", Value::Number(n)) => {
                            s.delay = Duration::from_millis(n.as_u64().ok_or("retry.delay must be milliseconds")?)
                        }
                        ("backoff", Value::Number(n)) => s.backoff = n.as_f64().unwrap_or(2.0).clamp(1.0, 10.0),
                        ("jitter", Value::Number(n)) => s.jitter = n.as_f64().unwrap_or(0.2).clamp(0.0, 1.0),
                        ("action", Value::String(a)) => {
                            s.action = match a.as_str() {
                                "none" => RetryAction::None,
                                "extend_timeout" => RetryAction::ExtendTimeout,
                                "rebuild_context" => RetryAction::RebuildContext,
                                "refresh_snapshot" => RetryAction::RefreshSnapshot,
                                other => return Err(format!("retry.action \"{other}\" is unknown; expected none, extend_timeout, rebuild_context or refresh_snapshot")),
                            }
                        }
                        (k, _) => {
                            return Err(format!(
                                "retry.{k} is unknown or of the wrong type; expected maxRetries, delay (ms), backoff, jitter or action"
                            ))
                        }
                    }
                }
                Ok(RetryOverride::Custom(s))
            }
            Some(other) => Err(format!(
                "retry is a {}, expected false or a strategy object",
                crate::protocol::json_kind(other)
            )),
        }
    }
}

/// One retried attempt, as reported in `retries`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RetryRecord {
    pub attempt: u32,
    pub error_type: ErrorType,
    pub delay_ms: u64,
    pub action: &'static str,
}

pub fn action_name(a: RetryAction) -> &'static str {
    match a {
        RetryAction::None => "none",
        RetryAction::ExtendTimeout => "extend_timeout",
        RetryAction::RebuildContext => "rebuild_context",
        RetryAction::RefreshSnapshot => "refresh_snapshot",
    }
}

/// Should failure number `retries_done + 1` be retried, and after how long?
/// `unit` in [0,1) is the jitter draw (random in production, fixed in tests).
pub fn decide(
    strategy: Option<&Strategy>,
    error_type: ErrorType,
    retries_done: u32,
    destructive_timeout_blocked: bool,
    unit: f64,
) -> Option<(Duration, RetryAction)> {
    if !error_type.recoverable() || destructive_timeout_blocked {
        return None;
    }
    let s = strategy?;
    if retries_done >= s.max_retries {
        return None;
    }
    let base = s.delay.as_millis() as f64 * s.backoff.max(1.0).powi(retries_done as i32);
    // Symmetric jitter: base * (1 ± jitter).
    let factor = 1.0 + s.jitter.clamp(0.0, 1.0) * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
    let ms = (base * factor).clamp(0.0, 3_600_000.0);
    Some((Duration::from_millis(ms as u64), s.action))
}

/// Run a call with retries; `post` turns a raw attempt result into the
/// step's verdict (e.g. an `expect` check that yields ASSERTION_FAILED).
pub async fn run_with<F>(hub: &Hub, info: &ToolInfo, req: &CallRequest, post: F) -> CallOutcome
where
    F: Fn(Result<Value, HubError>) -> Result<Value, HubError>,
{
    let cfg = hub.config();
    let mut timeout = req
        .timeout
        .unwrap_or_else(|| hub.default_timeout(&info.server));
    let mut retries = Vec::new();
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let a = hub
            .attempt(info, &req.params, timeout, &req.cancel, &req.session)
            .await;
        let verdict = post(a.result);
        let error = match verdict {
            Ok(value) => {
                return outcome(info, req, true, value, a.raw, None, attempts, retries);
            }
            Err(e) => e,
        };
        let strategy = match &req.retry {
            RetryOverride::Disabled => None,
            RetryOverride::Custom(s) => Some(s.clone()),
            RetryOverride::Default => cfg.retry.strategies.get(&error.error_type).cloned(),
        };
        let destructive = info
            .annotations
            .as_ref()
            .and_then(|a| a.get("destructiveHint"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let blocked = destructive
            && error.error_type == ErrorType::Timeout
            && !cfg.retry.retry_destructive_on_timeout;
        let decision = decide(
            strategy.as_ref(),
            error.error_type,
            attempts - 1,
            blocked,
            rand::random::<f64>(),
        );
        let Some((delay, action)) = decision else {
            let mut error = error;
            if blocked {
                error.message.push_str(
                    " (not retried: the tool is marked destructive and the first call may already have taken effect)",
                );
            }
            return outcome(
                info,
                req,
                false,
                Value::Null,
                a.raw,
                Some(error),
                attempts,
                retries,
            );
        };
        tracing::warn!(tool = %info.qualified_name, attempt = attempts, error_type = %error.error_type,
            delay_ms = delay.as_millis() as u64, action = action_name(action), error = %error.message, "retrying");
        let record = RetryRecord {
            attempt: attempts,
            error_type: error.error_type,
            delay_ms: delay.as_millis() as u64,
            action: action_name(action),
        };
        if let Some(hook) = &req.on_retry {
            (hook.0)(&record);
        }
        retries.push(record);
        match action {
            RetryAction::None => {}
            RetryAction::ExtendTimeout => timeout = (timeout * 2).min(MAX_EXTENDED_TIMEOUT),
            RetryAction::RebuildContext => rebuild_context(hub, info, &req.cancel).await,
            RetryAction::RefreshSnapshot => refresh_snapshot(hub, info, &req.cancel).await,
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
                return outcome(info, req, false, Value::Null, None, Some(e), attempts, retries);
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
    }
}

/// Call a configured helper tool of the same server (recovery or snapshot).
async fn helper_call(
    hub: &Hub,
    info: &ToolInfo,
    tool: &str,
    cancel: &tokio_util::sync::CancellationToken,
) -> bool {
    let snapshot = hub.tools();
    let Some(helper) = snapshot
        .by_server(&info.server)
        .into_iter()
        .find(|t| t.name == tool)
        .cloned()
    else {
        tracing::warn!(server = %info.server, tool, "configured helper tool is not offered by the server");
        return false;
    };
    let a = hub
        .attempt(
            &helper,
            &Value::Object(Default::default()),
            Duration::from_secs(30),
            cancel,
            "hub",
        )
        .await;
    if let Err(e) = &a.result {
        tracing::warn!(server = %info.server, tool, error = %e, "helper tool failed");
    }
    a.result.is_ok()
}

/// `rebuild_context`: the server's recovery tool if configured, else a restart.
async fn rebuild_context(hub: &Hub, info: &ToolInfo, cancel: &tokio_util::sync::CancellationToken) {
    let cfg = hub.config();
    let recovery = cfg
        .mcp_servers
        .get(&info.server)
        .and_then(|s| s.recovery_tool.clone());
    if let Some(tool) = recovery {
        helper_call(hub, info, &tool, cancel).await;
        return;
    }
    if info.server == crate::hub::BUILTIN_SERVER {
        return;
    }
    let Some(handle) = hub.server(&info.server) else {
        return;
    };
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
}

/// `refresh_snapshot`: call the server's snapshot tool if configured.
async fn refresh_snapshot(
    hub: &Hub,
    info: &ToolInfo,
    cancel: &tokio_util::sync::CancellationToken,
) {
    let cfg = hub.config();
    if let Some(tool) = cfg
        .mcp_servers
        .get(&info.server)
        .and_then(|s| s.snapshot_tool.clone())
    {
        helper_call(hub, info, &tool, cancel).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strat(max: u32, delay: u64, backoff: f64, jitter: f64) -> Strategy {
        Strategy {
            max_retries: max,
            delay: Duration::from_millis(delay),
            backoff,
            jitter,
            action: RetryAction::None,
        }
    }

    #[test]
    fn non_recoverable_classes_are_never_retried() {
        let s = strat(5, 10, 2.0, 0.0);
        for t in ErrorType::ALL {
            let d = decide(Some(&s), t, 0, false, 0.5);
            assert_eq!(d.is_some(), t.recoverable(), "{t}");
        }
    }

    #[test]
    fn backoff_is_exponential_and_bounded_by_max_retries() {
        let s = strat(3, 100, 2.0, 0.0);
        let ds: Vec<_> = (0..4)
            .map(|n| decide(Some(&s), ErrorType::Network, n, false, 0.5).map(|d| d.0.as_millis()))
            .collect();
        assert_eq!(ds, vec![Some(100), Some(200), Some(400), None]);
    }

    #[test]
    fn jitter_stays_within_its_band() {
        let s = strat(1, 1000, 2.0, 0.2);
        let lo = decide(Some(&s), ErrorType::Timeout, 0, false, 0.0).map(|d| d.0.as_millis());
        let hi = decide(Some(&s), ErrorType::Timeout, 0, false, 1.0).map(|d| d.0.as_millis());
        assert_eq!(lo, Some(800));
        assert_eq!(hi, Some(1200));
    }

    /// The schedule on paused tokio time: three NETWORK retries of 2000 ms
    /// with factor 2 and ±20 % jitter take between 11.2 s and 16.8 s of
    /// (virtual) waiting, and each wait is inside its jitter band.
    #[tokio::test(start_paused = true)]
    async fn backoff_schedule_on_paused_time() {
        let s = Strategy {
            max_retries: 3,
            delay: Duration::from_millis(2000),
            backoff: 2.0,
            jitter: 0.2,
            action: RetryAction::None,
        };
        let start = tokio::time::Instant::now();
        let mut n = 0;
        while let Some((d, _)) = decide(Some(&s), ErrorType::Network, n, false, rand::random()) {
            let base = 2000.0 * 2f64.powi(n as i32);
            let ms = d.as_millis() as f64;
            assert!(
                ms >= base * 0.8 - 1.0 && ms <= base * 1.2 + 1.0,
                "retry {n}: {ms} ms"
            );
            tokio::time::sleep(d).await;
            n += 1;
        }
        assert_eq!(n, 3);
        let waited = start.elapsed().as_millis();
        assert!((11_199..=16_801).contains(&waited), "{waited} ms");
    }

    #[test]
    fn destructive_timeout_is_not_retried() {
        let s = strat(3, 10, 2.0, 0.0);
        assert!(decide(Some(&s), ErrorType::Timeout, 0, true, 0.5).is_none());
    }

    #[test]
    fn override_parses() {
        assert_eq!(
            RetryOverride::parse(Some(&Value::Bool(false))),
            Ok(RetryOverride::Disabled)
        );
        let v = serde_json::json!({"maxRetries": 4, "delay": 10, "action": "extend_timeout"});
        match RetryOverride::parse(Some(&v)) {
            Ok(RetryOverride::Custom(s)) => {
                assert_eq!(s.max_retries, 4);
                assert_eq!(s.action, RetryAction::ExtendTimeout);
            }
            other => panic!("{other:?}"),
        }
        assert!(RetryOverride::parse(Some(&serde_json::json!({"action": "pray"}))).is_err());
    }
}
