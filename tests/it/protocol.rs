//! The protocol layer: hello, bad frames, ping, limits.

use serde_json::json;

use crate::support::TestHub;

#[tokio::test]
async fn bad_frames_get_exact_errors_and_the_connection_survives() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    c.send_text("{not json").await;
    let e = c.recv_type("error").await;
    assert_eq!(e["error"]["errorType"], "INVALID_MESSAGE");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not valid JSON"),
        "{e}"
    );
    let e = c.request(json!({"type": "tool_bach"})).await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("did you mean \"tool_batch\""),
        "{e}"
    );
    let e = c.request(json!({"type": "tool_call", "tool": 5})).await;
    let msg = e["error"]["message"].as_str().unwrap_or("").to_string();
    assert!(msg.contains("tool") && msg.contains("string"), "{msg}");
    assert!(!e["error"]["suggestion"].as_str().unwrap_or("").is_empty());
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong");
}

#[tokio::test]
async fn oversized_frame_is_limit_exceeded() {
    let hub = TestHub::start(json!({"server": {"maxMessageBytes": 1024}})).await;
    let mut c = hub.connect().await;
    let big = json!({"type": "ping", "id": 1, "pad": "x".repeat(1500)});
    c.send(big).await;
    let e = c.recv_type("error").await;
    assert_eq!(e["error"]["errorType"], "LIMIT_EXCEEDED");
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong");
}

#[tokio::test]
async fn deep_json_is_refused_cleanly() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    let deep = format!(
        "{{\"type\":\"ping\",\"x\":{}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    c.send_text(&deep).await;
    let e = c.recv_type("error").await;
    assert_eq!(e["error"]["errorType"], "INVALID_MESSAGE");
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
}

#[tokio::test]
async fn connections_are_capped() {
    let hub = TestHub::start(json!({"server": {"maxConnections": 2}})).await;
    let _a = hub.connect().await;
    let _b = hub.connect().await;
    let token = hub.token.clone().expect("token");
    let code = crate::gate::upgrade_status(
        &hub.addr,
        &[
            ("Host", hub.addr.clone()),
            ("Authorization", format!("Bearer {token}")),
        ],
    )
    .await;
    assert_eq!(code, 503);
    drop(_a);
    // The slot comes back once the hub notices the close.
    hub.wait_log("client disconnected").await;
    let mut c = hub.connect().await;
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
}

#[tokio::test]
async fn history_records_calls_with_secrets_redacted() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    let r = c
        .call(
            "write_file",
            json!({"path": "a.txt", "content": "hi", "password": "hunter2"}),
        )
        .await;
    assert_eq!(r["type"], "tool_result");
    let h = c.request(json!({"type": "history", "limit": 5})).await;
    let entries = h["entries"].as_array().expect("entries");
    let last = entries.last().expect("one entry");
    assert_eq!(last["tool"], "hub__write_file");
    assert_eq!(last["params"]["password"], json!({"$redacted": "password"}));
    let file = std::fs::read_to_string(hub.path().join("state/history.jsonl")).unwrap_or_default();
    // The writer is asynchronous; the in-memory view above is authoritative,
    // and the file must never hold the secret.
    assert!(!file.contains("hunter2"));
}

/// Issue 16.10: a value that cannot be an id says what an id looks like and
/// where to find one, not the generic framing advice.
#[tokio::test]
async fn a_bad_id_says_what_an_id_looks_like() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    let bad = "../etc/passwd";
    let cases = [
        (
            json!({"type": "task_status", "taskId": bad}),
            "\"../etc/passwd\" is not a task id: task ids are UUIDs, see list_tasks",
        ),
        (
            json!({"type": "resume_task", "taskId": bad}),
            "\"../etc/passwd\" is not a task id: task ids are UUIDs, see list_tasks",
        ),
        (
            json!({"type": "get_recording", "recordingId": bad}),
            "\"../etc/passwd\" is not a recording id: recording ids are",
        ),
        (
            json!({"type": "get_run", "runId": bad}),
            "\"../etc/passwd\" is not a run id: run ids are",
        ),
    ];
    for (msg, want) in cases {
        let e = c.request(msg.clone()).await;
        let error = &e["error"];
        let text = error["message"].as_str().unwrap_or_default();
        assert!(text.starts_with(want), "{msg} -> {e}");
        let suggestion = error["suggestion"].as_str().unwrap_or_default();
        assert!(
            !suggestion.contains("JSON object per WebSocket frame"),
            "{msg} -> {e}"
        );
        assert!(!suggestion.is_empty(), "{msg} -> {e}");
    }
    // The hub tool says the same.
    let r = c.call("hub__task_status", json!({"taskId": bad})).await;
    let text = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("\"../etc/passwd\" is not a task id"),
        "{r}"
    );
}
