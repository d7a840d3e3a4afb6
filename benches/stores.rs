//! The stores benchmark: how the hub's stores behave after a year of use,
//! measured on the real `toolhub` binary over its WebSocket.
//!
//! ```sh
//! cargo bench --bench stores   # 10,000 recordings, 10,000 tasks, a 60 MB history, 1,000 runs
//! cargo test --bench stores    # 100 / 100 / 1 MB / 50, as a smoke check
//! cargo bench --bench stores -- first-call runs   # only these phases
//! TOOLHUB_BIN=/path/to/other/toolhub cargo bench --bench stores   # another hub build
//! ```
//!
//! Phases (all by default): `recordings`, `recordings-rss`, `first-call`,
//! `tasks-start`, `runs`.
//!
//! - `list_recordings`: a page of 50 and a search, each the median of 20,
//!   over recordings made by the hub itself (one `start_recording`, one
//!   echo call, `stop_recording`, copied under new ids and names); the
//!   index rebuilt from the files at start (the copies have no entry).
//! - `list_tasks`: a page of 50 over finished tasks (run as one-step
//!   batches).
//! - the hub's RSS after 1 and after 100 listings.
//! - the hub's RSS with 100,000 stored recordings against an empty folder,
//!   the entries written directly in the on-disk format
//!   (`recordings-rss`; `stores/rss.rs`).
//! - time from spawning the hub to the first `tool_call` answered, with
//!   an empty history and with a large `history.jsonl` (`first-call`).
//! - the same with 10,000 finished tasks in the task store against an
//!   empty one (`tasks-start`; `stores/tasks.rs`).
//! - `list_runs` over 1,000 runs: the first listing after start, a page
//!   of 50 and the whole list (`runs`; `stores/runs.rs`).

#[path = "../tests/it/testserver_bin.rs"]
mod testserver_bin;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};

#[path = "common/hub.rs"]
mod hub;
use hub::Running;
#[path = "stores/rss.rs"]
mod rss;
#[path = "stores/runs.rs"]
mod runs;
#[path = "common/runs_fixture.rs"]
mod runs_fixture;
#[path = "stores/tasks.rs"]
mod tasks;

fn write_config(dir: &Path) -> PathBuf {
    let config = json!({
        "server": {"listen": "127.0.0.1:0"},
        "mcpServers": {"t": {"command": crate::testserver_bin::path(), "args": ["--fast-echo"]}},
        "builtin": {"enabled": false},
        "taskEngine": {"stateDir": "./state", "durability": "batch", "retention": {"maxTasks": 1_000_000}},
        "recording": {"storagePath": "./recordings"},
        "healthCheck": {"interval": 3_600_000},
    });
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).expect("config");
    path
}

impl Running {
    async fn start(dir: &Path) -> Running {
        Running::spawn(dir, &write_config(dir)).await
    }
}

/// Copy the hub-made recording `id` under `n - 1` new ids, each with its
/// own name and creation time.
fn copy_recordings(storage: &Path, id: &str, n: usize) {
    let text = std::fs::read_to_string(storage.join(id).join("recording.jsonl")).expect("read");
    let (first, rest) = text.split_once('\n').expect("header");
    let header: Value = serde_json::from_str(first).expect("header json");
    for i in 1..n {
        let new_id = format!("rec-bench-{i:06}");
        let mut h = header.clone();
        h["recordingId"] = json!(new_id);
        h["name"] = json!(format!("flow n-{i}"));
        h["createdAt"] = json!(format!(
            "2026-01-01T00:00:{:02}.{:03}Z",
            i / 1000 % 60,
            i % 1000
        ));
        let dir = storage.join(&new_id);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("recording.jsonl"), format!("{h}\n{rest}")).expect("write");
    }
}

/// A `history.jsonl` of about `bytes` bytes, in the hub's entry shape.
fn write_history(state: &Path, bytes: usize) {
    std::fs::create_dir_all(state).expect("state");
    let line = json!({"ts": "2026-01-01T00:00:00.000Z", "session": "s", "tool": "t__echo",
        "params": {"message": "x".repeat(200)}, "success": true, "errorType": null,
        "attempts": 1, "retries": 0, "durationMs": 1})
    .to_string();
    let mut text = String::with_capacity(bytes + line.len());
    while text.len() < bytes {
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(state.join("history.jsonl"), text).expect("history");
}

/// Milliseconds from spawning a hub on `dir` to its first answered call.
async fn first_call_ms(dir: &Path) -> f64 {
    let t = Instant::now();
    let hub = Running::start(dir).await;
    let mut c = hub.connect().await;
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__echo", "params": {"message": "hi"}}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    hub.kill().await;
    ms
}

/// The median of `v` (sorted here).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The phases named on the command line, or all of them.
struct Phases(Vec<String>);

impl Phases {
    fn from_args() -> Phases {
        let names = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with("--"))
            .collect();
        Phases(names)
    }

    fn wants(&self, name: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|n| n == name)
    }
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let phases = Phases::from_args();
    let (n, tasks, history_mb, runs, many) = if full {
        (10_000, 10_000, 60, 1_000, 100_000)
    } else {
        (100, 100, 1, 50, 1_000)
    };
    println!(
        "stores: {n} recordings, {tasks} finished tasks, {history_mb} MB history, {runs} runs"
    );
    println!("| what | measured |");
    println!("|---|---:|");
    if phases.wants("recordings") {
        recordings(n, tasks).await;
    }
    if phases.wants("recordings-rss") {
        rss::recordings(many).await;
    }
    if phases.wants("first-call") {
        first_call(history_mb).await;
    }
    if phases.wants("tasks-start") {
        tasks::start(tasks).await;
    }
    if phases.wants("runs") {
        runs::list(runs).await;
    }
}

