//! Raw -> validated: applies defaults, resolves paths, checks every rule the
//! types cannot express, and turns each failure into `path:line:column`.
//! Sections other than `server` and `mcpServers` live in `sections`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::defaults as d;
use super::locate::Locator;
use super::raw::{self, RawConfig, RawServerSection, RawToken};
use super::{Config, ConfigError, Loaded, ServerConfig, TokenSetting};

/// Carries what every check needs to report a located error or warning.
pub(super) struct Ctx<'a> {
    pub path: &'a Path,
    pub loc: Locator<'a>,
    pub base_dir: PathBuf,
    pub warnings: Vec<(usize, usize, String)>,
}

impl Ctx<'_> {
    /// An error placed at the key named by `pointer`.
    pub fn err(&self, pointer: &str, message: impl Into<String>) -> ConfigError {
        let (line, column) = self.loc.position(pointer);
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line,
            column,
            message: one_line(&message.into()),
        }
    }

    pub fn warn(&mut self, pointer: &str, message: impl Into<String>) {
        let (line, column) = self.loc.position(pointer);
        self.warnings
            .push((line, column, one_line(&message.into())));
    }

    /// A duration in ms that must be > 0.
    pub fn ms(&self, v: Option<u64>, default: u64, ptr: &str) -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(self.positive(v, default, ptr)?))
    }

    /// A count or size that must be > 0.
    pub fn positive<T>(&self, v: Option<T>, default: T, ptr: &str) -> Result<T, ConfigError>
    where
        T: Copy + PartialEq + Default + std::fmt::Display,
    {
        let v = v.unwrap_or(default);
        if v == T::default() {
            return Err(self.err(ptr, format!("{} must be greater than 0", dotted(ptr))));
        }
        Ok(v)
    }

    /// Resolve a configured path against the config folder (`~/` is $HOME).
    pub fn resolve(&self, value: &str, ptr: &str) -> Result<PathBuf, ConfigError> {
        if value.trim().is_empty() {
            return Err(self.err(
                ptr,
                format!("{} must not be empty; expected a path", dotted(ptr)),
            ));
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let p = match (value.strip_prefix("~/"), home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(value),
        };
        Ok(normalize(&self.base_dir.join(p)))
    }
}

