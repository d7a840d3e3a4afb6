//! The config module's unit tests (the shipped config.json among them).

use super::*;

#[test]
fn shipped_config_parses_without_warnings() {
    let l = parse(
        include_str!("../../config.json"),
        Path::new("/opt/toolhub/config.json"),
    )
    .unwrap_or_else(|e| panic!("shipped config.json is invalid: {e}"));
    assert_eq!(l.warnings, Vec::<String>::new());
    let c = l.config;
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:8765");
    // Exactly the reference extension (its manifest `key` fixes its id).
    assert_eq!(
        c.server.allowed_origins,
        vec!["chrome-extension://ogalccghdnhlhiecjohlmgmaembolcgn"]
    );
    assert_eq!(c.builtin.workspace, PathBuf::from("/opt/toolhub/workspace"));
    assert_eq!(c.task_engine.state_dir, PathBuf::from("/opt/toolhub/state"));
    assert_eq!(
        c.recording.storage_path,
        PathBuf::from("/opt/toolhub/recordings")
    );
    let names: Vec<&str> = c.mcp_servers.keys().map(String::as_str).collect();
    assert_eq!(names, ["filesystem", "playwright"]);
    assert!(c.mcp_servers.values().all(|s| s.disabled));
    let pw = &c.mcp_servers["playwright"];
    assert_eq!(pw.recovery_tool.as_deref(), Some("browser_close"));
    assert_eq!(pw.snapshot_tool.as_deref(), Some("browser_snapshot"));
    assert_eq!(
        pw.screenshot_tool.as_deref(),
        Some("browser_take_screenshot")
    );
    // A browser per chat tab, each with a profile of its own.
    assert_eq!(pw.scope, Scope::Context);
    match &pw.transport {
        Transport::Stdio { command, args, .. } => {
            assert_eq!(command, "npx");
            assert!(args.iter().any(|a| a == "@playwright/mcp@latest"));
            assert!(args.iter().any(|a| a == "--isolated"));
            assert!(args
                .windows(2)
                .any(|w| w == ["--executable-path", "/usr/bin/chromium"]));
        }
        other => panic!("playwright is not stdio: {other:?}"),
    }
}

#[test]
fn debug_output_hides_the_token() {
    let shown = format!("{:?}", TokenSetting::Fixed("s3cret".into()));
    assert!(!shown.contains("s3cret"), "{shown}");
}

#[test]
fn rules_match_argv_arrays_and_non_strings() {
    let rule = SafetyRule {
        tool: "*".into(),
        matches: vec![("command".into(), regex::Regex::new(r"^rm -rf /$").unwrap())],
        action: SafetyAction::Confirm,
        reason: None,
    };
    assert!(rule.applies("x", &serde_json::json!({"command": ["rm", "-rf", "/"]})));
    assert!(!rule.applies("x", &serde_json::json!({"command": null})));
    assert!(!rule.applies("x", &serde_json::json!({})));
    let n = SafetyRule {
        matches: vec![("n".into(), regex::Regex::new(r"^42$").unwrap())],
        ..rule
    };
    assert!(n.applies("x", &serde_json::json!({"n": 42})));
    // Any of a tool's names: the qualified one alone is enough.
    let fs = SafetyRule {
        tool: "fs__*".into(),
        ..n
    };
    let p = serde_json::json!({"n": 42});
    assert!(fs.applies_to_any(&["delete", "fs__delete"], &p));
    assert!(!fs.applies_to_any(&["delete", "git__delete"], &p));
    assert!(!fs.applies_to_any(&["delete", "fs__delete"], &serde_json::json!({"n": 4})));
}

#[test]
fn config_error_accessors() {
    let e = parse("{\n  \"server\": 1}", Path::new("c.json")).unwrap_err();
    assert_eq!((e.line(), e.column()), (Some(2), Some(13)));
    assert_eq!(e.path(), Path::new("c.json"));
    assert_eq!(e.to_string(), format!("c.json:2:13: {}", e.message()));
    assert!(!e.is_not_found());
}

#[test]
fn sandbox_read_lists_default_to_the_credential_stores_and_resolve_like_paths() {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let c = test_support::ok("{}").config.builtin;
    assert_eq!(c.config_file, PathBuf::from(test_support::P));
    assert!(c.sandbox_allow_read.is_empty());
    if let Some(home) = &home {
        assert_eq!(c.sandbox_deny_read.len(), 18);
        for p in [
            ".ssh",
            ".aws",
            ".config/gcloud",
            ".netrc",
            ".mozilla",
            ".cargo/credentials.toml",
        ] {
            assert!(c.sandbox_deny_read.contains(&home.join(p)), "{p}");
        }
    }
    let c = test_support::ok(
        r#"{"builtin": {"sandboxDenyRead": ["~/.secret", "rel/x", "/abs"], "sandboxAllowRead": ["~"]}}"#,
    )
    .config
    .builtin;
    if let Some(home) = &home {
        assert_eq!(
            c.sandbox_deny_read,
            [
                home.join(".secret"),
                PathBuf::from("/tmp/cfgtest/rel/x"),
                PathBuf::from("/abs")
            ]
        );
        assert_eq!(c.sandbox_allow_read, std::slice::from_ref(home));
    }
    let (_, _, m) = test_support::bad(r#"{"builtin": {"sandboxDenyRead": [""]}}"#);
    assert!(
        m.contains("builtin.sandboxDenyRead.0 must not be empty"),
        "{m}"
    );
    let (_, _, m) = test_support::bad(r#"{"builtin": {"sandboxAllowRead": "~/.ssh"}}"#);
    assert!(
        m.starts_with("builtin.sandboxAllowRead: invalid type"),
        "{m}"
    );
}

#[test]
fn command_env_names_are_kept_and_bad_ones_refused() {
    let c = test_support::ok("{}").config.builtin;
    assert!(c.command_env.is_empty());
    let c = test_support::ok(r#"{"builtin": {"commandEnv": ["CARGO_HOME", "XDG_*"]}}"#)
        .config
        .builtin;
    assert_eq!(c.command_env, ["CARGO_HOME", "XDG_*"]);
    for bad in [r#"[""]"#, r#"["A=B"]"#] {
        let text = format!(r#"{{"builtin": {{"commandEnv": {bad}}}}}"#);
        let e = parse(&text, Path::new(test_support::P))
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"))
            .to_string();
        assert!(
            e.contains("builtin.commandEnv.0") && e.contains("not a variable name"),
            "{e}"
        );
    }
}
