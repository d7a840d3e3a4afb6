//! need_user approvals: confirm rules, deny rules, declines and expiry.

use serde_json::json;

use crate::barrier;
use crate::servers::wait_running;
use crate::support::{batch_events, call_log, testserver_entry, Client, TestHub};

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

/// With durability `step` a step's result waits for the journal's next
/// sync; a wait for a person must not hold it too. Everything before the
/// `need_user` arrives before it, in order.
#[tokio::test]
async fn messages_held_for_the_journal_go_out_before_a_confirmation_wait() {
    let (_hub, mut c) = hub_with_rules(300_000).await;
    c.seen.clear();
    c.send(json!({"type": "tool_batch", "id": "held", "steps": [
        {"tool": "t__echo", "params": {"message": "safe"}},
        {"tool": "t__echo", "params": {"message": "danger zone"}}
    ]}))
    .await;
    c.recv_type("need_user").await;
    assert_eq!(
        batch_events(&c.seen, "held"),
        ["state:running", "step:0", "state:need_user", "need_user"],
        "{:?}",
        c.seen
    );
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

/// A single call whose session ends while it waits for a person is
/// cancelled, and its question goes with it: a late `confirm` finds
/// nothing to approve.
#[tokio::test]
async fn a_single_calls_question_is_withdrawn_when_its_session_ends() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({
            "server": {"sessionGraceMs": 0},
            "mcpServers": {"t": testserver_entry(&p, "t", &[])},
            "safety": {"confirmTimeout": 300_000, "rules": [
                {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}
            ]}
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    c.send(
        json!({"type": "tool_call", "id": "q", "tool": "t__echo", "params": {"message": "danger"}}),
    )
    .await;
    let ask = c.recv_type("need_user").await;
    assert!(
        ask["taskId"]
            .as_str()
            .is_some_and(|t| t.starts_with("call-")),
        "{ask}"
    );
    assert_eq!(ask["requestId"], "q", "{ask}");
    drop(c);
    hub.wait_log("call cancelled at the safety gate").await;
    let mut other = hub.connect().await;
    let late = other
        .request(json!({"type": "confirm", "taskId": ask["taskId"], "approve": true}))
        .await;
    assert_eq!(late["type"], "error", "{late}");
    assert!(
        call_log(&hub.path(), "t")
            .iter()
            .all(|l| l["arguments"]["message"] != "danger"),
        "a withdrawn call must not run"
    );
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
async fn with_the_owner_gone_the_main_tokens_sessions_are_asked_and_no_tool_can_approve() {
    let (hub, mut c) = hub_with_rules(300_000).await;
    let mut other = hub.connect().await;
    c.send(json!({"type": "tool_batch", "id": "orphan", "steps": [
        {"tool": "t__barrier", "params": {"name": "orphan"}},
        {"tool": "t__echo", "params": {"message": "danger after the owner left"}}
    ]}))
    .await;
    let st = c
        .recv_where("running", |v| {
            v["type"] == "task_state" && v["state"] == "running"
        })
        .await;
    let task_id = st["taskId"].clone();
    // The owner leaves while the batch waits at the server; the question
    // comes only after.
    barrier::await_waiting(&mut other, "t", "orphan", 1).await;
    let session = crate::instances::session_id(&c);
    drop(c);
    hub.wait_log(&format!("client disconnected session={session}"))
        .await;
    barrier::release(&mut other, "t", "orphan").await;
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

/// Issue 16.5: a server's configured helper tool (here its snapshotTool,
/// called by the retry action refresh_snapshot) goes through the safety
/// gate: a deny rule keeps it from running, and the step's outcome says why.
#[tokio::test]
async fn a_helper_tool_is_gated_like_any_call_and_the_step_says_why() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut t = testserver_entry(&p, "t", &[]);
    t["snapshotTool"] = json!("image");
    t["recoveryTool"] = json!("image");
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": t},
            "safety": {"rules": [
                {"tool": "t__image", "action": "deny", "reason": "no pictures of this server"}
            ]}
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    for (id, action) in [("snap", "refresh_snapshot"), ("rebuild", "rebuild_context")] {
        c.send(json!({"type": "tool_batch", "id": id, "steps": [
            {"tool": "t__flaky", "params": {"key": id, "failures": 1},
             "retry": {"maxRetries": 1, "delay": 10, "action": action}}
        ]}))
        .await;
        let step = c
            .recv_where("the step's result", |v| {
                v["type"] == "batch_step_result" && v["batchId"] == id
            })
            .await;
        assert_eq!(step["success"], true, "{step}");
        let retry = &step["retries"][0];
        assert_eq!(retry["action"], action, "{step}");
        let note = retry["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("t__image was not called: denied by a safety rule")
                && note.contains("no pictures of this server"),
            "{step}"
        );
    }
    let log = call_log(&hub.path(), "t");
    assert!(log.iter().any(|l| l["tool"] == "flaky"), "{log:?}");
    assert!(
        log.iter().all(|l| l["tool"] != "image"),
        "a denied helper must not run"
    );
    // The helper went through the call pipeline: history keeps it as the
    // hub's own call.
    let h = c.request(json!({"type": "history", "limit": 50})).await;
    let refused = h["entries"].as_array().into_iter().flatten().filter(|e| {
        e["session"] == "hub" && e["tool"] == "t__image" && e["errorType"] == "SAFETY_BLOCKED"
    });
    assert_eq!(refused.count(), 2, "{h}");
}

/// Issue 16.5: the screenshot a recording takes after each step
/// (screenshotTool) passes the same gate: denied, it is not taken.
#[tokio::test]
async fn a_denied_screenshot_tool_is_not_called_for_a_recording() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut t = testserver_entry(&p, "t", &[]);
    t["screenshotTool"] = json!("image");
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": t},
            "recording": {"screenshotOnStep": true},
            "safety": {"rules": [{"tool": "t__image", "action": "deny", "reason": "no pictures"}]}
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let started = c.request(json!({"type": "start_recording"})).await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    let r = c.call("t__echo", json!({"message": "hi"})).await;
    assert_eq!(r["success"], true, "{r}");
    c.request(json!({"type": "stop_recording"})).await;
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let step = &got["recording"]["steps"][0];
    assert!(step["screenshot"].is_null(), "{step}");
    hub.wait_log("screenshot for the recording not taken: refused by the safety gate")
        .await;
    assert!(
        call_log(&hub.path(), "t")
            .iter()
            .all(|l| l["tool"] != "image"),
        "a denied screenshot tool must not run"
    );
}
