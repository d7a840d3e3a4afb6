//! need_user approvals: confirm rules, deny rules, declines and expiry.

use serde_json::json;

use crate::servers::wait_running;
use crate::support::{call_log, testserver_entry, Client, TestHub};

async fn hub_with_rules(confirm_timeout: u64) -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": testserver_entry(&p, "t", &[])},
            "safety": {"confirmTimeout": confirm_timeout, "rules": [
                {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"},
                {"tool": "t__*", "match": {"message": "forbidden"}, "action": "deny"}
            ]}
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, c)
}

#[tokio::test]
async fn a_confirm_rule_waits_for_the_exact_step_then_runs() {
    let (hub, mut c) = hub_with_rules(300_000).await;
    c.send(json!({"type": "tool_batch", "id": "b", "steps": [
        {"tool": "t__echo", "params": {"message": "safe"}},
        {"tool": "t__echo", "params": {"message": "danger zone"}}
    ]}))
    .await;
    let ask = c.recv_type("need_user").await;
    assert_eq!(ask["stepIndex"], 1);
    assert_eq!(ask["reason"], "dangerous echo");
    assert_eq!(ask["params"]["message"], "danger zone");
    let task_id = ask["taskId"].clone();
    c.recv_where("need_user state", |v| {
        v["type"] == "task_state" && v["state"] == "need_user"
    })
    .await;
    assert!(
        call_log(&hub.path(), "t")
            .iter()
            .all(|l| l["arguments"]["message"] != "danger zone"),
        "must not run before approval"
    );
    let wrong = c
        .request(json!({"type": "confirm", "taskId": task_id, "approve": true, "stepIndex": 0}))
        .await;
    assert_eq!(
        wrong["type"], "error",
        "a confirm for another step is refused: {wrong}"
    );
    let wrong = c
        .request(
            json!({"type": "confirm", "taskId": task_id, "approve": true, "paramsHash": "0000"}),
        )
        .await;
    assert_eq!(wrong["type"], "error");
    let ok = c
        .request(json!({"type": "confirm", "taskId": task_id, "approve": true, "stepIndex": 1, "paramsHash": ask["paramsHash"]}))
        .await;
    assert_eq!(ok["type"], "confirmed", "{ok}");
    let again = c
        .request(json!({"type": "confirm", "taskId": task_id, "approve": true}))
        .await;
    assert_eq!(again["type"], "error", "single use");
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["state"], "success", "{done}");
}

#[tokio::test]
async fn deny_rules_and_declines_are_safety_blocked() {
    let (hub, mut c) = hub_with_rules(300_000).await;
    let r = c.call("t__echo", json!({"message": "forbidden"})).await;
    assert_eq!(r["error"]["errorType"], "SAFETY_BLOCKED", "{r}");
    assert!(call_log(&hub.path(), "t")
        .iter()
        .all(|l| l["arguments"]["message"] != "forbidden"));
    // A single tool_call is gated the same way.
    c.send(
        json!({"type": "tool_call", "id": "x", "tool": "echo", "params": {"message": "danger"}}),
    )
    .await;
    let ask = c.recv_type("need_user").await;
    c.request(json!({"type": "confirm", "taskId": ask["taskId"], "approve": false}))
        .await;
    let r = c.recv_where("tool_result x", |v| v["replyTo"] == "x").await;
    assert_eq!(r["error"]["errorType"], "SAFETY_BLOCKED", "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("declined"));
}

#[tokio::test]
async fn an_unanswered_confirmation_expires_as_safety_blocked() {
    let (_hub, mut c) = hub_with_rules(200).await;
    let r = c.call("t__echo", json!({"message": "danger"})).await;
    assert_eq!(r["error"]["errorType"], "SAFETY_BLOCKED", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("confirmTimeout"),
        "{r}"
    );
}

#[tokio::test]
async fn with_the_owner_gone_every_connection_is_asked_and_no_tool_can_approve() {
    let (hub, mut c) = hub_with_rules(300_000).await;
    let mut other = hub.connect().await;
    c.send(json!({"type": "tool_batch", "id": "orphan", "steps": [
        {"tool": "t__slow", "params": {"ms": 800}},
        {"tool": "t__echo", "params": {"message": "danger after the owner left"}}
    ]}))
    .await;
    let st = c
        .recv_where("running", |v| {
            v["type"] == "task_state" && v["state"] == "running"
        })
        .await;
    let task_id = st["taskId"].clone();
    drop(c);
    hub.wait_log("client disconnected").await;
    let ask = other.recv_type("need_user").await;
    assert_eq!(ask["taskId"], task_id, "{ask}");
    // An agent that can only emit tool calls cannot approve its own call.
    for name in ["confirm", "hub__confirm", "approve"] {
        let r = other
            .call(name, json!({"taskId": task_id, "approve": true}))
            .await;
        assert_eq!(r["error"]["errorType"], "TOOL_NOT_FOUND", "{r}");
    }
    let ok = other
        .request(json!({"type": "confirm", "taskId": task_id, "approve": true}))
        .await;
    assert_eq!(ok["type"], "confirmed", "{ok}");
    let t = other
        .request(json!({"type": "task_status", "taskId": task_id, "wait": true}))
        .await;
    assert_eq!(t["task"]["state"], "success", "{t}");
}
