//! The hub's own controls as tools of the `hub` server (`hub__health_check`,
//! `hub__tool_batch`, `hub__task_*`, `hub__record_*`, …), so an agent that
//! can only emit tool calls can use them. They drive the engine and the
//! recorder, so they live here, in the composition root, and are mounted
//! into the call layer behind [`LocalTools`].
//!
//! None of them can approve a `need_user` step: an agent must not approve
//! its own dangerous call.

use std::sync::Arc;

use serde_json::{json, Value};

use super::App;
use crate::engine::StopOnDrop;
use crate::errors::{ErrorType, HubError};
use crate::hub::local::{LocalCall, LocalFuture, LocalTools};
use crate::mcp::registry::RawTool;

crate::hub::local::tool_names! {
    /// Every control tool; dispatch is on this enum, not on strings.
    HealthCheck => "health_check",
    ListTools => "list_tools",
    History => "history",
    Batch => "tool_batch",
    TaskStatus => "task_status",
    ListTasks => "list_tasks",
    ResumeTask => "resume_task",
    RecordStart => "record_start",
    RecordStop => "record_stop",
    RecordList => "record_list",
    RecordGet => "record_get",
    RecordDelete => "record_delete",
    RecordReplay => "record_replay",
}

impl Tool {
    fn description(self) -> &'static str {
        match self {
            Tool::HealthCheck => "The hub's health: every server's state, tool count, restarts, last error and stderr tail, plus checks with fixes.",
            Tool::ListTools => "Every tool the hub offers (name, server, qualifiedName, description, inputSchema) and the list's hash.",
            Tool::History => "The latest tool calls made through the hub (secrets redacted).",
            Tool::Batch => "Run several tool calls in order as one task, with variables (saveAs + {{name.result}}), conditions (when), expectations (expect) and retries; returns each step's outcome. Same fields as the tool_batch message.",
            Tool::TaskStatus => "A task's state, step counts by state, one page of steps (offset, limit: default 100, at most 1000; stepsPage.nextOffset says where the next page starts), whether it can be resumed (and why not), and which step is uncertain.",
            Tool::ListTasks => "The known tasks (running, finished, recoverable), newest first, a page at a time (default 100, with the total), filtered by state, tool or creation time.",
            Tool::ResumeTask => "Continue a failed, recoverable or cancelled task from its first unfinished step with its saved variables; returns the task when it stops again.",
            Tool::RecordStart => "Start recording every tool call of this connection (name, description optional; context: only the calls made in that client context).",
            Tool::RecordStop => "Stop this connection's recording (context: the one of that client context); save defaults to true (false deletes it).",
            Tool::RecordList => "Search the saved recordings by words (name, description, tags), tool, server or creation time; a page at a time (default 100, with the total), newest first unless sorted otherwise.",
            Tool::RecordGet => "A recording's header, summary, step count and one page of its steps (offset, limit: default 100, at most 1000; stepsPage.nextOffset says where the next page starts).",
            Tool::RecordDelete => "Delete a recording.",
            Tool::RecordReplay => "Replay a recording: mode live (default), dry or offline; variables re-render its templates; returns the replay summary with differences.",
        }
    }

    fn read_only(self) -> bool {
        matches!(
            self,
            Tool::HealthCheck
                | Tool::ListTools
                | Tool::History
                | Tool::TaskStatus
                | Tool::ListTasks
                | Tool::RecordList
                | Tool::RecordGet
        )
    }

    fn input_schema(self) -> Value {
        let empty = json!({"type": "object", "properties": {}});
        let task_id = json!({"type": "object", "required": ["taskId"], "properties": {"taskId": {"type": "string"}}});
        let recording_id = json!({"type": "object", "required": ["recordingId"], "properties": {"recordingId": {"type": "string"}}});
        let page = |mut schema: Value| {
            schema["properties"]["offset"] = json!({"type": "integer", "minimum": 0, "description": "first step to return (default 0)"});
            schema["properties"]["limit"] = json!({"type": "integer", "minimum": 1, "maximum": 1000, "description": "steps to return (default 100)"});
            schema
        };
        match self {
            Tool::HealthCheck | Tool::ListTools => empty,
            Tool::ListTasks => json!({"type": "object", "properties": {
                "state": {"enum": ["pending", "running", "retrying", "need_user", "success", "failed", "recoverable", "cancelled"]},
                "tool": {"type": "string", "description": "tasks with a step calling this tool (bare or qualified name)"},
                "since": {"type": "string", "description": "created at or after: an RFC 3339 UTC time or a date"},
                "offset": {"type": "integer", "minimum": 0}, "limit": {"type": "integer", "minimum": 0, "maximum": 1000}}}),
            Tool::RecordList => json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "words matched against name, description and tags"},
                "tool": {"type": "string"}, "server": {"type": "string"},
                "since": {"type": "string", "description": "created at or after: an RFC 3339 UTC time or a date"},
                "sort": {"enum": ["newest", "oldest", "name", "updated"]},
                "offset": {"type": "integer", "minimum": 0}, "limit": {"type": "integer", "minimum": 0, "maximum": 1000}}}),
            Tool::History => {
                json!({"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 1000}}})
            }
            Tool::Batch => json!({
                "type": "object",
                "required": ["steps"],
                "properties": {
                    "steps": {"type": "array", "items": {"type": "object", "required": ["tool"], "properties": {
                        "id": {"type": "string"}, "tool": {"type": "string"}, "params": {"type": "object"},
                        "saveAs": {"type": "string"}, "when": {}, "expect": {}, "timeout": {"type": "integer"}, "retry": {},
                        "saveImages": {"type": ["boolean", "string"], "description": "keep the images the step returns as screenshots of the current run (a string names them)"}
                    }}},
                    "options": {"type": "object", "properties": {
                        "stopOnError": {"type": "boolean"}, "timeout": {"type": "integer"}, "variables": {"type": "object"},
                        "secrets": {"type": "array", "items": {"type": "string"}, "description": "names of variables whose values are secret: never written, masked wherever the hub writes"}
                    }}
                }
            }),
            Tool::TaskStatus => page(task_id),
            Tool::ResumeTask => page(
                json!({"type": "object", "required": ["taskId"], "properties": {"taskId": {"type": "string"}, "fromStep": {"type": "integer", "minimum": 0}, "variables": {"type": "object"}}}),
            ),
            Tool::RecordStart => {
                json!({"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}, "context": {"type": "string"}}})
            }
            Tool::RecordStop => {
                json!({"type": "object", "properties": {"save": {"type": "boolean"}, "context": {"type": "string"}}})
            }
            Tool::RecordGet => page(recording_id),
            Tool::RecordDelete => recording_id,
            Tool::RecordReplay => {
                json!({"type": "object", "required": ["recordingId"], "properties": {
                "recordingId": {"type": "string"}, "mode": {"enum": ["live", "dry", "offline"]},
                "variables": {"type": "object"}, "continueOnError": {"type": "boolean"}, "speed": {"type": "number"}}})
            }
        }
    }
}

/// The control tools over the application's services.
pub struct Controls(App);

impl Controls {
    pub fn new(app: App) -> Arc<Controls> {
        Arc::new(Controls(app))
    }

    async fn run(&self, tool: Tool, call: LocalCall<'_>) -> Result<Value, HubError> {
        let app = &self.0;
        let (hub, engine, recorder) = (&app.hub, &app.engine, &app.recorder);
        let params = call.params;
        match tool {
            Tool::HealthCheck => Ok(app.health(&call.caller()).await),
            Tool::ListTools => Ok(hub.listing(call.view)),
            Tool::History => {
                let limit = params
                    .get("limit")
                    .and_then(Value::as_u64)
                    .unwrap_or(50)
                    .min(1000) as usize;
                Ok(json!({"entries": hub.history.latest_for(limit, &call.caller()).await}))
            }
            Tool::Batch => {
                let caller = call.caller();
                crate::engine::run_inline(engine, params, &caller, call.context, call.cancel).await
            }
            Tool::TaskStatus | Tool::ResumeTask => {
                // Another view's task, or another client's, is unknown.
                let caller = call.caller();
                let id = required_str(params, "taskId")?;
                let page = step_page(params)?;
                if tool == Tool::ResumeTask {
                    let from = params
                        .get("fromStep")
                        .and_then(Value::as_u64)
                        .map(|n| n as usize);
                    let vars = params.get("variables").and_then(Value::as_object).cloned();
                    if let Some(t) = engine.load(id).await {
                        if !crate::engine::visible(&t, &caller) {
                            return Err(crate::engine::unknown_task(id));
                        }
                        // The resumed steps are the caller's work too.
                        t.set_caller(call.session);
                    }
                    let by = (Some(&caller), None);
                    let handle = crate::engine::resume(engine, id, from, vars, by, None, None)?;
                    // An abandoned call (timeout, cancel) stops the task too.
                    let _stop = StopOnDrop(engine.get(id));
                    let _ = handle.await;
                }
                let t = engine
                    .load(id)
                    .await
                    .filter(|t| crate::engine::visible(t, &caller))
                    .ok_or_else(|| crate::engine::unknown_task(id))?;
                Ok(t.status_json(page))
            }
            Tool::ListTasks => {
                crate::engine::list_json(engine, &params_of(tool, params)?, &call.caller())
            }
            // The recorder's file work runs on the blocking pool, in order
            // with the session's recording messages.
            Tool::RecordStart => {
                let (r, caller) = (recorder.clone(), call.caller());
                let req = params_of(tool, params)?;
                let keys = [call.session];
                recorder.io.run(&keys, move || r.start(&caller, req)).await
            }
            Tool::RecordStop => {
                let req: crate::protocol::recording::StopReq = params_of(tool, params)?;
                let (r, session) = (recorder.clone(), call.session.to_string());
                let keys = [call.session];
                let stop = move || r.stop(&session, req.context.as_deref(), req.save, "stopped");
                recorder.io.run(&keys, stop).await
            }
            Tool::RecordList => {
                // A client's listing reads the index file: off the worker,
                // as the /ws message's is.
                let req: crate::protocol::recording::ListReq = params_of(tool, params)?;
                let (r, caller) = (recorder.clone(), call.caller());
                let list = move || Ok(r.list(&caller, &req));
                recorder.io.run(&[call.session], list).await
            }
            Tool::RecordGet | Tool::RecordDelete => {
                let key = required_str(params, "recordingId")?;
                let (id, keys) = (key.to_string(), [call.session, key]);
                let storage = hub.config().recording.storage_path.clone();
                let caller = call.caller();
                if tool == Tool::RecordGet {
                    let page = step_page(params)?;
                    let get = move || {
                        let rec = crate::recording::load_for(&storage, &id, &caller)?;
                        Ok(crate::recording::export::json_page(&rec, page))
                    };
                    recorder.io.run(&keys, get).await
                } else {
                    let r = recorder.clone();
                    let delete = move || {
                        r.delete(&caller, &id)?;
                        Ok(json!({"recordingId": id, "deleted": true}))
                    };
                    recorder.io.run(&keys, delete).await
                }
            }
            Tool::RecordReplay => {
                let req: crate::protocol::recording::ReplayReq = params_of(tool, params)?;
                crate::recording::replay::execute(engine, None, &call.caller(), &req).await
            }
        }
    }
}

/// `offset`/`limit` of a control tool's params.
fn step_page(params: &Value) -> Result<crate::protocol::StepPage, HubError> {
    serde_json::from_value(params.clone()).map_err(|e| {
        HubError::new(
            ErrorType::InvalidParams,
            format!("offset and limit must be whole numbers of 0 or more: {e}"),
        )
    })
}

/// A control tool's params decoded into the wire type of its message.
fn params_of<T: serde::de::DeserializeOwned>(tool: Tool, params: &Value) -> Result<T, HubError> {
    serde_json::from_value(params.clone()).map_err(|e| {
        HubError::new(
            ErrorType::InvalidParams,
            format!("{} params: {e}", tool.name()),
        )
        .with_suggestion("see the tool's inputSchema in list_tools")
    })
}

fn required_str<'a>(params: &'a Value, key: &str) -> Result<&'a str, HubError> {
    params.get(key).and_then(Value::as_str).ok_or_else(|| {
        HubError::new(
            ErrorType::InvalidParams,
            format!("missing field \"{key}\" (a string)"),
        )
    })
}

impl LocalTools for Controls {
    fn tools(&self) -> Vec<RawTool> {
        Tool::ALL
            .iter()
            .copied()
            .map(|t| RawTool {
                name: t.name().into(),
                description: Some(t.description().into()),
                input_schema: t.input_schema(),
                annotations: Some(if t.read_only() {
                    json!({"readOnlyHint": true})
                } else {
                    json!({"destructiveHint": true})
                }),
                extra: Default::default(),
            })
            .collect()
    }

    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        let tool = Tool::from_name(tool)?;
        Some(Box::pin(self.run(tool, call)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for &t in Tool::ALL {
            assert_eq!(Tool::from_name(t.name()), Some(t));
            assert!(seen.insert(t.name()), "{} twice", t.name());
            assert_eq!(t.input_schema()["type"], "object");
        }
    }
}
