//! config.json: raw serde mirror (`raw`) -> validated [`Config`] (`validate`).
//!
//! Every key is optional (defaults live in `defaults`). Parsing is two passes
//! over the same text: first into `serde_json::Value` (syntax errors with
//! line:column, unknown-key warnings), then into the `Raw*` types (type errors
//! with line:column). Semantic errors are located by `locate`, which maps a JSON
//! pointer back to the line:column of its key. A failed load changes nothing:
//! the caller keeps its old `Config`. `reload` watches the file.

mod assertions;
mod ctx;
mod defaults;
mod glob;
mod json_error;
mod key_table;
mod locate;
mod raw;
pub mod reload;
mod sections;
mod server_section;
mod servers;
#[cfg(test)]
mod test_support;
mod validate;
pub mod views;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::errors::ErrorType;

pub use assertions::{AssertionsConfig, BrowserChoice};
pub use defaults::{default_redact_keys, default_safety_rules, default_strategies, COMMAND_ENV};
pub use glob::glob_match;
pub use key_table::{sections as key_sections, REMOVED as REMOVED_KEYS};
pub use reload::{diff_servers, spawn_watcher, ServerDiff};

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Its folder; every relative path in the file is resolved against it.
    pub base_dir: PathBuf,
    pub server: ServerConfig,
    pub mcp_servers: BTreeMap<String, ServerSpec>,
    pub builtin: BuiltinConfig,
    pub task_engine: TaskEngineConfig,
    pub health_check: HealthCheckConfig,
    pub recording: RecordingConfig,
    pub runs: RunsConfig,
    pub replay: ReplayConfig,
    pub retry: RetryConfig,
    pub safety: SafetyConfig,
    pub security: SecurityConfig,
    pub assertions: AssertionsConfig,
    /// `views`: named subsets of the aggregate, by name.
    pub views: BTreeMap<String, views::ViewSpec>,
    /// `clients`: tokens that open only some views, by client name.
    pub clients: BTreeMap<String, views::ClientSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub allowed_origins: Vec<String>,
    pub token: TokenSetting,
    pub max_message_bytes: usize,
    pub max_connections: usize,
    pub send_queue: usize,
    pub handshake_timeout: Duration,
    pub ping_interval: Duration,
    pub idle_timeout: Duration,
    pub max_json_depth: usize,
    /// Serve the aggregate as an MCP server at `/mcp`.
    pub mcp_endpoint: bool,
    /// At `/mcp`, list a tool or prompt under its bare name when no other
    /// tool or prompt has that name (qualified `server__name` otherwise).
    pub mcp_bare_names: bool,
    /// An `/mcp` session without any request for this long is ended (and
    /// its `maxConnections` slot freed).
    pub mcp_session_idle: Duration,
    /// A 2025-11-25 session client's `tools/call` still running after this
    /// long has its SSE stream ended, and the client resumes it with
    /// `Last-Event-ID` (SEP-1699); zero: never.
    pub mcp_stream_poll: Duration,
    /// At most this many items per page of an `/mcp` list; more come with
    /// a `nextCursor`.
    pub mcp_page_size: usize,
    /// Threads of the async runtime (0: one per CPU core); read at start-up.
    pub worker_threads: usize,
    /// A `/ws` session outlives its socket this long (zero: not at all).
    pub session_grace: Duration,
    /// Bytes of frames a session keeps for a resume.
    pub resume_buffer_bytes: usize,
    /// A `callKey` answers a repeat for this long.
    pub call_key_ttl: Duration,
    /// Call keys kept in memory (oldest out).
    pub call_key_max: usize,
    /// Bytes of answers the call keys hold in memory, for the whole hub
    /// (the oldest answers move to disk first; their keys still hold).
    pub call_key_max_bytes: usize,
    /// The same, for one client (one token's keys).
    pub call_key_client_max_bytes: usize,
    /// Bytes of kept results (`keep_result`) one principal (the main token,
    /// or one client) may have in the workspace; past it a keep is refused.
    pub kept_results_max_bytes: usize,
    /// Concurrent calls one session may have (a token's stateless `/mcp`
    /// requests together count as one session).
    pub max_in_flight_per_session: usize,
    /// Tasks no client drives (MCP tasks) running at once, hub-wide.
    pub max_unattended_tasks: usize,
}

