//! An MCP task belongs to the client whose token made it (issue 49.1): its
//! steps' `need_user` go to that client's `/ws` sessions and the main
//! token's, never another client's; another client's `tasks/get`,
//! `tasks/update` and `/ws` `confirm` find nothing; the person answers it.

use serde_json::{json, Value};

use super::direct::{message, reply_of};
use super::revision::request;
use crate::questions::{client, start, AGENT, EXT};
use crate::support::{call_log, TestHub};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A stateless 2026-07-28 request to `/mcp/chat` with `token`, declaring
/// the tasks extension.
async fn send(hub: &TestHub, token: &str, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    let name = params["name"]
        .as_str()
        .or_else(|| params["taskId"].as_str())
        .unwrap_or_default()
        .to_string();
    let body = request(1, method, params).to_string();
    let req = format!(
        "POST /mcp/chat HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\nMcp-Name: {name}\r\n\r\n{body}",
        hub.addr,
        body.len()
    );
    message(&reply_of(&super::raw_http(hub, &req).await))
}

#[tokio::test]
async fn an_mcp_tasks_question_belongs_to_its_client() {
    let (hub, mut main) = start().await;
    let mut ext = client(&hub, EXT).await;
    let mut agent = client(&hub, AGENT).await;
    let batch = json!({"steps": [{"tool": "t__echo", "params": {"message": "danger mcp"}}]});
    let m = send(
        &hub,
        EXT,
        "tools/call",
        json!({"name": "hub__tool_batch", "arguments": batch}),
    )
    .await;
    assert_eq!(m["result"]["resultType"], "task", "{m}");
    let task = m["result"]["taskId"].as_str().expect("taskId").to_string();
    let is_ours = |v: &Value| v["type"] == "need_user" && v["taskId"] == task.as_str();
    let ask = ext.recv_where("ext's question", is_ours).await;
    main.recv_where("the person's copy", is_ours).await;
    // Another client: the task is unknown, its answers find nothing.
    let got = send(&hub, AGENT, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(got["error"]["code"], -32602, "{got}");
    let answer = json!({"step-0": {"action": "accept", "content": {"approve": true}}});
    let upd = send(
        &hub,
        AGENT,
        "tasks/update",
        json!({"taskId": task, "inputResponses": answer}),
    )
    .await;
    assert_eq!(upd["error"]["code"], -32602, "{upd}");
    let r = agent
        .request(json!({"type": "confirm", "taskId": task, "approve": true,
            "stepIndex": 0, "paramsHash": ask["paramsHash"]}))
        .await;
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");
    let ran = || {
        call_log(&hub.path(), "t")
            .iter()
            .any(|l| l["arguments"]["message"] == "danger mcp")
    };
    assert!(!ran(), "another client's answer ran the step");
    // Its own client sees it waiting; the person answers it.
    let got = send(&hub, EXT, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(got["result"]["status"], "input_required", "{got}");
    let ok = main
        .request(json!({"type": "confirm", "taskId": task, "approve": true,
            "stepIndex": 0, "paramsHash": ask["paramsHash"]}))
        .await;
    assert_eq!(ok["type"], "confirmed", "{ok}");
    hub.wait_log(&format!(
        "task{{id={task}}}: toolhub::engine::runner: task finished"
    ))
    .await;
    assert!(ran());
    // The other client heard none of it: its own question is the first.
    agent
        .send(
            json!({"type": "tool_call", "id": "tb", "tool": "hub__tool_batch",
            "params": {"steps": [{"tool": "t__echo", "params": {"message": "danger agent"}}]}}),
        )
        .await;
    let mine = agent
        .recv_where("agent's question", |v| v["type"] == "need_user")
        .await;
    assert_eq!(mine["params"]["message"], "danger agent", "{mine}");
    assert!(!agent.seen.iter().any(is_ours), "{:?}", agent.seen);
}
