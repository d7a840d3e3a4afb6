//! The call types: what a caller asks for ([`CallRequest`]) and what every
//! `tool_result` / `batch_step_result` reports ([`CallOutcome`]).

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::errors::HubError;
use crate::retry::{RetryOverride, RetryRecord};

/// One tool call as a client (or a batch step) asks for it.
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub tool: String,
    pub params: Value,
    /// Per-attempt timeout; `None` = the server's, else `taskEngine.defaultTimeout`.
    pub timeout: Option<Duration>,
    pub session: String,
    pub retry: RetryOverride,
    pub cancel: CancellationToken,
    /// Told before each retry (the task engine shows `retrying`).
    pub on_retry: Option<RetryHook>,
    /// The client call to relay the server's progress, sampling and
    /// elicitation to (an MCP `tools/call`); `None` for everything else.
    pub link: Option<crate::mcp::relay::CallLink>,
}

/// A callback run before each retry of a call.
#[derive(Clone)]
pub struct RetryHook(pub std::sync::Arc<dyn Fn(&RetryRecord) + Send + Sync>);

impl std::fmt::Debug for RetryHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryHook")
    }
}

/// Everything a `tool_result` / `batch_step_result` reports about a call.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallOutcome {
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qualified_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub success: bool,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub result: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<HubError>,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<RetryRecord>,
    pub duration_ms: u64,
}

/// The result of one attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub result: Result<Value, HubError>,
    pub raw: Option<Value>,
}

impl CallOutcome {
    pub fn failed(tool: &str, error: HubError, elapsed: Duration) -> CallOutcome {
        CallOutcome {
            tool: tool.to_string(),
            qualified_name: None,
            server: error.server.clone(),
            success: false,
            result: Value::Null,
            raw: None,
            error: Some(error),
            attempts: 0,
            retries: Vec::new(),
            duration_ms: elapsed.as_millis() as u64,
        }
    }

    /// The outcome as a JSON object (camelCase), for replies and steps.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
