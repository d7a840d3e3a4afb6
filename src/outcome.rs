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
    pub session: crate::session::SessionId,
    /// Which instance of a `scope: "context"` server runs the call.
    pub context: crate::client_context::ClientContext,
    pub retry: RetryOverride,
    pub cancel: CancellationToken,
    /// Told before each retry (the task engine shows `retrying`).
    pub on_retry: Option<RetryHook>,
    /// The client call to relay the server's progress, sampling and
    /// elicitation to (an MCP `tools/call`); `None` for everything else.
    pub link: Option<crate::mcp::relay::CallLink>,
    /// The client's `callKey`, noted in the outcome and in history.
    pub call_key: Option<String>,
    /// The view the call is made in (`/ws/<view>`, `/mcp/<view>`, a task
    /// started there): the tool is resolved among the view's tools only,
    /// and one outside it is unknown (`hub::views`).
    pub view: Option<std::sync::Arc<str>>,
    /// The client of `clients` that made the call (`None`: the main token
    /// or the hub itself): a hub tool it calls sees only this principal's
    /// work (`caller`).
    pub client: Option<std::sync::Arc<str>>,
}

impl CallRequest {
    /// A call of `tool` for `session` with every option at its default
    /// (the server's timeout, the configured retries, no link, no key, the
    /// session's own client context).
    /// The one place a `CallRequest` is built: callers set what they add.
    pub fn new(
        tool: String,
        params: Value,
        session: crate::session::SessionId,
        cancel: CancellationToken,
    ) -> Self {
        CallRequest {
            tool,
            params,
            timeout: None,
            context: crate::client_context::ClientContext::session(&session, None),
            session,
            retry: RetryOverride::Default,
            cancel,
            on_retry: None,
            link: None,
            call_key: None,
            view: None,
            client: None,
        }
    }

    /// Who made the call, as one value.
    pub fn caller(&self) -> crate::caller::Caller {
        crate::caller::Caller {
            client: self.client.clone(),
            view: self.view.clone(),
            session: self.session.clone(),
        }
    }

    /// Made for `caller`: its session, view and client (the session's own
    /// client context).
    pub fn set_caller(&mut self, caller: &crate::caller::Caller) {
        self.context = crate::client_context::ClientContext::session(&caller.session, None);
        self.session = caller.session.clone();
        self.view = caller.view.clone();
        self.client = caller.client.clone();
    }
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
    /// The `callKey` the call was sent with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_key: Option<String>,
    /// The client context the call ran in (which instance of a
    /// `scope: "context"` server served it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<crate::client_context::ClientContext>,
    /// Some attempt may have reached the tool ([`Reach`] other than
    /// `Before`): a `callKey` of a cancelled call holds, never runs twice.
    #[serde(skip)]
    pub reached: bool,
    /// The view the call was made in; `qualifiedName` is then the view's
    /// name of the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    /// The real tool's qualified name, when the view renames it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_tool: Option<String>,
}

/// The result of one attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub result: Result<Value, HubError>,
    pub raw: Option<Value>,
    /// How far a failed attempt got (what a retry may assume).
    pub reach: Reach,
}

/// How far a failed attempt got: whether the tool may have acted. A retry
/// of [`Reach::Unknown`] may do the work twice, so it is made only for a
/// tool that is safe to repeat (`hub::retrying`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reach {
    /// Failed before the tool was reached: the server was not running or
    /// not connected, refused the connection, or the params could not be
    /// sent. Nothing ran; running it again is always safe.
    Before,
    /// The tool answered with its own failure: its outcome is known.
    #[default]
    Answered,
    /// The request may have reached the tool and no answer came: the hub's
    /// deadline passed, the connection was lost after the request was
    /// sent, the call was cancelled, or the hub killed the work.
    Unknown,
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
            call_key: None,
            context: None,
            reached: false,
            view: None,
            real_tool: None,
        }
    }

    /// The outcome as a JSON object (camelCase), for replies and steps.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The fields [`CallOutcome::to_json`] writes, but `tool` and `raw`,
    /// put into `into` (a step's body, whose `tool` is the step's own);
    /// `raw` is returned apart. Consumes the outcome: its result moves into
    /// the body, never copied.
    pub fn into_fields(self, into: &mut serde_json::Map<String, Value>) -> Option<Value> {
        let mut put = |k: &str, v: Value| {
            into.insert(k.to_string(), v);
        };
        if let Some(q) = self.qualified_name {
            put("qualifiedName", Value::String(q));
        }
        if let Some(s) = self.server {
            put("server", Value::String(s));
        }
        if let Some(v) = self.view {
            put("view", Value::String(v));
        }
        if let Some(r) = self.real_tool {
            put("realTool", Value::String(r));
        }
        put("success", Value::Bool(self.success));
        if !self.result.is_null() {
            put("result", self.result);
        }
        if let Some(e) = &self.error {
            put("error", serde_json::to_value(e).unwrap_or(Value::Null));
        }
        put("attempts", Value::from(self.attempts));
        if !self.retries.is_empty() {
            put(
                "retries",
                serde_json::to_value(&self.retries).unwrap_or(Value::Null),
            );
        }
        put("durationMs", Value::from(self.duration_ms));
        self.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::ErrorType;
    use serde_json::json;

    /// `into_fields` writes what `to_json` does, but `tool` and `raw`.
    fn same_as_to_json(out: CallOutcome) {
        let mut want = out.to_json();
        let want_raw = want.as_object_mut().and_then(|o| {
            o.remove("tool");
            o.remove("raw")
        });
        let mut got = serde_json::Map::new();
        let raw = out.into_fields(&mut got);
        assert_eq!(Value::Object(got), want);
        assert_eq!(raw, want_raw);
    }

    #[test]
    fn the_fields_of_a_step_are_those_of_its_outcome() {
        same_as_to_json(CallOutcome {
            tool: "echo".into(),
            qualified_name: Some("t__echo".into()),
            server: Some("t".into()),
            success: true,
            result: json!({"text": "hi", "n": [1, 2]}),
            raw: Some(json!({"content": [{"type": "text", "text": "hi"}]})),
            error: None,
            attempts: 2,
            retries: vec![RetryRecord {
                attempt: 1,
                error_type: ErrorType::Timeout,
                delay_ms: 100,
                action: "retry",
                note: Some("n".into()),
            }],
            duration_ms: 7,
            call_key: None,
            context: None,
            reached: true,
            view: Some("chat".into()),
            real_tool: Some("t__say".into()),
        });
        same_as_to_json(CallOutcome::failed(
            "nope",
            HubError::new(ErrorType::ToolNotFound, "no tool nope").with_server("s"),
            Duration::from_millis(3),
        ));
    }
}
