//! The relay benchmark: a direct stdio call to an MCP server against the same
//! call through the hub's WebSocket, measured in one run and printed as one
//! table with ratios against direct.
//!
//! ```sh
//! cargo bench --bench relay            # the full run (about a minute)
//! cargo bench --bench relay -- --quick # fewer calls, for a smoke check
//! TOOLHUB_BIN=/path/to/other/toolhub cargo bench --bench relay   # another hub build
//! TOOLHUB_BENCH_SERVER='{"spinMicros":0}' …   # server keys on top (an A/B run)
//! cargo bench --bench relay -- --calls-only # just the first table (for profiling)
//! cargo bench --bench relay -- --load-only  # only 16 in flight through the hub, 20 s (for perf)
//! cargo bench --bench relay -- --seq-only   # the same, one call at a time
//! cargo bench --bench relay -- --batch-only # direct p50, then the batch tables
//! cargo bench --bench relay -- --agent      # paired runs, 2–50 ms gaps: 1 against 2 workers
//! cargo bench --bench relay -- --stall-only # one client's file work against another's pings
//! ```
//!
//! The backend is `toolhub-testserver --fast-echo` (a minimal JSON-RPC echo
//! server, so the hub's own cost is what the table shows). Direct = raw
//! JSON-RPC lines over the server's stdio; hub = `tool_call` over a
//! tokio-tungstenite client to the real `toolhub` binary. Hub CPU comes from
//! `/proc/<pid>/stat` (the hub process only), RSS from `/proc/<pid>/status`.
//! This machine is shared and noisy: read the ratios, not the absolute times.
//! `relay/batch.rs` prints the `tool_batch` tables and the engine's
//! overhead per step, `relay/runs.rs` adds the `list_runs` figure over 1,000 runs,
//! `relay/retention.rs` the RSS after 1,000 and 10,000 small batches,
//! `relay/mcp.rs` the `/mcp` row (a lean keep-alive HTTP client), `relay/floor.rs`
//! the floor row: the leanest WebSocket → stdio relay on the same stack, in
//! its own process, so the hub's own cost is the difference between the rows.

#[path = "../tests/it/testserver_bin.rs"]
mod testserver_bin;
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

#[path = "relay/agent.rs"]
mod agent;
#[path = "relay/batch.rs"]
mod batch;
#[path = "relay/direct.rs"]
mod direct;
#[path = "relay/floor.rs"]
mod floor;
#[path = "relay/idle.rs"]
mod idle;
#[path = "relay/load.rs"]
mod load;
#[path = "relay/mcp.rs"]
mod mcp;
#[path = "relay/procfs.rs"]
mod procfs;
#[path = "relay/recovery.rs"]
mod recovery;
#[path = "relay/retention.rs"]
mod retention;
#[path = "relay/runs.rs"]
mod runs;
#[path = "common/runs_fixture.rs"]
mod runs_fixture;
#[path = "relay/stall.rs"]
mod stall;
#[path = "common/stall.rs"]
mod stall_fixture;

use direct::{Direct, RmcpDirect};
use procfs::{cpu_seconds, sleeps, status_kib};

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// Something that answers one echo call.
trait Caller: Send + Sync + 'static {
    fn echo(&self, n: u64) -> impl std::future::Future<Output = Value> + Send;
}

// ---------------------------------------------------------------- hub

