//! Validation of `mcpServers` entries: names, exactly one transport, paths.

use super::ctx::Ctx;
use super::locate::esc;
use super::raw::RawServer;
use super::{ConfigError, InstanceLimits, Scope, ServerSpec, ToolOverride, Transport};

/// `^[A-Za-z0-9_-]{1,32}$`, and not "hub" (reserved for the hub's own tools).
fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.eq_ignore_ascii_case("hub")
}

/// A `recording` value is a path (resolved) when it could not be a plain id.
fn looks_like_path(s: &str) -> bool {
    s.contains('/')
        || s.contains('\\')
        || s.starts_with('.')
        || s.ends_with(".json")
        || s.ends_with(".jsonl")
}

pub(super) fn server_spec(
    ctx: &mut Ctx,
    name: &str,
    r: RawServer,
) -> Result<ServerSpec, ConfigError> {
    let p = format!("/mcpServers/{}", esc(name));
    if !valid_server_name(name) {
        return Err(ctx.err(
            &p,
            format!("mcpServers: server name \"{name}\" is invalid; expected 1-32 characters from A-Z a-z 0-9 _ - and not \"hub\""),
        ));
    }
    let kinds: Vec<&str> = [
        ("command", r.command.is_some()),
        ("url", r.url.is_some()),
        ("recording", r.recording.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, set)| set.then_some(k))
    .collect();
    match kinds.as_slice() {
        [] => {
            return Err(ctx.err(
                &p,
                format!("mcpServers.{name} has neither \"command\" (stdio child) nor \"url\" (streamable HTTP); set one of them (or \"recording\")"),
            ))
        }
        [_] => {}
        [first, second, ..] => {
            return Err(ctx.err(
                &format!("{p}/{second}"),
                format!("mcpServers.{name} has both \"{first}\" and \"{second}\"; a server has exactly one of command, url, recording"),
            ))
        }
    }
    // Keys that belong to another transport are ignored; say so.
    let ignored: &[(&str, bool)] = match kinds[0] {
        "command" => &[("headers", r.headers.is_some())],
        "url" => &[
            ("args", r.args.is_some()),
            ("env", r.env.is_some()),
            ("cwd", r.cwd.is_some()),
        ],
        _ => &[
            ("args", r.args.is_some()),
            ("env", r.env.is_some()),
            ("cwd", r.cwd.is_some()),
            ("headers", r.headers.is_some()),
        ],
    };
    for (key, set) in ignored {
        if *set {
            let msg = format!(
                "mcpServers.{name}.{key} is ignored for a \"{}\" server",
                kinds[0]
            );
            ctx.warn(&format!("{p}/{key}"), msg);
        }
    }
    let transport = if let Some(command) = r.command {
        if command.trim().is_empty() {
            return Err(ctx.err(
                &format!("{p}/command"),
                format!("mcpServers.{name}.command is empty; expected a program such as npx"),
            ));
        }
        let cwd = match &r.cwd {
            Some(c) => ctx.resolve(c, &format!("{p}/cwd"))?,
            None => ctx.base_dir.clone(),
        };
        Transport::Stdio {
            command,
            args: r.args.unwrap_or_default(),
            env: r.env.unwrap_or_default(),
            cwd: Some(cwd),
        }
    } else if let Some(url) = r.url {
        if !(url.starts_with("http://") || url.starts_with("https://"))
            || url.len() <= "https://".len()
        {
            return Err(ctx.err(
                &format!("{p}/url"),
                format!("mcpServers.{name}.url \"{url}\" is not an http(s) URL; expected e.g. http://127.0.0.1:3001/mcp"),
            ));
        }
        Transport::Http {
            url,
            headers: r.headers.unwrap_or_default(),
        }
    } else {
        let source = r.recording.unwrap_or_default();
        let rp = format!("{p}/recording");
        let source = if looks_like_path(&source) {
            ctx.resolve(&source, &rp)?.to_string_lossy().into_owned()
        } else if source.trim().is_empty() {
            return Err(ctx.err(
                &rp,
                format!("mcpServers.{name}.recording is empty; expected a recording id or path"),
            ));
        } else {
            source
        };
        Transport::Recording { source }
    };
    let timeout = match r.timeout {
        None => None,
        Some(ms) => Some(ctx.ms(Some(ms), 1, &format!("{p}/timeout"))?),
    };
    let tool_overrides = r
        .tools
        .unwrap_or_default()
        .into_iter()
        .map(|(tool, o)| {
            let o = ToolOverride {
                resume_uncertain: o.resume_uncertain,
            };
            (tool, o)
        })
        .collect();
    let scope = r.scope.unwrap_or_default();
    if scope == Scope::Context && matches!(transport, Transport::Recording { .. }) {
        return Err(ctx.err(
            &format!("{p}/scope"),
            format!("mcpServers.{name}.scope \"context\" needs a command or url server; a recording-backed server has no per-client state (remove scope)"),
        ));
    }
    if scope == Scope::Shared && (r.max_instances.is_some() || r.instance_idle_ms.is_some()) {
        ctx.warn(
            &format!("{p}/scope"),
            format!("mcpServers.{name}.maxInstances and instanceIdleMs apply only with \"scope\": \"context\"; they are ignored"),
        );
    }
    let defaults = InstanceLimits::default();
    let max = r.max_instances.unwrap_or(defaults.max);
    if max == 0 || max > 256 {
        return Err(ctx.err(
            &format!("{p}/maxInstances"),
            format!("mcpServers.{name}.maxInstances {max} is out of range; expected 1 to 256"),
        ));
    }
    let instances = InstanceLimits {
        max,
        idle: ctx.ms(
            r.instance_idle_ms,
            defaults.idle.as_millis() as u64,
            &format!("{p}/instanceIdleMs"),
        )?,
    };
    Ok(ServerSpec {
        scope,
        instances,
        name: name.to_string(),
        transport,
        disabled: r.disabled.unwrap_or(false),
        trusted: r.trusted.unwrap_or(false),
        timeout,
        recovery_tool: r.recovery_tool,
        snapshot_tool: r.snapshot_tool,
        screenshot_tool: r.screenshot_tool,
        resume_uncertain: r.resume_uncertain,
        tool_overrides,
    })
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::super::test_support::{bad, ok, P};
    use super::*;
    use std::path::{Path, PathBuf};

    #[test]
    fn server_semantic_errors_point_at_the_key() {
        let text =
            "{\"mcpServers\": {\n  \"ok\": {\"command\": \"x\"},\n  \"fs\": {\"args\": []}}}";
        let (l, c, m) = bad(text);
        assert_eq!((l, c), (3, 3));
        assert!(m.contains("mcpServers.fs has neither \"command\""), "{m}");

        let (l, c, m) =
            bad("{\"mcpServers\": {\"fs\": {\"command\": \"x\",\n \"url\": \"http://h/mcp\"}}}");
        assert_eq!((l, c), (2, 2));
        assert!(m.contains("has both \"command\" and \"url\""), "{m}");

        let (_, _, m) = bad(r#"{"mcpServers": {"my server": {"command": "x"}}}"#);
        assert!(m.contains("server name \"my server\" is invalid"), "{m}");
        let (_, _, m) = bad(r#"{"mcpServers": {"hub": {"command": "x"}}}"#);
        assert!(m.contains("server name \"hub\" is invalid"), "{m}");
        let long = "a".repeat(33);
        assert!(parse(
            &format!(r#"{{"mcpServers": {{"{long}": {{"command": "x"}}}}}}"#),
            Path::new(P)
        )
        .is_err());
        let (_, _, m) = bad(r#"{"mcpServers": {"r": {"url": "ftp://h"}}}"#);
        assert!(m.contains("not an http(s) URL"), "{m}");
        let (_, _, m) = bad(r#"{"mcpServers": {"r": {"command": " "}}}"#);
        assert!(m.contains("mcpServers.r.command is empty"), "{m}");
    }

    #[test]
    fn server_paths_resolve_against_the_config_folder() {
        let c = ok(r#"{"mcpServers": {
                "a": {"command": "x", "cwd": "./srv"},
                "b": {"command": "x"},
                "c": {"recording": "./recs/one.jsonl"},
                "d": {"recording": "rec-123"}
            }}"#)
        .config;
        let transport = |n: &str| c.mcp_servers[n].transport.clone();
        let cwd = |n: &str| match transport(n) {
            Transport::Stdio { cwd, .. } => cwd,
            other => panic!("{other:?}"),
        };
        assert_eq!(cwd("a"), Some(PathBuf::from("/tmp/cfgtest/srv")));
        assert_eq!(cwd("b"), Some(PathBuf::from("/tmp/cfgtest")));
        let src = |n: &str| match transport(n) {
            Transport::Recording { source } => source,
            other => panic!("{other:?}"),
        };
        assert_eq!(src("c"), "/tmp/cfgtest/recs/one.jsonl");
        assert_eq!(src("d"), "rec-123");
    }
}
