//! Durable tasks: SIGKILL the real hub mid-batch, restart it, resume. A
//! step the kill must cut waits at the test server's barrier; the
//! restarted server knows no barrier, so the test releases it there
//! before the step runs again.

use std::path::Path;

use serde_json::{json, Value};

use crate::barrier;
use crate::servers::wait_running;
use crate::support::{batch_events, call_log, testserver_entry, Client, TestHub};

async fn start(p: &std::path::Path, dir: tempfile::TempDir) -> (TestHub, Client) {
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": testserver_entry(p, "t", &[])}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, c)
}

fn calls(p: &std::path::Path, tool: &str) -> Vec<Value> {
    call_log(p, "t")
        .into_iter()
        .filter(|l| l["tool"] == tool)
        .collect()
}

/// Resume and approve the uncertain-step confirmation if one is asked.
pub(crate) async fn resume_to_end(
    c: &mut Client,
    task_id: &Value,
    variables: Value,
) -> (Vec<Value>, Value) {
    c.send(json!({"type": "resume_task", "id": "res", "taskId": task_id, "variables": variables}))
        .await;
    follow_resume(c, task_id).await
}

/// The `resume_task` sent with id `res`, followed to its end: the steps it
/// ran and its `batch_complete`, approving the uncertain-step confirmation
/// if one is asked.
async fn follow_resume(c: &mut Client, task_id: &Value) -> (Vec<Value>, Value) {
    let mut steps = Vec::new();
    loop {
        let m = c
            .recv_where("resume events", |v| {
                matches!(
                    v["type"].as_str(),
                    Some("batch_step_result" | "batch_complete" | "need_user")
                ) || v["replyTo"] == "res"
            })
            .await;
        match m["type"].as_str() {
            Some("need_user") => {
                assert!(
                    m["reason"]
                        .as_str()
                        .unwrap_or("")
                        .contains("may already have run"),
                    "{m}"
                );
                let r = c
                    .request(json!({"type": "confirm", "taskId": task_id, "approve": true}))
                    .await;
                assert_eq!(r["type"], "confirmed", "{r}");
            }
            Some("batch_step_result") => steps.push(m),
            Some("batch_complete") => return (steps, m),
            _ => panic!("resume refused: {m}"),
        }
    }
}

