//! Assertion tools of the `hub` server: `hub__assert_text_present` and
//! `hub__assert_element_visible` (also answering to the names
//! `assertTextPresent` and `assertElementVisible`). They check the page of
//! the configured browser server (a `@playwright/mcp` entry) through its
//! `browser_evaluate` tool, so a failed check is an ordinary, retriable tool
//! failure (`ASSERTION_FAILED`) an agent can heal from, not an exception.
//!
//! - `locator`: the pure heuristics (description → role + name; ranking).
//! - `check`: what is checked, the verdict on one look, the ToolResult.
//! - `browser`: which server, and one look at its page (`probe.js`).
//!
//! Every answer is a ToolResult (`{"ok": true, …}` or `{"ok": false,
//! "error": {…}}`); the call layer turns the second into a failed call of
//! its class (`hub::local::tool_result`). Only the call layer is used, so
//! this module sits in the `calls` layer; the application mounts it.

mod browser;
mod check;
mod locator;

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use self::check::{Assertion, Judgement};
use crate::errors::{ErrorType, HubError};
use crate::hub::local::{LocalCall, LocalFuture, LocalTools};
use crate::hub::Hub;
use crate::mcp::registry::RawTool;

/// Each assertion tool; dispatch is on this enum, not on strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    TextPresent,
    ElementVisible,
}

/// Every name a tool answers to; the camelCase ones are the names the
/// design (seed 002) gives them, listed too so a bare call resolves.
const NAMES: [(&str, Tool); 4] = [
    ("assert_text_present", Tool::TextPresent),
    ("assert_element_visible", Tool::ElementVisible),
    ("assertTextPresent", Tool::TextPresent),
    ("assertElementVisible", Tool::ElementVisible),
];

