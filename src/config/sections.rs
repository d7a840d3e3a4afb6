//! Validation of the sections other than `server` and `mcpServers`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;

use super::ctx::Ctx;
use super::defaults::{self as d, default_redact_keys, default_safety_rules, default_strategies};
use super::locate::esc;
use super::raw::{
    suggest, RawBuiltin, RawHealthCheck, RawRecording, RawReplay, RawRetry, RawRuns, RawSafety,
    RawSecurity, RawTaskEngine,
};
use super::{
    BuiltinConfig, ConfigError, Durability, HealthCheckConfig, RecordingConfig, ReplayConfig,
    Retention, RetryConfig, RetryStrategy, RunsConfig, SafetyAction, SafetyConfig, SafetyRule,
    SecurityConfig, TaskEngineConfig, UncertainPolicy,
};
use crate::errors::ErrorType;

/// regex errors are multi-line diagrams; keep the last line ("unclosed group").
fn regex_msg(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    last.trim().trim_start_matches("error: ").to_string()
}

fn compile(ctx: &Ctx, pattern: &str, ptr: &str, what: &str) -> Result<Regex, ConfigError> {
    Regex::new(pattern).map_err(|e| {
        ctx.err(
            ptr,
            format!(
                "{what} \"{pattern}\" is not a valid regex: {}",
                regex_msg(&e)
            ),
        )
    })
}

pub(super) fn builtin(ctx: &Ctx, r: RawBuiltin) -> Result<BuiltinConfig, ConfigError> {
    let workspace = r.workspace.as_deref().unwrap_or(d::WORKSPACE);
    Ok(BuiltinConfig {
        enabled: r.enabled.unwrap_or(true),
        workspace: ctx.resolve(workspace, "/builtin/workspace")?,
        command_timeout: ctx.ms(
            r.command_timeout,
            d::COMMAND_TIMEOUT_MS,
            "/builtin/commandTimeout",
        )?,
        max_output_bytes: ctx.positive(
            r.max_output_bytes,
            d::MAX_OUTPUT_BYTES,
            "/builtin/maxOutputBytes",
        )?,
        max_read_bytes: ctx.positive(
            r.max_read_bytes,
            d::MAX_READ_BYTES,
            "/builtin/maxReadBytes",
        )?,
        sandbox: r.sandbox.unwrap_or_default(),
        sandbox_network: r.sandbox_network.unwrap_or(false),
        sandbox_deny_read: read_paths(ctx, r.sandbox_deny_read, "/builtin/sandboxDenyRead")?,
        sandbox_allow_read: read_paths(
            ctx,
            Some(r.sandbox_allow_read.unwrap_or_default()),
            "/builtin/sandboxAllowRead",
        )?,
        command_env: env_names(ctx, r.command_env.unwrap_or_default())?,
        config_file: ctx
            .path
            .file_name()
            .map(|name| ctx.base_dir.join(name))
            .unwrap_or_default(),
    })
}

/// `builtin.commandEnv`: names of environment variables (`*` and `?`
/// globs), each non-empty, without `=` or NUL.
fn env_names(ctx: &Ctx, names: Vec<String>) -> Result<Vec<String>, ConfigError> {
    for (i, n) in names.iter().enumerate() {
        if n.is_empty() || n.contains(['=', '\0']) {
            let at = format!("/builtin/commandEnv/{i}");
            return Err(ctx.err(
                &at,
                format!("{} \"{}\" is not a variable name: write a name such as \"CARGO_HOME\" or a glob such as \"XDG_*\" (no '=', not empty)", super::ctx::dotted(&at), n.escape_debug()),
            ));
        }
    }
    Ok(names)
}

/// `builtin.sandboxDenyRead` / `sandboxAllowRead`: each entry resolved
/// like any configured path (`~` is the hub's `HOME`); absent means the
/// default deny list, whose `~` entries are left out when `HOME` is unset.
fn read_paths(
    ctx: &Ctx,
    list: Option<Vec<String>>,
    ptr: &str,
) -> Result<Vec<PathBuf>, ConfigError> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    let Some(list) = list else {
        return Ok(d::SANDBOX_DENY_READ
            .iter()
            .filter_map(|p| Some(Path::new(home.as_ref()?).join(p.strip_prefix("~/")?)))
            .collect());
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let at = format!("{ptr}/{i}");
        if p == "~" || p.starts_with("~/") {
            let Some(home) = &home else {
                return Err(ctx.err(
                    &at,
                    format!(
                        "{} starts with ~ but the hub has no HOME; write the path in full",
                        super::ctx::dotted(&at)
                    ),
                ));
            };
            let rest = p.trim_start_matches('~').trim_start_matches('/');
            out.push(super::ctx::normalize(&Path::new(home).join(rest)));
            continue;
        }
        out.push(ctx.resolve(p, &at)?);
    }
    Ok(out)
}

