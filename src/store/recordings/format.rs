//! The on-disk recording format: `<storagePath>/<id>/recording.jsonl`, one
//! header line, one line per step (flushed when the step completes), and an
//! `end` line. Large results and images live beside it as files and are
//! referenced as `{"$file": "…", "bytes": N, "mediaType": "…"}`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::errors::HubError;

/// 2: the tool list is stored once per distinct list (`toolsHash`, see
/// `tools.rs`); 1: the header carries the list inline (still read).
pub const SCHEMA_VERSION: u32 = 2;

// One line is parsed or written at a time; the size difference is harmless.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    Header(Header),
    Step(Step),
    End(End),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub schema_version: u32,
    pub recording_id: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Words to find the recording by (`list_recordings` `query`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub created_at: String,
    pub hub_version: String,
    /// Servers in use when recording started: `{"name","state","toolCount"}`.
    #[serde(default)]
    pub servers: Vec<Value>,
    /// The tool list in use (name, server, qualifiedName, description,
    /// inputSchema, annotations), for `dry` replays and schema drift. On
    /// disk (schema 2) it is empty and `tools_hash` names the stored
    /// snapshot; `load` fills it in, so readers see the list either way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    /// The snapshot `<storage>/.tools/<hash>.json` holding the tool list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_hash: Option<String>,
    /// The client context it recorded (`start_recording` `context`, the
    /// label as the client gave it, e.g. `tab-17`); absent for a recording
    /// of every call of its connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The client of `clients` that recorded it (absent: the main token,
    /// or a recording made before clients were named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// Where a recorded call came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// "tool_call" or "batch_step".
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// The `callKey` of the call, or of the batch the step belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_key: Option<String>,
    /// The client context the call ran in (`session` or `session/label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// 0-based position in the recording.
    pub seq: usize,
    pub source: Source,
    /// The name as the client asked for it.
    pub tool: String,
    #[serde(default)]
    pub qualified_name: Option<String>,
    #[serde(default)]
    pub server: Option<String>,
    /// Params as sent (rendered), secrets replaced by `{"$redacted": key}`.
    pub params: Value,
    /// For batch steps: the params template before rendering (redacted too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_template: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_as: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Value>,
    /// On the first step recorded from a batch: its `options.variables`
    /// whose names are not secret (`security.redactKeys`, `options.secrets`),
    /// the recording's variable defaults for a replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<serde_json::Map<String, Value>>,
    /// RFC 3339 wall-clock time the call started.
    pub timestamp: String,
    /// Milliseconds since the recording started (for `speed` pacing).
    pub t_offset_ms: u64,
    pub duration_ms: u64,
    pub success: bool,
    #[serde(default)]
    pub attempts: u32,
    /// The value (value rules of tool_result), or a `$file` reference.
    #[serde(default)]
    pub result: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<HubError>,
    /// Image items of the MCP result, stored as files: `["step-3-img-0.png"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// `step-N.png` when `recording.screenshotOnStep` captured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct End {
    pub step_count: usize,
    pub total_duration_ms: u64,
    pub success_rate: f64,
    pub stopped_at: String,
    /// "stopped" | "size_limit" | "closed" (the connection went away).
    pub reason: String,
}

/// A recording read back from disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub header: Header,
    pub steps: Vec<Step>,
    pub end: Option<End>,
    /// No `end` line: the hub stopped (or is still recording).
    pub incomplete: bool,
}

impl Recording {
    /// `{"recordingId","name","description","createdAt","stepCount","incomplete",…}`.
    pub fn summary(&self) -> Value {
        serde_json::json!({
            "recordingId": self.header.recording_id,
            "name": self.header.name,
            "description": self.header.description,
            "createdAt": self.header.created_at,
            "client": self.header.client,
            "stepCount": self.steps.len(),
            "incomplete": self.incomplete,
            "metadata": self.end.as_ref().map(|e| serde_json::json!({
                "totalDuration": e.total_duration_ms,
                "successRate": e.success_rate,
                "reason": e.reason,
            })),
        })
    }
}
