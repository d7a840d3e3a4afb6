//! MCP Tasks (SEP-2663) backed by the engine, with raw 2026-07-28
//! requests as a stateless client sends them: `hub__tool_batch` as a task
//! that survives the hub's SIGKILL (each step's side effect once), any
//! upstream tool as a task when the client asks, `tasks/update` answering
//! a step's `need_user`, `tasks/cancel` reaching the upstream as
//! `notifications/cancelled`, and the errors for unknown tasks.

use serde_json::{json, Value};

use super::direct::{message, post_with};
use super::revision::request;
use super::{hub_with, wait_running};
use crate::support::{call_log, testserver_entry, TestHub};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A stateless 2026-07-28 request declaring the tasks extension (and
/// elicitation) unless `plain`; `Mcp-Name` names the tool or the task.
pub(super) async fn send(
    hub: &TestHub,
    id: u64,
    method: &str,
    mut params: Value,
    plain: bool,
) -> Value {
    let caps = if plain {
        json!({})
    } else {
        json!({"elicitation": {}, "extensions": {TASKS: {}}})
    };
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    if let Some(extra) = params.get("_meta").and_then(Value::as_object) {
        for (k, v) in extra {
            meta[k] = v.clone();
        }
    }
    params["_meta"] = meta;
    let name = params["name"]
        .as_str()
        .or_else(|| params["taskId"].as_str())
        .map(String::from);
    let mut headers = vec![
        ("Mcp-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(n) = &name {
        headers.push(("Mcp-Name", n.as_str()));
    }
    message(&post_with(hub, None, true, request(id, method, params), &headers).await)
}

/// `tools/call` of `tool` as a task: its `CreateTaskResult`, checked; the id.
pub(super) async fn create(hub: &TestHub, tool: &str, arguments: Value, meta: Value) -> String {
    let params = json!({"name": tool, "arguments": arguments, "_meta": meta});
    let m = send(hub, 1, "tools/call", params, false).await;
    let r = &m["result"];
    assert_eq!(r["resultType"], "task", "{m}");
    for key in ["result", "error", "inputRequests", "requestState", "task"] {
        assert!(r.get(key).is_none(), "no {key} on a CreateTaskResult: {m}");
    }
    assert!(
        r["createdAt"].is_string() && r["lastUpdatedAt"].is_string(),
        "{m}"
    );
    r["taskId"].as_str().expect("taskId").to_string()
}

pub(super) async fn get(hub: &TestHub, id: &str) -> Value {
    let m = send(hub, 2, "tasks/get", json!({"taskId": id}), false).await;
    assert_eq!(m["result"]["resultType"], "complete", "{m}");
    assert_eq!(m["result"]["taskId"], id, "{m}");
    m["result"].clone()
}

/// Wait (on the hub's log) until the task's run ends.
pub(super) async fn finished(hub: &TestHub, id: &str) {
    hub.wait_log(&format!(
        "task{{id={id}}}: toolhub::engine::runner: task finished"
    ))
    .await;
}

fn calls(hub: &TestHub, tool: &str, message: Option<&str>) -> usize {
    call_log(&hub.path(), "t")
        .iter()
        .filter(|c| c["tool"] == tool)
        .filter(|c| message.is_none_or(|m| c["arguments"]["message"] == m))
        .count()
}

pub(super) async fn hub(extra: Value) -> TestHub {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), extra).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    hub
}

