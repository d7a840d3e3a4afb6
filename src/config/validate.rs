//! Raw -> validated: applies defaults, resolves paths, checks every rule the
//! types cannot express, and turns each failure into `path:line:column`.
//! The `server` section lives in `server_section`, `mcpServers` entries in
//! `servers`, the other sections in `sections`; [`Ctx`] (in `ctx`) carries the
//! file and its locator to every check, and `json_error` formats serde_json's
//! syntax and type errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ctx::{dotted, normalize, Ctx};
use super::json_error::json_error;
use super::locate::Locator;
use super::raw::{self, RawConfig};
use super::server_section::server_section;
use super::{Config, ConfigError, LoadedConfig};

/// (absolute file path, its folder). The folder is canonicalized when it
/// exists so the hub sees one stable name for it.
fn absolutize(path: &Path) -> (PathBuf, PathBuf) {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(path),
            Err(_) => path.to_path_buf(),
        }
    };
    let joined = normalize(&joined);
    let parent = joined.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = std::fs::canonicalize(&parent).unwrap_or(parent);
    let file = match joined.file_name() {
        Some(name) => base.join(name),
        None => joined.clone(),
    };
    (file, base)
}

pub(super) fn parse(text: &str, path: &Path) -> Result<LoadedConfig, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|e| json_error(path, text, &e, None))?;
    let loc = Locator::new(text);
    if !value.is_object() {
        let (line, column) = loc.value_position("");
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line,
            column,
            message: "the top level must be a JSON object like {\"mcpServers\": {…}}".into(),
        });
    }
    let raw: RawConfig =
        serde_json::from_str(text).map_err(|e| json_error(path, text, &e, Some(&loc)))?;
    let (abs_path, base_dir) = absolutize(path);
    let mut ctx = Ctx {
        path,
        loc,
        base_dir: base_dir.clone(),
        warnings: Vec::new(),
    };
    for u in super::key_table::unknown_keys(&value) {
        if let Some(why) = u.removed {
            let key = dotted(&u.pointer);
            let msg = format!(
                "{key} was removed in this version and is ignored: {why}; delete it from the file"
            );
            ctx.warn(&u.pointer, msg);
            continue;
        }
        let parent = dotted(&u.pointer[..u.pointer.rfind('/').unwrap_or(0)]);
        let place = if parent.is_empty() {
            String::new()
        } else {
            format!(" in {parent}")
        };
        let known: Vec<&str> = u
            .known
            .iter()
            .copied()
            .filter(|k| *k != "$schema")
            .collect();
        let hint = match raw::suggest(&u.key, u.known) {
            Some(s) => format!("; did you mean \"{s}\"?"),
            None => ";".to_string(),
        };
        let msg = format!(
            "unknown key \"{}\"{place} (ignored){hint} known keys: {}",
            u.key,
            known.join(", ")
        );
        ctx.warn(&u.pointer, msg);
    }

    let server = server_section(&ctx, raw.server.unwrap_or_default())?;
    let mut mcp_servers = BTreeMap::new();
    for (name, spec) in raw.mcp_servers.unwrap_or_default() {
        let spec = super::servers::server_spec(&mut ctx, &name, spec)?;
        mcp_servers.insert(name, spec);
    }
    let views = super::views::views(&ctx, raw.views.unwrap_or_default())?;
    let clients = super::views::clients(&ctx, raw.clients.unwrap_or_default(), &views)?;
    if server.token == super::TokenSetting::Disabled && !clients.is_empty() {
        // With no hub token the gate admits every request as the main
        // token before it reads a client's: each client would open the
        // whole aggregate, not its views.
        return Err(ctx.err(
            "/clients",
            "clients are set but server.token is false: with no hub token every request counts as the main token's, so a client's token would open every view and tool, not only its own; remove \"token\": false from server (the hub then generates a token into <stateDir>/token) or set a token there, or delete clients",
        ));
    }
    let mut config = Config {
        views,
        clients,
        path: abs_path,
        base_dir,
        server,
        builtin: super::sections::builtin(&ctx, raw.builtin.unwrap_or_default())?,
        task_engine: super::sections::task_engine(&ctx, raw.task_engine.unwrap_or_default())?,
        health_check: super::sections::health_check(&ctx, raw.health_check.unwrap_or_default())?,
        recording: super::sections::recording(&ctx, raw.recording.unwrap_or_default())?,
        runs: super::sections::runs(&ctx, raw.runs.unwrap_or_default())?,
        replay: super::sections::replay(&ctx, raw.replay.unwrap_or_default())?,
        retry: super::sections::retry(&ctx, raw.retry.unwrap_or_default())?,
        safety: super::sections::safety(&ctx, raw.safety.unwrap_or_default())?,
        security: super::sections::security(&ctx, raw.security.unwrap_or_default())?,
        assertions: super::assertions::section(
            &mut ctx,
            raw.assertions.unwrap_or_default(),
            &mcp_servers,
        )?,
        mcp_servers,
    };
    config.security.secrets =
        crate::secrets::SecretValues::configured(super::configured_secrets(&config));
    if config.server.idle_timeout <= config.server.ping_interval {
        ctx.warn(
            "/server/idleTimeout",
            "server.idleTimeout is not longer than server.pingInterval; healthy idle connections will be closed",
        );
    }
    ctx.warnings.sort_by_key(|(l, c, _)| (*l, *c));
    let warnings = ctx
        .warnings
        .into_iter()
        .map(|(l, c, m)| format!("{}:{l}:{c}: {m}", path.display()))
        .collect();
    Ok(LoadedConfig { config, warnings })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use super::super::test_support::{bad, ok, P};
    use super::super::{parse, Durability, SandboxMode, TokenSetting, UncertainPolicy};
    use super::*;

    #[test]
    fn empty_object_gives_every_default() {
        let l = ok("{}");
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        let c = l.config;
        assert_eq!(c.path, PathBuf::from(P));
        assert_eq!(c.base_dir, PathBuf::from("/tmp/cfgtest"));
        assert_eq!(
            c.server.listen,
            "127.0.0.1:8765".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(c.server.allowed_origins, vec!["chrome-extension://*"]);
        assert_eq!(c.server.token, TokenSetting::Generate);
        assert_eq!(c.server.max_message_bytes, 4_194_304);
        assert_eq!(c.server.max_connections, 64);
        assert_eq!(c.server.send_queue, 1024);
        assert_eq!(c.server.handshake_timeout, Duration::from_secs(5));
        assert_eq!(c.server.ping_interval, Duration::from_secs(20));
        assert_eq!(c.server.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.server.max_json_depth, 128);
        assert!(c.mcp_servers.is_empty());
        assert!(c.builtin.enabled);
        assert_eq!(c.builtin.workspace, PathBuf::from("/tmp/cfgtest/workspace"));
        assert_eq!(c.builtin.command_timeout, Duration::from_secs(30));
        assert_eq!(c.builtin.max_output_bytes, 1_048_576);
        assert_eq!(c.builtin.max_read_bytes, 10_485_760);
        assert_eq!(c.builtin.sandbox, SandboxMode::WorkspaceWrite);
        assert!(!c.builtin.sandbox_network);
        let t = &c.task_engine;
        assert_eq!(t.default_timeout, Duration::from_secs(60));
        assert_eq!(t.state_dir, PathBuf::from("/tmp/cfgtest/state"));
        assert_eq!(t.max_batch_steps, 1000);
        assert_eq!(t.durability, Durability::Step);
        assert_eq!(t.resume_uncertain, UncertainPolicy::Confirm);
        assert_eq!(t.retention.max_age, Duration::from_secs(168 * 3600));
        assert_eq!(t.retention.max_tasks, 1000);
        assert_eq!(
            t.retention.resumable_max_age,
            Duration::from_secs(720 * 3600)
        );
        assert_eq!(t.retention.resumable_max_tasks, 200);
        assert!(c.health_check.enabled && c.health_check.auto_fix);
        assert_eq!(c.health_check.interval, Duration::from_secs(30));
        assert!(c.recording.enabled && !c.recording.screenshot_on_step);
        assert_eq!(
            c.recording.storage_path,
            PathBuf::from("/tmp/cfgtest/recordings")
        );
        assert_eq!(c.recording.max_bytes, 104_857_600);
        assert!(c.replay.ignore_paths.is_empty() && c.replay.ignore_regexes.is_empty());
        assert_eq!(c.retry.strategies, super::super::default_strategies());
        assert_eq!(c.retry.strategies.len(), 8);
        assert!(!c.retry.retry_destructive_on_timeout);
        assert_eq!(c.safety.rules, super::super::default_safety_rules());
        assert_eq!(c.safety.confirm_timeout, Duration::from_secs(300));
        assert!(!c.security.pin_tools);
        assert_eq!(c.security.redact_keys.len(), 6);
    }

    #[test]
    fn top_level_must_be_an_object() {
        let (l, c, m) = bad("\n  [1]");
        assert_eq!((l, c), (2, 3));
        assert!(m.contains("top level must be a JSON object"), "{m}");
    }

    #[test]
    fn unknown_keys_warn_with_a_suggestion_and_place() {
        let l = ok("{\n  \"serverz\": {},\n  \"server\": {\"maxConection\": 3}\n}");
        assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
        let w = &l.warnings[0];
        assert!(w.starts_with(&format!("{P}:2:3: unknown key \"serverz\" (ignored); did you mean \"server\"? known keys: server, mcpServers")), "{w}");
        assert!(!w.contains("$schema"), "{w}");
        let w = &l.warnings[1];
        assert!(w.starts_with(&format!("{P}:3:14: unknown key \"maxConection\" in server (ignored); did you mean \"maxConnections\"?")), "{w}");
        let l = ok(r#"{"zzzzzzzzzz": 1}"#);
        assert!(
            l.warnings[0].contains("unknown key \"zzzzzzzzzz\" (ignored); known keys: server,"),
            "{:?}",
            l.warnings
        );
        let l = ok(
            r#"{"$schema": "x", "mcpServers": {"a": {"type": "stdio", "command": "x", "headers": {}}}}"#,
        );
        assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
        assert!(l.warnings[0].contains("mcpServers.a.headers is ignored for a \"command\" server"));
    }

    #[test]
    fn relative_config_path_becomes_absolute() {
        let c = ok("{}").config;
        assert!(c.path.is_absolute());
        let l = parse("{}", Path::new("sub/config.json")).unwrap();
        assert!(l.config.path.is_absolute());
        assert!(l.config.path.ends_with("sub/config.json"));
        assert_eq!(l.config.base_dir, l.config.path.parent().unwrap());
    }

    #[test]
    fn load_reads_the_file_and_missing_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let e = super::super::load(&path).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.line(), None);
        std::fs::write(&path, r#"{"taskEngine": {"stateDir": "s"}}"#).unwrap();
        let c = super::super::load(&path).unwrap().config;
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(c.base_dir, base);
        assert_eq!(c.task_engine.state_dir, base.join("s"));
    }
}