#[tokio::test]
async fn sigkill_mid_batch_then_resume_runs_exactly_the_unfinished_steps() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let (hub, mut c) = start(&p, dir).await;
    c.send(json!({"type": "tool_batch", "id": "deploy", "steps": [
        {"id": "count", "tool": "t__counter", "params": {"key": "a"}, "saveAs": "c0"},
        {"id": "say", "tool": "t__echo", "params": {"message": "v={{c0.result.count}}"}, "saveAs": "e"},
        {"id": "held", "tool": "t__barrier", "params": {"name": "deploy"}},
        {"id": "last", "tool": "t__echo", "params": {"message": "{{e.result}} {{vars.env}}"}}
    ], "options": {"variables": {"env": "prod"}}})).await;
    let s1 = c
        .recv_where("step 1", |v| {
            v["type"] == "batch_step_result" && v["stepIndex"] == 1
        })
        .await;
    let task_id = s1["taskId"].clone();
    // Killed while step 2 waits at the server.
    hub.wait_log("testserver t call barrier").await;
    let hub = hub.crash_and_restart().await;
    let mut c = hub.connect().await;
    let t = c
        .request(json!({"type": "task_status", "taskId": task_id}))
        .await;
    assert_eq!(t["task"]["state"], "recoverable", "{t}");
    assert_eq!(t["task"]["resumable"], true);
    assert_eq!(t["task"]["uncertainStep"], 2, "{t}");
    let listed = c.request(json!({"type": "list_tasks"})).await;
    assert!(listed["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .any(|x| x["taskId"] == task_id));
    wait_running(&mut c, "t").await;
    barrier::release(&mut c, "t", "deploy").await;
    let (steps, done) = resume_to_end(&mut c, &task_id, json!({})).await;
    assert_eq!(done["state"], "success", "{done}");
    assert_eq!(done["resumed"], true);
    assert_eq!(done["batchId"], "deploy");
    let idx: Vec<_> = steps
        .iter()
        .map(|s| s["stepIndex"].as_u64().unwrap_or(99))
        .collect();
    assert_eq!(idx, vec![2, 3], "only the unfinished steps ran");
    assert!(steps.iter().all(|s| s["resumed"] == true));
    assert_eq!(
        steps[1]["result"], "v=1 prod",
        "variables saved before the crash were used"
    );
    assert_eq!(
        calls(&p, "counter").len(),
        1,
        "a finished step never runs again"
    );
    assert_eq!(calls(&p, "echo").len(), 2);
    assert_eq!(
        calls(&p, "barrier").len(),
        2,
        "the uncertain step ran again only after approval"
    );
}

#[tokio::test]
async fn a_step_acknowledged_before_a_crash_is_never_rerun() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let (hub, mut c) = start(&p, dir).await;
    c.send(json!({"type": "tool_batch", "id": "b", "steps": [
        {"tool": "t__counter", "params": {"key": "once"}},
        {"tool": "t__barrier", "params": {"name": "ack", "apiKey": "s3cret-literal"}}
    ]}))
    .await;
    let s0 = c
        .recv_where("step 0", |v| {
            v["type"] == "batch_step_result" && v["stepIndex"] == 0
        })
        .await;
    let hub = hub.crash_and_restart().await;
    let task_id = s0["taskId"].clone();
    // A secret written literally into step params never reaches the journal;
    // the resume supplies it again.
    let name = format!("state/tasks/{}.jsonl", task_id.as_str().unwrap_or("?"));
    let journal = std::fs::read_to_string(p.join(name)).expect("journal");
    assert!(!journal.contains("s3cret-literal"), "{journal}");
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    barrier::release(&mut c, "t", "ack").await;
    let (steps, done) = resume_to_end(&mut c, &task_id, json!({"apiKey": "s3cret-literal"})).await;
    assert_eq!(done["state"], "success", "{done}");
    assert!(steps.iter().all(|s| s["stepIndex"] != 0), "{steps:?}");
    let sent = calls(&p, "barrier").into_iter().last().expect("step 1 ran");
    assert_eq!(
        sent["arguments"]["apiKey"], "s3cret-literal",
        "the resumed step got the real value"
    );
    assert_eq!(calls(&p, "counter").len(), 1);
}

#[tokio::test]
async fn resume_refuses_finished_and_concurrent_resumes() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let (_hub, mut c) = start(&p, dir).await;
    c.send(json!({"type": "tool_batch", "id": "ok", "steps": [{"tool": "t__echo", "params": {"message": "x"}}]})).await;
    let done = c
        .recv_where("ok done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "ok"
        })
        .await;
    let r = c
        .request(json!({"type": "resume_task", "taskId": done["taskId"]}))
        .await;
    assert_eq!(r["type"], "error");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("already finished"),
        "{r}"
    );
    c.send(json!({"type": "tool_batch", "id": "f", "steps": [
        {"tool": "t__flaky", "params": {"key": "z", "failures": 1}, "retry": false},
        {"tool": "t__barrier", "params": {"name": "f"}}
    ]}))
    .await;
    let failed = c
        .recv_where("f done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "f"
        })
        .await;
    assert_eq!(failed["state"], "failed");
    let t = c
        .request(json!({"type": "task_status", "taskId": failed["taskId"]}))
        .await;
    assert_eq!(t["task"]["resumable"], true);
    c.send(json!({"type": "resume_task", "id": "first", "taskId": failed["taskId"]}))
        .await;
    // The first resume waits at the server when the second comes.
    barrier::await_waiting(&mut c, "t", "f", 1).await;
    let second = c
        .request(json!({"type": "resume_task", "taskId": failed["taskId"]}))
        .await;
    assert_eq!(
        second["type"], "error",
        "the second concurrent resume is refused: {second}"
    );
    assert!(
        second["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("the task is still running"),
        "{second}"
    );
    assert_eq!(barrier::release(&mut c, "t", "f").await, 1);
    let done = c
        .recv_where("resumed f", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "f"
        })
        .await;
    assert_eq!(done["state"], "success", "{done}");
    let gone = c
        .request(json!({"type": "resume_task", "taskId": "../../etc/passwd"}))
        .await;
    assert_eq!(gone["type"], "error");
}