/// A running hub process and its address and token.
struct Hub {
    child: Child,
    dir: tempfile::TempDir,
    addr: String,
    token: String,
    /// `client disconnected` lines the hub has logged so far.
    disconnects: Arc<tokio::sync::watch::Sender<usize>>,
    /// Heap trims the hub has logged so far.
    trims: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Hub {
    async fn start(durability: &str, max_connections: usize) -> Hub {
        let servers =
            json!({"t": {"command": crate::testserver_bin::path(), "args": ["--fast-echo"]}});
        Hub::start_with(durability, max_connections, servers).await
    }

    async fn start_with(durability: &str, max_connections: usize, servers: Value) -> Hub {
        Hub::start_full(durability, max_connections, servers, json!({})).await
    }

    /// The echo server, with these `server` keys on top of the defaults.
    async fn start_tuned(durability: &str, max_connections: usize, tuning: Value) -> Hub {
        let servers =
            json!({"t": {"command": crate::testserver_bin::path(), "args": ["--fast-echo"]}});
        Hub::start_full(durability, max_connections, servers, tuning).await
    }

    async fn start_full(
        durability: &str,
        max_connections: usize,
        servers: Value,
        tuning: Value,
    ) -> Hub {
        Hub::start_bin(
            None,
            durability,
            max_connections,
            servers,
            tuning,
            json!({}),
        )
        .await
    }

    /// [`Hub::start_full`] with `bin` as the hub's binary (else
    /// `TOOLHUB_BIN`, else this build's) and `sections` (top-level config
    /// sections, e.g. `retry`) on top.
    async fn start_bin(
        bin: Option<&str>,
        durability: &str,
        max_connections: usize,
        servers: Value,
        tuning: Value,
        sections: Value,
    ) -> Hub {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut server = json!({"listen": "127.0.0.1:0", "maxConnections": max_connections});
        for (k, v) in tuning.as_object().into_iter().flatten() {
            server[k] = v.clone();
        }
        // TOOLHUB_BENCH_SERVER: `server` keys for an A/B run, e.g.
        // '{"spinMicros":0}' for a baseline built before spinning was removed.
        if let Ok(extra) = std::env::var("TOOLHUB_BENCH_SERVER") {
            let extra: Value =
                serde_json::from_str(&extra).expect("TOOLHUB_BENCH_SERVER is a JSON object");
            for (k, v) in extra.as_object().into_iter().flatten() {
                server[k] = v.clone();
            }
        }
        let mut config = json!({
            "server": server,
            "mcpServers": servers,
            "builtin": {"enabled": false},
            "taskEngine": {"stateDir": "./state", "durability": durability},
            "recording": {"storagePath": "./recordings"},
        });
        for (k, v) in sections.as_object().into_iter().flatten() {
            config[k] = v.clone();
        }
        let path = dir.path().join("config.json");
        std::fs::write(&path, config.to_string()).expect("config");
        // TOOLHUB_BIN: another build of the hub to measure (e.g. a baseline).
        let bin = bin.map(String::from).unwrap_or_else(|| {
            std::env::var("TOOLHUB_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolhub").into())
        });
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(&path)
            .env("RUST_LOG", "warn,toolhub=info,toolhub::trim=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start toolhub");
        let stderr = child.stderr.take().expect("stderr");
        let (addr_tx, addr_rx) = oneshot::channel();
        let disconnects = Arc::new(tokio::sync::watch::channel(0usize).0);
        let seen = disconnects.clone();
        let trims = Arc::new(tokio::sync::watch::channel(0usize).0);
        let trimmed = trims.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut addr_tx = Some(addr_tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("client disconnected") {
                    seen.send_modify(|n| *n += 1);
                }
                if line.contains("returned free heap memory") {
                    trimmed.send_modify(|n| *n += 1);
                }
                if let Some(rest) = line.split("listening on ws://").nth(1) {
                    if let Some(tx) = addr_tx.take() {
                        let _ = tx.send(rest.trim_end_matches("/ws").to_string());
                    }
                }
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(60), addr_rx)
            .await
            .expect("hub did not listen in time")
            .expect("hub exited");
        let token = std::fs::read_to_string(dir.path().join("state/token"))
            .expect("token")
            .trim()
            .to_string();
        Hub {
            child,
            dir,
            addr,
            token,
            disconnects,
            trims,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("pid")
    }

    async fn connect(&self) -> WsClient {
        let mut req = format!("ws://{}/ws", self.addr)
            .into_client_request()
            .expect("request");
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {}", self.token).parse().expect("header"),
        );
        // A client that waits for nothing: Nagle off, as the hub has it.
        let (ws, _) = tokio_tungstenite::connect_async_with_config(req, None, true)
            .await
            .expect("connect");
        WsClient::new(ws)
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = &self.dir;
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket client matching replies by `replyTo` (and batches by
/// `batchId`), with every other message going to `events`.
struct WsClient {
    tx: mpsc::UnboundedSender<Message>,
    pending: Pending,
    events: tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>,
    next: std::sync::atomic::AtomicU64,
}

impl WsClient {
    fn new(ws: Ws) -> WsClient {
        let (mut sink, mut stream) = ws.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                if sink.send(m).await.is_err() {
                    return;
                }
            }
            // The client was dropped: close, so the reader ends too.
            let _ = sink.send(Message::Close(None)).await;
        });
        let pending: Pending = Arc::default();
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        let p = pending.clone();
        tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                let Message::Text(t) = m else { continue };
                let Ok(v) = serde_json::from_str::<Value>(t.as_str()) else {
                    continue;
                };
                let key = v.get("replyTo").and_then(Value::as_u64).or_else(|| {
                    (v["type"] == "batch_complete")
                        .then(|| v["batchId"].as_u64())
                        .flatten()
                });
                let waiter = key.and_then(|k| p.lock().expect("pending").remove(&k));
                match waiter {
                    Some(w) => {
                        let _ = w.send(v);
                    }
                    None => {
                        let _ = ev_tx.send(v);
                    }
                }
            }
        });
        WsClient {
            tx,
            pending,
            events: tokio::sync::Mutex::new(ev_rx),
            next: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// Send `msg` with a fresh numeric id; resolve with the reply (or, for
    /// a batch, with its `batch_complete`).
    async fn request(&self, mut msg: Value) -> Value {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        msg["id"] = json!(id);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending").insert(id, tx);
        self.tx
            .send(Message::Text(msg.to_string().into()))
            .expect("send");
        tokio::time::timeout(Duration::from_secs(120), rx)
            .await
            .expect("no reply within 120 s")
            .expect("reply")
    }

    /// Wait until server `t` is running.
    async fn wait_running(&self) {
        let h = self.request(json!({"type": "health_check"})).await;
        let up = h["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["name"] == "t" && s["state"] == "running");
        if up {
            return;
        }
        let mut ev = self.events.lock().await;
        tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(v) = ev.recv().await {
                if v["type"] == "server_status" && v["name"] == "t" && v["state"] == "running" {
                    return;
                }
            }
        })
        .await
        .expect("server t never ran");
    }
}

