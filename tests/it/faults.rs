//! Fault injection against the real hub: SIGKILL loops mid-batch while
//! recording, a disk that fills up (RLIMIT_FSIZE), editors saving
//! config.json every way they do, servers that write garbage or a huge line,
//! and process groups a SIGKILLed hub left behind.

use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};

use crate::durable::resume_to_end;
use crate::servers::wait_running;
use crate::support::{alive, testserver_entry, write_config, Client, TestHub, WAIT};
use crate::threats::process::{server_pid, wait_exit};

fn t_config(p: &Path) -> Value {
    json!({"mcpServers": {"t": testserver_entry(p, "t", &[])}})
}

/// Every line of a JSONL file parses (no torn line survives).
fn assert_jsonl_whole(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: torn line {l:?}: {e}", path.display()))
        })
        .collect()
}

fn jsonl_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(jsonl_files(&p));
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
    out
}

async fn task_of_batch(c: &mut Client, batch: &str) -> Option<Value> {
    let l = c.request(json!({"type": "list_tasks"})).await;
    l["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["batchId"] == batch)
        .cloned()
}

/// Fits the 60 s budget on a 2-core machine shared with other builds.
const KILL_ITERATIONS: usize = 50;
const LOOP_STEPS: usize = 4;

#[tokio::test]
async fn kill_loop_acknowledged_steps_are_always_on_disk() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut hub = TestHub::start_in(dir, t_config(&p)).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    for i in 0..KILL_ITERATIONS {
        let rec = c
            .request(json!({"type": "start_recording", "name": format!("loop{i}")}))
            .await;
        assert_eq!(rec["type"], "recording_started", "{rec}");
        let rec_id = rec["recordingId"].clone();
        let batch = format!("b{i}");
        c.send(json!({"type": "tool_batch", "id": batch, "steps": [
            {"tool": "t__counter", "params": {"key": format!("i{i}a")}},
            {"tool": "t__echo", "params": {"message": format!("m{i}")}},
            {"tool": "t__counter", "params": {"key": format!("i{i}b")}},
            {"tool": "t__echo", "params": {"message": format!("n{i}")}}
        ]}))
        .await;
        // SIGKILL after k acknowledged step results, k cycling 0..=LOOP_STEPS.
        let k = i % (LOOP_STEPS + 1);
        let mut acked = Vec::new();
        let mut task_id = None;
        while acked.len() < k {
            let b = batch.clone();
            let m = c
                .recv_where("step result", move |v| {
                    v["type"] == "batch_step_result" && v["batchId"] == b.as_str()
                })
                .await;
            task_id = Some(m["taskId"].clone());
            acked.push(m["stepIndex"].as_u64().expect("stepIndex"));
        }
        hub = hub.crash_and_restart().await;
        c = hub.connect().await;
        let task = task_of_batch(&mut c, &batch).await;
        let task = match (task, task_id) {
            (Some(t), _) => t,
            (None, None) => continue, // killed before anything was acknowledged
            (None, Some(id)) => panic!("iteration {i}: acknowledged task {id} lost"),
        };
        let id = task["taskId"].as_str().expect("taskId").to_string();
        // Acknowledged ⇒ on disk.
        let journal = assert_jsonl_whole(&p.join(format!("state/tasks/{id}.jsonl")));
        for a in &acked {
            assert!(
                journal
                    .iter()
                    .any(|r| r["kind"] == "step_finished" && r["index"] == *a),
                "iteration {i}: step {a} was acknowledged but is not StepFinished in the journal"
            );
        }
        match task["state"].as_str() {
            Some("success") => {}
            Some("recoverable") => {
                wait_running(&mut c, "t").await;
                let (_, done) = resume_to_end(&mut c, &json!(id), json!({})).await;
                assert_eq!(done["state"], "success", "iteration {i}: {done}");
            }
            other => panic!("iteration {i}: task state {other:?}: {task}"),
        }
        let list = c.request(json!({"type": "list_recordings"})).await;
        assert_eq!(list["problems"], json!([]), "iteration {i}: {list}");
        let got = c
            .request(json!({"type": "get_recording", "recordingId": rec_id}))
            .await;
        assert!(got["recording"]["steps"].is_array(), "iteration {i}: {got}");
    }
    for f in jsonl_files(&p.join("recordings")) {
        assert_jsonl_whole(&f);
    }
    let took = started.elapsed();
    eprintln!("{KILL_ITERATIONS} kill iterations took {took:?}");
}

