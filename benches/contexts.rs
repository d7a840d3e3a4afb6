//! The contexts soak (issue 31): client contexts, each with its own
//! browser (@playwright/mcp with Debian's chromium, `scope: "context"`),
//! opened and closed over minutes. At the end no process of theirs may be
//! left and the hub's RSS should be where it started.
//!
//! ```sh
//! cargo bench --bench contexts                          # 20 contexts over 300 s
//! cargo bench --bench contexts -- --contexts 6 --secs 60
//! cargo bench --bench contexts -- --testserver          # the test server's memo, no browser
//! cargo test --bench contexts                           # a smoke run: 3 contexts over 6 s
//! ```
//!
//! Context k opens at k × secs/contexts on its own WebSocket session,
//! labelled `tab-k`, and works for two of those spacings (two or three are
//! open at a time): it navigates to one of two loopback pages, takes a
//! snapshot and checks that it shows its own page only, about once a
//! second (with `--testserver`: `memo` stores the label, a second `memo`
//! must give it back). Then it is closed, in turn, one of three ways: its
//! socket closes (`sessionGraceMs` 0, so the session ends), `stop_instance`,
//! or it stays idle until `instanceIdleMs` (5 s) stops it. After its first
//! turn its instance's process tree is noted from /proc (the process group
//! of the pid `health_status` gives and every descendant: node, chromium
//! and its helpers). At the end the bench waits (up to `instanceIdleMs` +
//! 10 s) until none of the noted processes is alive and the hub has no
//! descendant beyond the template's, and prints what is left and the
//! hub's RSS: before the first context, every 20 s, and at the end.

#[path = "../tests/it/testserver_bin.rs"]
mod testserver_bin;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "common/hub.rs"]
mod hub;
#[path = "../tests/it/pages.rs"]
mod pages;
#[allow(dead_code)]
#[path = "../tests/it/procs.rs"]
mod procs;
use hub::{flag, Client, Running};
use procs::Proc;

const IDLE_MS: u64 = 5000;
const ROW_EVERY: Duration = Duration::from_secs(20);
const PAGES: [&str; 2] = [
    "<!doctype html><html><head><title>Alpha tab</title></head><body><h1>alpha-marker</h1></body></html>",
    "<!doctype html><html><head><title>Beta tab</title></head><body><h1>beta-marker</h1></body></html>",
];
const MARKERS: [&str; 2] = ["alpha-marker", "beta-marker"];

#[derive(Default)]
struct Counts {
    opened: AtomicUsize,
    closed: AtomicUsize,
    calls: AtomicU64,
    failures: AtomicU64,
    /// Snapshots that showed another context's page.
    crossed: AtomicU64,
}

fn write_config(dir: &Path, browser: bool, max: usize) -> std::path::PathBuf {
    let mut entry = if browser {
        let bin =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node_modules/.bin/playwright-mcp");
        assert!(
            bin.exists(),
            "{} is missing: run `npm ci --prefix tests`",
            bin.display()
        );
        json!({"command": bin, "args": ["--headless", "--isolated", "--no-sandbox",
            "--executable-path", "/usr/bin/chromium",
            "--output-dir", dir.join("pw-out")], "timeout": 60000})
    } else {
        json!({"command": crate::testserver_bin::path()})
    };
    entry["scope"] = json!("context");
    entry["maxInstances"] = json!(max);
    entry["instanceIdleMs"] = json!(IDLE_MS);
    let config = json!({
        "server": {"listen": "127.0.0.1:0", "sessionGraceMs": 0},
        "mcpServers": {"s": entry},
        "builtin": {"enabled": false},
        "taskEngine": {"stateDir": "./state"},
        "recording": {"storagePath": "./recordings"},
        "healthCheck": {"interval": 3_600_000},
    });
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).expect("config");
    path
}

