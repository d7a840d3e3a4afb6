//! One cap per session (issue 38.4): every piece of work a session starts
//! takes a place under `server.maxInFlightPerSession`, held until its
//! reply; over the cap it is refused at once with LIMIT_EXCEEDED naming
//! the key. The work waits at the test server's `barrier`, so what runs at
//! once is counted by the server, not guessed from timing.

use serde_json::{json, Value};

use crate::barrier;
use crate::mcp::driver::Driver;
use crate::support::{Client, TestHub};

const CAP: usize = 16;
const SENT: usize = 40;

/// A hub with the test server `t` and a session cap of [`CAP`], and two
/// clients (the second releases the barrier: the first is at its cap).
async fn hub() -> (TestHub, Client, Client) {
    let (hub, c) = crate::once::hub_with(json!({"maxInFlightPerSession": CAP})).await;
    let other = hub.connect().await;
    (hub, c, other)
}

fn refused_for_the_cap(error: &Value) -> bool {
    error["errorType"] == "LIMIT_EXCEEDED"
        && error["message"]
            .as_str()
            .is_some_and(|m| m.contains("server.maxInFlightPerSession"))
        && error["suggestion"]
            .as_str()
            .is_some_and(|s| s.contains("raise server.maxInFlightPerSession"))
}

/// Once `n` calls wait at `t`'s barrier `name`, let them go: how many
/// waited.
async fn release_when_waiting(other: &mut Client, name: &str, n: usize) -> u64 {
    barrier::release_when_waiting(other, "t", name, n).await
}

#[tokio::test]
async fn forty_batches_against_a_cap_of_sixteen() {
    let (_hub, mut c, mut other) = hub().await;
    for i in 0..SENT {
        c.send(json!({"type": "tool_batch", "id": format!("b{i}"),
            "steps": [{"tool": "t__barrier", "params": {"name": "batches"}}]}))
            .await;
    }
    // Every refusal comes while the 16 batches wait at the barrier: none
    // has finished yet.
    for _ in 0..SENT - CAP {
        let e = c
            .recv_where("a refusal", |v| {
                v["type"] == "error" && v["replyTo"].is_string()
            })
            .await;
        assert!(refused_for_the_cap(&e["error"]), "{e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("tool_batch")),
            "{e}"
        );
    }
    // A ping still answers, a confirm-free control message is refused.
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
    let h = c.request(json!({"type": "health_check"})).await;
    assert!(refused_for_the_cap(&h["error"]), "{h}");
    let waited = release_when_waiting(&mut other, "batches", CAP).await;
    assert_eq!(waited, CAP as u64, "the server had exactly the cap at once");
    assert!(
        !c.seen.iter().any(|v| v["type"] == "batch_complete"),
        "no batch finished before the release"
    );
    for _ in 0..CAP {
        let done = c.recv_type("batch_complete").await;
        assert_eq!(done["success"], true, "{done}");
    }
    // Each batch gave its place back before its batch_complete: the
    // session takes new work at once.
    c.send(json!({"type": "tool_batch", "id": "again",
        "steps": [{"tool": "t__echo", "params": {"message": "again"}}]}))
        .await;
    let again = c
        .recv_where("the next batch's end", |v| {
            v["batchId"] == "again" && v["type"] == "batch_complete" || v["replyTo"] == "again"
        })
        .await;
    assert_eq!(again["success"], true, "{again}");
}

#[tokio::test]
async fn a_resume_and_a_replay_take_a_place_too() {
    let (_hub, mut c, mut other) = hub().await;
    for i in 0..CAP {
        c.send(json!({"type": "tool_call", "id": format!("c{i}"),
            "tool": "t__barrier", "params": {"name": "calls"}}))
            .await;
    }
    barrier::await_waiting(&mut other, "t", "calls", CAP).await;
    for msg in [
        json!({"type": "replay_recording", "recordingId": "none"}),
        json!({"type": "resume_task", "taskId": "none"}),
        json!({"type": "task_status", "taskId": "none", "wait": true}),
        json!({"type": "list_recordings"}),
        json!({"type": "tool_batch", "steps": [{"tool": "t__echo", "params": {"message": "x"}}]}),
    ] {
        let r = c.request(msg.clone()).await;
        assert!(refused_for_the_cap(&r["error"]), "{msg}: {r}");
    }
    // What ends or answers work is never refused at the cap.
    let l = c.request(json!({"type": "list_tasks"})).await;
    assert_eq!(l["type"], "tasks", "{l}");
    let k = c
        .request(json!({"type": "cancel_task", "taskId": "none"}))
        .await;
    assert!(k["error"]["errorType"] != "LIMIT_EXCEEDED", "{k}");
    assert_eq!(
        release_when_waiting(&mut other, "calls", CAP).await,
        CAP as u64
    );
}

#[tokio::test]
async fn forty_mcp_calls_of_one_session_against_a_cap_of_sixteen() {
    let (hub, _c, mut other) = hub().await;
    let (mut d, _) = Driver::connect(&hub, json!({})).await;
    let mut ids = Vec::new();
    for _ in 0..SENT {
        ids.push(
            d.send(json!({"op": "callTool", "name": "t__barrier", "arguments": {"name": "mcp"}}))
                .await,
        );
    }
    // The refusals first: none of the 16 can answer before the release.
    let mut refused = Vec::new();
    for _ in 0..SENT - CAP {
        let a = d
            .recv_where("a refused call", |v| {
                v["ok"] == true && v["result"]["isError"] == true
            })
            .await;
        assert!(
            refused_for_the_cap(&a["result"]["structuredContent"]),
            "{a}"
        );
        refused.push(a["id"].clone());
    }
    let waited = release_when_waiting(&mut other, "mcp", CAP).await;
    assert_eq!(waited, CAP as u64, "the server had exactly the cap at once");
    let mut ran = 0;
    for id in ids.into_iter().filter(|i| !refused.contains(&json!(i))) {
        let a = d.answer(id).await;
        assert_eq!(a["ok"], true, "{a}");
        assert_ne!(a["result"]["isError"], true, "{a}");
        ran += 1;
    }
    assert_eq!((refused.len(), ran), (SENT - CAP, CAP));
}
