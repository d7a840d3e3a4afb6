//! The hub's internal server `hub`: workspace tools (read_file, write_file,
//! list_directory, run_command) and the hub's own controls as tools, so an
//! agent that can only emit tool calls can use them.
//!
//! Built-in tools can never approve a `need_user` step: an agent must not
//! approve its own dangerous call.

pub mod command;
pub mod fs;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::config::BuiltinConfig;
use crate::errors::{ErrorType, HubError};
use crate::hub::Hub;
use crate::mcp::registry::RawTool;

/// Every built-in tool; dispatch is on this enum, not on strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    ReadFile,
    WriteFile,
    ListDirectory,
    RunCommand,
    HealthCheck,
    ListTools,
    History,
    Batch,
    TaskStatus,
    ListTasks,
    ResumeTask,
    RecordStart,
    RecordStop,
    RecordList,
    RecordGet,
    RecordDelete,
    RecordReplay,
}

impl Tool {
    const CONTROL: [Tool; 13] = [
        Tool::HealthCheck,
        Tool::ListTools,
        Tool::History,
        Tool::Batch,
        Tool::TaskStatus,
        Tool::ListTasks,
        Tool::ResumeTask,
        Tool::RecordStart,
        Tool::RecordStop,
        Tool::RecordList,
        Tool::RecordGet,
        Tool::RecordDelete,
        Tool::RecordReplay,
    ];
    const WORKSPACE: [Tool; 4] = [
        Tool::ReadFile,
        Tool::WriteFile,
        Tool::ListDirectory,
        Tool::RunCommand,
    ];

    fn name(self) -> &'static str {
        match self {
            Tool::ReadFile => "read_file",
            Tool::WriteFile => "write_file",
            Tool::ListDirectory => "list_directory",
            Tool::RunCommand => "run_command",
            Tool::HealthCheck => "health_check",
            Tool::ListTools => "list_tools",
            Tool::History => "history",
            Tool::Batch => "tool_batch",
            Tool::TaskStatus => "task_status",
            Tool::ListTasks => "list_tasks",
            Tool::ResumeTask => "resume_task",
            Tool::RecordStart => "record_start",
            Tool::RecordStop => "record_stop",
            Tool::RecordList => "record_list",
            Tool::RecordGet => "record_get",
            Tool::RecordDelete => "record_delete",
            Tool::RecordReplay => "record_replay",
        }
    }

    fn from_name(name: &str) -> Option<Tool> {
        Tool::WORKSPACE
            .into_iter()
            .chain(Tool::CONTROL)
            .find(|t| t.name() == name)
    }
}

pub struct Builtin {
    workspace: Option<(fs::Workspace, command::CommandRunner)>,
}

impl Builtin {
    pub fn new(cfg: &BuiltinConfig) -> std::io::Result<Builtin> {
        let workspace = if cfg.enabled {
            let ws = fs::Workspace::new(&cfg.workspace, cfg.max_read_bytes)?;
            let runner = command::CommandRunner::new(
                ws.root().to_path_buf(),
                cfg.command_timeout,
                cfg.max_output_bytes,
            );
            Some((ws, runner))
        } else {
            None
        };
        Ok(Builtin { workspace })
    }

