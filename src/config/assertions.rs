//! The `assertions` section: which server's browser the assertion tools
//! (`hub__assert_text_present`, `hub__assert_element_visible`) check, and
//! how often they look again while waiting.

use std::collections::BTreeMap;
use std::time::Duration;

use super::ctx::Ctx;
use super::defaults as d;
use super::raw::RawAssertions;
use super::{ConfigError, ServerSpec};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionsConfig {
    /// The server the assertions drive; `None`: the one entry that names a
    /// `snapshotTool` (a Playwright MCP server).
    pub browser_server: Option<String>,
    /// The pause between two looks while an assertion waits (`timeout`).
    pub poll_interval: Duration,
}

/// Which server an assertion should use, when the call names none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrowserChoice {
    /// `assertions.browserServer`, or the only entry with `snapshotTool`.
    One(String),
    /// No entry qualifies.
    None,
    /// Several entries have `snapshotTool` and none is named.
    Several(Vec<String>),
}

impl AssertionsConfig {
    /// The browser server by the rule above.
    pub fn choose(&self, servers: &BTreeMap<String, ServerSpec>) -> BrowserChoice {
        if let Some(name) = &self.browser_server {
            return BrowserChoice::One(name.clone());
        }
        let with_snapshot: Vec<String> = servers
            .values()
            .filter(|s| s.snapshot_tool.is_some())
            .map(|s| s.name.clone())
            .collect();
        match with_snapshot.as_slice() {
            [] => BrowserChoice::None,
            [one] => BrowserChoice::One(one.clone()),
            _ => BrowserChoice::Several(with_snapshot),
        }
    }
}

pub(super) fn section(
    ctx: &mut Ctx,
    r: RawAssertions,
    servers: &BTreeMap<String, ServerSpec>,
) -> Result<AssertionsConfig, ConfigError> {
    if let Some(name) = &r.browser_server {
        if !servers.contains_key(name) {
            let names: Vec<&str> = servers.keys().map(String::as_str).collect();
            let hint = match crate::suggest::did_you_mean(name, names.iter().copied()).first() {
                Some(near) => format!("; did you mean \"{near}\"?"),
                None => String::new(),
            };
            let known = if names.is_empty() {
                "mcpServers is empty".to_string()
            } else {
                format!("servers: {}", names.join(", "))
            };
            return Err(ctx.err(
                "/assertions/browserServer",
                format!("assertions.browserServer \"{name}\" is not an entry of mcpServers{hint} {known}"),
            ));
        }
    }
    let cfg = AssertionsConfig {
        browser_server: r.browser_server,
        poll_interval: ctx.ms(
            r.poll_interval,
            d::ASSERT_POLL_INTERVAL_MS,
            "/assertions/pollInterval",
        )?,
    };
    if let BrowserChoice::Several(names) = cfg.choose(servers) {
        ctx.warn(
            "/mcpServers",
            format!(
                "several servers name a snapshotTool ({}); the assertion tools need assertions.browserServer or a `server` param to know which browser to check",
                names.join(", ")
            ),
        );
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{bad, ok};
    use super::*;

    #[test]
    fn the_browser_defaults_to_the_one_server_with_a_snapshot_tool() {
        let c = ok(r#"{"mcpServers": {
                "fs": {"command": "x"},
                "pw": {"command": "y", "snapshotTool": "browser_snapshot"}}}"#)
        .config;
        assert_eq!(c.assertions.poll_interval, Duration::from_millis(250));
        assert_eq!(c.assertions.browser_server, None);
        assert_eq!(
            c.assertions.choose(&c.mcp_servers),
            BrowserChoice::One("pw".into())
        );
        let none = ok(r#"{"mcpServers": {"fs": {"command": "x"}}}"#).config;
        assert_eq!(
            none.assertions.choose(&none.mcp_servers),
            BrowserChoice::None
        );
    }

    #[test]
    fn several_snapshot_servers_warn_unless_one_is_named() {
        let two = r#"{"mcpServers": {
                "a": {"command": "x", "snapshotTool": "s"},
                "b": {"command": "y", "snapshotTool": "s"}}BROWSER}"#;
        let l = ok(&two.replace("BROWSER", ""));
        assert_eq!(
            l.config.assertions.choose(&l.config.mcp_servers),
            BrowserChoice::Several(vec!["a".into(), "b".into()])
        );
        assert!(
            l.warnings
                .iter()
                .any(|w| w.contains("several servers name a snapshotTool (a, b)")),
            "{:?}",
            l.warnings
        );
        let l = ok(&two.replace(
            "BROWSER",
            r#", "assertions": {"browserServer": "b", "pollInterval": 100}"#,
        ));
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        let a = &l.config.assertions;
        assert_eq!(a.poll_interval, Duration::from_millis(100));
        assert_eq!(
            a.choose(&l.config.mcp_servers),
            BrowserChoice::One("b".into())
        );
    }

    #[test]
    fn a_browser_server_that_is_not_configured_is_located() {
        let (l, c, m) = bad(
            "{\"mcpServers\": {\"pw\": {\"command\": \"x\"}},\n \"assertions\": {\"browserServer\": \"pww\"}}",
        );
        assert_eq!((l, c), (2, 17));
        assert!(
            m.contains("assertions.browserServer \"pww\" is not an entry of mcpServers; did you mean \"pw\"? servers: pw"),
            "{m}"
        );
        let (_, _, m) = bad(r#"{"assertions": {"pollInterval": 0}}"#);
        assert!(
            m.contains("assertions.pollInterval must be greater than 0"),
            "{m}"
        );
    }

    #[test]
    fn unknown_assertion_keys_are_warned_with_the_nearest_key() {
        let l = ok(r#"{"assertions": {"browserserver": "x"}}"#);
        assert!(
            l.warnings.iter().any(
                |w| w.contains("unknown key \"browserserver\" in assertions")
                    && w.contains("did you mean \"browserServer\"")
            ),
            "{:?}",
            l.warnings
        );
    }
}