#[tokio::test]
async fn a_tool_batch_task_survives_a_sigkill_and_runs_each_step_once() {
    // The step the kill interrupts may have run: skip it on resume.
    let hub = hub(json!({"taskEngine": {"resumeUncertain": "skip"}})).await;
    let batch = json!({"steps": [
        {"tool": "t__echo", "params": {"message": "one"}},
        {"tool": "t__hang", "params": {}},
        {"tool": "t__echo", "params": {"message": "three"}},
    ]});
    let id = create(&hub, "hub__tool_batch", batch, json!({})).await;
    // Journaled before the reply: known at once.
    let first = get(&hub, &id).await;
    assert_eq!(first["status"], "working", "{first}");
    hub.wait_log("testserver t call hang").await;
    assert_eq!(calls(&hub, "echo", Some("one")), 1);

    let hub = hub.crash_and_restart().await;
    finished(&hub, &id).await;
    let done = get(&hub, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let summary = &done["result"]["structuredContent"];
    assert_eq!(summary["taskId"], id.as_str(), "{done}");
    assert_eq!(summary["steps"][1]["skipped"], true, "{done}");
    assert_eq!(summary["steps"][2]["success"], true, "{done}");
    // Every step's side effect exactly once, across the crash.
    assert_eq!(calls(&hub, "echo", Some("one")), 1);
    assert_eq!(calls(&hub, "hang", None), 1);
    assert_eq!(calls(&hub, "echo", Some("three")), 1);
}

#[tokio::test]
async fn any_tool_runs_as_a_task_when_asked_and_unknown_tasks_are_errors() {
    let hub = hub(json!({})).await;
    // Not asked: the same call answers at once.
    let args = json!({"message": "now"});
    let sync = json!({"name": "t__echo", "arguments": args});
    let m = send(&hub, 3, "tools/call", sync, false).await;
    assert_eq!(m["result"]["resultType"], "complete", "{m}");
    // Asked with _meta["toolhub/task"]: a task whose result is the call's.
    let id = create(
        &hub,
        "t__echo",
        json!({"message": "later"}),
        json!({"toolhub/task": true}),
    )
    .await;
    finished(&hub, &id).await;
    let done = get(&hub, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "later", "{done}");
    assert!(
        done["result"].get("isError").is_none_or(|e| e == false),
        "{done}"
    );

    let unknown = uuid_like();
    let m = send(&hub, 4, "tasks/get", json!({"taskId": unknown}), false).await;
    assert_eq!(m["error"]["code"], -32602, "{m}");
    let m = send(
        &hub,
        5,
        "tasks/cancel",
        json!({"taskId": "not a task"}),
        false,
    )
    .await;
    assert_eq!(m["error"]["code"], -32602, "{m}");
    // Without the extension, tasks/* are not for this client.
    let m = send(&hub, 6, "tasks/get", json!({"taskId": id}), true).await;
    assert_eq!(m["error"]["code"], -32021, "{m}");
}

fn uuid_like() -> String {
    "00000000-0000-4000-8000-000000000000".to_string()
}

#[tokio::test]
async fn tasks_update_answers_a_steps_need_user() {
    let rules = json!({"safety": {"rules": [
        {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}]}});
    let hub = hub(rules).await;
    let batch = json!({"steps": [{"tool": "t__echo", "params": {"message": "danger"}}]});
    let id = create(&hub, "hub__tool_batch", batch, json!({})).await;
    hub.wait_log("waiting for a person to confirm").await;
    let asked = get(&hub, &id).await;
    assert_eq!(asked["status"], "input_required", "{asked}");
    let q = &asked["inputRequests"]["step-0"];
    assert_eq!(q["method"], "elicitation/create", "{asked}");
    let text = q["params"]["message"].as_str().unwrap_or("");
    assert!(text.contains("dangerous echo"), "{asked}");
    assert_eq!(calls(&hub, "echo", Some("danger")), 0);

    let answer = json!({"step-0": {"action": "accept", "content": {"approve": true}}});
    let params = json!({"taskId": id, "inputResponses": answer});
    let m = send(&hub, 7, "tasks/update", params, false).await;
    assert_eq!(m["result"], json!({"resultType": "complete"}), "{m}");
    finished(&hub, &id).await;
    let done = get(&hub, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["success"], true,
        "{done}"
    );
    assert_eq!(calls(&hub, "echo", Some("danger")), 1);
}

#[tokio::test]
async fn tasks_cancel_stops_a_batch_and_the_upstream_hears_it() {
    let hub = hub(json!({})).await;
    let batch = json!({"steps": [
        {"tool": "t__hang", "params": {}},
        {"tool": "t__echo", "params": {"message": "after"}},
    ]});
    let id = create(&hub, "hub__tool_batch", batch, json!({})).await;
    hub.wait_log("testserver t call hang").await;
    let m = send(&hub, 8, "tasks/cancel", json!({"taskId": id}), false).await;
    assert_eq!(m["result"], json!({"resultType": "complete"}), "{m}");
    hub.wait_log("testserver t cancelled hang").await;
    finished(&hub, &id).await;
    let done = get(&hub, &id).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    // Cancelling an ended task is the same empty answer.
    let m = send(&hub, 9, "tasks/cancel", json!({"taskId": id}), false).await;
    assert_eq!(m["result"], json!({"resultType": "complete"}), "{m}");
    assert_eq!(calls(&hub, "echo", Some("after")), 0);
}

/// A server that asks twice at once in the middle of a task's call
/// (issue 39.3, SEP-2663 with SEP-2322): the task reads `input_required`
/// with both questions; answered one at a time by `tasks/update`, it
/// keeps only the open one, and completes with both answers.
#[tokio::test]
async fn tasks_update_answers_a_servers_questions_one_at_a_time() {
    let hub = super::revision::conformance_hub().await;
    let id = create(&hub, "conf__multi_input", json!({}), json!({})).await;
    hub.wait_log("asks its client: input-1").await;
    let asked = get(&hub, &id).await;
    assert_eq!(asked["status"], "input_required", "{asked}");
    let keys: Vec<String> = asked["inputRequests"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["input-0", "input-1"], "{asked}");
    for k in &keys {
        assert_eq!(
            asked["inputRequests"][k]["method"], "elicitation/create",
            "{asked}"
        );
    }
    let name_key = keys
        .iter()
        .find(|k| {
            asked["inputRequests"][k.as_str()]
                .to_string()
                .contains("Your name?")
        })
        .expect("the name question")
        .clone();
    let other = keys
        .iter()
        .find(|k| **k != name_key)
        .expect("the other")
        .clone();

    // A wrong shape is refused; the question stays open.
    let bad = json!({"taskId": id, "inputResponses": {&name_key: 7}});
    send(&hub, 3, "tasks/update", bad, false).await;
    let answer = json!({&name_key: {"action": "accept", "content": {"name": "Ada"}}});
    let m = send(
        &hub,
        4,
        "tasks/update",
        json!({"taskId": id, "inputResponses": answer}),
        false,
    )
    .await;
    assert_eq!(m["result"], json!({"resultType": "complete"}), "{m}");
    let half = get(&hub, &id).await;
    assert_eq!(half["status"], "input_required", "{half}");
    let left: Vec<&String> = half["inputRequests"]
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert_eq!(left, [&other], "{half}");

    let answer = json!({&other: {"action": "accept", "content": {"confirm": true}}});
    send(
        &hub,
        5,
        "tasks/update",
        json!({"taskId": id, "inputResponses": answer}),
        false,
    )
    .await;
    finished(&hub, &id).await;
    let done = get(&hub, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"].to_string();
    assert!(text.contains("Ada") && text.contains("true"), "{done}");
}