/// Run the hub with every file it writes capped at `limit` bytes, SIGXFSZ
/// ignored: a write past the cap fails with EFBIG, as on a full disk.
async fn start_with_fsize(dir: tempfile::TempDir, config: Value, limit: u64) -> TestHub {
    TestHub::start_in_with(dir, config, move |cmd| {
        // SAFETY: setrlimit and signal are async-signal-safe; nothing else
        // runs between fork and exec. An ignored disposition survives exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    })
    .await
}

#[tokio::test]
async fn disk_full_stops_the_recording_and_the_hub_carries_on() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = start_with_fsize(dir, t_config(&p), 200_000).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    c.request(json!({"type": "start_recording", "name": "full"}))
        .await;
    let mut stopped = None;
    for _ in 0..40 {
        c.send(
            json!({"type": "tool_call", "id": "big", "tool": "t__big", "params": {"bytes": 30000}}),
        )
        .await;
        let m = c
            .recv_where("result or stop", |v| {
                v["replyTo"] == "big" || v["type"] == "recording_stopped"
            })
            .await;
        if m["type"] == "recording_stopped" {
            stopped = Some(m);
            break;
        }
    }
    let s = stopped.expect("recording_stopped once the file hit the limit");
    assert_eq!(s["reason"], "write_error", "{s}");
    // The hub stays up and answers.
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong", "{pong}");
    // A batch whose journal outgrows the limit still completes: the journal
    // write fails, the client gets a `warning`, the task is no longer durable.
    c.send(json!({"type": "tool_batch", "id": "after", "steps": [
        {"tool": "t__echo", "params": {"message": "small"}},
        {"tool": "t__big", "params": {"bytes": 250000}},
        {"tool": "t__echo", "params": {"message": "still"}}
    ]}))
    .await;
    let done = c
        .recv_where("batch done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "after"
        })
        .await;
    assert_eq!(done["state"], "success", "{done}");
    let warning = c.recv_type("warning").await;
    assert!(
        warning["message"]
            .as_str()
            .unwrap_or("")
            .contains("journal"),
        "{warning}"
    );
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong");
    // No journal or recording line is torn.
    let files = jsonl_files(&p);
    assert!(!files.is_empty());
    for f in files {
        if f.ends_with("t.calls.jsonl") {
            continue; // the test server's own log
        }
        assert_jsonl_whole(&f);
    }
}

async fn config_check_ok(c: &mut Client) -> bool {
    let h = c.request(json!({"type": "health_check"})).await;
    h["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["name"] == "config")
        .map(|x| x["ok"] == true)
        .expect("config check")
}

fn cfg_with(p: &Path, servers: &[&str]) -> Value {
    let mut m = serde_json::Map::new();
    for s in servers {
        m.insert(s.to_string(), testserver_entry(p, s, &[]));
    }
    crate::support::with_test_defaults(json!({"mcpServers": m}))
}

const RELOADED: &str = "config reloaded";

#[tokio::test]
async fn config_saves_half_written_rename_and_recreate_each_reload_once() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"a": testserver_entry(&p, "a", &[])}}),
    )
    .await;
    let path = p.join("config.json");
    let mut c = hub.connect().await;
    wait_running(&mut c, "a").await;
    // A half-written file is refused; the old config stays.
    let full = serde_json::to_string_pretty(&cfg_with(&p, &["a", "b"])).expect("json");
    std::fs::write(&path, &full[..full.len() / 2]).expect("write half");
    hub.wait_log("config reload refused").await;
    assert!(!config_check_ok(&mut c).await);
    assert_eq!(hub.log_count(RELOADED), 0);
    // Completing the file applies exactly one reload.
    std::fs::write(&path, &full).expect("write whole");
    hub.wait_log_count(RELOADED, 1).await;
    wait_running(&mut c, "b").await;
    assert!(config_check_ok(&mut c).await);
    // Editor rename-save.
    write_config(&path, &cfg_with(&p, &["a", "b", "c"]));
    hub.wait_log_count(RELOADED, 2).await;
    wait_running(&mut c, "c").await;
    // Delete, then create.
    std::fs::remove_file(&path).expect("delete");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&cfg_with(&p, &["a", "d"])).expect("json"),
    )
    .expect("create");
    hub.wait_log_count(RELOADED, 3).await;
    wait_running(&mut c, "d").await;
    // One more distinct edit moves the count by exactly one: no save above
    // produced a late extra reload.
    write_config(&path, &cfg_with(&p, &["a", "e"]));
    hub.wait_log_count(RELOADED, 4).await;
    wait_running(&mut c, "e").await;
    let h = c.request(json!({"type": "health_check"})).await;
    let names: Vec<_> = h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .filter(|n| n.len() == 1)
        .collect();
    assert_eq!(names, vec!["a", "e"], "{h}");
    assert_eq!(hub.log_count(RELOADED), 4, "{}", hub.logs());
}