impl Caller for WsClient {
    async fn echo(&self, n: u64) -> Value {
        let r = self
            .request(json!({"type": "tool_call", "tool": "t__echo",
                            "params": {"message": format!("hello {n}")}}))
            .await;
        debug_assert_eq!(r["success"], true, "{r}");
        r
    }
}

/// `ping` over the same socket: the floor of a WebSocket round trip
/// through the hub, with no tool call behind it.
struct WsPing(Arc<WsClient>);

impl Caller for WsPing {
    async fn echo(&self, _n: u64) -> Value {
        self.0.request(json!({"type": "ping"})).await
    }
}

// ---------------------------------------------------------------- measures

struct Latency {
    p50: Duration,
    p90: Duration,
    p99: Duration,
}

async fn sequential<C: Caller>(c: &C, n: u64) -> Latency {
    for i in 0..n / 10 {
        c.echo(i).await; // warm-up
    }
    let mut v = Vec::with_capacity(n as usize);
    for i in 0..n {
        let t = Instant::now();
        c.echo(i).await;
        v.push(t.elapsed());
    }
    v.sort();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p) as usize];
    Latency {
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
    }
}

/// Calls per second with `inflight` concurrent callers, `total` calls.
async fn throughput<C: Caller>(c: &Arc<C>, inflight: u64, total: u64) -> f64 {
    let started = Instant::now();
    let per = total / inflight;
    let mut workers = Vec::new();
    for w in 0..inflight {
        let c = c.clone();
        workers.push(tokio::spawn(async move {
            for i in 0..per {
                c.echo(w * per + i).await;
            }
        }));
    }
    for w in workers {
        w.await.expect("worker");
    }
    (per * inflight) as f64 / started.elapsed().as_secs_f64()
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    // Re-executed as the floor relay (see relay/floor.rs)?
    floor::serve_if_asked();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(bench_main());
}

