//! `--conformance`: the fixtures of the suite's Tasks extension scenarios
//! (SEP-2663). This server speaks 2025-11-25 and knows nothing of tasks;
//! it marks its long tools with `_meta["io.modelcontextprotocol/tasks"]`
//! and the hub runs them as its own durable tasks.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, ElicitRequestParams, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Map, Value};

use super::reply::text;

type Reply = Result<CallToolResult, ErrorData>;

/// The Tasks fixtures: `greet` (sync), `slow_compute` (optional task),
/// `failing_job` (required task), `protocol_error_job` (optional task),
/// `confirm_delete` and `multi_input` (optional tasks that elicit
/// mid-call, once and twice at once).
pub fn tools() -> Vec<Tool> {
    let support = |s: &str| json!({"io.modelcontextprotocol/tasks": {"taskSupport": s}});
    let object = |properties: Value| json!({"type": "object", "properties": properties});
    let listed = json!([
        {"name": "greet", "description": "Says hello (sync only).",
         "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
        {"name": "slow_compute", "description": "Sleeps `seconds`, then answers (task-supporting).",
         "inputSchema": object(json!({"seconds": {"type": "number"}, "label": {"type": "string"}})),
         "_meta": support("optional")},
        {"name": "failing_job", "description": "Always a tool execution error (task required).",
         "inputSchema": object(json!({})), "_meta": support("required")},
        {"name": "protocol_error_job", "description": "Always a JSON-RPC internal error (task-supporting).",
         "inputSchema": object(json!({})), "_meta": support("optional")},
        {"name": "confirm_delete", "description": "Asks to confirm (elicitation mid-call), then says it deleted (task-supporting).",
         "inputSchema": object(json!({"filename": {"type": "string"}})), "_meta": support("optional")},
        {"name": "multi_input", "description": "Asks two questions at once (two elicitations in parallel) (task-supporting).",
         "inputSchema": object(json!({})), "_meta": support("optional")},
    ]);
    serde_json::from_value(listed).unwrap_or_default()
}

/// Run a Tasks fixture (`stop`: the call's cancellation); `None` when
/// `name` is not one.
pub async fn call(
    name: &str,
    args: &Map<String, Value>,
    cx: &RequestContext<RoleServer>,
) -> Option<Reply> {
    let stop = &cx.ct;
    let r = match name {
        "greet" => {
            let who = args.get("name").and_then(Value::as_str).unwrap_or("World");
            Ok(text(format!("Hello, {who}!")))
        }
        "slow_compute" => {
            let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
            let label = args.get("label").and_then(Value::as_str).unwrap_or("");
            // The tool's own work is a wait; cancellation ends it.
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs_f64(seconds.max(0.0))) => {
                    Ok(text(format!("computed {label} after {seconds} s")))
                }
                _ = stop.cancelled() => Err(ErrorData::internal_error("slow_compute was cancelled", None)),
            }
        }
        "failing_job" => Ok(CallToolResult::error(vec![ContentBlock::text(
            "failing_job failed, as it always does",
        )])),
        "protocol_error_job" => Err(ErrorData::internal_error(
            "protocol_error_job raised an internal error",
            None,
        )),
        "confirm_delete" => {
            let file = args.get("filename").and_then(Value::as_str).unwrap_or("");
            match ask(cx, &format!("Delete {file}?"), "confirm", "boolean").await {
                Ok(a) if a["action"] == "accept" && a["content"]["confirm"] == true => {
                    Ok(text(format!("deleted {file}")))
                }
                Ok(_) => Ok(text(format!("kept {file}"))),
                Err(e) => Err(e),
            }
        }
        "multi_input" => {
            let (a, b) = tokio::join!(
                ask(cx, "Your name?", "name", "string"),
                ask(cx, "Confirm?", "confirm", "boolean")
            );
            match (a, b) {
                (Ok(a), Ok(b)) => Ok(text(format!(
                    "got {} and {}",
                    a["content"]["name"], b["content"]["confirm"]
                ))),
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        }
        _ => return None,
    };
    Some(r)
}

/// Ask the client by elicitation (a one-field form) and return its answer.
async fn ask(
    cx: &RequestContext<RoleServer>,
    message: &str,
    field: &str,
    kind: &str,
) -> Result<Value, ErrorData> {
    let params: ElicitRequestParams = serde_json::from_value(json!({
        "mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    }))
    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let r = cx
        .peer
        .create_elicitation(params)
        .await
        .map_err(|e| ErrorData::internal_error(format!("elicitation failed: {e}"), None))?;
    serde_json::to_value(r).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}
