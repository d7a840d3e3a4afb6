//! Client → hub message bodies. One struct per `type`; `parse_body` is the
//! single dispatch from the wire name to the enum.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::artifact::{ArtifactReq, RawArtifactReq};
use super::keep::{KeepResultReq, RawKeepResultReq};
use super::paging::{Paging, Since};
use super::recording::RecordingMsg;
use super::runs::RunMsg;

#[derive(Debug)]
pub enum ClientMsg {
    Ping,
    ListTools,
    ToolCall(ToolCallReq),
    ToolBatch(BatchReq),
    CancelTask(TaskRef),
    ResumeTask(ResumeTaskReq),
    TaskStatus(TaskRef),
    ListTasks(ListTasksReq),
    Confirm(ConfirmReq),
    HealthCheck,
    ReloadTools(ReloadToolsReq),
    History(HistoryReq),
    Recording(RecordingMsg),
    Run(RunMsg),
    Artifact(ArtifactReq),
    ResumeSession(ResumeSessionReq),
    Ack(AckReq),
    StopInstance(StopInstanceReq),
    KeepResult(KeepResultReq),
}

/// `stop_instance`: stop one per-context instance of a server (its whole
/// process group); the next call of that context starts a fresh one.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopInstanceReq {
    pub server: String,
    /// The context as `health_status` shows it (`owner` or `owner/label`).
    pub context: String,
}

/// `resume_session`: take over a session whose socket dropped.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeSessionReq {
    pub session_id: String,
    pub resume_token: String,
    /// The highest `seq` the client processed (0: none).
    pub last_seq: u64,
}

/// `ack`: the client processed every frame up to `seq`.
#[derive(Debug, Clone, Deserialize)]
pub struct AckReq {
    pub seq: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallReq {
    pub tool: String,
    #[serde(default = "empty_object")]
    pub params: Value,
    /// Milliseconds; else the server's or `taskEngine.defaultTimeout`.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// `false` disables retries, or a strategy object overrides the class default.
    #[serde(default)]
    pub retry: Option<Value>,
    /// Keep the images the tool returns in the current run's screenshots.
    #[serde(default)]
    pub save_images: Option<SaveImages>,
    /// A repeat with the same key does not run again ([`crate::callkeys`]).
    #[serde(default)]
    pub call_key: Option<String>,
    /// The client context within the session (a tab id): which instance
    /// of a `scope: "context"` server runs the call.
    #[serde(default)]
    pub context: Option<String>,
}

/// A `tool_call` frame read straight from its text into [`ToolCallReq`]
/// (the hot path: no `Value` tree of the whole frame first). Anything this
/// does not read cleanly goes through the general decoder, which says
/// exactly what is wrong; so this only ever accepts what that would.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DirectToolCall<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    #[serde(default)]
    id: Option<Value>,
    tool: String,
    #[serde(default = "empty_object")]
    params: Value,
    #[serde(default)]
    timeout: Option<u64>,
    #[serde(default)]
    retry: Option<Value>,
    #[serde(default)]
    save_images: Option<SaveImages>,
    #[serde(default)]
    call_key: Option<String>,
    #[serde(default)]
    context: Option<String>,
}

/// `text` as a well-formed `tool_call` (its id and request), or `None`:
/// then the general decoder reads it.
pub(super) fn direct_tool_call(text: &str) -> Option<(Option<Value>, ToolCallReq)> {
    let d: DirectToolCall = serde_json::from_str(text).ok()?;
    if d.ty != "tool_call" {
        return None;
    }
    let id = match d.id {
        None | Some(Value::Null) => None,
        Some(v @ (Value::String(_) | Value::Number(_))) => Some(v),
        Some(_) => return None,
    };
    let req = ToolCallReq {
        tool: d.tool,
        params: d.params,
        timeout: d.timeout,
        retry: d.retry,
        save_images: d.save_images,
        call_key: d.call_key,
        context: d.context,
    };
    Some((id, req))
}

/// `saveImages` of a `tool_call` or batch step: `true` keeps every image
/// the tool returns as a screenshot of the current run (slug from the
/// call's `filename`/`name`/`description` or the tool), a string also
/// names them (the slug's source); `false` is the same as leaving it out.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(untagged)]
pub enum SaveImages {
    Flag(bool),
    Named(String),
}