async fn bench_main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this
    // binary without it: then a smoke run proves the benchmark still works.
    let bench = std::env::args().any(|a| a == "--bench");
    let quick = !bench || std::env::args().any(|a| a == "--quick");
    let n: u64 = match (bench, quick) {
        (false, _) => 200,
        (true, true) => 2_000,
        (true, false) => 10_000,
    };
    load::raise_fd_limit();
    if std::env::args().any(|a| a == "--load-only") {
        return load::load_only(16).await;
    }
    if std::env::args().any(|a| a == "--seq-only") {
        return load::load_only(1).await;
    }
    if std::env::args().any(|a| a == "--agent") {
        return agent::tables(quick).await;
    }
    if std::env::args().any(|a| a == "--stall-only") {
        let hub = Hub::start("step", 64).await;
        stall::phase(&hub, quick).await;
        return stall::large_results(quick).await;
    }

    // Direct.
    let direct = Arc::new(Direct::start().await);
    let d_seq = sequential(direct.as_ref(), n).await;
    if std::env::args().any(|a| a == "--batch-only") {
        let hub = Hub::start("step", 64).await;
        let client = hub.connect().await;
        client.wait_running().await;
        batch::tables(&hub, &client, d_seq.p50, bench, quick).await;
        return;
    }
    let mut d_tp = Vec::new();
    for k in [1, 16, 64] {
        d_tp.push(throughput(&direct, k, n * 2).await);
    }

    // rmcp's client, same server: the bench process's CPU per call against
    // the raw client's shows what rmcp itself costs.
    let me = std::process::id();
    let c0 = cpu_seconds(me);
    let raw16 = throughput(&direct, 16, n * 2).await;
    let raw_cpu16 = (cpu_seconds(me) - c0) * 1e6 / (n * 2) as f64;
    let rmcp = Arc::new(RmcpDirect::start().await);
    let r_seq = sequential(rmcp.as_ref(), n).await;
    let c0 = cpu_seconds(me);
    let r16 = throughput(&rmcp, 16, n * 2).await;
    let r_cpu16 = (cpu_seconds(me) - c0) * 1e6 / (n * 2) as f64;
    drop(rmcp);

    // The floor: the leanest relay on the same stack, in its own process.
    let fl = floor::Floor::start().await;
    let fl_client = Arc::new(fl.connect().await);
    let f_seq = sequential(fl_client.as_ref(), n).await;
    let c0 = cpu_seconds(fl.pid());
    let f16 = throughput(&fl_client, 16, n * 2).await;
    let f_cpu16 = (cpu_seconds(fl.pid()) - c0) * 1e6 / (n * 2) as f64;
    drop(fl_client);
    drop(fl);

    // Through the hub (durability step, the default).
    let hub = Hub::start("step", 2048).await;
    let pid = hub.pid();
    let client = Arc::new(hub.connect().await);
    client.wait_running().await;
    let idle_kib = status_kib(pid, "VmRSS");
    let cpu0 = cpu_seconds(pid);
    let sleeps0 = sleeps(pid);
    let h_seq = sequential(client.as_ref(), n).await;
    let seq_cpu_us = (cpu_seconds(pid) - cpu0) * 1e6 / (n + n / 10) as f64;
    let seq_sleeps = (sleeps(pid) - sleeps0) as f64 / (n + n / 10) as f64;
    let ps0 = sleeps(pid);
    let p_seq = sequential(&WsPing(client.clone()), n).await;
    let ping_sleeps = (sleeps(pid) - ps0) as f64 / (n + n / 10) as f64;
    let mut h_tp = Vec::new();
    let mut cpu16 = 0.0;
    for k in [1, 16, 64] {
        let c0 = cpu_seconds(pid);
        h_tp.push(throughput(&client, k, n * 2).await);
        if k == 16 {
            cpu16 = (cpu_seconds(pid) - c0) * 1e6 / (n * 2) as f64;
        }
    }
    let load_kib = status_kib(pid, "VmHWM");
    // The MCP endpoint, sequential, with a lean HTTP client.
    let lean = mcp::McpLean::open(&hub).await;
    let ms0 = sleeps(pid);
    let m_seq = sequential(&lean, n).await;
    let mcp_sleeps = (sleeps(pid) - ms0) as f64 / (n + n / 10) as f64;
    drop(lean);
    let calls_only = std::env::args().any(|a| a == "--calls-only");

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("\n## Relay: echo through the hub vs direct stdio ({n} sequential calls)\n");
    println!("| path | p50 | p90 | p99 | added p50 | calls/s 1 | calls/s 16 | calls/s 64 | ÷ direct (16) | hub CPU/call seq / 16 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| direct stdio | {} | {} | {} | – | {:.0} | {:.0} | {:.0} | 1.00 | – |",
        us(d_seq.p50),
        us(d_seq.p90),
        us(d_seq.p99),
        d_tp[0],
        d_tp[1],
        d_tp[2]
    );
    println!(
        "| toolhub WebSocket | {} | {} | {} | {:+.0} µs | {:.0} | {:.0} | {:.0} | {:.2} | {:.0} µs / {:.0} µs |",
        us(h_seq.p50), us(h_seq.p90), us(h_seq.p99),
        (ms(h_seq.p50) - ms(d_seq.p50)) * 1e3,
        h_tp[0], h_tp[1], h_tp[2], h_tp[1] / d_tp[1], seq_cpu_us, cpu16
    );
    println!(
        "| floor: minimal WebSocket → stdio relay, same stack, no hub logic | {} | {} | {} | {:+.0} µs | – | {:.0} | – | {:.2} | – / {:.0} µs |",
        us(f_seq.p50), us(f_seq.p90), us(f_seq.p99),
        (ms(f_seq.p50) - ms(d_seq.p50)) * 1e3,
        f16, f16 / d_tp[1], f_cpu16
    );
    println!(
        "| toolhub WebSocket `ping` (no tool call) | {} | {} | {} | {:+.0} µs | – | – | – | – | – |",
        us(p_seq.p50),
        us(p_seq.p90),
        us(p_seq.p99),
        (ms(p_seq.p50) - ms(d_seq.p50)) * 1e3
    );
    println!(
        "| toolhub /mcp (lean HTTP client) | {} | {} | {} | {:+.0} µs | – | – | – | – | – |",
        us(m_seq.p50),
        us(m_seq.p90),
        us(m_seq.p99),
        (ms(m_seq.p50) - ms(d_seq.p50)) * 1e3
    );
    println!(
        "| rmcp client, direct stdio | {} | {} | {} | {:+.0} µs | – | {:.0} | – | {:.2} | client CPU/call 16: rmcp {:.0} µs, raw {:.0} µs |",
        us(r_seq.p50), us(r_seq.p90), us(r_seq.p99),
        (ms(r_seq.p50) - ms(d_seq.p50)) * 1e3,
        r16, r16 / raw16.max(1.0), r_cpu16, raw_cpu16
    );
    println!(
        "\nthe hub's own cost, over the floor in this run: {:+.0} µs at p50 (/ws), {:+.0} µs (/mcp); {:+.0} µs of CPU per call at 16 in flight",
        (ms(h_seq.p50) - ms(f_seq.p50)) * 1e3,
        (ms(m_seq.p50) - ms(f_seq.p50)) * 1e3,
        cpu16 - f_cpu16
    );
    println!(
        "\nhub threads went to sleep {seq_sleeps:.1} times per sequential call, {ping_sleeps:.1} per ping, {mcp_sleeps:.1} per /mcp call \
         (each is a wake-up paid later; a call needs at most 2: wait for the client, wait for the server)"
    );
    println!(
        "\nhub RSS: {:.1} MiB idle with one server, peak {:.1} MiB under load",
        idle_kib as f64 / 1024.0,
        load_kib as f64 / 1024.0
    );

    if calls_only {
        return;
    }

    // Batches, and the engine's overhead per step.
    batch::tables(&hub, client.as_ref(), d_seq.p50, bench, quick).await;

    // Steady use: RSS after 1,000 and 10,000 small batches (before the
    // runs figure, whose create_run makes every later call a run's log entry).
    let (first, total) = match (bench, quick) {
        (false, _) => (100, 300),
        (true, true) => (1_000, 3_000),
        (true, false) => (1_000, 10_000),
    };
    retention::steady_batches(&hub, client.as_ref(), first, total).await;

    runs::list_runs(&hub, client.as_ref(), if quick { 200 } else { 1000 }).await;

    stall::phase(&hub, quick).await;
    stall::large_results(quick).await;

    recovery::transient_mix(bench).await;

    // Idle connections.
    let conns = match (bench, quick) {
        (false, _) => 20,
        (true, true) => 200,
        (true, false) => 1000,
    };
    idle::connections(&hub, conns).await;
}
