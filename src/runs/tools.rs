//! The run operations as tools of the `hub` server (`hub__run_create`,
//! `hub__run_set`, …), so an agent that can only call tools can use them.
//! Their params decode into the same `protocol::runs` types as the
//! messages.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::Runs;
use crate::caller::Caller;
use crate::errors::{ErrorType, HubError};
use crate::hub::local::{LocalCall, LocalFuture, LocalTools};
use crate::mcp::registry::RawTool;
use crate::protocol::runs::{CreateRunReq, GetRunReq, ListRunsReq, LogEntryReq, RunRef};

crate::hub::local::tool_names! {
    /// Every run tool; dispatch is on this enum.
    Create => "run_create",
    Set => "run_set",
    List => "run_list",
    Get => "run_get",
    Log => "run_log",
    Archive => "run_archive",
    Delete => "run_delete",
}

impl Tool {
    fn description(self) -> &'static str {
        match self {
            Tool::Create => "Create a run (a persistent workspace for one topic): theme (1-500 chars), runId optional (^[a-z0-9-]{1,50}$, else made from the theme).",
            Tool::Set => "Make a run this connection's current run (for the main token also the hub-wide default); every later tool call and batch step is logged into it. An archived run becomes active.",
            Tool::List => "List runs (metadata only); status active|archived filters.",
            Tool::Get => "A run's metadata and its last log entries (tail, default 20).",
            Tool::Log => "Write your own entry into the current run (or runId): step, status (success|error|warning), action_type (navigation|extraction|interaction|screenshot|recipe_execution|data_processing|analysis|user_interaction|other), execution_method (command|recipe|file|manual|analysis|tool), data (an object; data.file for method file; no code).",
            Tool::Archive => "Archive a run (set_run makes it active again).",
            Tool::Delete => "Delete a run and everything in its folder.",
        }
    }

    fn input_schema(self) -> Value {
        let run_id = json!({"type": "object", "required": ["runId"], "properties": {"runId": {"type": "string"}}});
        match self {
            Tool::Create => json!({"type": "object", "required": ["theme"], "properties": {
                "theme": {"type": "string"}, "runId": {"type": "string"}}}),
            Tool::Set | Tool::Archive | Tool::Delete => run_id,
            Tool::List => {
                json!({"type": "object", "properties": {"status": {"enum": ["active", "archived"]},
                    "offset": {"type": "integer", "minimum": 0}, "limit": {"type": "integer", "minimum": 0, "maximum": 1000}}})
            }
            Tool::Get => json!({"type": "object", "required": ["runId"], "properties": {
                "runId": {"type": "string"}, "tail": {"type": "integer", "minimum": 0, "maximum": 1000}}}),
            Tool::Log => json!({"type": "object",
                "required": ["step", "status", "action_type", "execution_method"],
                "properties": {
                    "step": {"type": "string"},
                    "status": {"enum": ["success", "error", "warning"]},
                    "action_type": {"enum": ["navigation", "extraction", "interaction", "screenshot", "recipe_execution", "data_processing", "analysis", "user_interaction", "other"]},
                    "execution_method": {"enum": ["command", "recipe", "file", "manual", "analysis", "tool"]},
                    "data": {"type": "object"},
                    "runId": {"type": "string"}}}),
        }
    }
}

/// Is `qualified` one of these tools (not logged into a run themselves)?
pub fn is_run_tool(qualified: &str) -> bool {
    qualified
        .strip_prefix("hub__")
        .and_then(Tool::from_name)
        .is_some()
}

/// The run tools over the runs service.
pub struct RunTools(Arc<Runs>);

impl RunTools {
    pub fn new(runs: Arc<Runs>) -> Arc<RunTools> {
        Arc::new(RunTools(runs))
    }
}

/// One run tool (blocking file IO: on the blocking pool, in order with the
/// session's run messages).
/// What the tool shows or changes is `who`'s (a client token: its own runs).
fn run(runs: &Runs, tool: Tool, who: &Caller, p: &Value) -> Result<Value, HubError> {
    match tool {
        Tool::Create => runs.create(who, &params::<CreateRunReq>(tool, p)?),
        Tool::Set => runs.set(who, &params::<RunRef>(tool, p)?.run_id),
        Tool::List => Ok(runs.list(who, &params::<ListRunsReq>(tool, p)?)),
        Tool::Get => runs.get(who, &params::<GetRunReq>(tool, p)?),
        Tool::Log => runs.log(who, params::<LogEntryReq>(tool, p)?),
        Tool::Archive => runs.archive(who, &params::<RunRef>(tool, p)?.run_id),
        Tool::Delete => runs.delete(who, &params::<RunRef>(tool, p)?.run_id),
    }
}

fn params<T: DeserializeOwned>(tool: Tool, p: &Value) -> Result<T, HubError> {
    serde_json::from_value(p.clone()).map_err(|e| {
        HubError::new(
            ErrorType::InvalidParams,
            format!("{} params: {e}", tool.name()),
        )
        .with_suggestion(format!("see the inputSchema of hub__{}", tool.name()))
    })
}

impl LocalTools for RunTools {
    fn tools(&self) -> Vec<RawTool> {
        Tool::ALL
            .iter()
            .copied()
            .map(|t| RawTool {
                name: t.name().into(),
                description: Some(t.description().into()),
                input_schema: t.input_schema(),
                annotations: Some(match t {
                    Tool::List | Tool::Get => json!({"readOnlyHint": true}),
                    Tool::Delete => json!({"destructiveHint": true}),
                    _ => json!({"readOnlyHint": false}),
                }),
                extra: Default::default(),
            })
            .collect()
    }

    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        let tool = Tool::from_name(tool)?;
        Some(Box::pin(async move {
            let runs = self.0.clone();
            let (who, p) = (call.caller(), call.params.clone());
            let job = move || run(&runs, tool, &who, &p);
            self.0.io.run(&[call.session], job).await
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_run_tools_match() {
        for &t in Tool::ALL {
            assert_eq!(Tool::from_name(t.name()), Some(t));
            assert_eq!(t.input_schema()["type"], "object");
            assert!(is_run_tool(&format!("hub__{}", t.name())));
        }
        assert!(!is_run_tool("hub__run_command"));
        assert!(!is_run_tool("run_create"));
    }
}