impl ServerConfig {
    /// The runtime's worker threads: `workerThreads`, 0 meaning one per core.
    pub fn runtime_workers(&self) -> usize {
        match self.worker_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

#[derive(Clone, PartialEq, Eq)]
pub enum TokenSetting {
    /// Key absent: generate one at first start into `<stateDir>/token`.
    Generate,
    /// `false`: no token (only allowed on a loopback address).
    Disabled,
    Fixed(String),
}

// Debug by hand so a logged Config never shows the token.
impl std::fmt::Debug for TokenSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSetting::Generate => f.write_str("Generate"),
            TokenSetting::Disabled => f.write_str("Disabled"),
            TokenSetting::Fixed(_) => f.write_str("Fixed(<redacted>)"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    pub transport: Transport,
    pub disabled: bool,
    pub trusted: bool,
    pub timeout: Option<Duration>,
    pub recovery_tool: Option<String>,
    pub snapshot_tool: Option<String>,
    pub screenshot_tool: Option<String>,
    pub resume_uncertain: Option<UncertainPolicy>,
    pub tool_overrides: BTreeMap<String, ToolOverride>,
    /// One process for every client, or one per client context.
    pub scope: Scope,
    /// How many instances a `scope: "context"` server may run at once, and
    /// how long an unused one lives. A reload applies them without a restart.
    pub instances: InstanceLimits,
}

impl ServerSpec {
    /// Whether a reload from `self` to `new` must restart the server: any
    /// change except the instance limits, which apply as they are.
    pub fn needs_restart(&self, new: &ServerSpec) -> bool {
        let mut same = new.clone();
        same.instances = self.instances;
        *self != same
    }
}

/// Whether a server is shared by every client or runs one instance per
/// client context (`scope` in an `mcpServers` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    #[default]
    Shared,
    Context,
}

/// The bounds of a `scope: "context"` server's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceLimits {
    /// `maxInstances` (default 8).
    pub max: usize,
    /// `instanceIdleMs` (default 10 min).
    pub idle: Duration,
}

