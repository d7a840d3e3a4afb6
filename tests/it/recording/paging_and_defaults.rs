//! Recordings page their steps (issue 16.1), keep a batch's non-secret
//! variables as replay defaults (issue 16.2), and a replay reports the steps
//! a stop left as not run (issue 16.8).

use serde_json::{json, Value};

use super::{hub_with_t, record_flow, replay};
use crate::support::{call_log, TestHub};

/// Issue 16.1: a recording of more steps than the default page comes back a
/// page at a time, always with its step count and summary.
#[tokio::test]
async fn get_recording_pages_its_steps() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let started = c
        .request(json!({"type": "start_recording", "name": "long"}))
        .await;
    let id = started["recordingId"].clone();
    let steps: Vec<Value> = (0..130)
        .map(|i| json!({"tool": "t__echo", "params": {"message": format!("m{i}")}}))
        .collect();
    c.send(json!({"type": "tool_batch", "id": "long", "steps": steps}))
        .await;
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["stepsCompleted"], 130, "{done}");
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["stepCount"], 130, "{stopped}");
    let first = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let rec = &first["recording"];
    assert_eq!(rec["steps"].as_array().map(Vec::len), Some(100), "{rec}");
    assert_eq!(rec["stepCount"], 130);
    assert_eq!(rec["summary"]["stepCount"], 130);
    assert_eq!(rec["summary"]["name"], "long");
    assert_eq!(rec["header"]["name"], "long");
    assert_eq!(
        rec["stepsPage"],
        json!({"offset": 0, "limit": 100, "returned": 100, "total": 130, "nextOffset": 100})
    );
    let next = c
        .request(json!({"type": "get_recording", "recordingId": id, "offset": 100}))
        .await;
    let rec = &next["recording"];
    assert_eq!(rec["steps"].as_array().map(Vec::len), Some(30), "{rec}");
    assert_eq!(rec["steps"][0]["seq"], 100);
    assert_eq!(rec["steps"][0]["params"]["message"], "m100");
    assert_eq!(rec["stepsPage"]["nextOffset"], Value::Null);
    // The control tool pages the same way.
    let r = c
        .call(
            "hub__record_get",
            json!({"recordingId": id, "offset": 125, "limit": 10}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    let seqs: Vec<u64> = r["result"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["seq"].as_u64())
        .collect();
    assert_eq!(seqs, [125, 126, 127, 128, 129]);
    assert_eq!(r["result"]["stepCount"], 130);
    // Exports stay whole.
    let e = c
        .request(json!({"type": "export_recording", "recordingId": id, "format": "json"}))
        .await;
    assert_eq!(e["content"]["steps"].as_array().map(Vec::len), Some(130));
    // A bad page is refused with the field named.
    let bad = c
        .request(json!({"type": "get_recording", "recordingId": id, "offset": -1}))
        .await;
    assert_eq!(bad["type"], "error", "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("offset"),
        "{bad}"
    );
}

/// Issue 16.2: a recorded batch's non-secret variables are the replay's
/// defaults; only the secret ones must be given, a dry replay names what is
/// missing instead of failing, and `variables` still overrides.
#[tokio::test]
async fn replay_uses_recorded_variables_and_asks_only_for_secrets() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let steps = &got["recording"]["steps"];
    assert_eq!(steps[1]["variables"], json!({"user": "ann"}), "{got}");
    assert!(steps[0].get("variables").is_none() && steps[2].get("variables").is_none());
    // A dry replay with no variables: no failure, the missing one named.
    let (dry, done) = replay(&mut c, json!({"recordingId": id, "mode": "dry"})).await;
    assert_eq!(done["type"], "replay_complete", "{done}");
    assert_eq!(done["success"], true, "{done}");
    assert_eq!(done["missingVariables"], json!(["password"]), "{done}");
    assert_eq!(done["variableDefaults"], json!({"user": "ann"}), "{done}");
    assert_eq!(
        dry[1]["missingVariables"],
        json!(["password"]),
        "{}",
        dry[1]
    );
    assert_eq!(dry[1]["success"], true, "{}", dry[1]);
    assert_eq!(dry[0]["missingVariables"], json!([]), "{}", dry[0]);
    // A live one asks for the secret only.
    let (_, refused) = replay(&mut c, json!({"recordingId": id})).await;
    assert_eq!(refused["type"], "error", "{refused}");
    let msg = refused["error"]["message"].as_str().unwrap_or("");
    assert!(msg.ends_with(": password"), "{msg}");
    let echoed = |hub: &TestHub| -> Vec<Value> {
        call_log(&hub.path(), "t")
            .into_iter()
            .filter(|l| l["tool"] == "echo_structured")
            .map(|l| l["arguments"]["value"].clone())
            .collect()
    };
    let (_, done) = replay(
        &mut c,
        json!({"recordingId": id, "variables": {"password": "pw"}}),
    )
    .await;
    assert_eq!(done["success"], true, "{done}");
    assert_eq!(
        echoed(&hub).last(),
        Some(&json!("ann")),
        "the default was used"
    );
    let (_, done) = replay(
        &mut c,
        json!({"recordingId": id, "variables": {"password": "pw", "user": "bob"}}),
    )
    .await;
    assert_eq!(done["type"], "replay_complete", "{done}");
    assert_eq!(
        echoed(&hub).last(),
        Some(&json!("bob")),
        "variables override"
    );
    // The exports show the defaults and what must be given.
    let md = c
        .request(json!({"type": "export_recording", "recordingId": id, "format": "markdown"}))
        .await;
    let md = md["content"].as_str().unwrap_or("");
    assert!(
        md.contains("| Variable defaults | `{\"user\":\"ann\"}` |"),
        "{md}"
    );
    assert!(md.contains("| Variables to give | password |"), "{md}");
}

/// Issue 16.8 in a replay: the steps a stop leaves are reported not run,
/// with no differences (they were not reached, not changed).
#[tokio::test]
async fn a_replay_stopped_by_a_failure_reports_the_rest_not_run_without_diffs() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let w = c
        .call("hub__write_file", json!({"path": "x.txt", "content": "1"}))
        .await;
    assert_eq!(w["success"], true, "{w}");
    let started = c
        .request(json!({"type": "start_recording", "name": "stop"}))
        .await;
    let id = started["recordingId"].clone();
    c.send(json!({"type": "tool_batch", "id": "sb", "steps": [
        {"id": "read", "tool": "hub__read_file", "params": {"path": "{{vars.path}}"}},
        {"id": "after", "tool": "t__echo", "params": {"message": "after"}}
    ], "options": {"variables": {"path": "x.txt"}}}))
        .await;
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["state"], "success", "{done}");
    c.request(json!({"type": "stop_recording"})).await;
    let (steps, done) = replay(
        &mut c,
        json!({"recordingId": id, "variables": {"path": "missing.txt"}}),
    )
    .await;
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0]["success"], false, "{}", steps[0]);
    assert_eq!(steps[1]["skipped"], true, "{}", steps[1]);
    assert_eq!(steps[1]["diff"], json!([]), "{}", steps[1]);
    let diffs = done["differences"].as_array().expect("differences");
    assert_eq!(diffs.len(), 1, "{done}");
    assert_eq!(diffs[0]["stepIndex"], 0);
    assert_eq!(done["failureCount"], 2, "{done}");
}