#[tokio::test]
async fn torn_and_corrupt_journals_are_reported_never_fatal() {
    let dir = tempfile::tempdir().expect("dir");
    let tasks = dir.path().join("state/tasks");
    std::fs::create_dir_all(&tasks).expect("mkdir");
    let header = json!({"kind": "header", "schemaVersion": 1, "taskId": "torn1", "batchId": "b1",
        "steps": [{"tool": "echo", "params": {"message": "a"}}, {"tool": "echo", "params": {"message": "b"}}],
        "options": {"stopOnError": true}, "createdMs": 1, "hubVersion": "0.1.0"});
    let started = json!({"kind": "step_started", "index": 0, "params": {}, "ts": 2});
    std::fs::write(
        tasks.join("torn1.jsonl"),
        format!("{header}\n{started}\n{{\"kind\":\"step_fin"),
    )
    .expect("torn");
    let mut h2 = header.clone();
    h2["taskId"] = json!("bad1");
    std::fs::write(
        tasks.join("bad1.jsonl"),
        format!("{h2}\nnot json at all\n{started}\n"),
    )
    .expect("corrupt");
    // The hub stopped before a task's first sync: its header never
    // completed, nobody was told of it, and recovery removes it.
    std::fs::write(tasks.join("unsynced1.jsonl"), b"").expect("empty");
    std::fs::write(tasks.join("unsynced2.jsonl"), br#"{"kind":"header","sch"#).expect("torn");
    let hub = TestHub::start_in(dir, json!({})).await;
    let mut c = hub.connect().await;
    let list = c.request(json!({"type": "list_tasks"})).await;
    let tasks = hub.path().join("state/tasks");
    assert!(!tasks.join("unsynced1.jsonl").exists());
    assert!(!tasks.join("unsynced2.jsonl").exists());
    assert!(!list["problems"].to_string().contains("unsynced"), "{list}");
    let torn = list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["taskId"] == "torn1")
        .cloned();
    let torn = torn.expect("the torn journal is still loaded");
    assert_eq!(torn["state"], "recoverable");
    assert_eq!(torn["uncertainStep"], 0);
    let problems = list["problems"].to_string();
    assert!(
        problems.contains("bad1") && problems.contains(":2"),
        "{problems}"
    );
    hub.wait_log("torn").await;
}

/// A FIFO at `path` for [`open_gate`].
fn make_gate(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Let a process blocked reading the FIFO `gate` go on: a line, written
/// once it opens the FIFO; resolves when written. A thread of its own, so
/// a test that fails before a reader comes leaves nothing to wait for.
fn open_gate(gate: &Path) -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let gate = gate.to_path_buf();
    std::thread::spawn(move || {
        std::fs::write(&gate, "go\n").expect("write the gate");
        let _ = tx.send(());
    });
    rx
}

#[tokio::test]
async fn resume_sent_at_once_after_a_restart_waits_for_its_server() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    // The server starts only once the test opens its gate (a FIFO its
    // wrapper reads), so a resume sent after the restart finds it starting.
    let gate = p.join("gate");
    make_gate(&gate);
    let mut entry = testserver_entry(&p, "t", &[]);
    let script = format!("read -r _ < '{}'; exec \"$0\" \"$@\"", gate.display());
    let mut args = vec![json!("-c"), json!(script)];
    args.push(entry["command"].clone());
    args.extend(entry["args"].as_array().cloned().unwrap_or_default());
    entry["command"] = json!("/bin/sh");
    entry["args"] = Value::Array(args);
    let opened = open_gate(&gate);
    let hub = TestHub::start_in(dir, json!({"mcpServers": {"t": entry}})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    opened.await.expect("the first start read its gate");
    c.send(json!({"type": "tool_batch", "id": "b", "steps": [
        {"id": "say", "tool": "t__echo", "params": {"message": "one"}},
        // A bare name: it names no server, so the wait must find the
        // starting one.
        {"id": "held", "tool": "barrier", "params": {"name": "b"}},
        {"id": "last", "tool": "t__echo", "params": {"message": "two"}}
    ]}))
    .await;
    let s0 = c
        .recv_where("step 0", |v| {
            v["type"] == "batch_step_result" && v["stepIndex"] == 0
        })
        .await;
    let task_id = s0["taskId"].clone();
    hub.wait_log("testserver t call barrier").await;
    let hub = hub.crash_and_restart().await;
    let mut c = hub.connect().await;
    let h = c.request(json!({"type": "health_check"})).await;
    let t_state = h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "t")
        .map(|s| s["state"].clone());
    assert_ne!(t_state, Some(json!("running")), "server already up: {h}");
    c.send(json!({"type": "resume_task", "id": "res", "taskId": task_id}))
        .await;
    // The server comes up only once the resume waits for it, and the step
    // cut by the kill waits at the new server's barrier until another
    // client releases it there.
    hub.wait_log("a tool name is not known yet: waiting for the servers that are starting")
        .await;
    let _opened = open_gate(&gate);
    let mut other = hub.connect().await;
    let release = tokio::spawn(async move { barrier::release(&mut other, "t", "b").await });
    let (steps, done) = follow_resume(&mut c, &task_id).await;
    assert_eq!(done["state"], "success", "{done} {steps:?}");
    let idx: Vec<_> = steps
        .iter()
        .map(|s| s["stepIndex"].as_u64().unwrap_or(99))
        .collect();
    assert_eq!(idx, vec![1, 2], "{steps:?}");
    assert!(steps.iter().all(|s| s["success"] == true), "{steps:?}");
    release.await.expect("release");
}

