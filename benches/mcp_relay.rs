//! `cargo bench --bench mcp_relay`: what `/mcp` adds to a call. The same
//! `echo` of `toolhub-testserver` is called sequentially, once directly
//! (rmcp client over stdio) and once through the hub (rmcp Streamable HTTP
//! client → `/mcp` → the call path → the same kind of stdio child); the
//! added p50 is the difference (target: at most 150 µs). Under `cargo test`
//! it makes 50 calls each as a smoke check and asserts nothing about time.
//!
//! ```sh
//! cargo bench --bench mcp_relay                 # the p50 each path adds
//! cargo bench --bench mcp_relay -- --agent      # the agent pattern (agent.rs)
//! TOOLHUB_BIN=/a/toolhub TOOLHUB_BIN_B=/b/toolhub cargo bench --bench mcp_relay -- --agent
//! TOOLHUB_BENCH_SPIN=0 …                        # server.spinMicros of the hubs
//! TOOLHUB_TESTSERVER=/path/to/toolhub-testserver …  # the hubs' test server
//! ```

#[path = "../tests/it/testserver_bin.rs"]
mod testserver_bin;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::json;

#[path = "mcp_relay/agent.rs"]
mod agent;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

async fn time_calls(peer: &Peer<RoleClient>, tool: &str, n: usize) -> Vec<Duration> {
    let args = json!({"message": "m"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::with_capacity(n);
    for i in 0..(n + n / 5) {
        let t = Instant::now();
        let r = peer
            .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args.clone()))
            .await;
        if let Err(e) = r {
            panic!("{tool} failed: {e}");
        }
        if i >= n / 5 {
            out.push(t.elapsed()); // the first fifth warms up
        }
    }
    out.sort();
    out
}

/// The test server the hubs run (`TOOLHUB_TESTSERVER`: another build).
fn testserver() -> String {
    crate::testserver_bin::path().into()
}

/// Start a hub (`bin`) with one test server `t` in a fresh folder; its
/// process, `/mcp` URL and folder, once `t` has published its tools.
fn start_hub(bin: &str) -> (std::process::Child, String, std::path::PathBuf) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "toolhub-mcp-bench-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    let testserver = testserver();
    let mut server = json!({"listen": "127.0.0.1:0", "token": false});
    if let Some(spin) = std::env::var("TOOLHUB_BENCH_SPIN")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        server["spinMicros"] = json!(spin);
    }
    let config = json!({
        "server": server,
        "taskEngine": {"stateDir": "./state"},
        "builtin": {"workspace": "./workspace"},
        "recording": {"storagePath": "./recordings"},
        "healthCheck": {"interval": 3600000},
        "mcpServers": {"t": {"command": testserver, "args": ["--name", "t"]}},
    });
    let cfg = dir.join("config.json");
    std::fs::write(&cfg, config.to_string()).expect("write the config");
    let mut hub = Command::new(bin)
        .arg("--config")
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolhub");
    // Wait for the endpoint's address and for `t` to publish its tools.
    let mut url = None;
    let mut started = false;
    let mut lines = std::io::BufReader::new(hub.stderr.take().expect("stderr")).lines();
    for line in lines.by_ref() {
        let line = line.unwrap_or_default();
        if let Some(rest) = line.split("MCP endpoint at ").nth(1) {
            url = rest.split_whitespace().next().map(String::from);
        }
        // The server may start before the endpoint is logged: either order.
        started |= line.contains("server t started");
        if url.is_some() && started {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    (hub, url.expect("the hub logged its MCP endpoint"), dir)
}

fn main() {
    // rmcp's HTTP client is built without a TLS provider of its own (the
    // hub links ring): install it, as the hub does, before the first client.
    toolhub::mcp::upstream::tls_provider();
    let full = std::env::args().any(|a| a == "--bench");
    if std::env::args().any(|a| a == "--agent") {
        agent::run(full);
        return;
    }
    let n = if full { 2000 } else { 50 };
    let testserver = testserver();
    let bin = std::env::var("TOOLHUB_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolhub").into());
    let (mut hub, url, dir) = start_hub(&bin);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let ws_url = url.replace("http://", "ws://").replace("/mcp", "/ws");
    let (direct, relayed, ws) = rt.block_on(async {
        let mut cmd = tokio::process::Command::new(&testserver);
        cmd.args(["--name", "direct"]);
        let (proc, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let direct = ().serve(proc).await.expect("init");
        let d = time_calls(direct.peer(), "echo", n).await;
        let via = ().serve(StreamableHttpClientTransport::from_uri(url)).await.expect("init");
        let r = time_calls(via.peer(), "t__echo", n).await;
        let _ = direct.cancel().await;
        let _ = via.cancel().await;
        let w = time_ws(&ws_url, n).await;
        (d, r, w)
    });
    let _ = hub.kill();
    let _ = hub.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (d50, r50) = (percentile(&direct, 0.5), percentile(&relayed, 0.5));
    println!(
        "mcp_relay: {n} sequential echo calls: direct p50 {:.0} µs p90 {:.0} µs; via /mcp p50 {:.0} µs p90 {:.0} µs; added p50 {:.0} µs (with rmcp's HTTP client: the target, ≤ 150 µs, is measured by the relay bench's /mcp row with a lean client)",
        us(d50),
        us(percentile(&direct, 0.9)),
        us(r50),
        us(percentile(&relayed, 0.9)),
        us(r50) - us(d50)
    );
    let w50 = percentile(&ws, 0.5);
    println!(
        "mcp_relay: the same through /ws tool_call: p50 {:.0} µs p90 {:.0} µs; added p50 {:.0} µs",
        us(w50),
        us(percentile(&ws, 0.9)),
        us(w50) - us(d50)
    );
    if !full {
        agent::run(false); // a smoke check of the agent pattern too
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A `/ws` connection (Nagle off), past its `hello`.
async fn connect_ws(url: &str) -> Ws {
    use futures::StreamExt;
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
        .await
        .expect("connect /ws");
    let _hello = ws.next().await;
    ws
}

/// One `t__echo` `tool_call` over `/ws`, timed to its reply.
async fn ws_echo(ws: &mut Ws, id: usize) -> Duration {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let msg = json!({"type": "tool_call", "id": id, "tool": "t__echo", "params": {"message": "m"}});
    let t = Instant::now();
    ws.send(Message::Text(msg.to_string().into()))
        .await
        .expect("send");
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(txt))) if txt.contains("\"replyTo\"") => break,
            Some(Ok(_)) => {}
            other => panic!("/ws ended: {other:?}"),
        }
    }
    t.elapsed()
}

/// Sequential `tool_call`s over the hub's own WebSocket protocol.
async fn time_ws(url: &str, n: usize) -> Vec<Duration> {
    let mut ws = connect_ws(url).await;
    let mut out = Vec::with_capacity(n);
    for i in 0..(n + n / 5) {
        let took = ws_echo(&mut ws, i).await;
        if i >= n / 5 {
            out.push(took); // the first fifth warms up
        }
    }
    out.sort();
    out
}