impl SaveImages {
    /// Whether images are to be kept, and the name asked for, if any.
    pub fn wanted(&self) -> Option<Option<&str>> {
        match self {
            SaveImages::Flag(false) => None,
            SaveImages::Flag(true) => Some(None),
            SaveImages::Named(n) => Some(Some(n.as_str())),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchReq {
    pub steps: Vec<BatchStep>,
    #[serde(default)]
    pub options: BatchOptions,
    /// A repeat with the same key does not run again ([`crate::callkeys`]).
    #[serde(default)]
    pub call_key: Option<String>,
    /// The client context within the session (see [`ToolCallReq::context`]).
    #[serde(default)]
    pub context: Option<String>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BatchStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub tool: String,
    #[serde(default = "empty_object")]
    pub params: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_as: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_images: Option<SaveImages>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BatchOptions {
    #[serde(default = "yes")]
    pub stop_on_error: bool,
    /// Milliseconds bounding the whole batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<Map<String, Value>>,
    /// Names of `variables` that are secret whatever their names: never
    /// written, and their values masked wherever the hub writes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            stop_on_error: true,
            timeout: None,
            variables: None,
            secrets: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRef {
    pub task_id: String,
    /// `task_status` only: answer once the task is no longer running.
    #[serde(default)]
    pub wait: bool,
    /// `task_status` only: which steps to return (not flattened: serde
    /// would lose the field's name in errors).
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
}

impl TaskRef {
    pub fn page(&self) -> super::StepPage {
        super::StepPage {
            offset: self.offset,
            limit: self.limit,
        }
    }
}

/// `list_tasks`: filters and a page of the known tasks, newest first.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksReq {
    /// Only tasks in this state (`running`, `success`, `failed`, …).
    #[serde(default)]
    pub state: Option<String>,
    /// Only tasks with a step calling this tool (bare or qualified name).
    #[serde(default)]
    pub tool: Option<String>,
    /// Only tasks created at or after this time.
    #[serde(default)]
    pub since: Option<Since>,
    #[serde(flatten)]
    pub page: Paging,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeTaskReq {
    pub task_id: String,
    #[serde(default)]
    pub from_step: Option<usize>,
    /// Values for `{{vars.x}}` given again (secrets are never journaled).
    #[serde(default)]
    pub variables: Option<Map<String, Value>>,
    /// Run it in this context of the resuming session instead of the one
    /// its journal records.
    #[serde(default)]
    pub context: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmReq {
    pub task_id: String,
    pub approve: bool,
    #[serde(default)]
    pub step_index: Option<usize>,
    /// The `paramsHash` of the `need_user` being answered (optional binding).
    #[serde(default)]
    pub params_hash: Option<String>,
    /// What the person filled in, for a `need_user` that carries a
    /// server's form (`input`).
    #[serde(default)]
    pub content: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadToolsReq {
    /// Accept changed tool definitions when `security.pinTools` is on.
    #[serde(default)]
    pub approve: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryReq {
    #[serde(default = "default_history_limit")]
    pub limit: usize,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

fn yes() -> bool {
    true
}

fn default_history_limit() -> usize {
    50
}

fn body<T: DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let inner = inner
            .replace("invalid type: ", "")
            .replace("missing field `", "missing field \"")
            .replace('`', "\"");
        if path == "." || path.is_empty() {
            inner
        } else {
            format!("field \"{path}\": {inner}")
        }
    })
}

/// Dispatch on the wire name (already checked against `CLIENT_TYPES`).
pub(super) fn parse_body(ty: &str, v: Value) -> Result<ClientMsg, String> {
    Ok(match ty {
        "ping" => ClientMsg::Ping,
        "list_tools" => ClientMsg::ListTools,
        "tool_call" => ClientMsg::ToolCall(body(v)?),
        "tool_batch" => ClientMsg::ToolBatch(body(v)?),
        "cancel_task" => ClientMsg::CancelTask(body(v)?),
        "resume_task" => ClientMsg::ResumeTask(body(v)?),
        "task_status" => ClientMsg::TaskStatus(body(v)?),
        "list_tasks" => ClientMsg::ListTasks(body(v)?),
        "confirm" => ClientMsg::Confirm(body(v)?),
        "health_check" => ClientMsg::HealthCheck,
        "reload_tools" => ClientMsg::ReloadTools(body(v)?),
        "history" => ClientMsg::History(body(v)?),
        "start_recording" => ClientMsg::Recording(RecordingMsg::Start(body(v)?)),
        "stop_recording" => ClientMsg::Recording(RecordingMsg::Stop(body(v)?)),
        "list_recordings" => ClientMsg::Recording(RecordingMsg::List(body(v)?)),
        "get_recording" => ClientMsg::Recording(RecordingMsg::Get(body(v)?)),
        "delete_recording" => ClientMsg::Recording(RecordingMsg::Delete(body(v)?)),
        "export_recording" => ClientMsg::Recording(RecordingMsg::Export(body(v)?)),
        "replay_recording" => ClientMsg::Recording(RecordingMsg::Replay(body(v)?)),
        "update_recording" => ClientMsg::Recording(RecordingMsg::Update(body(v)?)),
        "create_run" => ClientMsg::Run(RunMsg::Create(body(v)?)),
        "set_run" => ClientMsg::Run(RunMsg::Set(body(v)?)),
        "stop_instance" => ClientMsg::StopInstance(body(v)?),
        "list_runs" => ClientMsg::Run(RunMsg::List(body(v)?)),
        "get_run" => ClientMsg::Run(RunMsg::Get(body(v)?)),
        "log_run_entry" => ClientMsg::Run(RunMsg::Log(body(v)?)),
        "archive_run" => ClientMsg::Run(RunMsg::Archive(body(v)?)),
        "delete_run" => ClientMsg::Run(RunMsg::Delete(body(v)?)),
        "resume_session" => ClientMsg::ResumeSession(body(v)?),
        "ack" => ClientMsg::Ack(body(v)?),
        "get_artifact" => ClientMsg::Artifact(ArtifactReq::try_from(body::<RawArtifactReq>(v)?)?),
        "keep_result" => {
            ClientMsg::KeepResult(KeepResultReq::try_from(body::<RawKeepResultReq>(v)?)?)
        }
        other => return Err(format!("type \"{other}\" has no decoder")),
    })
}