/// Issue 16.8: cleanup steps that ran after a stop are journaled like any
/// step: after a restart a resume runs the steps the stop left (they were
/// reported not run) and never runs the cleanup again.
#[tokio::test]
async fn a_resume_after_restart_runs_what_the_stop_left_and_not_the_cleanup() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let (hub, mut c) = start(&p, dir).await;
    c.send(json!({"type": "tool_batch", "id": "cl", "steps": [
        {"id": "check", "tool": "hub__read_file", "params": {"path": "flag.txt"}},
        {"id": "after", "tool": "t__echo", "params": {"message": "after"}},
        {"id": "fix", "tool": "hub__write_file", "params": {"path": "flag.txt", "content": "ok"},
         "when": "failure"},
        {"id": "last", "tool": "t__echo", "params": {"message": "last"}}
    ]}))
    .await;
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["stepsCompleted"], 2, "check failed, fix ran: {done}");
    let task_id = done["taskId"].clone();
    assert!(calls(&p, "echo").is_empty(), "nothing after the stop ran");
    let hub = hub.crash_and_restart().await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let t = c
        .request(json!({"type": "task_status", "taskId": task_id}))
        .await;
    let states: Vec<&str> = t["task"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["state"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(states, ["failed", "pending", "success", "pending"], "{t}");
    let (steps, done) = resume_to_end(&mut c, &task_id, json!({})).await;
    assert_eq!(done["state"], "success", "{done}");
    assert_eq!(done["stepsCompleted"], 4, "{done}");
    let idx: Vec<_> = steps
        .iter()
        .map(|s| s["stepIndex"].as_u64().unwrap_or(99))
        .collect();
    assert_eq!(
        idx,
        vec![0, 1, 3],
        "the cleanup did not run again: {steps:?}"
    );
    assert!(steps.iter().all(|s| s["success"] == true), "{steps:?}");
    assert_eq!(calls(&p, "echo").len(), 2);
}

/// A hub with server `t` and `retention` as `taskEngine.retention`.
async fn hub_retaining(retention: Value) -> (TestHub, std::path::PathBuf, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])},
               "taskEngine": {"retention": retention}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, p, c)
}

/// Run a one-step batch `id` to its `batch_complete`.
async fn one_step(c: &mut Client, id: &str, step: Value) -> Value {
    c.send(json!({"type": "tool_batch", "id": id, "steps": [step]}))
        .await;
    c.recv_where("batch_complete", |v| {
        v["type"] == "batch_complete" && v["batchId"] == id
    })
    .await
}

