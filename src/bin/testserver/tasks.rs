//! `--conformance`: the fixtures of the suite's Tasks extension scenarios
//! (SEP-2663). This server speaks 2025-11-25 and knows nothing of tasks;
//! it marks its long tools with `_meta["io.modelcontextprotocol/tasks"]`
//! and the hub runs them as its own durable tasks.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::reply::text;

type Reply = Result<CallToolResult, ErrorData>;

/// The Tasks fixtures: `greet` (sync), `slow_compute` (optional task),
/// `failing_job` (required task), `protocol_error_job` (optional task).
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
    ]);
    serde_json::from_value(listed).unwrap_or_default()
}

/// Run a Tasks fixture (`stop`: the call's cancellation); `None` when
/// `name` is not one.
pub async fn call(
    name: &str,
    args: &Map<String, Value>,
    stop: &CancellationToken,
) -> Option<Reply> {
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
        _ => return None,
    };
    Some(r)
}
