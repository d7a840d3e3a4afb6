//! `keep_result` (issue 37 item 6, the hub's side): the extension folds a
//! long result in the chat and has the hub keep it whole in the workspace,
//! at a path `hub__read_file` reads; bad requests get a clear error and
//! the connection keeps running.

use serde_json::{json, Value};

use crate::support::TestHub;

fn assert_error(r: &Value, error_type: &str, says: &str) {
    assert_eq!(r["type"], "error", "{r}");
    let e = &r["error"];
    assert_eq!(e["errorType"], error_type, "{r}");
    let msg = e["message"].as_str().unwrap_or("");
    assert!(msg.contains(says), "{says} not in: {msg}");
    assert!(
        !e["suggestion"].as_str().unwrap_or("").is_empty(),
        "no suggestion: {r}"
    );
}

#[tokio::test]
async fn a_kept_result_is_written_atomically_and_read_back_with_read_file() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    let text = format!("héad\n{}\ntail ✓", "x".repeat(50_000));
    let r = c
        .request(json!({"type": "keep_result", "name": "th-0123456789abcdef-0-s3", "text": text}))
        .await;
    assert_eq!(r["type"], "result_kept", "{r}");
    assert_eq!(r["path"], ".toolhub/results/th-0123456789abcdef-0-s3.txt");
    assert_eq!(r["chars"], text.chars().count());
    let on_disk = hub
        .path()
        .join("workspace/.toolhub/results/th-0123456789abcdef-0-s3.txt");
    assert_eq!(std::fs::read_to_string(&on_disk).expect("kept"), text);
    let read = c
        .call("hub__read_file", json!({"path": r["path"].clone()}))
        .await;
    assert_eq!(read["success"], true, "{read}");
    assert_eq!(read["result"], json!(text));

    // The same name again replaces it.
    let r = c
        .request(
            json!({"type": "keep_result", "name": "th-0123456789abcdef-0-s3", "text": "second"}),
        )
        .await;
    assert_eq!(r["chars"], 6, "{r}");
    assert_eq!(std::fs::read_to_string(&on_disk).expect("kept"), "second");
    let left: Vec<_> = std::fs::read_dir(on_disk.parent().expect("dir"))
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "temp files left: {left:?}");
}

#[tokio::test]
async fn bad_requests_are_refused_and_the_connection_keeps_running() {
    let config = json!({"server": {"maxMessageBytes": 40 * 1024 * 1024}});
    let hub = TestHub::start(config).await;
    let mut c = hub.connect().await;
    for (msg, says) in [
        (
            json!({"type": "keep_result", "name": "../../x", "text": "t"}),
            "\"name\"",
        ),
        (
            json!({"type": "keep_result", "name": "a.b", "text": "t"}),
            "not valid",
        ),
        (
            json!({"type": "keep_result", "name": "", "text": "t"}),
            "not valid",
        ),
        (
            json!({"type": "keep_result", "name": "x".repeat(101), "text": "t"}),
            "not valid",
        ),
        (
            json!({"type": "keep_result", "name": "ok"}),
            "missing field \"text\"",
        ),
        (
            json!({"type": "keep_result", "text": "t"}),
            "missing field \"name\"",
        ),
        (
            json!({"type": "keep_result", "name": "ok", "text": 5}),
            "text",
        ),
    ] {
        let r = c.request(msg.clone()).await;
        assert_error(&r, "INVALID_MESSAGE", says);
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("keep_result: "),
            "{r}"
        );
    }
    let big = "y".repeat(32 * 1024 * 1024 + 1);
    let r = c
        .request(json!({"type": "keep_result", "name": "big", "text": big}))
        .await;
    assert_error(&r, "LIMIT_EXCEEDED", "over the limit of 33554432 bytes");
    let results = hub.path().join("workspace/.toolhub/results");
    assert!(!results.join("big.txt").exists());
    assert!(!hub.path().join("x.txt").exists());
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong", "{pong}");
}

#[tokio::test]
async fn with_the_workspace_tools_off_nothing_is_kept() {
    let hub = TestHub::start(json!({"builtin": {"enabled": false}})).await;
    let mut c = hub.connect().await;
    let r = c
        .request(json!({"type": "keep_result", "name": "n", "text": "t"}))
        .await;
    assert_error(&r, "NOT_FOUND", "builtin.enabled is false");
}