impl Tool {
    fn from_name(name: &str) -> Option<Tool> {
        NAMES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    fn description(self, alias_of: Option<&str>) -> String {
        let what = match self {
            Tool::TextPresent => "Check that the browser's page shows a text (visible, not only in the DOM). Returns {ok:true, text, context, …}; a miss fails with ASSERTION_FAILED (retriable) saying what is closest. With timeout (ms) it keeps looking until the text shows; without, it looks once.",
            Tool::ElementVisible => "Check that an element described in words (\"the Submit button\", \"link 'Sign in'\", \"Email field\") is visible: by role and accessible name, text, aria-label, placeholder, title or alt; exact, then case-insensitive, then fuzzy. Returns {ok:true, role, name, …}; a miss fails with ASSERTION_FAILED (retriable) naming a hidden match or the nearest element. With timeout (ms) it keeps looking; without, it looks once.",
        };
        match alias_of {
            Some(name) => format!("Same as hub__{name}. {what}"),
            None => what.to_string(),
        }
    }

    fn input_schema(self) -> Value {
        let timeout = json!({"type": "integer", "minimum": 0, "description": "milliseconds to keep looking; absent or 0: look once"});
        let server = json!({"type": "string", "description": "the browser's MCP server (default: assertions.browserServer, else the entry with snapshotTool)"});
        match self {
            Tool::TextPresent => json!({"type": "object", "required": ["text"], "properties": {
                "text": {"type": "string", "minLength": 1},
                "exact": {"type": "boolean", "description": "true: some element's whole text is exactly this (case-sensitive); default: the page contains it, ignoring case and spacing"},
                "timeout": timeout, "server": server}}),
            Tool::ElementVisible => {
                json!({"type": "object", "required": ["description"], "properties": {
                "description": {"type": "string", "minLength": 1},
                "timeout": timeout, "server": server}})
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TextParams {
    text: String,
    #[serde(default)]
    exact: bool,
    timeout: Option<u64>,
    server: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ElementParams {
    #[serde(alias = "targetDescription")]
    description: String,
    timeout: Option<u64>,
    server: Option<String>,
}

/// The assertion tools over the call layer.
pub struct Assertions {
    hub: Hub,
}

impl Assertions {
    pub fn new(hub: Hub) -> Arc<Assertions> {
        Arc::new(Assertions { hub })
    }

    /// Every outcome as a ToolResult.
    async fn run(&self, tool: Tool, call: LocalCall<'_>) -> Result<Value, HubError> {
        let outcome = match parse(tool, call.params) {
            Ok((c, timeout, server)) => self.check(&c, timeout, server.as_deref(), call).await,
            Err(e) => Err(e),
        };
        Ok(match outcome {
            Ok(evidence) => evidence,
            Err(e) => check::failure(&e),
        })
    }

    /// Look until the check passes, or once without `timeout`.
    async fn check(
        &self,
        c: &Assertion,
        timeout: Option<Duration>,
        server: Option<&str>,
        call: LocalCall<'_>,
    ) -> Result<Value, HubError> {
        let cfg = self.hub.config();
        let server = browser::server_for(&cfg, server)?;
        let plan = c.plan();
        let started = tokio::time::Instant::now();
        let deadline = timeout.map(|t| started + t);
        let mut looks = 0u32;
        loop {
            looks += 1;
            let miss = match browser::look(&self.hub, &server, &plan, call).await {
                Ok(p) if p.blank => return Err(page_closed(&server)),
                Ok(p) => match c.judge(&p) {
                    Judgement::Pass(evidence) => return Ok(check::ok(evidence)),
                    Judgement::Miss(m) => Ok(m),
                },
                // A navigation under way, a server coming back: keep looking
                // while there is time; then it is that failure, not a miss.
                Err(e) if e.recoverable && deadline.is_some() => Err(e),
                Err(e) => return Err(e),
            };
            let now = tokio::time::Instant::now();
            let Some(deadline) = deadline.filter(|d| now < *d) else {
                return match miss {
                    Ok(m) => {
                        let waited = timeout.map(|_| started.elapsed().as_millis() as u64);
                        Err(check::miss_error(c, &Assertion::after_wait(m, waited)))
                    }
                    Err(e) => Err(e),
                };
            };
            tracing::debug!(server = %server, looks, "assertion not met yet; looking again");
            let pause = cfg.assertions.poll_interval.min(deadline - now);
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = call.cancel.cancelled() => {
                    return Err(HubError::new(ErrorType::Cancelled, "the assertion was cancelled while waiting"));
                }
            }
        }
    }
}

/// The typed params of a call: the check, its timeout and server.
fn parse(
    tool: Tool,
    params: &Value,
) -> Result<(Assertion, Option<Duration>, Option<String>), HubError> {
    let bad = |e: serde_json::Error| {
        HubError::new(ErrorType::InvalidParams, format!("invalid params: {e}"))
    };
    let empty = |field: &str| {
        HubError::new(
            ErrorType::InvalidParams,
            format!("`{field}` is empty; say what to look for"),
        )
    };
    let (check, timeout, server) = match tool {
        Tool::TextPresent => {
            let p: TextParams = serde_json::from_value(params.clone()).map_err(bad)?;
            if p.text.trim().is_empty() {
                return Err(empty("text"));
            }
            let c = Assertion::Text {
                text: p.text,
                exact: p.exact,
            };
            (c, p.timeout, p.server)
        }
        Tool::ElementVisible => {
            let p: ElementParams = serde_json::from_value(params.clone()).map_err(bad)?;
            let query = locator::Query::parse(&p.description);
            if query.role.is_none() && query.name.is_empty() {
                return Err(empty("description"));
            }
            let c = Assertion::Element {
                description: p.description,
                query,
            };
            (c, p.timeout, p.server)
        }
    };
    let timeout = timeout.filter(|ms| *ms > 0).map(Duration::from_millis);
    Ok((check, timeout, server))
}

fn page_closed(server: &str) -> HubError {
    HubError::new(
        ErrorType::PageClosed,
        format!("no page is open in the browser of server {server} (it shows a blank page): the page was closed or never opened"),
    )
    .with_suggestion("open the page again with browser_navigate, then repeat the check")
}

impl LocalTools for Assertions {
    fn tools(&self) -> Vec<RawTool> {
        NAMES
            .iter()
            .map(|(name, tool)| {
                let canonical = NAMES.iter().find(|(_, t)| t == tool).map(|(n, _)| *n);
                let alias_of = canonical.filter(|c| c != name);
                RawTool {
                    name: name.to_string(),
                    description: Some(tool.description(alias_of)),
                    input_schema: tool.input_schema(),
                    annotations: Some(json!({"readOnlyHint": true, "idempotentHint": true})),
                    extra: Default::default(),
                }
            })
            .collect()
    }

    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        let tool = Tool::from_name(tool)?;
        Some(Box::pin(self.run(tool, call)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_listed_and_dispatchable() {
        let mut seen = std::collections::BTreeSet::new();
        for (name, tool) in NAMES {
            assert_eq!(Tool::from_name(name), Some(tool));
            assert!(seen.insert(name), "{name} twice");
            assert_eq!(tool.input_schema()["type"], "object");
        }
        assert_eq!(
            Tool::TextPresent.description(Some("assert_text_present")),
            format!(
                "Same as hub__assert_text_present. {}",
                Tool::TextPresent.description(None)
            )
        );
    }

    #[test]
    fn params_are_typed_and_checked() {
        let (c, t, s) = parse(
            Tool::TextPresent,
            &json!({"text": "Saved", "exact": true, "timeout": 500, "server": "pw"}),
        )
        .expect("valid");
        assert_eq!(
            c,
            Assertion::Text {
                text: "Saved".into(),
                exact: true
            }
        );
        assert_eq!(t, Some(Duration::from_millis(500)));
        assert_eq!(s.as_deref(), Some("pw"));
        let (c, t, _) = parse(
            Tool::ElementVisible,
            &json!({"targetDescription": "Submit button", "timeout": 0}),
        )
        .expect("the seed's field name");
        assert!(matches!(c, Assertion::Element { .. }));
        assert_eq!(t, None, "0 means look once");
        for (tool, params) in [
            (Tool::TextPresent, json!({})),
            (Tool::TextPresent, json!({"text": "  "})),
            (Tool::TextPresent, json!({"text": "x", "timeout": -1})),
            (Tool::ElementVisible, json!({"description": "the"})),
        ] {
            let e = parse(tool, &params).expect_err("invalid");
            assert_eq!(e.error_type, ErrorType::InvalidParams, "{params}");
        }
    }
}
