//! Serde mirror of config.json. Every field is optional (defaults are applied
//! in `validate`), unknown keys are ignored by serde and reported as warnings
//! by `key_table::unknown_keys`, whose known-key lists come from these very types
//! (via [`fields_of`]) so the two cannot drift apart.

use std::collections::BTreeMap;

use serde::de::{self, Visitor};
use serde::Deserialize;
use serde_json::Value;

#[cfg(test)]
use super::key_table::fields_of;
use super::{Durability, RetryAction, SafetyAction, SandboxMode, UncertainPolicy};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawConfig {
    /// Editors add `$schema`; accepted and ignored.
    #[serde(rename = "$schema")]
    #[allow(dead_code)] // declared only so it counts as a known key
    pub schema: Option<Value>,
    pub server: Option<RawServerSection>,
    pub mcp_servers: Option<BTreeMap<String, RawServer>>,
    pub builtin: Option<RawBuiltin>,
    pub task_engine: Option<RawTaskEngine>,
    pub health_check: Option<RawHealthCheck>,
    pub recording: Option<RawRecording>,
    pub runs: Option<RawRuns>,
    pub replay: Option<RawReplay>,
    pub retry: Option<RawRetry>,
    pub safety: Option<RawSafety>,
    pub security: Option<RawSecurity>,
    pub assertions: Option<RawAssertions>,
    pub views: Option<BTreeMap<String, super::views::RawView>>,
    pub clients: Option<BTreeMap<String, super::views::RawClient>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawServerSection {
    /// `IP:PORT`; `localhost:PORT` is taken as `127.0.0.1:PORT`.
    pub listen: Option<String>,
    pub allowed_origins: Option<Vec<String>>,
    pub token: Option<RawToken>,
    pub max_message_bytes: Option<usize>,
    pub max_connections: Option<usize>,
    pub send_queue: Option<usize>,
    pub handshake_timeout: Option<u64>,
    pub ping_interval: Option<u64>,
    pub idle_timeout: Option<u64>,
    pub max_json_depth: Option<usize>,
    /// Serve the aggregate as one MCP server at `/mcp` (default true).
    pub mcp_endpoint: Option<bool>,
    /// List tools and prompts at `/mcp` under their bare names where unique.
    pub mcp_bare_names: Option<bool>,
    /// Milliseconds without a request after which an `/mcp` session ends.
    pub mcp_session_idle: Option<u64>,
    /// Milliseconds after which a long `/mcp` call's SSE stream is ended
    /// for the client to resume (SEP-1699; 0: never).
    pub mcp_stream_poll: Option<u64>,
    /// Items per page of an `/mcp` list (`tools/list`, …).
    pub mcp_page_size: Option<usize>,
    /// Threads that run the hub's tasks (0: one per CPU core).
    pub worker_threads: Option<usize>,
    /// Milliseconds a `/ws` session outlives its socket (0: not at all).
    pub session_grace_ms: Option<u64>,
    /// Bytes of frames a session keeps for a resume.
    pub resume_buffer_bytes: Option<usize>,
    /// Milliseconds a `callKey` answers a repeat.
    pub call_key_ttl_ms: Option<u64>,
    /// Call keys kept in memory.
    pub call_key_max: Option<usize>,
    /// Bytes of answers call keys hold.
    pub call_key_max_bytes: Option<usize>,
    /// Bytes of answers one client's call keys hold.
    pub call_key_client_max_bytes: Option<usize>,
    /// Bytes of `keep_result` files one principal may have in the workspace.
    pub kept_results_max_bytes: Option<usize>,
    /// Concurrent calls one session may have.
    pub max_in_flight_per_session: Option<usize>,
    /// Tasks no client drives (MCP tasks) running at once, hub-wide.
    pub max_unattended_tasks: Option<usize>,
}

/// `"token"`: a string (fixed token), `false` (no token) or `true` (same as
/// absent: generate one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawToken {
    Fixed(String),
    Flag(bool),
}

