//! "Record this tab" (issue 41, item 2): `start_recording` with a
//! `context` records only the calls made in that client context; one
//! connection holds one recording per context (and one without a context,
//! which takes every call); `stop_recording` names the one it stops; a live
//! replay in the tab says `same`, `changed` or `failed`.

use serde_json::{json, Value};

use super::{hub_with_t, replay};
use crate::support::Client;

fn echo_in(message: &str, context: Option<&str>) -> Value {
    let mut call = json!({"type": "tool_call", "tool": "t__echo", "params": {"message": message}});
    if let Some(c) = context {
        call["context"] = json!(c);
    }
    call
}

/// Run a batch of echo steps in `context` and wait for its end.
async fn batch_in(c: &mut Client, id: &str, context: &str, messages: &[&str]) {
    let steps: Vec<Value> = messages
        .iter()
        .map(|m| json!({"tool": "t__echo", "params": {"message": m}}))
        .collect();
    c.send(json!({"type": "tool_batch", "id": id, "context": context, "steps": steps}))
        .await;
    let done = c
        .recv_where("the batch", |v| {
            v["type"] == "batch_complete" && v["batchId"] == id
        })
        .await;
    assert_eq!(done["state"], "success", "{done}");
}

/// A recording's steps: (the message each echoed, its source type, the
/// label of its context).
async fn steps_of(c: &mut Client, id: &Value) -> (Value, Vec<(String, String, String)>) {
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let rec = got["recording"].clone();
    let steps = rec["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps: {got}"))
        .iter()
        .map(|s| {
            let context = s["source"]["context"].as_str().unwrap_or("");
            let label = context.split_once('/').map_or("", |(_, l)| l);
            (
                s["params"]["message"].as_str().unwrap_or("").to_string(),
                s["source"]["type"].as_str().unwrap_or("").to_string(),
                label.to_string(),
            )
        })
        .collect();
    (rec, steps)
}

fn step(message: &str, kind: &str, label: &str) -> (String, String, String) {
    (message.into(), kind.into(), label.into())
}

fn error_of(reply: &Value) -> (String, String, String) {
    assert_eq!(reply["type"], "error", "{reply}");
    let e = &reply["error"];
    let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
    (s("errorType"), s("message"), s("suggestion"))
}

#[tokio::test]
async fn two_tabs_on_one_connection_each_record_only_their_own_calls() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let one = c
        .request(json!({"type": "start_recording", "name": "tab one", "context": "tab-1"}))
        .await;
    assert_eq!(one["type"], "recording_started", "{one}");
    assert_eq!(one["context"], "tab-1");
    let two = c
        .request(json!({"type": "start_recording", "name": "tab two", "context": "tab-2"}))
        .await;
    assert_eq!(two["context"], "tab-2", "{two}");

    // Starting a tab that records already is refused, naming the stop.
    let again = c
        .request(json!({"type": "start_recording", "context": "tab-1"}))
        .await;
    let (ty, message, suggestion) = error_of(&again);
    assert_eq!(ty, "INVALID_MESSAGE");
    assert!(
        message.contains("\"tab-1\"") && message.contains("already recording"),
        "{message}"
    );
    assert!(
        suggestion.contains(r#"{"type":"stop_recording","context":"tab-1"}"#),
        "{suggestion}"
    );

    // Single calls and batches in each tab, and a call in no tab.
    for (m, ctx) in [
        ("one-a", Some("tab-1")),
        ("two-a", Some("tab-2")),
        ("none", None),
        ("three", Some("tab-3")),
    ] {
        let r = c.request(echo_in(m, ctx)).await;
        assert_eq!(r["success"], true, "{r}");
    }
    batch_in(&mut c, "b2", "tab-2", &["two-b", "two-c"]).await;
    batch_in(&mut c, "b1", "tab-1", &["one-b"]).await;
    let r = c.request(echo_in("one-c", Some("tab-1"))).await;
    assert_eq!(r["success"], true, "{r}");

    // Without a context, with only tab recordings: refused, naming them.
    let which = c.request(json!({"type": "stop_recording"})).await;
    let (ty, message, suggestion) = error_of(&which);
    assert_eq!(ty, "INVALID_MESSAGE");
    assert!(
        message.contains("no recording without a context")
            && message.contains("\"tab-1\"")
            && message.contains("\"tab-2\""),
        "{message}"
    );
    assert!(suggestion.contains("stop_recording"), "{suggestion}");

    let stopped = c
        .request(json!({"type": "stop_recording", "context": "tab-2"}))
        .await;
    assert_eq!(stopped["type"], "recording_stopped", "{stopped}");
    assert_eq!(stopped["context"], "tab-2");
    assert_eq!(stopped["recordingId"], two["recordingId"]);
    assert_eq!(stopped["stepCount"], 3);
    let stopped = c
        .request(json!({"type": "stop_recording", "context": "tab-1"}))
        .await;
    assert_eq!(stopped["recordingId"], one["recordingId"], "{stopped}");
    assert_eq!(stopped["stepCount"], 3);
    let gone = c
        .request(json!({"type": "stop_recording", "context": "tab-1"}))
        .await;
    let (ty, message, _) = error_of(&gone);
    assert_eq!(ty, "INVALID_MESSAGE");
    assert!(message.contains("is not recording"), "{message}");

    let expected = [
        (
            &one,
            "tab-1",
            [
                ("one-a", "tool_call"),
                ("one-b", "batch_step"),
                ("one-c", "tool_call"),
            ],
        ),
        (
            &two,
            "tab-2",
            [
                ("two-a", "tool_call"),
                ("two-b", "batch_step"),
                ("two-c", "batch_step"),
            ],
        ),
    ];
    for (started, label, want) in expected {
        let (rec, steps) = steps_of(&mut c, &started["recordingId"]).await;
        assert_eq!(rec["header"]["context"], label, "{rec}");
        let want: Vec<_> = want.iter().map(|(m, k)| step(m, k, label)).collect();
        assert_eq!(steps, want);
        // Each step kept its result and duration, as any recording does.
        for (i, (message, _, _)) in want.iter().enumerate() {
            assert_eq!(rec["steps"][i]["result"], message.as_str(), "{rec}");
            assert!(rec["steps"][i]["durationMs"].is_u64(), "{rec}");
        }
    }

    // The exports name the context.
    for format in ["markdown", "html"] {
        let e = c
            .request(json!({"type": "export_recording", "recordingId": two["recordingId"], "format": format}))
            .await;
        let text = e["content"].as_str().unwrap_or("");
        assert!(text.contains("Context") && text.contains("tab-2"), "{e}");
    }
}