/// The ids `list_tasks` shows, and how many journals the folder holds.
async fn kept(c: &mut Client, p: &std::path::Path) -> (Vec<Value>, usize) {
    let tasks = c.request(json!({"type": "list_tasks"})).await;
    let ids = tasks["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["taskId"].clone())
        .collect();
    let journals = std::fs::read_dir(p.join("state/tasks"))
        .expect("tasks dir")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .count();
    (ids, journals)
}

/// Issue 16.15: `retention.maxTasks` holds while tasks finish (not only at
/// start and hourly), and a finished task keeps no journal file open.
#[tokio::test]
async fn max_tasks_holds_as_tasks_finish_and_finished_tasks_close_their_journals() {
    let (hub, p, mut c) = hub_retaining(json!({"maxTasks": 3})).await;
    let mut last = Value::Null;
    for i in 0..8 {
        let step = json!({"tool": "t__echo", "params": {"message": "x"}});
        let done = one_step(&mut c, &format!("b{i}"), step).await;
        assert_eq!(done["success"], true, "{done}");
        last = done["taskId"].clone();
    }
    let (ids, journals) = kept(&mut c, &p).await;
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.contains(&last), "the newest task is kept: {ids:?}");
    assert_eq!(journals, 3, "one journal per kept task");
    let open: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", hub.pid()))
        .expect("/proc fd")
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|t| t.display().to_string())
        .filter(|t| t.contains("/state/tasks/"))
        .collect();
    assert!(
        open.is_empty(),
        "finished tasks keep journals open: {open:?}"
    );
    let status = c
        .request(json!({"type": "task_status", "taskId": last}))
        .await;
    assert_eq!(status["task"]["state"], "success", "{status}");
    assert_eq!(status["task"]["steps"][0]["success"], true, "{status}");
}

/// Issue 32: failed, cancelled and recoverable tasks are kept under their
/// own bound (`retention.resumableMaxTasks`), newest first, journals too.
#[tokio::test]
async fn resumable_tasks_are_pruned_beyond_their_own_bound() {
    let (_hub, p, mut c) = hub_retaining(json!({"resumableMaxTasks": 2})).await;
    let mut failed = Vec::new();
    for i in 0..5 {
        let step = json!({"tool": "t__fail", "params": {"message": "no"}, "retry": false});
        let done = one_step(&mut c, &format!("f{i}"), step).await;
        assert_eq!(done["state"], "failed", "{done}");
        failed.push(done["taskId"].clone());
    }
    // A successful task is not counted against the resumable bound.
    let ok = one_step(
        &mut c,
        "ok",
        json!({"tool": "t__echo", "params": {"message": "x"}}),
    )
    .await;
    let (ids, journals) = kept(&mut c, &p).await;
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(
        ids.contains(&failed[3]) && ids.contains(&failed[4]),
        "{ids:?}"
    );
    assert!(ids.contains(&ok["taskId"]), "{ids:?}");
    assert_eq!(journals, 3, "one journal per kept task");
    let gone = c
        .request(json!({"type": "task_status", "taskId": failed[0]}))
        .await;
    assert_eq!(gone["type"], "error", "{gone}");
}

async fn journal_syncs(c: &mut Client) -> u64 {
    let h = c.request(json!({"type": "health_check"})).await;
    h["tasks"]["journalSyncs"].as_u64().expect("journalSyncs")
}

/// With durability `step` a step's start is synced before its call and
/// carries the previous step's result; the end is the last sync: n + 1
/// fdatasyncs for n steps (it was 2n + 4), with every message in its order.
#[tokio::test]
async fn a_step_durable_batch_syncs_once_per_step_and_once_at_the_end() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let (hub, mut c) = start(&p, dir).await;
    let n = 6u64;
    let steps: Vec<Value> = (0..n)
        .map(|i| json!({"tool": "t__echo", "params": {"message": format!("m{i}")}}))
        .collect();
    let before = journal_syncs(&mut c).await;
    c.seen.clear();
    c.send(json!({"type": "tool_batch", "id": "sync", "steps": steps}))
        .await;
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["state"], "success", "{done}");
    let synced = journal_syncs(&mut c).await - before;
    assert!(
        (n..=n + 1).contains(&synced),
        "{synced} fdatasyncs for {n} steps; expected one per step start and one at the end"
    );
    let order = batch_events(&c.seen, "sync");
    let mut want = vec!["state:running".to_string()];
    want.extend((0..n).map(|i| format!("step:{i}")));
    want.extend(["state:success".to_string(), "batch_complete".to_string()]);
    assert_eq!(order, want);
    // Read back after a crash, every step of the journal is finished.
    let task_id = done["taskId"].clone();
    let hub = hub.crash_and_restart().await;
    let mut c = hub.connect().await;
    let t = c
        .request(json!({"type": "task_status", "taskId": task_id}))
        .await;
    assert_eq!(t["task"]["state"], "success", "{t}");
    assert_eq!(t["task"]["stepsCompleted"], n, "{t}");
}
