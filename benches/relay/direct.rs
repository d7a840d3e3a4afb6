//! The direct paths the relay is measured against: raw JSON-RPC lines over
//! `toolhub-testserver --fast-echo`'s stdio, and rmcp's own client to the
//! same server (what the hub's upstream side costs before the hub adds
//! anything).

use std::process::Stdio;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use super::{Caller, Pending};

/// `toolhub-testserver --fast-echo` with piped stdin and stdout.
pub fn fast_echo() -> Child {
    Command::new(crate::testserver_bin::path())
        .arg("--fast-echo")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the test server")
}

/// Raw JSON-RPC over the test server's stdio.
pub struct Direct {
    _child: Child,
    tx: mpsc::UnboundedSender<String>,
    pending: Pending,
    next: std::sync::atomic::AtomicU64,
}

impl Direct {
    pub async fn start() -> Direct {
        let mut child = fast_echo();
        let mut stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Arc::default();
        let p = pending.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(id) = v.get("id").and_then(Value::as_u64) {
                    if let Some(tx) = p.lock().expect("pending").remove(&id) {
                        let _ = tx.send(v);
                    }
                }
            }
        });
        let d = Direct {
            _child: child,
            tx,
            pending,
            next: std::sync::atomic::AtomicU64::new(1),
        };
        let init = d
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "relay-bench", "version": "0"}}),
            )
            .await;
        assert!(init.get("result").is_some(), "initialize: {init}");
        let _ = d.tx.send(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string() + "\n",
        );
        d
    }

    async fn request(&self, method: &str, params: Value) -> Value {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending").insert(id, tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.tx.send(msg.to_string() + "\n").expect("send");
        rx.await.expect("direct reply")
    }
}

impl Caller for Direct {
    async fn echo(&self, n: u64) -> Value {
        self.request(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": format!("hello {n}")}}),
        )
        .await
    }
}

/// rmcp's own client over the same server's stdio: what the hub's upstream
/// side costs before the hub adds anything (the hub talks to its servers
/// through rmcp).
pub struct RmcpDirect(rmcp::service::RunningService<rmcp::RoleClient, ()>);

impl RmcpDirect {
    pub async fn start() -> RmcpDirect {
        use rmcp::ServiceExt;
        let mut cmd = tokio::process::Command::new(crate::testserver_bin::path());
        cmd.arg("--fast-echo");
        let (proc, _) = rmcp::transport::TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("start the test server");
        RmcpDirect(().serve(proc).await.expect("rmcp initialize"))
    }
}

impl Caller for RmcpDirect {
    async fn echo(&self, n: u64) -> Value {
        let mut args = serde_json::Map::new();
        args.insert("message".into(), Value::String(format!("hello {n}")));
        let r = self
            .0
            .call_tool(rmcp::model::CallToolRequestParams::new("echo").with_arguments(args))
            .await
            .expect("rmcp echo");
        serde_json::to_value(r).unwrap_or(Value::Null)
    }
}
