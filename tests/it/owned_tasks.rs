//! Tasks carry their principal (issue 49.1): a client token lists, reads,
//! resumes and cancels only its own tasks, over `/ws` and as hub tools,
//! and another's answers exactly like an unknown id; the main token sees
//! and acts on every task. The principal is journaled: after a restart
//! it holds the same.

use serde_json::{json, Value};

use crate::barrier;
use crate::questions::{client, start, EXT};
use crate::support::Client;

fn ids(listed: &Value) -> Vec<String> {
    listed["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["taskId"].as_str().map(String::from))
        .collect()
}

/// `ext`'s answers for `task` by every way it can name one, each the same
/// as for `unknown` (a task id nobody has) but for the id.
async fn unknown_to(ext: &mut Client, task: &str, unknown: &str) {
    for ty in ["task_status", "cancel_task", "resume_task"] {
        let got = ext.request(json!({"type": ty, "taskId": task})).await;
        let none = ext.request(json!({"type": ty, "taskId": unknown})).await;
        assert_eq!(got["error"]["errorType"], "NOT_FOUND", "{ty}: {got}");
        assert_eq!(
            got["error"].to_string().replace(task, "ID"),
            none["error"].to_string().replace(unknown, "ID"),
            "{ty}"
        );
    }
    for tool in ["hub__task_status", "hub__resume_task"] {
        let got = ext.call(tool, json!({"taskId": task})).await;
        let none = ext.call(tool, json!({"taskId": unknown})).await;
        assert_eq!(got["error"]["errorType"], "NOT_FOUND", "{tool}: {got}");
        assert_eq!(
            got["error"].to_string().replace(task, "ID"),
            none["error"].to_string().replace(unknown, "ID"),
            "{tool}"
        );
    }
    for listed in [
        ext.request(json!({"type": "list_tasks"})).await,
        ext.call("hub__list_tasks", json!({})).await["result"].clone(),
    ] {
        assert!(listed["tasks"].is_array(), "{listed}");
        assert!(!ids(&listed).contains(&task.to_string()), "{listed}");
    }
}

#[tokio::test]
async fn a_client_sees_and_acts_on_its_own_tasks_only() {
    let (hub, mut main) = start().await;
    let token = hub.token.clone().expect("token");
    // The person in the same view as the client: only the principal differs.
    let mut person = hub.connect_at("/ws/chat", &token).await.expect("chat");
    let mut ext = client(&hub, EXT).await;
    let unknown = uuid::Uuid::new_v4().to_string();
    for (c, name) in [(&mut person, "m"), (&mut ext, "e")] {
        c.send(json!({"type": "tool_batch", "id": name, "steps": [
            {"tool": "t__barrier", "params": {"name": name}}]}))
            .await;
    }
    let of = |v: &Value, b: &str| v["type"] == "task_state" && v["batchId"] == b;
    let theirs = person.recv_where("m runs", |v| of(v, "m")).await["taskId"]
        .as_str()
        .expect("taskId")
        .to_string();
    let mine = ext.recv_where("e runs", |v| of(v, "e")).await["taskId"]
        .as_str()
        .expect("taskId")
        .to_string();
    barrier::await_waiting(&mut main, "t", "m", 1).await;
    barrier::await_waiting(&mut main, "t", "e", 1).await;
    unknown_to(&mut ext, &theirs, &unknown).await;
    // Its own: listed with its principal, and readable.
    let listed = ext.request(json!({"type": "list_tasks"})).await;
    assert_eq!(ids(&listed), std::slice::from_ref(&mine), "{listed}");
    assert_eq!(listed["tasks"][0]["client"], "ext", "{listed}");
    let own = ext.call("hub__task_status", json!({"taskId": mine})).await;
    assert_eq!(own["result"]["state"], "running", "{own}");
    // The person sees both and cancels the client's.
    let all = ids(&person.request(json!({"type": "list_tasks"})).await);
    assert!(all.contains(&mine) && all.contains(&theirs), "{all:?}");
    let c = person
        .request(json!({"type": "cancel_task", "taskId": mine}))
        .await;
    assert_eq!(c["type"], "task_cancelling", "{c}");
    let done = ext.recv_type("batch_complete").await;
    assert_eq!(done["state"], "cancelled", "{done}");
    // The person's task is untouched by all of that.
    let t = person
        .request(json!({"type": "task_status", "taskId": theirs}))
        .await;
    assert_eq!(t["task"]["state"], "running", "{t}");

    // Killed while the person's task waits: the principals are journaled.
    let hub = hub.crash_and_restart().await;
    let mut ext = client(&hub, EXT).await;
    let mut person = hub.connect_at("/ws/chat", &token).await.expect("chat");
    crate::mcp::wait_running(&mut person, &["t"]).await;
    let t = person
        .request(json!({"type": "task_status", "taskId": theirs}))
        .await;
    assert_eq!(t["task"]["state"], "recoverable", "{t}");
    unknown_to(&mut ext, &theirs, &unknown).await;
    let listed = ext.request(json!({"type": "list_tasks"})).await;
    assert_eq!(ids(&listed), std::slice::from_ref(&mine), "{listed}");
    assert_eq!(listed["tasks"][0]["client"], "ext", "{listed}");
    // The client resumes its own; the person resumes theirs.
    barrier::release(&mut person, "t", "e").await;
    barrier::release(&mut person, "t", "m").await;
    let r = ext.call("hub__resume_task", json!({"taskId": mine})).await;
    assert_eq!(r["result"]["state"], "success", "{r}");
    person
        .send(json!({"type": "resume_task", "taskId": theirs}))
        .await;
    // The step the crash cut may have run: the person is asked.
    let ask = person.recv_type("need_user").await;
    let ok = person
        .request(json!({"type": "confirm", "taskId": theirs, "approve": true,
            "stepIndex": ask["stepIndex"], "paramsHash": ask["paramsHash"]}))
        .await;
    assert_eq!(ok["type"], "confirmed", "{ok}");
    let done = person.recv_type("batch_complete").await;
    assert_eq!(done["state"], "success", "{done}");
}

/// A batch's `callKey` names the token's own request: another principal
/// sending the same key and steps runs its own task, and never gets the
/// first one's (its results, its id).
#[tokio::test]
async fn a_call_key_never_finds_another_principals_task() {
    let (hub, _main) = start().await;
    let token = hub.token.clone().expect("token");
    let mut person = hub.connect_at("/ws/chat", &token).await.expect("chat");
    let mut ext = client(&hub, EXT).await;
    let batch = |id: &str| {
        json!({"type": "tool_batch", "id": id, "callKey": "same-key",
            "steps": [{"tool": "t__echo", "params": {"message": "keyed"}}]})
    };
    person.send(batch("p")).await;
    let first = person.recv_type("batch_complete").await;
    assert_eq!(first["state"], "success", "{first}");
    ext.send(batch("e")).await;
    let got = ext
        .recv_where("an answer to e", |v| {
            v["batchId"] == "e" && v["type"] == "batch_complete" || v["replyTo"] == "e"
        })
        .await;
    assert_eq!(got["type"], "batch_complete", "{got}");
    assert_ne!(got["taskId"], first["taskId"], "{got}");
    // The person's repeat still finds the person's task.
    let again = person.request(batch("p2")).await;
    assert_eq!(again["deduplicated"], true, "{again}");
    assert_eq!(again["task"]["taskId"], first["taskId"], "{again}");
}
