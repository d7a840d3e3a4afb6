//! Retry decisions, used by `tool_call` and by every batch step (the loop
//! that acts on them is `hub::retrying`).
//!
//! Decisions look at the [`ErrorType`] only, never at error text: the
//! classifier in `errors` is the one place that reads text. Strategies come
//! from `retry.strategies` (class defaults from docs/protocol.md, merged in
//! `config`); a call or step may disable retries or bring its own strategy.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::config::{RetryAction, RetryStrategy};
use crate::errors::ErrorType;

/// Longest timeout `extend_timeout` will grow an attempt to.
pub const MAX_EXTENDED_TIMEOUT: Duration = Duration::from_secs(600);

/// A call's or step's own retry setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum RetryOverride {
    #[default]
    Default,
    Disabled,
    Custom(RetryStrategy),
}

impl RetryOverride {
    /// `false` disables; an object `{maxRetries, delay, backoff, jitter, action}`
    /// replaces the class strategy (missing fields take the defaults).
    pub fn parse(v: Option<&Value>) -> Result<RetryOverride, String> {
        match v {
            None | Some(Value::Null) | Some(Value::Bool(true)) => Ok(RetryOverride::Default),
            Some(Value::Bool(false)) => Ok(RetryOverride::Disabled),
            Some(Value::Object(o)) => {
                let mut s = RetryStrategy {
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
    /// What the action's helper tool (`recoveryTool`, `snapshotTool`) did
    /// when it did not simply succeed: refused by the safety gate, failed,
    /// or not offered by the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
/// `unsafe_to_repeat`: the failed attempt may have taken effect and its tool
/// is not safe to run twice (`hub::retrying` decides), so it never is.
/// `unit` in [0,1) is the jitter draw (random in production, fixed in tests).
pub fn decide(
    strategy: Option<&RetryStrategy>,
    error_type: ErrorType,
    retries_done: u32,
    unsafe_to_repeat: bool,
    unit: f64,
) -> Option<(Duration, RetryAction)> {
    if !error_type.recoverable() || unsafe_to_repeat {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strat(max: u32, delay: u64, backoff: f64, jitter: f64) -> RetryStrategy {
        RetryStrategy {
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
        let s = RetryStrategy {
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
    fn an_unsafe_repeat_is_never_retried() {
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