pub(super) fn task_engine(ctx: &Ctx, r: RawTaskEngine) -> Result<TaskEngineConfig, ConfigError> {
    let state_dir = r.state_dir.as_deref().unwrap_or(d::STATE_DIR);
    let ret = r.retention.unwrap_or_default();
    let hours = ctx.positive(
        ret.max_age_hours,
        d::RETENTION_MAX_AGE_HOURS,
        "/taskEngine/retention/maxAgeHours",
    )?;
    let resumable_hours = ctx.positive(
        ret.resumable_max_age_hours,
        d::RETENTION_RESUMABLE_MAX_AGE_HOURS,
        "/taskEngine/retention/resumableMaxAgeHours",
    )?;
    Ok(TaskEngineConfig {
        default_timeout: ctx.ms(
            r.default_timeout,
            d::DEFAULT_TIMEOUT_MS,
            "/taskEngine/defaultTimeout",
        )?,
        state_dir: ctx.resolve(state_dir, "/taskEngine/stateDir")?,
        max_batch_steps: ctx.positive(
            r.max_batch_steps,
            d::MAX_BATCH_STEPS,
            "/taskEngine/maxBatchSteps",
        )?,
        durability: r.durability.unwrap_or(Durability::Step),
        resume_uncertain: r.resume_uncertain.unwrap_or(UncertainPolicy::Confirm),
        retention: Retention {
            max_age: Duration::from_secs(hours.saturating_mul(3600)),
            max_tasks: ctx.positive(
                ret.max_tasks,
                d::RETENTION_MAX_TASKS,
                "/taskEngine/retention/maxTasks",
            )?,
            resumable_max_age: Duration::from_secs(resumable_hours.saturating_mul(3600)),
            resumable_max_tasks: ctx.positive(
                ret.resumable_max_tasks,
                d::RETENTION_RESUMABLE_MAX_TASKS,
                "/taskEngine/retention/resumableMaxTasks",
            )?,
        },
    })
}

pub(super) fn health_check(ctx: &Ctx, r: RawHealthCheck) -> Result<HealthCheckConfig, ConfigError> {
    Ok(HealthCheckConfig {
        enabled: r.enabled.unwrap_or(true),
        interval: ctx.ms(r.interval, d::HEALTH_INTERVAL_MS, "/healthCheck/interval")?,
        auto_fix: r.auto_fix.unwrap_or(true),
    })
}

pub(super) fn recording(ctx: &Ctx, r: RawRecording) -> Result<RecordingConfig, ConfigError> {
    let storage = r.storage_path.as_deref().unwrap_or(d::STORAGE_PATH);
    Ok(RecordingConfig {
        enabled: r.enabled.unwrap_or(true),
        screenshot_on_step: r.screenshot_on_step.unwrap_or(false),
        storage_path: ctx.resolve(storage, "/recording/storagePath")?,
        max_bytes: ctx.positive(r.max_bytes, d::RECORDING_MAX_BYTES, "/recording/maxBytes")?,
    })
}

pub(super) fn runs(ctx: &Ctx, r: RawRuns) -> Result<RunsConfig, ConfigError> {
    let storage = r.storage_path.as_deref().unwrap_or(d::RUNS_PATH);
    Ok(RunsConfig {
        storage_path: ctx.resolve(storage, "/runs/storagePath")?,
    })
}

pub(super) fn replay(ctx: &Ctx, r: RawReplay) -> Result<ReplayConfig, ConfigError> {
    let ignore = r.ignore.unwrap_or_default();
    let ignore_regexes = ignore.regexes.unwrap_or_default();
    for (i, pattern) in ignore_regexes.iter().enumerate() {
        compile(
            ctx,
            pattern,
            &format!("/replay/ignore/regexes/{i}"),
            "replay.ignore.regexes entry",
        )?;
    }
    Ok(ReplayConfig {
        ignore_paths: ignore.paths.unwrap_or_default(),
        ignore_regexes,
    })
}