#[tokio::test]
async fn a_recording_without_a_context_takes_every_call_beside_a_tab_recording() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let idle = c.request(json!({"type": "stop_recording"})).await;
    let (_, message, _) = error_of(&idle);
    assert_eq!(message, "this connection is not recording");

    let all = c.request(json!({"type": "start_recording"})).await;
    assert_eq!(all["context"], Value::Null, "{all}");
    let tab = c
        .request(json!({"type": "start_recording", "context": "tab-1"}))
        .await;
    assert_eq!(tab["type"], "recording_started", "{tab}");
    let twice = c.request(json!({"type": "start_recording"})).await;
    let (_, message, suggestion) = error_of(&twice);
    assert!(message.contains("without a context"), "{message}");
    assert_eq!(
        suggestion,
        r#"send {"type":"stop_recording"} first, or record another context"#
    );

    for (m, ctx) in [
        ("in-tab", Some("tab-1")),
        ("plain", None),
        ("other", Some("tab-2")),
    ] {
        c.request(echo_in(m, ctx)).await;
    }
    batch_in(&mut c, "b", "tab-1", &["batch-in-tab"]).await;

    // No context: the one without a context stops; the tab's goes on.
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["recordingId"], all["recordingId"], "{stopped}");
    assert_eq!(stopped["context"], Value::Null);
    assert_eq!(stopped["stepCount"], 4);
    c.request(echo_in("after", Some("tab-1"))).await;
    let stopped = c
        .request(json!({"type": "stop_recording", "context": "tab-1", "save": true}))
        .await;
    assert_eq!(stopped["stepCount"], 3, "{stopped}");

    let (rec, steps) = steps_of(&mut c, &all["recordingId"]).await;
    assert!(rec["header"].get("context").is_none(), "{rec}");
    let messages: Vec<&str> = steps.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(messages, ["in-tab", "plain", "other", "batch-in-tab"]);
    let (_, steps) = steps_of(&mut c, &tab["recordingId"]).await;
    let messages: Vec<&str> = steps.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(messages, ["in-tab", "batch-in-tab", "after"]);
}

#[tokio::test]
async fn a_bad_context_is_refused_before_anything_starts() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let long = "x".repeat(129);
    for (bad, says) in [
        (json!(5), "expected a string"),
        (json!(""), "is empty"),
        (json!(long), "longer than 128"),
        (json!("tab\n1"), "control characters"),
    ] {
        for ty in ["start_recording", "stop_recording"] {
            let r = c.request(json!({"type": ty, "context": bad})).await;
            let (errtype, message, _) = error_of(&r);
            assert_eq!(errtype, "INVALID_MESSAGE");
            assert!(
                message.starts_with(&format!("{ty}: field \"context\"")) && message.contains(says),
                "{message}"
            );
        }
    }
    let list = c.request(json!({"type": "list_recordings"})).await;
    assert_eq!(list["total"], 0, "nothing was started: {list}");
}