/// One turn of a context's work; whether it went well. `urls` empty:
/// the test server's memo.
async fn turn(c: &mut Client, label: &str, k: usize, urls: &[String], n: &Counts) -> Option<Value> {
    let call = |tool: &str, params: Value| json!({"type": "tool_call", "tool": format!("s__{tool}"), "params": params, "context": label});
    let (first, second, mine, theirs) = if urls.is_empty() {
        (
            call("memo", json!({"value": label})),
            call("memo", json!({})),
            label.to_string(),
            "\"memo\":null".to_string(),
        )
    } else {
        (
            call("browser_navigate", json!({"url": urls[k % 2]})),
            call("browser_snapshot", json!({})),
            MARKERS[k % 2].to_string(),
            MARKERS[(k + 1) % 2].to_string(),
        )
    };
    let a = c.request(first).await;
    let b = c.request(second).await;
    n.calls.fetch_add(2, Ordering::Relaxed);
    if a["success"] != true || b["success"] != true {
        n.failures.fetch_add(1, Ordering::Relaxed);
        eprintln!("{label}: failed: {a} / {b}");
        return None;
    }
    let shown = b["result"].to_string();
    if !shown.contains(&mine) || shown.contains(&theirs) {
        n.crossed.fetch_add(1, Ordering::Relaxed);
        eprintln!("{label}: saw another context's state: {shown:.300}");
    }
    Some(b)
}

/// The live process tree of `context`'s instance, from health's pid.
async fn instance_tree(c: &mut Client, context: &str) -> Vec<Proc> {
    let h = c.request(json!({"type": "health_check"})).await;
    let pid = h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["instances"].as_array().into_iter().flatten())
        .find(|i| i["context"] == context)
        .and_then(|i| i["pid"].as_i64());
    pid.map(|p| procs::tree(p as i32)).unwrap_or_default()
}

