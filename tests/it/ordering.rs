//! A message's effects in the order the client sent them: a `tool_call`
//! sent right behind `start_recording` or `set_run`, without waiting for
//! their replies, is recorded or logged, though those two do their file
//! work on the blocking pool and the call would otherwise finish first.

use serde_json::json;

use crate::runs::{entries, hub_with_t};

#[tokio::test]
async fn a_call_sent_right_after_start_recording_is_recorded() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    for i in 0..20 {
        c.send(json!({"type": "start_recording", "id": format!("start-{i}")}))
            .await;
        c.send(
            json!({"type": "tool_call", "id": format!("call-{i}"), "tool": "t__echo",
                      "params": {"message": format!("right behind {i}")}}),
        )
        .await;
        let started = c
            .recv_where("recording_started", |v| {
                v["replyTo"] == format!("start-{i}")
            })
            .await;
        assert_eq!(started["type"], "recording_started", "{started}");
        let id = started["recordingId"].as_str().expect("id").to_string();
        let r = c
            .recv_where("the call", |v| v["replyTo"] == format!("call-{i}"))
            .await;
        assert_eq!(r["success"], true, "{r}");
        let stopped = c.request(json!({"type": "stop_recording"})).await;
        assert_eq!(stopped["type"], "recording_stopped", "{stopped}");
        let got = c
            .request(json!({"type": "get_recording", "recordingId": id}))
            .await;
        let steps = got["recording"]["steps"].as_array().expect("steps");
        assert_eq!(
            steps.len(),
            1,
            "round {i}: the call is in the recording: {got}"
        );
        assert_eq!(steps[0]["params"]["message"], format!("right behind {i}"));
    }
}

#[tokio::test]
async fn a_call_sent_right_after_set_run_is_logged_into_that_run() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    for i in 0..10 {
        let r = c
            .request(json!({"type": "create_run", "theme": format!("order {i}")}))
            .await;
        let id = r["run"]["runId"].as_str().expect("runId").to_string();
        c.send(json!({"type": "set_run", "id": format!("set-{i}"), "runId": id}))
            .await;
        c.send(
            json!({"type": "tool_call", "id": format!("call-{i}"), "tool": "t__echo",
                      "params": {"message": format!("logged {i}")}}),
        )
        .await;
        c.recv_where("run_set", |v| v["replyTo"] == format!("set-{i}"))
            .await;
        let r = c
            .recv_where("the call", |v| v["replyTo"] == format!("call-{i}"))
            .await;
        assert_eq!(r["success"], true, "{r}");
        let logged = entries(&mut c, &id, 10).await;
        assert!(
            logged
                .iter()
                .any(|e| e["data"]["params"]["message"] == format!("logged {i}")),
            "round {i}: the call is in run {id}: {logged:?}"
        );
    }
}

#[tokio::test]
async fn a_recording_being_recorded_is_not_rewritten_under_the_recorder() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let started = c.request(json!({"type": "start_recording"})).await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    let r = c.call("t__echo", json!({"message": "one"})).await;
    assert_eq!(r["success"], true, "{r}");
    let refused = c
        .request(json!({"type": "update_recording", "recordingId": id, "name": "renamed"}))
        .await;
    assert_eq!(
        refused["error"]["errorType"], "INVALID_MESSAGE",
        "{refused}"
    );
    assert!(
        refused["error"]["suggestion"]
            .as_str()
            .unwrap_or_default()
            .contains("stop_recording"),
        "{refused}"
    );
    c.call("t__echo", json!({"message": "two"})).await;
    c.request(json!({"type": "stop_recording"})).await;
    let updated = c
        .request(json!({"type": "update_recording", "recordingId": id, "name": "renamed"}))
        .await;
    assert_eq!(updated["type"], "recording_updated", "{updated}");
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let steps = got["recording"]["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "no step was lost: {got}");
    assert_eq!(got["recording"]["header"]["name"], "renamed", "{got}");
}
