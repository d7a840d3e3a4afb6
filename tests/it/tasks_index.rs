//! The finished-task index (`state/tasks.index.jsonl`, issue 19): tasks
//! that succeeded are listed from it and not replayed at start; it is
//! rebuilt when deleted, picks up a journal changed behind the hub's back,
//! and a crash between a task's end and its index line is repaired at the
//! next start. Unfinished tasks are recovered as before.

use std::path::Path;

use serde_json::{json, Value};

use crate::runs::hub_with_t;
use crate::support::{sorted_ids, Client};

/// Run a one-step batch to success; its task id.
async fn succeed(c: &mut Client, batch: &str) -> String {
    c.send(json!({"type": "tool_batch", "id": batch, "batchId": batch,
        "steps": [{"tool": "t__echo", "params": {"message": batch}}]}))
        .await;
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["state"], "success", "{done}");
    done["taskId"].as_str().expect("taskId").to_string()
}

async fn tasks(c: &mut Client, params: Value) -> Value {
    let mut msg = params;
    msg["type"] = json!("list_tasks");
    let l = c.request(msg).await;
    assert_eq!(l["type"], "tasks", "{l}");
    l
}

fn ids(l: &Value) -> Vec<String> {
    sorted_ids(l, "tasks", "taskId")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn index(p: &Path) -> std::path::PathBuf {
    p.join("state/tasks.index.jsonl")
}

async fn status(c: &mut Client, id: &str) -> Value {
    let s = c
        .request(json!({"type": "task_status", "taskId": id}))
        .await;
    assert_eq!(s["type"], "task", "{s}");
    s
}

#[tokio::test]
async fn tasks_index_is_rebuilt_after_deleting_it() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let a = succeed(&mut c, "a").await;
    let b = succeed(&mut c, "b").await;
    let hub = hub
        .crash_and_restart_with(|p| {
            let _ = std::fs::remove_file(index(p));
        })
        .await;
    let line = hub
        .wait_log("tasks index was missing; rebuilt from the journals")
        .await;
    assert!(line.contains("rebuilt=2"), "{line}");
    let mut c = hub.connect().await;
    let l = tasks(&mut c, json!({})).await;
    assert_eq!(ids(&l), sorted(vec![a.clone(), b.clone()]), "{l}");
    assert_eq!(l["total"], 2);
    assert!(index(&hub.path()).exists(), "written again");
    // The next start replays neither journal, and a task asked for by id
    // is read from its journal then.
    let hub = hub.crash_and_restart().await;
    let ready = hub.wait_log("tasks index ready").await;
    assert!(
        ready.contains("finished=2") && ready.contains("loaded=0"),
        "{ready}"
    );
    let mut c = hub.connect().await;
    let s = status(&mut c, &a).await;
    assert_eq!(s["task"]["state"], "success", "{s}");
    assert_eq!(s["task"]["steps"][0]["success"], true, "{s}");
    let l = tasks(&mut c, json!({"state": "success", "tool": "echo"})).await;
    assert_eq!(ids(&l), sorted(vec![a, b]), "{l}");
}

#[tokio::test]
async fn a_task_journal_changed_behind_the_hubs_back_is_picked_up() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let a = succeed(&mut c, "before").await;
    let gone = succeed(&mut c, "gone").await;
    let hub = hub
        .crash_and_restart_with(|p| {
            let path = p.join("state/tasks").join(format!("{a}.jsonl"));
            let text = std::fs::read_to_string(&path).expect("journal");
            let (first, rest) = text.split_once('\n').expect("header");
            let mut h: Value = serde_json::from_str(first).expect("header json");
            h["batchId"] = json!("edited");
            std::fs::write(&path, format!("{h}\n{rest}")).expect("write");
            std::fs::remove_file(p.join("state/tasks").join(format!("{gone}.jsonl")))
                .expect("rm journal");
        })
        .await;
    let line = hub
        .wait_log("tasks index: picked up journals changed outside the hub")
        .await;
    assert!(
        line.contains("changed=1") && line.contains("removed=1") && line.contains("added=0"),
        "{line}"
    );
    let mut c = hub.connect().await;
    let l = tasks(&mut c, json!({})).await;
    assert_eq!(ids(&l), vec![a.clone()], "{l}");
    assert_eq!(l["tasks"][0]["batchId"], "edited", "{l}");
}

#[tokio::test]
async fn a_crash_between_a_task_end_and_its_index_entry_is_repaired_on_restart() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let done = succeed(&mut c, "done").await;
    let cut = succeed(&mut c, "cut").await;
    // And a task running when the hub is killed: recoverable, as before.
    c.send(json!({"type": "tool_batch", "id": "slow", "steps": [
        {"tool": "t__echo", "params": {"message": "first"}},
        {"tool": "t__hang", "params": {}}
    ]}))
    .await;
    let first = c
        .recv_where("step 0 of the slow batch", |v| {
            v["type"] == "batch_step_result"
                && v["stepIndex"] == 0
                && v["taskId"] != done.as_str()
                && v["taskId"] != cut.as_str()
        })
        .await;
    let running = first["taskId"].as_str().expect("taskId").to_string();
    // SIGKILL, and what a kill between `cut`'s end record and its index
    // line leaves: the journal ends, the index never heard of it.
    let hub = hub
        .crash_and_restart_with(|p| {
            let text = std::fs::read_to_string(index(p)).expect("index");
            let kept: String = text
                .lines()
                .filter(|l| !l.contains(&cut))
                .map(|l| format!("{l}\n"))
                .collect();
            assert!(kept.len() < text.len(), "cut was indexed: {text}");
            std::fs::write(index(p), kept).expect("write index");
        })
        .await;
    let line = hub
        .wait_log("tasks index: picked up journals changed outside the hub")
        .await;
    assert!(
        line.contains("added=1") && line.contains("removed=0"),
        "{line}"
    );
    let ready = hub.wait_log("tasks index ready").await;
    assert!(
        ready.contains("finished=2") && ready.contains("loaded=1"),
        "{ready}"
    );
    let mut c = hub.connect().await;
    let l = tasks(&mut c, json!({})).await;
    assert_eq!(ids(&l), sorted(vec![done, cut, running.clone()]), "{l}");
    let s = status(&mut c, &running).await;
    assert_eq!(s["task"]["state"], "recoverable", "{s}");
    let recoverable = tasks(&mut c, json!({"state": "recoverable"})).await;
    assert_eq!(ids(&recoverable), vec![running], "{recoverable}");
}
