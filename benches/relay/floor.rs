//! The floor: the leanest WebSocket → stdio relay we can write on the same
//! stack as the hub (tokio with one worker thread, tungstenite, a piped
//! child), and nothing else: no auth, no tool list, no gate, no history, no
//! retries, no timeouts. A `tool_call` frame becomes a `tools/call` line to
//! `toolhub-testserver --fast-echo`, its answer a `tool_result` frame.
//!
//! What it adds over a direct call is what one more process hop (a socket
//! and a pipe, each way) costs on this machine; the hub's row minus this
//! row is what the hub's own work costs. The bench runs it as a second
//! process (this same binary, re-executed with [`FLOOR_ENV`]) so that it
//! pays the same wake-ups as the hub.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::WsClient;

/// Set in the environment: this process is the floor relay, not the bench.
pub const FLOOR_ENV: &str = "TOOLHUB_BENCH_FLOOR";

/// The floor relay process, as the bench sees it.
pub struct Floor {
    child: Child,
    pub addr: String,
}

impl Floor {
    pub async fn start() -> Floor {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .env(FLOOR_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the floor relay");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the floor relay did not listen in time")
            .expect("read")
            .expect("the floor relay exited")
            .trim_start_matches("listening on ")
            .to_string();
        Floor { child, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("pid")
    }

    pub async fn connect(&self) -> WsClient {
        let (ws, _) =
            tokio_tungstenite::connect_async_with_config(format!("ws://{}", self.addr), None, true)
                .await
                .expect("connect to the floor relay");
        WsClient::new(ws)
    }
}

/// Run as the floor relay (never returns) when [`FLOOR_ENV`] is set;
/// otherwise return.
pub fn serve_if_asked() {
    if std::env::var_os(FLOOR_ENV).is_none() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(serve());
    std::process::exit(0);
}

async fn serve() {
    let mut child = super::direct::fast_echo();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "floor", "version": "0"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .expect("init");
    lines
        .next_line()
        .await
        .expect("read")
        .expect("initialize answer");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .expect("initialized");

    // One client at a time is all the bench needs; its frames go here.
    let client: Arc<Mutex<Option<mpsc::UnboundedSender<String>>>> = Arc::default();
    let to_client = client.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let frame = json!({"type": "tool_result", "replyTo": v["id"],
                               "success": true, "result": v["result"]});
            if let Some(tx) = to_client.lock().expect("client").as_ref() {
                let _ = tx.send(frame.to_string());
            }
        }
    });
    let (to_server, mut lines_out) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Some(line) = lines_out.recv().await {
            if stdin.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
    });

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    println!("listening on {}", listener.local_addr().expect("addr"));
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        let _ = sock.set_nodelay(true);
        let Ok(ws) = tokio_tungstenite::accept_async(sock).await else {
            continue;
        };
        let (mut sink, mut stream) = ws.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        *client.lock().expect("client") = Some(tx);
        // Writer: every frame ready now goes out in one flush.
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                if sink.feed(Message::Text(first.into())).await.is_err() {
                    return;
                }
                while let Ok(more) = rx.try_recv() {
                    if sink.feed(Message::Text(more.into())).await.is_err() {
                        return;
                    }
                }
                if sink.flush().await.is_err() {
                    return;
                }
            }
        });
        let to_server = to_server.clone();
        tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                let Message::Text(t) = m else { continue };
                let Ok(v) = serde_json::from_str::<Value>(t.as_str()) else {
                    continue;
                };
                let tool = v["tool"].as_str().unwrap_or("");
                let name = tool.split_once("__").map_or(tool, |(_, n)| n);
                let call = json!({"jsonrpc": "2.0", "id": v["id"], "method": "tools/call",
                                  "params": {"name": name, "arguments": v["params"]}});
                let _ = to_server.send(format!("{call}\n"));
            }
        });
    }
}