pub(super) fn retry(ctx: &Ctx, r: RawRetry) -> Result<RetryConfig, ConfigError> {
    let mut strategies = default_strategies();
    let recoverable: Vec<&str> = ErrorType::ALL
        .into_iter()
        .filter(|t| t.recoverable())
        .map(ErrorType::as_str)
        .collect();
    for (key, s) in r.strategies.unwrap_or_default() {
        let p = format!("/retry/strategies/{}", esc(&key));
        let class = match ErrorType::parse(&key) {
            Some(c) => c,
            None => {
                let all: Vec<&'static str> = ErrorType::ALL.map(ErrorType::as_str).to_vec();
                let hint = suggest(&key, &all)
                    .map(|s| format!("did you mean \"{s}\"? "))
                    .unwrap_or_default();
                return Err(ctx.err(
                    &p,
                    format!(
                        "retry.strategies: unknown error type \"{key}\"; {hint}expected one of {}",
                        recoverable.join(", ")
                    ),
                ));
            }
        };
        if !class.recoverable() {
            return Err(ctx.err(
                &p,
                format!("retry.strategies: {key} is not recoverable and is never retried; expected one of {}", recoverable.join(", ")),
            ));
        }
        // Field by field over the class default; every recoverable class has one.
        let base = strategies.get(&class).cloned().unwrap_or(RetryStrategy {
            max_retries: 1,
            delay: Duration::from_millis(1000),
            backoff: d::BACKOFF,
            jitter: d::JITTER,
            action: super::RetryAction::None,
        });
        let backoff = s.backoff.unwrap_or(base.backoff);
        if !(backoff.is_finite() && backoff >= 1.0) {
            return Err(ctx.err(
                &format!("{p}/backoff"),
                format!("retry.strategies.{key}.backoff must be a number >= 1.0, found {backoff}"),
            ));
        }
        let jitter = s.jitter.unwrap_or(base.jitter);
        if !(0.0..=1.0).contains(&jitter) {
            return Err(ctx.err(
                &format!("{p}/jitter"),
                format!(
                    "retry.strategies.{key}.jitter must be between 0.0 and 1.0, found {jitter}"
                ),
            ));
        }
        let merged = RetryStrategy {
            max_retries: s.max_retries.unwrap_or(base.max_retries),
            delay: s.delay.map_or(base.delay, Duration::from_millis),
            backoff,
            jitter,
            action: s.action.unwrap_or(base.action),
        };
        strategies.insert(class, merged);
    }
    let safe_to_repeat = r.safe_to_repeat.unwrap_or_default();
    if let Some((i, g)) = safe_to_repeat.iter().enumerate().find(|(_, g)| bad_glob(g)) {
        return Err(ctx.err(
            &format!("/retry/safeToRepeat/{i}"),
            format!("retry.safeToRepeat[{i}] \"{g}\" is not a valid glob; expected a qualified tool name with * and ? wildcards"),
        ));
    }
    Ok(RetryConfig {
        strategies,
        retry_destructive_on_timeout: r.retry_destructive_on_timeout.unwrap_or(false),
        safe_to_repeat,
    })
}

/// Globs support `*` and `?` only; brackets and braces would silently be
/// literal, so they are refused rather than misunderstood.
fn bad_glob(g: &str) -> bool {
    g.is_empty() || g.chars().any(|c| c.is_whitespace() || "[]{}".contains(c))
}

pub(super) fn safety(ctx: &Ctx, r: RawSafety) -> Result<SafetyConfig, ConfigError> {
    let rules = match r.rules {
        None => default_safety_rules(),
        Some(raw_rules) => {
            let mut rules = Vec::with_capacity(raw_rules.len());
            for (i, rule) in raw_rules.into_iter().enumerate() {
                let p = format!("/safety/rules/{i}");
                let tool = rule.tool.unwrap_or_else(|| "*".to_string());
                if bad_glob(&tool) {
                    return Err(ctx.err(
                        &format!("{p}/tool"),
                        format!("safety.rules[{i}].tool \"{tool}\" is not a valid glob; expected a tool name with * and ? wildcards"),
                    ));
                }
                let mut matches = Vec::new();
                for (key, pattern) in rule.matches.unwrap_or_default() {
                    let what = format!("safety.rules[{i}].match.{key}");
                    let re = compile(ctx, &pattern, &format!("{p}/match/{}", esc(&key)), &what)?;
                    matches.push((key, re));
                }
                rules.push(SafetyRule {
                    tool,
                    matches,
                    action: rule.action.unwrap_or(SafetyAction::Confirm),
                    reason: rule.reason,
                });
            }
            rules
        }
    };
    Ok(SafetyConfig {
        rules,
        confirm_timeout: ctx.ms(
            r.confirm_timeout,
            d::CONFIRM_TIMEOUT_MS,
            "/safety/confirmTimeout",
        )?,
    })
}

