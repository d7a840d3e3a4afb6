//! Client contexts beyond single calls (issue 31): a live replay runs in a
//! context of its own, whose instance stops when the replay ends, or in
//! the one it names; `resume_task` with `context` moves the rest of a task
//! into that context.

use serde_json::{json, Value};

use crate::recording::replay;
use crate::servers::wait_running;
use crate::support::{testserver_entry, Client, TestHub};

async fn start() -> (TestHub, Client) {
    start_with(&[]).await
}

/// [`start`] with test servers `shared` (not per context) beside `t`.
async fn start_with(shared: &[&str]) -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let mut t = testserver_entry(dir.path(), "t", &[]);
    t["scope"] = json!("context");
    let mut servers = json!({"t": t});
    for name in shared {
        servers[*name] = testserver_entry(dir.path(), name, &[]);
    }
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": servers, "server": {"sessionGraceMs": 0}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    for name in shared {
        wait_running(&mut c, name).await;
    }
    (hub, c)
}

/// The contexts of `t`'s instances now, as health lists them.
async fn instances(c: &mut Client) -> Vec<String> {
    let h = c.request(json!({"type": "health_check"})).await;
    let t = h["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .find(|s| s["name"] == "t")
        .cloned()
        .expect("t");
    let mut out: Vec<String> = t["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .map(|i| i["context"].as_str().expect("context").to_string())
        .collect();
    out.sort();
    out
}

fn pid(r: &Value) -> i64 {
    r["result"]["pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("no pid: {r}"))
}

#[tokio::test]
async fn a_replay_runs_in_a_context_of_its_own_or_in_the_one_it_names() {
    let (_hub, mut c) = start().await;
    let started = c.request(json!({"type": "start_recording"})).await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    let mine = c
        .call("t__memo", json!({"value": "the session's page"}))
        .await;
    c.request(json!({"type": "stop_recording"})).await;
    let session = mine["context"].as_str().expect("context").to_string();

    let (steps, done) = replay(&mut c, json!({"recordingId": id})).await;
    assert_eq!(done["type"], "replay_complete", "{done}");
    let actual = &steps[0]["actual"]["result"];
    assert_ne!(
        actual["pid"].as_i64(),
        Some(pid(&mine)),
        "its own instance: {actual}"
    );
    assert_eq!(
        actual["memo"], "the session's page",
        "it replayed the recorded value into a fresh memo: {actual}"
    );
    assert_eq!(
        instances(&mut c).await,
        vec![session.clone()],
        "the replay's own instance stopped with it"
    );
    let again = c.call("t__memo", json!({})).await;
    assert_eq!(again["result"]["memo"], "the session's page", "{again}");
    assert_eq!(pid(&again), pid(&mine), "the session kept its instance");

    let (steps, _) = replay(&mut c, json!({"recordingId": id, "context": "tab-7"})).await;
    let in_tab = c
        .request(json!({"type": "tool_call", "tool": "t__memo", "params": {}, "context": "tab-7"}))
        .await;
    assert_eq!(
        steps[0]["actual"]["result"]["pid"].as_i64(),
        Some(pid(&in_tab)),
        "the named context's instance ran the replay and stays: {in_tab}"
    );
    assert_eq!(
        instances(&mut c).await,
        vec![session.clone(), format!("{session}/tab-7")]
    );
}

#[tokio::test]
async fn resume_task_with_a_context_runs_the_rest_there() {
    let (_hub, mut c) = start().await;
    c.send(
        json!({"type": "tool_batch", "id": "b", "context": "tab-a", "steps": [
            {"tool": "t__flaky", "params": {"key": "once", "failures": 1}, "retry": false},
            {"tool": "t__memo", "params": {"value": "resumed"}}
        ]}),
    )
    .await;
    let done = c
        .recv_where("batch b", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "b"
        })
        .await;
    assert_eq!(done["state"], "failed", "{done}");
    let task = done["taskId"].as_str().expect("taskId").to_string();
    // No reply: the task's events follow.
    c.send(json!({"type": "resume_task", "id": "again", "taskId": task, "context": "tab-b"}))
        .await;
    let step = c
        .recv_where("the memo step", |v| {
            v["type"] == "batch_step_result"
                && v["taskId"] == task
                && v["tool"] == "t__memo"
                && v["skipped"] != true
        })
        .await;
    assert_eq!(step["success"], true, "{step}");
    let in_b = c
        .request(json!({"type": "tool_call", "tool": "t__memo", "params": {}, "context": "tab-b"}))
        .await;
    assert_eq!(
        in_b["result"]["memo"], "resumed",
        "the rest ran in tab-b: {in_b}"
    );
    assert_eq!(step["result"]["pid"].as_i64(), Some(pid(&in_b)));
    let ctx = instances(&mut c).await;
    assert!(ctx.iter().any(|c| c.ends_with("/tab-a")), "{ctx:?}");
}

/// The step the kill cuts waits at the barrier of `u`, a shared server
/// (a barrier in `t` would be in the instance the kill takes away).
#[tokio::test]
async fn after_a_restart_a_resumed_task_runs_in_a_fresh_instance_of_its_context() {
    let (hub, mut c) = start_with(&["u"]).await;
    c.send(
        json!({"type": "tool_batch", "id": "job", "context": "tab-r", "steps": [
            {"tool": "t__memo", "params": {"value": "the old page"}},
            {"tool": "u__barrier", "params": {"name": "job"}},
            {"tool": "t__memo", "params": {}}
        ]}),
    )
    .await;
    let s0 = c
        .recv_where("step 0", |v| {
            v["type"] == "batch_step_result" && v["batchId"] == "job" && v["stepIndex"] == 0
        })
        .await;
    let context = format!("{}/tab-r", crate::instances::session_id(&c));
    let task_id = s0["taskId"].clone();
    hub.wait_log("testserver u call barrier").await;
    let hub = hub.crash_and_restart().await;
    let journal = std::fs::read_to_string(hub.path().join(format!(
        "state/tasks/{}.jsonl",
        task_id.as_str().unwrap_or("?")
    )))
    .expect("journal");
    assert!(
        journal.contains(&context),
        "the journal records the context"
    );
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    wait_running(&mut c, "u").await;
    crate::barrier::release(&mut c, "u", "job").await;
    let (steps, done) = crate::durable::resume_to_end(&mut c, &task_id, json!({})).await;
    assert_eq!(done["state"], "success", "{done}");
    assert!(
        steps.iter().any(|s| s["stepIndex"] == 1),
        "the step cut by the crash is run again (after its uncertain confirm): {steps:?}"
    );
    let last = steps.last().expect("steps");
    assert_eq!(last["stepIndex"], 2, "{steps:?}");
    assert_eq!(
        last["result"]["memo"],
        Value::Null,
        "a fresh instance: the old page is gone with the old hub: {last}"
    );
    assert_ne!(last["result"]["pid"], s0["result"]["pid"], "{last}");
    // Its session did not survive the restart: the instance stops with the
    // task, not after instanceIdleMs.
    crate::instances::health_until(&mut c, "t", |t| {
        t["instances"].as_array().is_some_and(|i| i.is_empty())
    })
    .await;
    hub.wait_log(&format!("context={context}")).await;
}

/// A task resumed by another session in the context of a session that has
/// ended runs there in a fresh instance, which stops when the task is
/// done instead of lingering until instanceIdleMs.
#[tokio::test]
async fn a_resumed_task_of_an_ended_session_lets_its_instance_go_when_done() {
    let (hub, mut a) = start().await;
    let owner = crate::instances::session_id(&a);
    a.send(json!({"type": "tool_batch", "id": "b", "steps": [
        {"tool": "t__memo", "params": {"value": "a's page"}},
        {"tool": "t__flaky", "params": {"key": "ended", "failures": 1}, "retry": false},
        {"tool": "t__memo", "params": {}}
    ]}))
    .await;
    let done = a
        .recv_where("batch b", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "b"
        })
        .await;
    assert_eq!(done["state"], "failed", "{done}");
    let task = done["taskId"].clone();
    drop(a);
    // Grace 0: the session ends with its socket, and its instance with it.
    hub.wait_log(&format!("context={owner} reason=its session ended"))
        .await;
    let mut b = hub.connect().await;
    let (steps, done) = crate::durable::resume_to_end(&mut b, &task, json!({})).await;
    assert_eq!(done["state"], "success", "{done}");
    let last = steps.last().expect("steps");
    assert_eq!(
        last["result"]["memo"],
        Value::Null,
        "a fresh instance: {last}"
    );
    crate::instances::health_until(&mut b, "t", |t| {
        t["instances"].as_array().is_some_and(|i| i.is_empty())
    })
    .await;
}

/// A recording's steps and a run's log entries note the context each call
/// ran in (`source.context`, `data.source.context`), a tab's as well as the
/// session's own.
#[tokio::test]
async fn recordings_and_runs_note_each_calls_context() {
    let (_hub, mut c) = start().await;
    let session = crate::instances::session_id(&c);
    let run = crate::runs::create_and_set(&mut c, "contexts").await;
    let started = c.request(json!({"type": "start_recording"})).await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    c.call("t__memo", json!({"value": "own"})).await;
    let tab = c
        .request(json!({"type": "tool_call", "tool": "t__memo", "params": {"value": "tab"}, "context": "tab-3"}))
        .await;
    assert_eq!(tab["success"], true, "{tab}");
    c.request(json!({"type": "stop_recording"})).await;

    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let steps = got["recording"]["steps"].as_array().expect("steps").clone();
    let contexts: Vec<&Value> = steps.iter().map(|s| &s["source"]["context"]).collect();
    let tab_ctx = format!("{session}/tab-3");
    assert_eq!(contexts, vec![&json!(session), &json!(tab_ctx)], "{got}");

    let entries = crate::runs::entries(&mut c, &run, 10).await;
    let logged: Vec<&Value> = entries
        .iter()
        .filter(|e| e["data"]["tool"] == "t__memo")
        .map(|e| &e["data"]["source"]["context"])
        .collect();
    assert_eq!(
        logged,
        vec![&json!(session), &json!(tab_ctx)],
        "{entries:?}"
    );
}