/// Messages quote user text (keys, names, patterns) that may hold escaped
/// newlines or control characters; errors and warnings must stay one line.
fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `/mcpServers/fs/args/0` -> `mcpServers.fs.args.0` for messages.
pub(super) fn dotted(pointer: &str) -> String {
    pointer
        .trim_start_matches('/')
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Drop `.` components (`/cfg/./state` -> `/cfg/state`); `..` is kept because
/// resolving it lexically is wrong across symlinks.
fn normalize(p: &Path) -> PathBuf {
    p.components().filter(|c| *c != Component::CurDir).collect()
}

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

/// A serde_json error as a located one-line error; type errors get the
/// dotted path of the offending value in front.
fn json_error(
    path: &Path,
    text: &str,
    e: &serde_json::Error,
    loc: Option<&Locator>,
) -> ConfigError {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let mut msg = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    // serde names our mirror types ("expected struct RawServer"); say "an object".
    while let Some(at) = msg.find("struct Raw") {
        let end = msg[at + 10..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .map_or(msg.len(), |i| at + 10 + i);
        msg.replace_range(at..end, "an object");
    }
    if let Some(place) = loc.and_then(|l| l.display_at(e.line(), e.column())) {
        msg = format!("{place}: {msg}");
    }
    let line = e.line().max(1);
    // serde_json counts bytes; report characters like everything else.
    let line_text = text.lines().nth(line - 1).unwrap_or("");
    let byte_col = e.column().max(1);
    let column = line_text
        .char_indices()
        .take_while(|(i, _)| *i < byte_col - 1)
        .count()
        + 1;
    ConfigError::Invalid {
        path: path.to_path_buf(),
        line,
        column,
        message: one_line(&msg),
    }
}

pub(super) fn parse(text: &str, path: &Path) -> Result<Loaded, ConfigError> {
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
    for u in raw::unknown_keys(&value) {
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
    let config = Config {
        path: abs_path,
        base_dir,
        server,
        mcp_servers,
        builtin: super::sections::builtin(&ctx, raw.builtin.unwrap_or_default())?,
        task_engine: super::sections::task_engine(&ctx, raw.task_engine.unwrap_or_default())?,
        health_check: super::sections::health_check(&ctx, raw.health_check.unwrap_or_default())?,
        recording: super::sections::recording(&ctx, raw.recording.unwrap_or_default())?,
        replay: super::sections::replay(&ctx, raw.replay.unwrap_or_default())?,
        retry: super::sections::retry(&ctx, raw.retry.unwrap_or_default())?,
        safety: super::sections::safety(&ctx, raw.safety.unwrap_or_default())?,
        security: super::sections::security(&ctx, raw.security.unwrap_or_default())?,
    };
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
    Ok(Loaded { config, warnings })
}

fn parse_listen(s: &str) -> Option<SocketAddr> {
    if let Ok(a) = s.parse() {
        return Some(a);
    }
    let port = s.strip_prefix("localhost:")?.parse().ok()?;
    Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
}

fn server_section(ctx: &Ctx, r: RawServerSection) -> Result<ServerConfig, ConfigError> {
    let listen_text = r.listen.as_deref().unwrap_or(d::LISTEN);
    let listen = parse_listen(listen_text).ok_or_else(|| {
        ctx.err(
            "/server/listen",
            format!("server.listen \"{listen_text}\" is not an address; expected IP:PORT such as 127.0.0.1:8765"),
        )
    })?;
    let token = match r.token {
        None | Some(RawToken::Flag(true)) => TokenSetting::Generate,
        Some(RawToken::Flag(false)) => TokenSetting::Disabled,
        Some(RawToken::Fixed(t)) if t.trim().is_empty() => {
            return Err(ctx.err(
                "/server/token",
                "server.token is an empty string; set a token, remove the key to generate one, or set false (loopback only)",
            ))
        }
        Some(RawToken::Fixed(t)) => TokenSetting::Fixed(t),
    };
    if token == TokenSetting::Disabled && !listen.ip().is_loopback() {
        return Err(ctx.err(
            "/server/token",
            format!("server.token is false but server.listen {listen} is not loopback; set a token or listen on 127.0.0.1"),
        ));
    }
    let allowed_origins = r
        .allowed_origins
        .unwrap_or_else(|| d::ALLOWED_ORIGINS.iter().map(|s| s.to_string()).collect());
    if let Some(i) = allowed_origins.iter().position(|o| o.trim().is_empty()) {
        return Err(ctx.err(
            &format!("/server/allowedOrigins/{i}"),
            "server.allowedOrigins has an empty entry; expected an origin such as chrome-extension://*",
        ));
    }
    Ok(ServerConfig {
        listen,
        allowed_origins,
        token,
        max_message_bytes: ctx.positive(
            r.max_message_bytes,
            d::MAX_MESSAGE_BYTES,
            "/server/maxMessageBytes",
        )?,
        max_connections: ctx.positive(
            r.max_connections,
            d::MAX_CONNECTIONS,
            "/server/maxConnections",
        )?,
        send_queue: ctx.positive(r.send_queue, d::SEND_QUEUE, "/server/sendQueue")?,
        handshake_timeout: ctx.ms(
            r.handshake_timeout,
            d::HANDSHAKE_TIMEOUT_MS,
            "/server/handshakeTimeout",
        )?,
        ping_interval: ctx.ms(r.ping_interval, d::PING_INTERVAL_MS, "/server/pingInterval")?,
        idle_timeout: ctx.ms(r.idle_timeout, d::IDLE_TIMEOUT_MS, "/server/idleTimeout")?,
        max_json_depth: ctx.positive(
            r.max_json_depth,
            d::MAX_JSON_DEPTH,
            "/server/maxJsonDepth",
        )?,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{parse, Durability, UncertainPolicy};
    use super::*;

    pub const P: &str = "/tmp/cfgtest/config.json";

    pub fn ok(text: &str) -> Loaded {
        match parse(text, Path::new(P)) {
            Ok(l) => l,
            Err(e) => panic!("expected a valid config, got: {e}"),
        }
    }

    /// (line, column, message) of the error `text` must produce.
    pub fn bad(text: &str) -> (usize, usize, String) {
        match parse(text, Path::new(P)) {
            Ok(_) => panic!("expected an error for {text}"),
            Err(e) => {
                let shown = e.to_string();
                assert!(!shown.contains('\n'), "error is not one line: {shown}");
                let (l, c) = (e.line().unwrap(), e.column().unwrap());
                assert!(shown.starts_with(&format!("{P}:{l}:{c}: ")), "{shown}");
                (l, c, e.message())
            }
        }
    }

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
        let t = &c.task_engine;
        assert_eq!(t.default_timeout, Duration::from_secs(60));
        assert_eq!(t.max_retries, 3);
        assert_eq!(t.retry_delay, Duration::from_secs(1));
        assert_eq!(t.state_dir, PathBuf::from("/tmp/cfgtest/state"));
        assert_eq!(t.max_batch_steps, 1000);
        assert_eq!(t.durability, Durability::Step);
        assert_eq!(t.resume_uncertain, UncertainPolicy::Confirm);
        assert_eq!(t.retention.max_age, Duration::from_secs(168 * 3600));
        assert_eq!(t.retention.max_tasks, 1000);
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
        assert_eq!(c.retry.strategies.len(), 6);
        assert!(!c.retry.retry_destructive_on_timeout);
        assert_eq!(c.safety.rules, super::super::default_safety_rules());
        assert_eq!(c.safety.confirm_timeout, Duration::from_secs(300));
        assert!(!c.security.pin_tools);
        assert_eq!(c.security.redact_keys.len(), 6);
    }

    #[test]
    fn syntax_error_reports_line_and_column() {
        // Missing comma after "a": serde_json stops at the next key's quote.
        let (l, c, m) = bad(
            "{\n  \"server\": {\n    \"listen\": \"127.0.0.1:1\"\n    \"token\": \"x\"\n  }\n}",
        );
        assert_eq!((l, c), (4, 5), "{m}");
        assert!(m.contains("expected `,` or `}`"), "{m}");
    }

    #[test]
    fn type_error_reports_line_column_and_key() {
        let (l, c, m) = bad("{\n  \"server\": {\n    \"maxConnections\": \"x\"\n  }\n}");
        assert_eq!((l, c), (3, 25), "{m}");
        assert_eq!(
            m,
            "server.maxConnections: invalid type: string \"x\", expected usize"
        );
        let (l, _, m) = bad("{\"mcpServers\": {\n \"fs\": 5}}");
        assert_eq!(l, 2);
        assert_eq!(
            m,
            "mcpServers.fs: invalid type: integer `5`, expected an object"
        );
        let (_, _, m) = bad(r#"{"taskEngine": {"durability": "sometimes"}}"#);
        assert!(
            m.starts_with("taskEngine.durability: unknown variant `sometimes`"),
            "{m}"
        );
    }

    #[test]
    fn top_level_must_be_an_object() {
        let (l, c, m) = bad("\n  [1]");
        assert_eq!((l, c), (2, 3));
        assert!(m.contains("top level must be a JSON object"), "{m}");
    }

    #[test]
    fn semantic_errors_point_at_the_key() {
        let (l, c, m) = bad("{\n  \"server\": {\n      \"listen\": \"nope\"}}");
        assert_eq!((l, c), (3, 7));
        assert!(
            m.contains("server.listen \"nope\" is not an address"),
            "{m}"
        );
    }

    #[test]
    fn token_rules() {
        let (l, c, m) = bad("{\"server\": {\"listen\": \"0.0.0.0:8765\",\n  \"token\": false}}");
        assert_eq!((l, c), (2, 3));
        assert_eq!(
            m,
            "server.token is false but server.listen 0.0.0.0:8765 is not loopback; set a token or listen on 127.0.0.1"
        );
        let (_, _, m) = bad(r#"{"server": {"token": ""}}"#);
        assert!(m.contains("server.token is an empty string"), "{m}");
        let (_, _, m) = bad(r#"{"server": {"token": 5}}"#);
        assert!(m.contains("a token string or false"), "{m}");
        let t = |s: &str| ok(s).config.server.token;
        assert_eq!(t(r#"{"server": {"token": false}}"#), TokenSetting::Disabled);
        assert_eq!(t(r#"{"server": {"token": true}}"#), TokenSetting::Generate);
        assert_eq!(
            t(r#"{"server": {"token": "s3"}}"#),
            TokenSetting::Fixed("s3".into())
        );
        let c = ok(r#"{"server": {"listen": "[::1]:9000", "token": false}}"#).config;
        assert_eq!(c.server.token, TokenSetting::Disabled);
        let c = ok(r#"{"server": {"listen": "localhost:9001"}}"#).config;
        assert_eq!(
            c.server.listen,
            "127.0.0.1:9001".parse::<SocketAddr>().unwrap()
        );
        let c = ok(r#"{"server": {"listen": "0.0.0.0:9002", "token": "t"}}"#).config;
        assert!(!c.server.listen.ip().is_loopback());
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
    fn relative_paths_resolve_against_the_config_folder() {
        let l = ok(r#"{
            "builtin": {"workspace": "ws"},
            "taskEngine": {"stateDir": "../st"},
            "recording": {"storagePath": "/abs/rec"}}"#);
        let c = l.config;
        assert_eq!(c.builtin.workspace, PathBuf::from("/tmp/cfgtest/ws"));
        assert_eq!(c.task_engine.state_dir, PathBuf::from("/tmp/cfgtest/../st"));
        assert_eq!(c.recording.storage_path, PathBuf::from("/abs/rec"));
        let (_, _, m) = bad(r#"{"builtin": {"workspace": ""}}"#);
        assert!(m.contains("builtin.workspace must not be empty"), "{m}");
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

    #[test]
    fn messages_stay_one_line_and_zero_is_refused() {
        let (_, _, m) = bad("{\"mcpServers\": {\"a\\nb\": {}}}");
        assert!(m.contains("server name \"a\\nb\" is invalid"), "{m}");
        let w = ok("{\"a\\u0007\": 1}").warnings;
        assert!(w[0].contains("unknown key \"a\\u{7}\""), "{w:?}");
        let (l, c, m) = bad("{\"server\": {\n\"maxConnections\": 0}}");
        assert_eq!((l, c), (2, 1));
        assert_eq!(m, "server.maxConnections must be greater than 0");
        let (_, _, m) = bad(r#"{"mcpServers": {"a": {"command": "x", "timeout": 0}}}"#);
        assert_eq!(m, "mcpServers.a.timeout must be greater than 0");
    }
}
