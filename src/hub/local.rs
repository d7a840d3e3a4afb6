//! Tools that run inside the hub process, behind one small trait.
//!
//! The call path does not know what a local tool is: the workspace tools,
//! the hub's control tools (registered by the application, which knows the
//! engine and the recorder) and a recording-backed offline server all answer
//! through [`LocalTools`]. Several providers may be mounted under one server
//! name (`hub`); the first that knows a tool answers it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::errors::{ErrorType, HubError};
use crate::mcp::offline::Offline;
use crate::mcp::registry::RawTool;

/// A boxed future of a local tool's result.
/// A provider's tools as an enum with one list of names: `enum Tool`,
/// `Tool::ALL`, `Tool::name` and `Tool::from_name`, all from one table of
/// `Variant => "name"` lines, so a name is written once.
macro_rules! tool_names {
    ($(#[$doc:meta])* $($variant:ident => $name:literal),+ $(,)?) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Tool {
            $($variant),+
        }

        impl Tool {
            const ALL: &'static [Tool] = &[$(Tool::$variant),+];

            fn name(self) -> &'static str {
                match self {
                    $(Tool::$variant => $name),+
                }
            }

            fn from_name(name: &str) -> Option<Tool> {
                Tool::ALL.iter().copied().find(|t| t.name() == name)
            }
        }
    };
}
pub(crate) use tool_names;

pub type LocalFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, HubError>> + Send + 'a>>;

/// What a local tool may know about the call it serves.
#[derive(Clone, Copy)]
pub struct LocalCall<'a> {
    pub params: &'a Value,
    pub cancel: &'a CancellationToken,
    /// The calling connection's session (`""` for internal calls).
    pub session: &'a str,
    /// The client of `clients` that made the call (`None`: the main
    /// token): what the tool shows or changes of shared state is this
    /// principal's (`caller`).
    pub client: Option<&'a str>,
    /// The calling client context (a tool that calls a per-context
    /// server, such as the browser assertions, calls it in this one).
    pub context: &'a crate::client_context::ClientContext,
    /// The view the call was made in (`None`: the whole aggregate): what
    /// the tool reaches further must stay within it.
    pub view: Option<&'a str>,
}

impl LocalCall<'_> {
    /// Who made the call, as one value.
    pub fn caller(&self) -> crate::caller::Caller {
        crate::caller::Caller {
            client: self.client.map(Into::into),
            view: self.view.map(Into::into),
            session: self.session.into(),
        }
    }
}

/// A provider of in-process tools.
pub trait LocalTools: Send + Sync {
    /// The tools it offers now, for the aggregate list.
    fn tools(&self) -> Vec<RawTool>;

    /// Run `tool`, or `None` when this provider does not have it.
    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>>;

    /// A config reload was accepted: take up the settings this provider
    /// reads (before the tool list is rebuilt). Most read nothing.
    fn reconfigure(&self, _config: &crate::config::Config) {}
}

/// The providers mounted under one server name, in mount order.
#[derive(Clone, Default)]
pub struct Mounted(Vec<Arc<dyn LocalTools>>);

impl Mounted {
    pub fn of(p: Arc<dyn LocalTools>) -> Mounted {
        Mounted(vec![p])
    }

    pub fn push(&mut self, p: Arc<dyn LocalTools>) {
        self.0.push(p);
    }

    pub fn tools(&self) -> Vec<RawTool> {
        self.0.iter().flat_map(|p| p.tools()).collect()
    }

    pub fn reconfigure(&self, config: &crate::config::Config) {
        self.0.iter().for_each(|p| p.reconfigure(config));
    }

    pub fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        self.0.iter().find_map(|p| p.call(tool, call))
    }
}

/// A recording-backed server answers from its recording, in process.
pub struct OfflineTools(pub Arc<Offline>);

impl LocalTools for OfflineTools {
    fn tools(&self) -> Vec<RawTool> {
        self.0.tools()
    }

    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        Some(Box::pin(async move { self.0.call(tool, call.params) }))
    }
}

/// The ToolResult contract an in-process tool may answer in: `{"ok": true,
/// …evidence}` is a success like any value; `{"ok": false, "error": {"code",
/// "message", "retriable", "suggestion"?}}` is a failed call of class `code`
/// (`recoverable` follows the class, as everywhere). The failure keeps the
/// ToolResult as `raw`, shaped as the MCP `CallToolResult` the tool would
/// answer over MCP (`isError: true`, the ToolResult as `structuredContent`,
/// the message as its text), so a client sees the same object either way.
pub fn tool_result(result: Result<Value, HubError>) -> (Result<Value, HubError>, Option<Value>) {
    let value = match result {
        Ok(v) => v,
        Err(e) => return (Err(e), None),
    };
    let failed = value.get("ok").and_then(Value::as_bool) == Some(false);
    let Some(error) = value.get("error").filter(|e| failed && e.is_object()) else {
        return (Ok(value), None);
    };
    let text = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or("");
    let class = ErrorType::parse(text("code")).unwrap_or(ErrorType::Unknown);
    let mut e = HubError::new(class, text("message"));
    if !text("suggestion").is_empty() {
        e = e.with_suggestion(text("suggestion"));
    }
    let raw = serde_json::json!({
        "content": [{"type": "text", "text": e.message}],
        "structuredContent": value,
        "isError": true,
    });
    (Err(e), Some(raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_tool_result_is_a_failure_of_its_class_and_keeps_the_result_as_raw() {
        let miss = json!({"ok": false, "error": {"code": "ASSERTION_FAILED",
            "message": "text \"x\" is not on the page", "retriable": true, "suggestion": "wait"}});
        let (r, raw) = tool_result(Ok(miss.clone()));
        let e = r.expect_err("a failure");
        assert_eq!(e.error_type, ErrorType::AssertionFailed);
        assert!(e.recoverable);
        assert_eq!(e.suggestion, "wait");
        assert_eq!(e.message, "text \"x\" is not on the page");
        let raw = raw.expect("raw");
        assert_eq!(raw["isError"], true);
        assert_eq!(raw["structuredContent"], miss);
        assert_eq!(raw["content"][0]["text"], "text \"x\" is not on the page");

        let (r, _) = tool_result(Ok(
            json!({"ok": false, "error": {"code": "NOPE", "message": "m"}}),
        ));
        let e = r.expect_err("a failure");
        assert_eq!(e.error_type, ErrorType::Unknown);
        assert!(!e.suggestion.is_empty());
    }

    #[test]
    fn other_values_pass_unchanged() {
        for v in [
            json!({"ok": true, "role": "button"}),
            json!({"ok": false}),
            json!({"ok": "false", "error": {"code": "TIMEOUT"}}),
            json!("text"),
        ] {
            let (r, raw) = tool_result(Ok(v.clone()));
            assert_eq!(r.ok(), Some(v));
            assert!(raw.is_none());
        }
    }
}