pub(super) fn security(ctx: &Ctx, r: RawSecurity) -> Result<SecurityConfig, ConfigError> {
    let redact_keys = r.redact_keys.unwrap_or_else(default_redact_keys);
    for (i, k) in redact_keys.iter().enumerate() {
        let p = format!("/security/redactKeys/{i}");
        if k.is_empty() {
            return Err(ctx.err(
                &p,
                "security.redactKeys has an empty entry, which would redact every key; remove it",
            ));
        }
        compile(ctx, k, &p, "security.redactKeys entry")?;
    }
    // An empty list must match nothing; `[^\s\S]` is the empty class.
    let pattern = if redact_keys.is_empty() {
        r"[^\s\S]".to_string()
    } else {
        let parts: Vec<String> = redact_keys.iter().map(|k| format!("(?:{k})")).collect();
        format!("(?i){}", parts.join("|"))
    };
    let redact = compile(ctx, &pattern, "/security/redactKeys", "security.redactKeys")?;
    Ok(SecurityConfig {
        pin_tools: r.pin_tools.unwrap_or(false),
        redact_keys,
        redact,
        secrets: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{bad, ok};
    use super::super::RetryAction;
    use super::*;

    #[test]
    fn strategy_overrides_merge_field_by_field() {
        let c = ok(r#"{"retry": {"strategies": {
            "TIMEOUT": {"maxRetries": 5},
            "NETWORK": {"delay": 10, "backoff": 1.5, "jitter": 0, "action": "rebuild_context"}
        }, "retryDestructiveOnTimeout": true, "safeToRepeat": ["t__*"]}}"#)
        .config;
        let s = &c.retry.strategies;
        let t = &s[&ErrorType::Timeout];
        assert_eq!(t.max_retries, 5);
        assert_eq!(t.delay, Duration::from_millis(1000));
        assert_eq!(t.action, RetryAction::ExtendTimeout);
        assert_eq!((t.backoff, t.jitter), (2.0, 0.2));
        let n = &s[&ErrorType::Network];
        assert_eq!(n.max_retries, 3);
        assert_eq!(n.delay, Duration::from_millis(10));
        assert_eq!((n.backoff, n.jitter), (1.5, 0.0));
        assert_eq!(n.action, RetryAction::RebuildContext);
        // Untouched classes keep their defaults.
        assert_eq!(
            s[&ErrorType::PageClosed],
            default_strategies()[&ErrorType::PageClosed]
        );
        assert_eq!(s.len(), 8);
        assert!(c.retry.retry_destructive_on_timeout);
        assert_eq!(c.retry.safe_to_repeat, ["t__*"]);
        let (_, _, m) = bad(r#"{"retry": {"safeToRepeat": ["t__[ab]"]}}"#);
        assert!(m.starts_with("retry.safeToRepeat[0]"), "{m}");
    }

    #[test]
    fn strategy_keys_must_be_recoverable_error_types() {
        let (l, c, m) = bad("{\"retry\": {\"strategies\": {\n  \"TIMEOUTS\": {}}}}");
        assert_eq!((l, c), (2, 3));
        assert!(m.starts_with("retry.strategies: unknown error type \"TIMEOUTS\"; did you mean \"TIMEOUT\"? expected one of TIMEOUT, PAGE_CLOSED"), "{m}");
        let (_, _, m) = bad(r#"{"retry": {"strategies": {"NOT_FOUND": {}}}}"#);
        assert!(m.contains("NOT_FOUND is not recoverable"), "{m}");
        let (_, _, m) = bad(r#"{"retry": {"strategies": {"TIMEOUT": {"action": "explode"}}}}"#);
        assert!(
            m.starts_with("retry.strategies.TIMEOUT.action: unknown variant `explode`"),
            "{m}"
        );
        let (_, _, m) = bad(r#"{"retry": {"strategies": {"TIMEOUT": {"backoff": 0.5}}}}"#);
        assert!(m.contains("backoff must be a number >= 1.0"), "{m}");
        let (_, _, m) = bad(r#"{"retry": {"strategies": {"TIMEOUT": {"jitter": 2}}}}"#);
        assert!(m.contains("jitter must be between 0.0 and 1.0"), "{m}");
    }

    #[test]
    fn configured_safety_rules_replace_the_defaults() {
        let c = ok(r#"{"safety": {"rules": [
            {"tool": "*delete*", "action": "deny", "reason": "no deleting"},
            {"match": {"command": "^git\\s+push"}}
        ], "confirmTimeout": 1000}}"#)
        .config;
        let r = &c.safety.rules;
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].tool.as_str(), r[0].action),
            ("*delete*", SafetyAction::Deny)
        );
        assert!(r[0].applies("fs.delete_file", &serde_json::json!({})));
        assert!(!r[0].applies("read_file", &serde_json::json!({})));
        assert_eq!(
            (r[1].tool.as_str(), r[1].action),
            ("*", SafetyAction::Confirm)
        );
        assert!(r[1].applies(
            "run_command",
            &serde_json::json!({"command": "git push -f"})
        ));
        assert!(!r[1].applies("run_command", &serde_json::json!({"cmd": "git push"})));
        assert_eq!(c.safety.confirm_timeout, Duration::from_secs(1));
        assert!(ok(r#"{"safety": {"rules": []}}"#)
            .config
            .safety
            .rules
            .is_empty());
    }

    #[test]
    fn bad_safety_rules_are_located() {
        let (l, c, m) = bad(
            "{\"safety\": {\"rules\": [{\"tool\": \"x\",\n  \"match\": {\"command\": \"rm(\"}}]}}",
        );
        assert_eq!((l, c), (2, 13));
        assert_eq!(
            m,
            "safety.rules[0].match.command \"rm(\" is not a valid regex: unclosed group"
        );
        let (_, _, m) = bad(r#"{"safety": {"rules": [{"tool": "run_[abc]"}]}}"#);
        assert!(
            m.contains("safety.rules[0].tool \"run_[abc]\" is not a valid glob"),
            "{m}"
        );
        let (_, _, m) = bad(r#"{"safety": {"rules": [{"tool": ""}]}}"#);
        assert!(m.contains("is not a valid glob"), "{m}");
        let (_, _, m) = bad(r#"{"safety": {"rules": [{"action": "maybe"}]}}"#);
        assert!(
            m.starts_with(
                "safety.rules[0].action: unknown variant `maybe`, expected `deny` or `confirm`"
            ),
            "{m}"
        );
        let (_, _, m) = bad(r#"{"replay": {"ignore": {"regexes": ["ok", "("]}}}"#);
        assert!(
            m.starts_with("replay.ignore.regexes entry \"(\" is not a valid regex"),
            "{m}"
        );
    }

    #[test]
    fn redaction_matches_secret_keys_case_insensitively() {
        let s = ok("{}").config.security;
        for key in [
            "password",
            "X-Api-Key",
            "githubToken",
            "Authorization",
            "api_key",
            "apikey",
            "Set-Cookie",
            "CLIENT_SECRET",
        ] {
            assert!(s.is_secret_key(key), "{key} should be secret");
        }
        for key in ["username", "query", "url", "path", "command"] {
            assert!(!s.is_secret_key(key), "{key} should not be secret");
        }
        let s = ok(r#"{"security": {"redactKeys": ["^pin$"], "pinTools": true}}"#)
            .config
            .security;
        assert!(s.pin_tools);
        assert!(
            s.is_secret_key("PIN") && !s.is_secret_key("pinned") && !s.is_secret_key("password")
        );
        let s = ok(r#"{"security": {"redactKeys": []}}"#).config.security;
        assert!(!s.is_secret_key("password") && !s.redact.is_match(""));
        let (_, _, m) = bad(r#"{"security": {"redactKeys": ["ok", "a[b"]}}"#);
        assert!(
            m.starts_with("security.redactKeys entry \"a[b\" is not a valid regex"),
            "{m}"
        );
        let (_, _, m) = bad(r#"{"security": {"redactKeys": [""]}}"#);
        assert!(m.contains("empty entry"), "{m}");
    }
}