#[tokio::test]
async fn the_watcher_survives_fifty_saves_in_a_row_and_the_last_wins() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"a": testserver_entry(&p, "a", &[])}}),
    )
    .await;
    let path = p.join("config.json");
    let mut c = hub.connect().await;
    wait_running(&mut c, "a").await;
    for n in 1..=50 {
        let mut cfg = cfg_with(&p, &["a"]);
        cfg["healthCheck"]["interval"] = json!(3_600_000 + n);
        if n == 50 {
            cfg["mcpServers"]["last"] = testserver_entry(&p, "last", &[]);
        }
        if n % 2 == 0 {
            write_config(&path, &cfg);
        } else {
            std::fs::write(&path, serde_json::to_string_pretty(&cfg).expect("json"))
                .expect("write");
        }
    }
    wait_running(&mut c, "last").await;
    let r = c.call("last__echo", json!({"message": "fifty"})).await;
    assert_eq!(r["success"], true, "{r}");
    assert!(config_check_ok(&mut c).await);
}

fn rss_kb(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

#[tokio::test]
async fn a_server_writing_garbage_on_stdout_stays_usable() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(dir, t_config(&p)).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    for _ in 0..3 {
        let r = c.call("t__garbage", json!({})).await;
        assert_eq!(r["success"], true, "{r}");
    }
    let r = c.call("t__echo", json!({"message": "after garbage"})).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"], "after garbage");
    assert!(alive(hub.pid()));
}

#[tokio::test]
async fn a_huge_answer_fails_at_once_with_limit_exceeded_and_memory_stays_bounded() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(dir, t_config(&p)).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let before = rss_kb(hub.pid());
    // A minute's timeout: the answer over 16 MiB must fail long before it.
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__big", "params": {"bytes": 20_000_000}, "timeout": 60000, "retry": false}))
        .await;
    assert_eq!(r["error"]["errorType"], "LIMIT_EXCEEDED", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("16777216-byte limit"), "{msg}");
    let after = rss_kb(hub.pid());
    assert!(
        after.saturating_sub(before) < 300 * 1024,
        "RSS grew from {before} kB to {after} kB"
    );
    hub.wait_log("exceeded the maximum line length").await;
    // The line was dropped whole; the server still answers.
    let r = c.call("t__echo", json!({"message": "after big"})).await;
    assert_eq!(r["success"], true, "{r}");
}

#[tokio::test]
async fn start_up_sweeps_a_grandchild_left_by_a_sigkilled_hub() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(dir, t_config(&p)).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let server = server_pid(&mut c, "t").await;
    let r = c.call("t__spawn_grandchild", json!({})).await;
    let grandchild = r["result"]["pid"].as_i64().expect("pid") as i32;
    let recorded = std::fs::read_to_string(p.join("state/children.json")).expect("children.json");
    assert!(
        recorded.contains(&format!("\"pgid\": {server}")),
        "{recorded}"
    );
    let hub = hub.crash_and_restart().await;
    assert!(wait_exit(server, WAIT).await, "server outlived the hub");
    let line = hub.wait_log("start-up sweep: killed process group").await;
    assert!(line.contains(&server.to_string()), "{line}");
    assert!(
        wait_exit(grandchild, WAIT).await,
        "grandchild {grandchild} survived the restart"
    );
    assert!(!alive(grandchild));
}