impl Default for InstanceLimits {
    fn default() -> Self {
        InstanceLimits {
            max: 8,
            idle: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// `cwd` is the configured folder resolved against the config folder, or
    /// the config folder itself when absent, so relative `args` such as
    /// `./workspace` mean the same thing wherever the hub was started.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// A recording id, or an absolute path when the value looked like a path.
    Recording { source: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOverride {
    pub resume_uncertain: Option<UncertainPolicy>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UncertainPolicy {
    Confirm,
    Rerun,
    Skip,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinConfig {
    pub enabled: bool,
    pub workspace: PathBuf,
    pub command_timeout: Duration,
    pub max_output_bytes: usize,
    pub max_read_bytes: usize,
    /// `builtin.sandbox`: how `run_command` is confined (Landlock).
    pub sandbox: SandboxMode,
    /// `builtin.sandboxNetwork`: false (the default) denies TCP connect
    /// and bind to `run_command` (Landlock ABI 4 or newer).
    pub sandbox_network: bool,
    /// `builtin.sandboxDenyRead`: what `run_command` may not read (absolute,
    /// `~` expanded); the hub's own config file and state dir are denied
    /// besides, whatever this says.
    pub sandbox_deny_read: Vec<PathBuf>,
    /// `builtin.sandboxAllowRead`: re-granted even beneath a denied path.
    pub sandbox_allow_read: Vec<PathBuf>,
    /// `builtin.commandEnv`: names (`*`/`?` globs) of the hub's environment
    /// variables `run_command` passes on besides the default ones
    /// ([`COMMAND_ENV`]); every other variable is cleared.
    pub command_env: Vec<String>,
    /// The config file these settings were read from (absolute): never
    /// readable by `run_command`.
    pub config_file: PathBuf,
}

/// `builtin.sandbox`: what a `run_command` may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read anywhere but the denied paths (`sandboxDenyRead`, the hub's
    /// own files); write only in the workspace, the current run's folder
    /// and the hub's private temp dir (`TMPDIR`).
    #[default]
    WorkspaceWrite,
    /// Read as `WorkspaceWrite` does; write nowhere (but the private temp
    /// dir and device files such as /dev/null).
    ReadOnly,
    /// No confinement: the command can do whatever the hub's user can.
    Off,
}

impl SandboxMode {
    /// The config spelling, e.g. `"workspace-write"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskEngineConfig {
    pub default_timeout: Duration,
    pub state_dir: PathBuf,
    pub max_batch_steps: usize,
    pub durability: Durability,
    pub resume_uncertain: UncertainPolicy,
    pub retention: Retention,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// fdatasync after every step.
    Step,
    /// flush only; a crash may lose the steps since the last sync.
    Batch,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    pub max_age: Duration,
    pub max_tasks: usize,
    /// Failed, cancelled and recoverable tasks (`engine::durable::retention`).
    pub resumable_max_age: Duration,
    pub resumable_max_tasks: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheckConfig {
    pub enabled: bool,
    pub interval: Duration,
    pub auto_fix: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingConfig {
    pub enabled: bool,
    pub screenshot_on_step: bool,
    pub storage_path: PathBuf,
    pub max_bytes: u64,
}

/// `runs`: where topic workspaces live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunsConfig {
    pub storage_path: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayConfig {
    pub ignore_paths: Vec<String>,
    /// Patterns checked to compile at load time.
    pub ignore_regexes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// Only recoverable classes; the defaults merged with the file's overrides.
    pub strategies: BTreeMap<ErrorType, RetryStrategy>,
    pub retry_destructive_on_timeout: bool,
    /// `retry.safeToRepeat`: globs of qualified tool names that may run
    /// again after an outcome-unknown failure, whatever their annotations.
    pub safe_to_repeat: Vec<String>,
}

/// How failures of one error class are retried (`retry.strategies.CLASS`).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryStrategy {
    pub max_retries: u32,
    pub delay: Duration,
    /// Multiplier per attempt, >= 1.0.
    pub backoff: f64,
    /// Fraction of the delay, 0.0..=1.0.
    pub jitter: f64,
    pub action: RetryAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryAction {
    None,
    ExtendTimeout,
    RebuildContext,
    RefreshSnapshot,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SafetyConfig {
    pub rules: Vec<SafetyRule>,
    pub confirm_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct SafetyRule {
    /// Glob over the tool name: `*` any run of characters, `?` one character.
    pub tool: String,
    /// Param key -> pattern; the rule applies when every pattern finds a match.
    pub matches: Vec<(String, regex::Regex)>,
    pub action: SafetyAction,
    pub reason: Option<String>,
}

// Regex has no PartialEq; two rules are equal when their patterns are.
impl PartialEq for SafetyRule {
    fn eq(&self, other: &Self) -> bool {
        self.tool == other.tool
            && self.action == other.action
            && self.reason == other.reason
            && self.matches.len() == other.matches.len()
            && self
                .matches
                .iter()
                .zip(&other.matches)
                .all(|((ka, ra), (kb, rb))| ka == kb && ra.as_str() == rb.as_str())
    }
}

impl SafetyRule {
    /// True when this rule applies to a call of `tool` with `params`.
    /// A param that is a string is matched as is, an array of strings joined
    /// with spaces (argv style), anything else as its JSON text. A missing
    /// param means the rule does not apply.
    pub fn applies(&self, tool: &str, params: &serde_json::Value) -> bool {
        self.applies_to_any(&[tool], params)
    }

    /// Whether the rule matches a call known by any of `names` (a tool's
    /// own and qualified name): the params are matched once, not per name.
    pub fn applies_to_any(&self, names: &[&str], params: &serde_json::Value) -> bool {
        if !names.iter().any(|n| glob_match(&self.tool, n)) {
            return false;
        }
        self.matches.iter().all(|(key, re)| match params.get(key) {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::String(s)) => re.is_match(s),
            Some(serde_json::Value::Array(items)) if items.iter().all(|v| v.is_string()) => {
                let joined: Vec<&str> = items.iter().filter_map(|v| v.as_str()).collect();
                re.is_match(&joined.join(" "))
            }
            Some(other) => re.is_match(&other.to_string()),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SafetyAction {
    Deny,
    Confirm,
}

#[derive(Debug, Clone)]
pub struct SecurityConfig {
    pub pin_tools: bool,
    pub redact_keys: Vec<String>,
    /// Case-insensitive alternation of `redact_keys`, unanchored: a key that
    /// contains any of them ("githubToken", "X-Api-Key") is secret.
    pub redact: regex::Regex,
    /// Secret values masked by value in everything the hub writes; filled
    /// from this config (server env/headers, a fixed token) and, shared
    /// across reloads, while the hub runs.
    pub secrets: crate::secrets::SecretValues,
}

impl PartialEq for SecurityConfig {
    fn eq(&self, other: &Self) -> bool {
        self.pin_tools == other.pin_tools && self.redact_keys == other.redact_keys
    }
}

impl SecurityConfig {
    /// True when a params/headers/env key names a secret whose value must be
    /// redacted before it is logged or recorded.
    pub fn is_secret_key(&self, key: &str) -> bool {
        !self.redact_keys.is_empty() && self.redact.is_match(key)
    }
}

/// The secret values a config itself holds: each server's `env` and
/// `headers` values whose keys are secret (`security.redactKeys`), and a
/// fixed `server.token`.
pub fn configured_secrets(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for spec in cfg.mcp_servers.values() {
        let pairs = match &spec.transport {
            Transport::Stdio { env, .. } => env,
            Transport::Http { headers, .. } => headers,
            Transport::Recording { .. } => continue,
        };
        for (k, v) in pairs {
            if cfg.security.is_secret_key(k) {
                out.push(v.clone());
                // `Bearer <key>`: the key alone is secret too.
                if let Some((_, rest)) = v.split_once(' ') {
                    out.push(rest.trim().to_string());
                }
            }
        }
    }
    if let TokenSetting::Fixed(t) = &cfg.server.token {
        out.push(t.clone());
    }
    out
}

/// A loaded config and the warnings (unknown keys, ignored keys) to log.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    pub warnings: Vec<String>,
}

/// Why a config could not be loaded. Display is one line starting with the
/// file path, and `path:line:column:` when the problem has a place in the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read config file: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

impl ConfigError {
    pub fn path(&self) -> &Path {
        match self {
            ConfigError::Read { path, .. } | ConfigError::Invalid { path, .. } => path,
        }
    }

    /// 1-based line, `None` for read errors.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Invalid { line, .. } => Some(*line),
            ConfigError::Read { .. } => None,
        }
    }

    /// 1-based column, `None` for read errors.
    pub fn column(&self) -> Option<usize> {
        match self {
            ConfigError::Invalid { column, .. } => Some(*column),
            ConfigError::Read { .. } => None,
        }
    }

    /// What is wrong, without the location prefix.
    pub fn message(&self) -> String {
        match self {
            ConfigError::Invalid { message, .. } => message.clone(),
            ConfigError::Read { source, .. } => format!("cannot read config file: {source}"),
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, ConfigError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Read and validate the file at `path`. A missing file is an error
/// ([`ConfigError::is_not_found`]); the caller decides whether that is fatal.
pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Validate `text` as if it were the content of the file at `path` (which
/// need not exist; its folder anchors relative paths).
pub fn parse(text: &str, path: &Path) -> Result<LoadedConfig, ConfigError> {
    validate::parse(text, path)
}

#[cfg(test)]
mod tests;