    /// The tools of the `hub` server, for the registry.
    pub fn raw_tools(&self) -> Vec<RawTool> {
        let mut out = Vec::new();
        if self.workspace.is_some() {
            for (name, description, schema) in fs::tool_definitions() {
                out.push(RawTool {
                    name: name.to_string(),
                    description: Some(description.to_string()),
                    input_schema: schema,
                    annotations: None,
                });
            }
        }
        let empty = json!({"type": "object", "properties": {}});
        out.push(RawTool {
            name: Tool::HealthCheck.name().into(),
            description: Some("The hub's health: every server's state, tool count, restarts, last error and stderr tail, plus checks with fixes.".into()),
            input_schema: empty.clone(),
            annotations: Some(json!({"readOnlyHint": true})),
        });
        out.push(RawTool {
            name: Tool::ListTools.name().into(),
            description: Some("Every tool the hub offers (name, server, qualifiedName, description, inputSchema) and the list's hash.".into()),
            input_schema: empty,
            annotations: Some(json!({"readOnlyHint": true})),
        });
        out.push(RawTool {
            name: Tool::History.name().into(),
            description: Some("The latest tool calls made through the hub (secrets redacted).".into()),
            input_schema: json!({"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 1000}}}),
            annotations: Some(json!({"readOnlyHint": true})),
        });
        out.push(RawTool {
            name: Tool::Batch.name().into(),
            description: Some("Run several tool calls in order as one task, with variables (saveAs + {{name.result}}), conditions (when), expectations (expect) and retries; returns each step's outcome. Same fields as the tool_batch message.".into()),
            input_schema: json!({
                "type": "object",
                "required": ["steps"],
                "properties": {
                    "steps": {"type": "array", "items": {"type": "object", "required": ["tool"], "properties": {
                        "id": {"type": "string"}, "tool": {"type": "string"}, "params": {"type": "object"},
                        "saveAs": {"type": "string"}, "when": {}, "expect": {}, "timeout": {"type": "integer"}, "retry": {}
                    }}},
                    "options": {"type": "object", "properties": {
                        "stopOnError": {"type": "boolean"}, "timeout": {"type": "integer"}, "variables": {"type": "object"}
                    }}
                }
            }),
            annotations: Some(json!({"destructiveHint": true})),
        });
        let task_id = json!({"type": "object", "required": ["taskId"], "properties": {"taskId": {"type": "string"}}});
        out.push(RawTool {
            name: Tool::TaskStatus.name().into(),
            description: Some("A task's state, each step's outcome, whether it can be resumed (and why not), and which step is uncertain.".into()),
            input_schema: task_id,
            annotations: Some(json!({"readOnlyHint": true})),
        });
        out.push(RawTool {
            name: Tool::ListTasks.name().into(),
            description: Some(
                "Every known task (running, finished, recoverable) with its state.".into(),
            ),
            input_schema: json!({"type": "object", "properties": {}}),
            annotations: Some(json!({"readOnlyHint": true})),
        });
        out.push(RawTool {
            name: Tool::ResumeTask.name().into(),
            description: Some("Continue a failed, recoverable or cancelled task from its first unfinished step with its saved variables; returns the task when it stops again.".into()),
            input_schema: json!({"type": "object", "required": ["taskId"], "properties": {"taskId": {"type": "string"}, "fromStep": {"type": "integer", "minimum": 0}, "variables": {"type": "object"}}}),
            annotations: Some(json!({"destructiveHint": true})),
        });
        out.extend(record_tools());
        out
    }
}

/// The recording controls as tools (an agent can record itself).
fn record_tools() -> Vec<RawTool> {
    let id = json!({"type": "object", "required": ["recordingId"], "properties": {"recordingId": {"type": "string"}}});
    let t = |tool: Tool, description: &str, schema: Value, read_only: bool| RawTool {
        name: tool.name().into(),
        description: Some(description.into()),
        input_schema: schema,
        annotations: Some(if read_only {
            json!({"readOnlyHint": true})
        } else {
            json!({"destructiveHint": true})
        }),
    };
    vec![
        t(Tool::RecordStart, "Start recording every tool call of this connection (name, description optional).",
          json!({"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}}}), false),
        t(Tool::RecordStop, "Stop this connection's recording; save defaults to true (false deletes it).",
          json!({"type": "object", "properties": {"save": {"type": "boolean"}}}), false),
        t(Tool::RecordList, "List saved recordings (newest first).", json!({"type": "object", "properties": {}}), true),
        t(Tool::RecordGet, "A recording with every step.", id.clone(), true),
        t(Tool::RecordDelete, "Delete a recording.", id, false),
        t(Tool::RecordReplay, "Replay a recording: mode live (default), dry or offline; variables re-render its templates; returns the replay summary with differences.",
          json!({"type": "object", "required": ["recordingId"], "properties": {
              "recordingId": {"type": "string"}, "mode": {"enum": ["live", "dry", "offline"]},
              "variables": {"type": "object"}, "continueOnError": {"type": "boolean"}, "speed": {"type": "number"}}}), false),
    ]
}

/// Run one built-in tool.
pub async fn call(
    hub: &Hub,
    name: &str,
    params: &Value,
    cancel: &CancellationToken,
    session: &str,
) -> Result<Value, HubError> {
    let Some(tool) = Tool::from_name(name) else {
        return Err(HubError::new(
            ErrorType::ToolNotFound,
            format!("the hub has no built-in tool \"{name}\""),
        ));
    };
    let ws = || {
        hub.builtin.workspace.as_ref().ok_or_else(|| {
            HubError::new(
                ErrorType::ToolNotFound,
                format!("built-in tool {name} is off (builtin.enabled is false in config.json)"),
            )
        })
    };
    match tool {
        Tool::ReadFile => ws()?.0.read_file(params).await,
        Tool::WriteFile => ws()?.0.write_file(params).await,
        Tool::ListDirectory => ws()?.0.list_directory(params).await,
        Tool::RunCommand => {
            let v = ws()?.1.run(params, cancel.clone()).await?;
            if let Some(e) = command::exit_error(&v) {
                return Err(e);
            }
            Ok(v)
        }
        Tool::HealthCheck => Ok(crate::hub::health::report(hub).await),
        Tool::ListTools => {
            let t = hub.tools();
            Ok(json!({"tools": t.tools(), "hash": t.hash()}))
        }
        Tool::Batch => crate::engine::run_inline(hub, params, cancel).await,
        Tool::TaskStatus | Tool::ResumeTask => {
            let id = params
                .get("taskId")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    HubError::new(
                        ErrorType::InvalidParams,
                        "missing field \"taskId\" (a string)",
                    )
                })?;
            if tool == Tool::ResumeTask {
                let from = params
                    .get("fromStep")
                    .and_then(Value::as_u64)
                    .map(|n| n as usize);
                let vars = params.get("variables").and_then(Value::as_object).cloned();
                let handle = crate::engine::resume(hub, id, from, vars, None)?;
                // An abandoned call (timeout, cancel) stops the task too.
                let _stop = crate::engine::StopOnDrop(hub.engine().get(id));
                let _ = handle.await;
            }
            let t = hub.engine().get(id).ok_or_else(|| {
                HubError::new(ErrorType::NotFound, format!("no task with id {id:?}"))
            })?;
            Ok(t.to_json(true))
        }
        Tool::ListTasks => Ok(crate::engine::list_json(hub)),
        Tool::RecordStart => {
            let str_of = |k: &str| params.get(k).and_then(Value::as_str).map(String::from);
            hub.recorder()
                .start(hub, session, str_of("name"), str_of("description"))
        }
        Tool::RecordStop => {
            let save = params.get("save").and_then(Value::as_bool).unwrap_or(true);
            hub.recorder().stop(session, save, "stopped")
        }
        Tool::RecordList => {
            let (recs, problems) =
                crate::recording::store::list(&hub.config().recording.storage_path);
            Ok(json!({"recordings": recs, "problems": problems}))
        }
        Tool::RecordGet | Tool::RecordDelete => {
            let id = params
                .get("recordingId")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    HubError::new(
                        ErrorType::InvalidParams,
                        "missing field \"recordingId\" (a string)",
                    )
                })?;
            let storage = hub.config().recording.storage_path.clone();
            if tool == Tool::RecordGet {
                let rec = crate::recording::store::load(&storage, id)?;
                Ok(crate::recording::export::json(&rec))
            } else {
                crate::recording::store::delete(&storage, id)?;
                Ok(json!({"recordingId": id, "deleted": true}))
            }
        }
        Tool::RecordReplay => {
            let req: crate::recording::replay::ReplayReq = serde_json::from_value(params.clone())
                .map_err(|e| {
                HubError::new(
                    ErrorType::InvalidParams,
                    format!("record_replay params: {e}"),
                )
            })?;
            crate::recording::replay::execute(hub, None, &req).await
        }
        Tool::History => {
            let limit = params
                .get("limit")
                .and_then(Value::as_u64)
                .unwrap_or(50)
                .min(1000) as usize;
            Ok(json!({"entries": hub.history.latest(limit)}))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_builtin_is_dispatchable() {
        let dir = std::env::temp_dir().join(format!("toolhub-bt-{}", std::process::id()));
        let cfg = BuiltinConfig {
            enabled: true,
            workspace: dir.clone(),
            command_timeout: std::time::Duration::from_secs(1),
            max_output_bytes: 1024,
            max_read_bytes: 1024,
        };
        let b = match Builtin::new(&cfg) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        };
        let tools = b.raw_tools();
        assert!(tools.len() >= 17);
        for t in &tools {
            assert!(
                Tool::from_name(&t.name).is_some(),
                "{} is listed but not callable",
                t.name
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
