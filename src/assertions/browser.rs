//! The browser the assertions look at: which configured server it is, and
//! one look at its page (the probe script through that server's
//! `browser_evaluate`). The hub never starts a browser of its own; a call
//! that reaches a server's browser goes through the call layer
//! (`Hub::resolve_settled` waits for a starting server, the tool pins are
//! checked, `Hub::attempt` runs it), like the hub's other helper calls.

use serde::Deserialize;
use serde_json::{json, Value};

use super::locator::Candidate;
use crate::config::{BrowserChoice, Config};
use crate::errors::{ErrorType, HubError};
use crate::hub::local::LocalCall;
use crate::hub::Hub;
use crate::retry::RetryOverride;

/// The Playwright MCP tool that runs a function in the page.
pub const EVALUATE_TOOL: &str = "browser_evaluate";

/// The page side, see the comment at its top.
const PROBE: &str = include_str!("probe.js");

/// What one look at the page found (see probe.js for the shapes).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Probe {
    pub url: String,
    /// The browser shows a fresh `about:blank`: no page is open.
    pub blank: bool,
    /// The script itself failed.
    pub error: Option<String>,
    pub found: Option<TextFound>,
    pub hidden: Vec<TextHidden>,
    pub near: Vec<String>,
    pub candidates: Vec<Candidate>,
    /// More elements could have matched than the probe reports.
    pub more: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TextFound {
    pub tag: String,
    pub context: String,
    pub in_viewport: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TextHidden {
    pub tag: String,
    pub hidden: String,
    pub context: String,
}

/// The server an assertion checks: the call's `server`, else the config's
/// choice ([`crate::config::AssertionsConfig::choose`]).
pub fn server_for(cfg: &Config, requested: Option<&str>) -> Result<String, HubError> {
    let names = || {
        cfg.mcp_servers
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(name) = requested {
        if cfg.mcp_servers.contains_key(name) {
            return Ok(name.to_string());
        }
        return Err(HubError::new(
            ErrorType::InvalidParams,
            format!("`server` \"{name}\" is not a configured server (servers: {})", names()),
        )
        .with_suggestion("pass the name of the @playwright/mcp entry in mcpServers as `server`, or leave `server` out to use assertions.browserServer"));
    }
    match cfg.assertions.choose(&cfg.mcp_servers) {
        BrowserChoice::One(name) => Ok(name),
        BrowserChoice::None => Err(HubError::new(
            ErrorType::BrowserMissing,
            "no browser server is configured for the assertion tools (no mcpServers entry has a snapshotTool and assertions.browserServer is not set)",
        )
        .with_suggestion("add @playwright/mcp to mcpServers with \"snapshotTool\": \"browser_snapshot\" (the hub never starts a browser itself), or name its entry in assertions.browserServer")),
        BrowserChoice::Several(list) => Err(HubError::new(
            ErrorType::InvalidParams,
            format!("several servers could be the browser ({}); the call does not say which", list.join(", ")),
        )
        .with_suggestion("pass `server`, or set assertions.browserServer in config.json")),
    }
}

/// The `browser_evaluate` params that run the probe with `plan` (the
/// script without its leading comment, which would only travel).
pub fn evaluate_params(plan: &Value) -> Value {
    let code = PROBE.find("(plan) =>").map_or(PROBE, |at| &PROBE[at..]);
    json!({"function": format!("() => ({})({plan})", code.trim_end())})
}

/// One look at the page of `server`'s browser.
pub async fn look(
    hub: &Hub,
    server: &str,
    plan: &Value,
    call: LocalCall<'_>,
) -> Result<Probe, HubError> {
    let tool = format!("{server}__{EVALUATE_TOOL}");
    let info = hub
        .resolve_settled(&tool, None, &RetryOverride::Default, call.cancel)
        .await
        .map_err(|e| match e.error_type {
            ErrorType::ToolNotFound => {
                let hint = format!("server {server} has no {EVALUATE_TOOL}: the assertion tools need a @playwright/mcp server; set assertions.browserServer or `server` to one");
                e.with_suggestion(hint)
            }
            _ => e,
        })?;
    hub.pin_check(&info, call.client.is_some())?;
    let params = evaluate_params(plan);
    let timeout = hub.default_timeout(server);
    let attempt = hub
        .attempt(
            &info,
            &params,
            timeout,
            call.cancel,
            crate::hub::AttemptFor {
                session: call.session,
                client: call.client,
                context: call.context,
                view: call.view,
            },
        )
        .await;
    let value = attempt.result?;
    let probe = parse_answer(&value).map_err(|m| {
        HubError::new(
            ErrorType::Unknown,
            format!("could not read the answer of {server}'s {EVALUATE_TOOL}: {m}"),
        )
        .with_server(server)
        .with_tool(EVALUATE_TOOL)
    })?;
    if let Some(e) = &probe.error {
        return Err(HubError::classified(format!("the page check failed: {e}"))
            .with_server(server)
            .with_tool(EVALUATE_TOOL));
    }
    Ok(probe)
}

/// The probe's summary out of a `browser_evaluate` answer: Playwright MCP
/// answers Markdown (`### Result` then the JSON, then other sections), or in
/// its JSON mode an object whose `result` holds that JSON text.
pub fn parse_answer(v: &Value) -> Result<Probe, String> {
    let text = match v {
        Value::String(s) => result_section(s),
        Value::Object(o) => match o.get("result") {
            Some(Value::String(s)) => s.as_str(),
            Some(inner) => return serde_json::from_value(inner.clone()).map_err(|e| e.to_string()),
            None => return serde_json::from_value(v.clone()).map_err(|e| e.to_string()),
        },
        _ => return Err("expected text or an object".into()),
    };
    let probe: Value = serde_json::from_str(text.trim()).map_err(|e| {
        let start: String = text.trim().chars().take(120).collect();
        format!("{e} in {start:?}")
    })?;
    if !probe.is_object() {
        return Err("the result is not an object".into());
    }
    serde_json::from_value(probe).map_err(|e| e.to_string())
}

/// The body of the `### Result` section, or the whole text when it has no
/// sections. No line of the JSON starts with `### ` (newlines inside its
/// strings are escaped).
fn result_section(s: &str) -> &str {
    let Some(at) = s.find("### Result\n") else {
        return s;
    };
    let body = &s[at + "### Result\n".len()..];
    match body.find("\n### ") {
        Some(end) => &body[..end],
        None => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    #[test]
    fn the_answer_is_read_from_the_result_section() {
        let md = "### Result\n{\n  \"url\": \"http://x/\",\n  \"blank\": false,\n  \"near\": [\"### not a header\"]\n}\n### Ran Playwright code\n```js\nawait page.evaluate('() => 1');\n```\n### Page\n- Page URL: http://x/";
        let p = parse_answer(&json!(md)).expect("parsed");
        assert_eq!(p.url, "http://x/");
        assert_eq!(p.near, ["### not a header"]);
        let raw = parse_answer(&json!("{\"blank\": true}")).expect("parsed");
        assert!(raw.blank);
        let structured = parse_answer(&json!({"result": "{\"url\": \"u\"}"})).expect("parsed");
        assert_eq!(structured.url, "u");
        assert!(parse_answer(&json!("### Error\nboom")).is_err());
        assert!(parse_answer(&json!("### Result\n\"a string\"")).is_err());
        assert!(parse_answer(&json!(3)).is_err());
    }

    #[test]
    fn the_probe_is_sent_as_a_function_with_its_plan() {
        let p = evaluate_params(&json!({"mode": "text", "text": "a\"b"}));
        let f = p["function"].as_str().expect("function");
        assert!(f.starts_with("() => ((plan) => {"), "{}", &f[..40]);
        assert!(
            f.ends_with(")({\"mode\":\"text\",\"text\":\"a\\\"b\"})"),
            "{}",
            &f[f.len() - 60..]
        );
    }

    #[test]
    fn the_server_is_the_call_s_or_the_config_s() {
        let cfg = |text: &str| {
            parse(text, Path::new("/tmp/cfgtest/config.json"))
                .expect("valid")
                .config
        };
        let one = cfg(
            r#"{"mcpServers": {"pw": {"command": "x", "snapshotTool": "s"}, "fs": {"command": "y"}}}"#,
        );
        assert_eq!(server_for(&one, None).expect("pw"), "pw");
        assert_eq!(server_for(&one, Some("fs")).expect("fs"), "fs");
        let e = server_for(&one, Some("nope")).expect_err("unknown");
        assert_eq!(e.error_type, ErrorType::InvalidParams);
        assert!(e.message.contains("servers: fs, pw"), "{}", e.message);
        let none = cfg(r#"{"mcpServers": {"fs": {"command": "y"}}}"#);
        let e = server_for(&none, None).expect_err("none");
        assert_eq!(e.error_type, ErrorType::BrowserMissing);
        assert!(e.suggestion.contains("snapshotTool"), "{}", e.suggestion);
        let two = cfg(
            r#"{"mcpServers": {"a": {"command": "x", "snapshotTool": "s"}, "b": {"command": "y", "snapshotTool": "s"}}}"#,
        );
        let e = server_for(&two, None).expect_err("several");
        assert_eq!(e.error_type, ErrorType::InvalidParams);
        assert!(e.message.contains("(a, b)"), "{}", e.message);
    }
}