impl<'de> Deserialize<'de> for RawToken {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TokenVisitor;
        impl Visitor<'_> for TokenVisitor {
            type Value = RawToken;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a token string or false")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawToken, E> {
                Ok(RawToken::Fixed(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawToken, E> {
                Ok(RawToken::Flag(v))
            }
        }
        d.deserialize_any(TokenVisitor)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawServer {
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub recording: Option<String>,
    /// Other MCP clients write `"type": "stdio"|"http"`; accepted and ignored
    /// (the transport follows from command/url/recording).
    #[serde(rename = "type")]
    #[allow(dead_code)] // declared only so it counts as a known key
    pub kind: Option<String>,
    pub disabled: Option<bool>,
    pub trusted: Option<bool>,
    pub timeout: Option<u64>,
    pub recovery_tool: Option<String>,
    pub snapshot_tool: Option<String>,
    pub screenshot_tool: Option<String>,
    pub resume_uncertain: Option<UncertainPolicy>,
    pub tools: Option<BTreeMap<String, RawToolOverride>>,
    pub scope: Option<super::Scope>,
    pub max_instances: Option<usize>,
    pub instance_idle_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawToolOverride {
    pub resume_uncertain: Option<UncertainPolicy>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawBuiltin {
    pub enabled: Option<bool>,
    pub workspace: Option<String>,
    pub command_timeout: Option<u64>,
    pub max_output_bytes: Option<usize>,
    pub max_read_bytes: Option<usize>,
    pub sandbox: Option<SandboxMode>,
    pub sandbox_network: Option<bool>,
    pub sandbox_deny_read: Option<Vec<String>>,
    pub sandbox_allow_read: Option<Vec<String>>,
    pub command_env: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawTaskEngine {
    pub default_timeout: Option<u64>,
    pub state_dir: Option<String>,
    pub max_batch_steps: Option<usize>,
    pub durability: Option<Durability>,
    pub resume_uncertain: Option<UncertainPolicy>,
    pub retention: Option<RawRetention>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRetention {
    pub max_age_hours: Option<u64>,
    pub max_tasks: Option<usize>,
    pub resumable_max_age_hours: Option<u64>,
    pub resumable_max_tasks: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawHealthCheck {
    pub enabled: Option<bool>,
    pub interval: Option<u64>,
    pub auto_fix: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRecording {
    pub enabled: Option<bool>,
    pub screenshot_on_step: Option<bool>,
    pub storage_path: Option<String>,
    pub max_bytes: Option<u64>,
}

/// `runs`: topic workspaces (`src/runs/`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRuns {
    pub storage_path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawReplay {
    pub ignore: Option<RawReplayIgnore>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawReplayIgnore {
    pub paths: Option<Vec<String>>,
    pub regexes: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRetry {
    /// Keys are ErrorType wire names ("TIMEOUT"), checked in `validate`.
    pub strategies: Option<BTreeMap<String, RawStrategy>>,
    pub retry_destructive_on_timeout: Option<bool>,
    pub safe_to_repeat: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawStrategy {
    pub max_retries: Option<u32>,
    pub delay: Option<u64>,
    pub backoff: Option<f64>,
    pub jitter: Option<f64>,
    pub action: Option<RetryAction>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawSafety {
    /// When present, replaces the default rules entirely.
    pub rules: Option<Vec<RawRule>>,
    pub confirm_timeout: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRule {
    /// Tool-name glob; absent means every tool.
    pub tool: Option<String>,
    /// Param key -> regex.
    #[serde(rename = "match")]
    pub matches: Option<BTreeMap<String, String>>,
    /// Absent means confirm.
    pub action: Option<SafetyAction>,
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawSecurity {
    pub pin_tools: Option<bool>,
    /// Regex fragments; replaces the default list when present.
    pub redact_keys: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawAssertions {
    pub browser_server: Option<String>,
    pub poll_interval: Option<u64>,
}

/// The known key nearest to `key`: same letters ignoring case and `_`/`-`,
/// or within edit distance max(2, len/3). Ties go to the first listed.
pub fn suggest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let nk = norm(key);
    if let Some(k) = known.iter().find(|k| norm(k) == nk) {
        return Some(k);
    }
    let limit = (key.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| (levenshtein(&nk, &norm(k)), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

pub use crate::suggest::levenshtein;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_lists_come_from_serde_renames() {
        let top = fields_of::<RawConfig>();
        assert!(top.contains(&"mcpServers"));
        assert!(top.contains(&"taskEngine"));
        assert!(top.contains(&"$schema"));
        assert!(fields_of::<RawRule>().contains(&"match"));
        assert!(fields_of::<RawServer>().contains(&"type"));
        assert!(fields_of::<RawServerSection>().contains(&"maxJsonDepth"));
        assert_eq!(
            fields_of::<RawRetention>(),
            &[
                "maxAgeHours",
                "maxTasks",
                "resumableMaxAgeHours",
                "resumableMaxTasks"
            ]
        );
    }

    #[test]
    fn levenshtein_distances() {
        assert_eq!(levenshtein("", ""), 0);
        assert_eq!(levenshtein("server", "serverz"), 1);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("abc", ""), 3);
    }

    #[test]
    fn suggestions() {
        let top = fields_of::<RawConfig>();
        assert_eq!(suggest("serverz", top), Some("server"));
        assert_eq!(suggest("mcp_servers", top), Some("mcpServers"));
        assert_eq!(suggest("TaskEngine", top), Some("taskEngine"));
        assert_eq!(suggest("completelydifferent", top), None);
    }
}
