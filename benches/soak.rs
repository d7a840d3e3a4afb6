//! The soak: the real hub under a long mixed load, its RSS every 20 s.
//!
//! ```sh
//! cargo bench --bench soak -- --secs 1800   # 30 minutes (the default under `cargo bench`)
//! cargo bench --bench soak -- --secs 300 --every 10
//! cargo test --bench soak                   # 4 s, as a smoke check
//! TOOLHUB_BIN=/path/to/other/toolhub cargo bench --bench soak   # another hub build
//! ```
//!
//! Four clients, each over its own WebSocket, loop on: an echo call; every
//! third turn a 3-step batch (a counting server's `counter` saved with
//! `saveAs`, an echo of it through a template, an echo of that); every
//! fourteenth turn a short recording (start, two echo calls, stop). Every
//! 40 s the clients pause for 15 s (the quiet gaps), and every 20 s the
//! config file is rewritten with another value of an unrelated key
//! (`healthCheck.timeout`), which the hub reloads. Every 20 s (`--every`)
//! it prints the hub's RSS and the work done so far: calls (batch steps
//! and recorded calls included), batches, recordings, failures, reloads
//! and server restarts. A failed call or batch is counted, never fatal.

#[path = "../tests/it/testserver_bin.rs"]
mod testserver_bin;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "common/hub.rs"]
mod hub;
use hub::{flag, Client, Running};

const CLIENTS: usize = 4;
/// One cycle of load: `ACTIVE` of work, then a quiet gap.
const CYCLE: Duration = Duration::from_secs(40);
const ACTIVE: Duration = Duration::from_secs(25);
const RELOAD_EVERY: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Counts {
    calls: AtomicU64,
    batches: AtomicU64,
    recordings: AtomicU64,
    failures: AtomicU64,
}

fn write_config(dir: &Path, n: u64) -> PathBuf {
    let config = json!({
        "server": {"listen": "127.0.0.1:0"},
        "mcpServers": {"t": {"command": crate::testserver_bin::path()}},
        "builtin": {"enabled": false},
        "taskEngine": {"stateDir": "./state"},
        "recording": {"storagePath": "./recordings"},
        "healthCheck": {"timeout": 5_000 + n % 1_000},
    });
    let path = dir.join("config.json");
    // Through a rename, so the watcher never reads half a file.
    let tmp = dir.join("config.json.tmp");
    std::fs::write(&tmp, config.to_string()).expect("config");
    std::fs::rename(&tmp, &path).expect("config rename");
    path
}

/// Is a reply a success (a `tool_result` or a `batch_complete`)?
fn ok(v: &Value) -> bool {
    v["success"] == true || v["state"] == "success"
}

async fn client(mut c: Client, k: usize, start: Instant, end: Instant, n: Arc<Counts>) {
    let echo = |i: u64| json!({"type": "tool_call", "tool": "t__echo", "params": {"message": format!("c{k} {i}")}});
    let batch = json!({"type": "tool_batch", "steps": [
        {"tool": "t__counter", "params": {"key": format!("soak-{k}")}, "saveAs": "c"},
        {"tool": "t__echo", "params": {"message": "count={{c.result.count}}"}, "saveAs": "e"},
        {"tool": "t__echo", "params": {"message": "again: {{e.result}}"}}
    ]});
    let count = |v: &Value, what: Option<&AtomicU64>, steps: u64| {
        if let Some(what) = what {
            what.fetch_add(1, Ordering::Relaxed);
        }
        n.calls.fetch_add(steps, Ordering::Relaxed);
        if !ok(v) {
            n.failures.fetch_add(1, Ordering::Relaxed);
        }
    };
    let mut i = 0u64;
    while Instant::now() < end {
        // The quiet gap at the end of each cycle: wait for the next one.
        let into = start.elapsed().as_nanos() % CYCLE.as_nanos();
        if into >= ACTIVE.as_nanos() {
            let rest = Duration::from_nanos((CYCLE.as_nanos() - into) as u64);
            tokio::time::sleep(rest.min(end.saturating_duration_since(Instant::now()))).await;
            continue;
        }
        i += 1;
        let r = c.request(echo(i)).await;
        count(&r, None, 1);
        if i.is_multiple_of(3) {
            let r = c.request(batch.clone()).await;
            count(&r, Some(&n.batches), 3);
        }
        if i.is_multiple_of(14) {
            let started = c
                .request(json!({"type": "start_recording", "name": format!("soak c{k} {i}")}))
                .await;
            if started["recordingId"].is_string() {
                for j in 0..2 {
                    let r = c.request(echo(i * 10 + j)).await;
                    count(&r, None, 1);
                }
                let stopped = c.request(json!({"type": "stop_recording"})).await;
                if stopped["saved"] == true {
                    n.recordings.fetch_add(1, Ordering::Relaxed);
                } else {
                    n.failures.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                n.failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let secs = flag("--secs").unwrap_or(if full { 1800 } else { 4 });
    let every = Duration::from_secs(flag("--every").unwrap_or(if full { 20 } else { 2 }));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(dir.path(), 0);
    let hub = Running::spawn(dir.path(), &path).await;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(hub.connect().await);
    }
    // Server t is up before the clock starts (a call waits for it).
    let first = clients[0]
        .request(json!({"type": "tool_call", "tool": "t__echo", "params": {"message": "up"}}))
        .await;
    assert!(ok(&first), "{first}");
    let n = Arc::new(Counts::default());
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for (k, c) in clients.into_iter().enumerate() {
        tasks.push(tokio::spawn(client(c, k, start, end, n.clone())));
    }
    println!(
        "soak: {CLIENTS} clients for {secs} s; RSS every {} s",
        every.as_secs()
    );
    println!("| t | RSS | calls | batches | recordings | failures | reloads | restarts |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut next_print = start + every;
    let mut next_reload = start + RELOAD_EVERY;
    let mut reloads = 0u64;
    let row = |t: Duration, reloads: u64| {
        let restarts = hub.count_log("restarting server");
        let seen = hub.count_log("config reloaded");
        println!(
            "| {:.0} s | {:.1} MiB | {} | {} | {} | {} | {}/{reloads} | {restarts} |",
            t.as_secs_f64(),
            hub.rss_kib() as f64 / 1024.0,
            n.calls.load(Ordering::Relaxed),
            n.batches.load(Ordering::Relaxed),
            n.recordings.load(Ordering::Relaxed),
            n.failures.load(Ordering::Relaxed),
            seen,
        );
    };
    row(Duration::ZERO, 0);
    while Instant::now() < end {
        let wake = next_print.min(next_reload).min(end);
        tokio::time::sleep_until(wake.into()).await;
        let now = Instant::now();
        if now >= next_reload {
            reloads += 1;
            write_config(dir.path(), reloads);
            next_reload += RELOAD_EVERY;
        }
        if now >= next_print {
            row(now - start, reloads);
            next_print += every;
        }
    }
    for t in tasks {
        t.await.expect("client");
    }
    row(start.elapsed(), reloads);
    hub.kill().await;
}