#[allow(clippy::too_many_arguments)]
async fn context(
    hub: Arc<Running>,
    k: usize,
    open_at: Instant,
    close_at: Instant,
    urls: Arc<Vec<String>>,
    n: Arc<Counts>,
    noted: Arc<Mutex<Vec<Proc>>>,
) {
    tokio::time::sleep_until(open_at.into()).await;
    let label = format!("tab-{k}");
    let mut c = hub.connect().await;
    n.opened.fetch_add(1, Ordering::Relaxed);
    let first = turn(&mut c, &label, k, &urls, &n).await;
    let ctx = first
        .as_ref()
        .and_then(|v| v["context"].as_str())
        .map(str::to_string);
    let mut tree = Vec::new();
    if let Some(ctx) = &ctx {
        tree = instance_tree(&mut c, ctx).await;
        noted.lock().expect("noted").extend(tree.iter().cloned());
    }
    while Instant::now() < close_at {
        turn(&mut c, &label, k, &urls, &n).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    match (k % 3, &ctx) {
        (1, Some(ctx)) => {
            let r = c
                .request(json!({"type": "stop_instance", "server": "s", "context": ctx}))
                .await;
            if r["type"] != "instance_stopped" {
                n.failures.fetch_add(1, Ordering::Relaxed);
                eprintln!("{label}: stop_instance: {r}");
            }
        }
        (2, Some(_)) => {
            // Idle, the session open: the reaper stops it.
            let limit = Duration::from_millis(IDLE_MS) + Duration::from_secs(10);
            let t0 = Instant::now();
            while tree.iter().any(procs::alive) && t0.elapsed() < limit {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        _ => {} // the socket closes below: the session ends
    }
    drop(c);
    n.closed.fetch_add(1, Ordering::Relaxed);
}

/// The hub's descendants that are not in `baseline` (by pid and start).
fn extra(hub: &Running, baseline: &[Proc]) -> Vec<Proc> {
    procs::descendants(hub.pid() as i32)
        .into_iter()
        .filter(|p| !baseline.contains(p))
        .collect()
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let browser = !std::env::args().any(|a| a == "--testserver");
    let contexts = flag("--contexts").unwrap_or(if full { 20 } else { 3 }) as usize;
    let secs = flag("--secs").unwrap_or(if full { 300 } else { 6 });
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(dir.path(), browser, 6);
    let hub = Arc::new(Running::spawn(dir.path(), &path).await);
    let urls = Arc::new(if browser {
        vec![
            pages::serve_html(PAGES[0]).await,
            pages::serve_html(PAGES[1]).await,
        ]
    } else {
        Vec::new()
    });
    // The template is up (list_tools waits for a server's first start).
    let mut watcher = hub.connect().await;
    let tools = watcher.request(json!({"type": "list_tools"})).await;
    assert!(
        tools["tools"].as_array().is_some_and(|t| t.len() > 1),
        "{tools}"
    );
    let baseline = procs::descendants(hub.pid() as i32);
    let rss_start = hub.rss_kib();
    let n = Arc::new(Counts::default());
    let noted: Arc<Mutex<Vec<Proc>>> = Arc::default();
    let start = Instant::now();
    let spacing = Duration::from_secs(secs) / contexts as u32;
    let mut tasks = Vec::new();
    for k in 0..contexts {
        let open_at = start + spacing * k as u32;
        let close_at = open_at + spacing * 2;
        tasks.push(tokio::spawn(context(
            hub.clone(),
            k,
            open_at,
            close_at.min(start + Duration::from_secs(secs)),
            urls.clone(),
            n.clone(),
            noted.clone(),
        )));
    }
    let what = if browser {
        "a browser"
    } else {
        "a test server"
    };
    println!(
        "contexts: {contexts} over {secs} s, one every {:.1} s, each with {what}; baseline: {} hub descendants, RSS {:.1} MiB",
        spacing.as_secs_f64(),
        baseline.len(),
        rss_start as f64 / 1024.0
    );
    println!("| t | hub RSS | opened | closed | hub descendants | calls | failures | crossed |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let row = |t: Duration| {
        println!(
            "| {:.0} s | {:.1} MiB | {} | {} | {} | {} | {} | {} |",
            t.as_secs_f64(),
            hub.rss_kib() as f64 / 1024.0,
            n.opened.load(Ordering::Relaxed),
            n.closed.load(Ordering::Relaxed),
            procs::descendants(hub.pid() as i32).len(),
            n.calls.load(Ordering::Relaxed),
            n.failures.load(Ordering::Relaxed),
            n.crossed.load(Ordering::Relaxed),
        );
    };
    row(Duration::ZERO);
    let all_done = futures::future::join_all(tasks);
    tokio::pin!(all_done);
    let mut next = start + ROW_EVERY;
    loop {
        tokio::select! {
            done = &mut all_done => {
                for d in done {
                    d.expect("context task");
                }
                break;
            }
            _ = tokio::time::sleep_until(next.into()) => {
                row(start.elapsed());
                next += ROW_EVERY;
            }
        }
    }
    // Every context is closed: wait for its processes to go.
    let noted = noted.lock().expect("noted").clone();
    let limit = Duration::from_millis(IDLE_MS) + Duration::from_secs(10);
    let t0 = Instant::now();
    while (noted.iter().any(procs::alive) || !extra(&hub, &baseline).is_empty())
        && t0.elapsed() < limit
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: Vec<&Proc> = noted.iter().filter(|p| procs::alive(p)).collect();
    let extra_now = extra(&hub, &baseline);
    // A fresh socket: one silent for minutes is dropped (server.idleTimeout).
    let h = hub
        .connect()
        .await
        .request(json!({"type": "health_check"}))
        .await;
    let instances = h["servers"][0]["instances"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    row(start.elapsed());
    let rss_end = hub.rss_kib();
    println!(
        "noted instance processes: {} ({} chromium); still alive: {}; hub descendants beyond the template's: {}; instances in health: {instances}; all gone {:.1} s after the last close",
        noted.len(),
        procs::chromium_count(&noted),
        left.len(),
        extra_now.len(),
        t0.elapsed().as_secs_f64(),
    );
    println!(
        "hub RSS: {:.1} MiB before the first context, {:.1} MiB at the end ({:+.1} %)",
        rss_start as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        (rss_end as f64 / rss_start as f64 - 1.0) * 100.0
    );
    if !left.is_empty() || !extra_now.is_empty() {
        println!("left behind: {left:?} {extra_now:?}");
    }
    Arc::try_unwrap(hub)
        .ok()
        .expect("hub still shared")
        .kill()
        .await;
    assert!(
        left.is_empty() && extra_now.is_empty(),
        "processes were left behind"
    );
}