#[tokio::test]
async fn a_tab_recording_replayed_in_its_tab_says_same_changed_or_failed() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let file = hub.path().join("workspace").join("tab.txt");
    std::fs::create_dir_all(file.parent().expect("parent")).expect("workspace");
    std::fs::write(&file, "first").expect("write");
    let started = c
        .request(json!({"type": "start_recording", "context": "tab-3"}))
        .await;
    let id = started["recordingId"].clone();
    let read = c
        .request(json!({"type": "tool_call", "tool": "read_file", "params": {"path": "tab.txt"}, "context": "tab-3"}))
        .await;
    assert_eq!(read["result"], "first", "{read}");
    c.request(echo_in("elsewhere", Some("tab-4"))).await;
    let stopped = c
        .request(json!({"type": "stop_recording", "context": "tab-3"}))
        .await;
    assert_eq!(stopped["stepCount"], 1, "{stopped}");

    // Replayed into the tab while the tab records again: the replay's step
    // ran in that context (the new recording holds it as the tab's).
    let again = c
        .request(json!({"type": "start_recording", "context": "tab-3"}))
        .await;
    let (steps, done) = replay(&mut c, json!({"recordingId": id, "context": "tab-3"})).await;
    assert_eq!(done["verdict"], "same", "{done}");
    assert_eq!(done["context"], "tab-3", "{done}");
    assert_eq!(steps[0]["verdict"], "same", "{:?}", steps);
    c.request(json!({"type": "stop_recording", "context": "tab-3"}))
        .await;
    let (_, held) = steps_of(&mut c, &again["recordingId"]).await;
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        (held[0].1.as_str(), held[0].2.as_str()),
        ("batch_step", "tab-3")
    );

    std::fs::write(&file, "second").expect("write");
    let (steps, done) = replay(&mut c, json!({"recordingId": id, "context": "tab-3"})).await;
    assert_eq!(done["verdict"], "changed", "{done}");
    assert_eq!(steps[0]["verdict"], "changed");
    let diff = steps[0]["diff"].to_string();
    assert!(diff.contains("first") && diff.contains("second"), "{diff}");

    std::fs::remove_file(&file).expect("remove");
    let (steps, done) = replay(&mut c, json!({"recordingId": id, "context": "tab-3"})).await;
    assert_eq!(done["verdict"], "failed", "{done}");
    assert_eq!(steps[0]["verdict"], "failed");
    assert_eq!(steps[0]["actual"]["error"]["errorType"], "NOT_FOUND");

    // Dry and offline replays carry a verdict too.
    let (_, dry) = replay(&mut c, json!({"recordingId": id, "mode": "dry"})).await;
    assert_eq!(dry["verdict"], "same", "{dry}");
    let (_, offline) = replay(&mut c, json!({"recordingId": id, "mode": "offline"})).await;
    assert_eq!(offline["verdict"], "same", "{offline}");
}

#[tokio::test]
async fn a_call_that_fills_two_recordings_stops_both_before_its_reply() {
    let (_hub, mut c) = hub_with_t(json!({"recording": {"maxBytes": 3000}})).await;
    c.request(json!({"type": "start_recording"})).await;
    c.request(json!({"type": "start_recording", "context": "tab-1"}))
        .await;
    c.send(json!({"type": "tool_call", "id": "big", "tool": "t__big", "params": {"bytes": 5000}, "context": "tab-1"}))
        .await;
    let mut stopped = Vec::new();
    loop {
        let m = c
            .recv_where("a stop or the reply", |v| {
                v["replyTo"] == "big" || v["type"] == "recording_stopped"
            })
            .await;
        if m["replyTo"] == "big" {
            assert_eq!(m["success"], true, "{m}");
            break;
        }
        assert_eq!(m["reason"], "size_limit", "{m}");
        stopped.push(m["context"].clone());
    }
    stopped.sort_by_key(|c| c.to_string());
    assert_eq!(
        stopped,
        [json!("tab-1"), json!(null)],
        "both, before the reply"
    );
    let idle = c.request(json!({"type": "stop_recording"})).await;
    let (_, message, _) = error_of(&idle);
    assert_eq!(message, "this connection is not recording");
}
