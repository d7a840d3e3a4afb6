//! The bodies of the recording messages (`start_recording`, …,
//! `replay_recording`, `update_recording`): wire types, parsed here with the
//! other client messages and handled by the recording service.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::paging::{Paging, Since};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartReq {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Words to find the recording by later (`list_recordings` `query`).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Record only the calls made in this client context of the
    /// connection (the `context` of `tool_call` / `tool_batch`, e.g. a
    /// tab id); `None` records every call of the connection.
    #[serde(default, deserialize_with = "context_label")]
    pub context: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopReq {
    #[serde(default = "yes")]
    pub save: bool,
    /// Which recording to stop: the one of this context; `None` stops the
    /// connection's recording without a context.
    #[serde(default, deserialize_with = "context_label")]
    pub context: Option<String>,
}

/// A `context` field: a string that passes
/// [`check_label`](crate::client_context::check_label), or null / absent.
fn context_label<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let label = Option::<String>::deserialize(d)?;
    if let Some(Err(m)) = label.as_deref().map(crate::client_context::check_label) {
        return Err(serde::de::Error::custom(m));
    }
    Ok(label)
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordingRef {
    pub recording_id: String,
}

/// `get_recording`: a recording and one page of its steps.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetReq {
    pub recording_id: String,
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
}

impl GetReq {
    pub fn page(&self) -> super::StepPage {
        super::StepPage {
            offset: self.offset,
            limit: self.limit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    Json,
    Markdown,
    Html,
    Batch,
    Flowchart,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportReq {
    pub recording_id: String,
    pub format: ExportFormat,
}

/// `update_recording`: rename, describe, and delete / insert / modify steps.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateReq {
    pub recording_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Replaces the tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Indices of steps to delete (applied first).
    #[serde(default)]
    pub delete_steps: Vec<usize>,
    /// `{"index": i, "changes": {"params"?, "tool"?, "saveAs"?, "when"?, "expect"?}}` (applied second).
    #[serde(default)]
    pub modify_steps: Vec<Value>,
    /// `{"index": i, "step": {"tool", "params", "saveAs"?, "when"?, "expect"?}}` inserted before index i (applied last).
    #[serde(default)]
    pub insert_steps: Vec<Value>,
}

/// `list_recordings`: search and page the recordings index.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListReq {
    /// Words matched (case-insensitively, every one) against the name,
    /// description and tags.
    #[serde(default)]
    pub query: Option<String>,
    /// Only recordings with a step calling this tool (bare or qualified).
    #[serde(default)]
    pub tool: Option<String>,
    /// Only recordings with a step on this server.
    #[serde(default)]
    pub server: Option<String>,
    /// Only recordings created at or after this time.
    #[serde(default)]
    pub since: Option<Since>,
    #[serde(default)]
    pub sort: RecordingSort,
    #[serde(flatten)]
    pub page: Paging,
}

/// The order of `list_recordings`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordingSort {
    /// Most recently created first (the default).
    #[default]
    Newest,
    Oldest,
    /// By name, A to Z (case-insensitive).
    Name,
    /// Most recently changed first.
    Updated,
}

/// The recording messages a connection can send.
#[derive(Debug)]
pub enum RecordingMsg {
    Start(StartReq),
    Stop(StopReq),
    List(ListReq),
    Get(GetReq),
    Delete(RecordingRef),
    Export(ExportReq),
    Replay(ReplayReq),
    Update(UpdateReq),
}

impl serde::Serialize for ExportFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            ExportFormat::Json => "json",
            ExportFormat::Markdown => "markdown",
            ExportFormat::Html => "html",
            ExportFormat::Batch => "batch",
            ExportFormat::Flowchart => "flowchart",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Live,
    Dry,
    Offline,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReq {
    pub recording_id: String,
    #[serde(default)]
    pub continue_on_error: bool,
    #[serde(default)]
    pub variables: Option<Map<String, Value>>,
    /// 0 = as fast as possible (default), 1 = original pacing, n = n× faster.
    #[serde(default)]
    pub speed: Option<f64>,
    #[serde(default)]
    pub mode: Option<Mode>,
    /// The client context to replay in; by default a fresh one of its own.
    #[serde(default)]
    pub context: Option<String>,
}