/// Recordings made by the hub, copied to `n`, and `tasks` finished tasks:
/// the index rebuilt at start, pages, a search, RSS over 100 listings.
async fn recordings(n: usize, tasks: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();

    // One recording and the tasks, made by the hub itself.
    let hub = Running::start(root).await;
    let mut c = hub.connect().await;
    let started = c
        .request(json!({"type": "start_recording", "name": "seed"}))
        .await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    c.request(json!({"type": "tool_call", "tool": "t__echo", "params": {"message": "hello"}}))
        .await;
    c.request(json!({"type": "stop_recording"})).await;
    let t = Instant::now();
    for i in 0..tasks {
        let done = c
            .request(json!({"type": "tool_batch", "steps": [{"tool": "t__echo", "params": {"message": format!("m{i}")}}]}))
            .await;
        assert_eq!(done["state"], "success", "{done}");
    }
    eprintln!("made {tasks} tasks in {:.1} s", t.elapsed().as_secs_f64());
    let one = std::fs::metadata(root.join("recordings").join(&id).join("recording.jsonl"))
        .map(|m| m.len())
        .unwrap_or(0);
    hub.kill().await;
    copy_recordings(&root.join("recordings"), &id, n);
    let _ = std::fs::remove_file(root.join("recordings/.index.jsonl"));

    // The stores after a year: the index is rebuilt at start.
    let t = Instant::now();
    let hub = Running::start(root).await;
    hub.wait_log("recordings index ready").await;
    let rebuilt = t.elapsed().as_secs_f64() * 1000.0;
    let mut c = hub.connect().await;
    let page = json!({"type": "list_recordings", "limit": 50});
    let (page_ms, reply) = c.time(&page, 20).await;
    assert_eq!(reply["total"], json!(n), "{}", reply["total"]);
    let page_bytes = reply.to_string().len();
    let search = json!({"type": "list_recordings", "query": "n-42", "tool": "echo", "limit": 50});
    let (search_ms, found) = c.time(&search, 20).await;
    assert!(found["total"].as_u64().unwrap_or(0) >= 1, "{found}");
    let tasks_page = json!({"type": "list_tasks", "limit": 50});
    let (tasks_ms, listed) = c.time(&tasks_page, 20).await;
    assert!(
        listed["total"].as_u64().unwrap_or(0) >= tasks as u64,
        "{}",
        listed["total"]
    );
    let all = json!({"type": "list_recordings"});
    c.request(all.clone()).await;
    let rss_one = hub.rss_kib();
    // Recordings first, then tasks, so each growth is told apart.
    for _ in 0..99 {
        c.request(all.clone()).await;
    }
    let rss_hundred = hub.rss_kib();
    for _ in 0..100 {
        c.request(tasks_page.clone()).await;
    }
    let rss_tasks = hub.rss_kib();
    hub.kill().await;

    println!("| one hub-made one-step recording on disk | {one} B |");
    println!("| hub start to index ready (rebuilt from {n} files) | {rebuilt:.0} ms |");
    println!("| `list_recordings` page of 50 (median of 20) | {page_ms:.1} ms, {page_bytes} B |");
    println!("| `list_recordings` search: query + tool (median of 20) | {search_ms:.1} ms |");
    println!("| `list_tasks` page of 50 (median of 20) | {tasks_ms:.1} ms |");
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "| hub RSS after 1 / 100 `list_recordings`, then after 100 `list_tasks` | {:.1} / {:.1} MiB (+{:.1}), then {:.1} MiB (+{:.1}) |",
        mib(rss_one),
        mib(rss_hundred),
        mib(rss_hundred) - mib(rss_one),
        mib(rss_tasks),
        mib(rss_tasks) - mib(rss_hundred)
    );
}

/// Time to the first call: an empty history against a large one.
async fn first_call(history_mb: usize) {
    let empty = tempfile::tempdir().expect("tempdir");
    let big = tempfile::tempdir().expect("tempdir");
    write_history(&big.path().join("state"), history_mb * 1024 * 1024);
    let reps = if std::env::args().any(|a| a == "--bench") {
        15
    } else {
        3
    };
    let mut e_ms = Vec::new();
    let mut b_ms = Vec::new();
    for _ in 0..reps {
        e_ms.push(first_call_ms(empty.path()).await);
        b_ms.push(first_call_ms(big.path()).await);
    }
    let (e, b) = (median(&mut e_ms), median(&mut b_ms));
    println!(
        "| spawn to first call, empty / {history_mb} MB history (median of {reps}, interleaved) | {e:.1} / {b:.1} ms ({:+.0} %) |",
        (b - e) / e * 100.0
    );
}
