//! The real hub binary as the benchmarks drive it: a process on a folder
//! with its log kept for waiting on lines, and a sequential WebSocket
//! client (shared by `stores` and `soak`).

// Each benchmark uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The number after `name` on the command line (`--secs 300`), if any.
pub fn flag(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

/// A hub process on a folder, with its log kept for waiting on lines.
pub struct Running {
    child: Child,
    addr: String,
    token: String,
    log: Arc<Mutex<Vec<String>>>,
    /// Bumped on every log line, so a waiter wakes on new lines.
    lines: tokio::sync::watch::Receiver<usize>,
}

impl Running {
    /// Start the hub (`TOOLHUB_BIN`, or this build's) on `dir` with the
    /// config at `path`, and wait until it listens.
    pub async fn spawn(dir: &Path, path: &Path) -> Running {
        // TOOLHUB_BIN: another build of the hub to measure (e.g. a baseline).
        let bin =
            std::env::var("TOOLHUB_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolhub").into());
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(path)
            .env("RUST_LOG", "warn,toolhub=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start toolhub");
        let stderr = child.stderr.take().expect("stderr");
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
        let lines_log = log.clone();
        let (seen_tx, lines) = tokio::sync::watch::channel(0usize);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut addr_tx = Some(addr_tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.split("listening on ws://").nth(1) {
                    if let Some(tx) = addr_tx.take() {
                        let _ = tx.send(rest.trim_end_matches("/ws").to_string());
                    }
                }
                lines_log.lock().expect("log").push(line);
                seen_tx.send_modify(|n| *n += 1);
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(120), addr_rx)
            .await
            .expect("hub did not listen in time")
            .expect("hub exited");
        let token = std::fs::read_to_string(dir.join("state/token"))
            .expect("token")
            .trim()
            .to_string();
        Running {
            child,
            addr,
            token,
            log,
            lines,
        }
    }

    pub async fn connect(&self) -> Client {
        let mut req = format!("ws://{}/ws", self.addr)
            .into_client_request()
            .expect("request");
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {}", self.token).parse().expect("header"),
        );
        let (ws, _) = tokio_tungstenite::connect_async_with_config(req, None, true)
            .await
            .expect("connect");
        Client { ws, next: 0 }
    }

    /// Wait (bounded) for a log line containing `needle`.
    pub async fn wait_log(&self, needle: &str) -> String {
        let mut lines = self.lines.clone();
        let found = tokio::time::timeout(Duration::from_secs(300), async {
            loop {
                let hit = self
                    .log
                    .lock()
                    .expect("log")
                    .iter()
                    .find(|l| l.contains(needle))
                    .cloned();
                if let Some(l) = hit {
                    return l;
                }
                lines.changed().await.expect("hub log ended");
            }
        });
        found
            .await
            .unwrap_or_else(|_| panic!("no log line {needle:?}"))
    }

    /// How many log lines so far contain `needle`.
    pub fn count_log(&self, needle: &str) -> usize {
        let log = self.log.lock().expect("log");
        log.iter().filter(|l| l.contains(needle)).count()
    }

    /// The hub's pid.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("pid")
    }

    pub fn rss_kib(&self) -> u64 {
        let pid = self.child.id().expect("pid");
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    }

    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A sequential client: one request, then its reply.
pub struct Client {
    ws: Ws,
    next: u64,
}

impl Client {
    pub async fn request(&mut self, mut msg: Value) -> Value {
        self.next += 1;
        let id = self.next;
        msg["id"] = json!(id);
        self.ws
            .send(Message::Text(msg.to_string().into()))
            .await
            .expect("send");
        let wait_batch = msg["type"] == "tool_batch";
        loop {
            let m = tokio::time::timeout(Duration::from_secs(120), self.ws.next())
                .await
                .expect("no reply in 120 s")
                .expect("socket closed")
                .expect("socket error");
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(t.as_str()).expect("json");
            let done = if wait_batch {
                v["type"] == "batch_complete"
            } else {
                v["replyTo"] == json!(id)
            };
            if done {
                return v;
            }
        }
    }

    /// Median milliseconds of `reps` runs of `msg`, and the last reply.
    pub async fn time(&mut self, msg: &Value, reps: usize) -> (f64, Value) {
        let mut ms = Vec::with_capacity(reps);
        let mut last = Value::Null;
        for _ in 0..reps {
            let t = Instant::now();
            last = self.request(msg.clone()).await;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        ms.sort_by(f64::total_cmp);
        (ms[ms.len() / 2], last)
    }
}
