//! Drives `tests/mcp/driver.mjs`: an MCP client on the official TypeScript
//! SDK, one JSON command per line in, one JSON answer or event per line out.

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::support::{TestHub, WAIT};

pub struct Driver {
    _child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<Value>,
    backlog: Vec<Value>,
    next: u64,
}

impl Driver {
    pub async fn start() -> Driver {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/driver.mjs");
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/node_modules/@modelcontextprotocol/sdk")
                .exists(),
            "@modelcontextprotocol/sdk is missing: run `npm ci --prefix tests`"
        );
        let mut child = Command::new("node")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn node tests/mcp/driver.mjs");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut r = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = r.next_line().await {
                if std::env::var_os("TOOLHUB_TEST_LOG").is_some() {
                    eprintln!("[driver] {l}");
                }
                match serde_json::from_str::<Value>(&l) {
                    Ok(v) => {
                        let _ = tx.send(v);
                    }
                    Err(_) => eprintln!("[driver] not JSON: {l}"),
                }
            }
        });
        Driver {
            _child: child,
            stdin,
            lines,
            backlog: Vec::new(),
            next: 0,
        }
    }

    /// Start a driver and connect it to `hub`'s `/mcp` with its token;
    /// `extra` adds to the connect command (sampling/elicitation answers).
    pub async fn connect(hub: &TestHub, extra: Value) -> (Driver, Value) {
        let mut d = Driver::start().await;
        let mut cmd = json!({"op": "connect", "url": mcp_url(hub)});
        if let Some(t) = &hub.token {
            cmd["token"] = json!(t);
        }
        for (k, v) in extra.as_object().into_iter().flatten() {
            cmd[k] = v.clone();
        }
        let info = d.ok(cmd).await;
        (d, info)
    }

    /// Send a command without waiting; returns its id.
    pub async fn send(&mut self, mut cmd: Value) -> u64 {
        self.next += 1;
        cmd["id"] = json!(self.next);
        let mut line = cmd.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to driver");
        self.next
    }

    /// The first line (backlog first) matching `pred`, within `WAIT`.
    pub async fn recv_where(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i);
        }
        let r = tokio::time::timeout(WAIT, async {
            loop {
                let v = self.lines.recv().await.expect("driver exited");
                if pred(&v) {
                    return v;
                }
                self.backlog.push(v);
            }
        })
        .await;
        r.unwrap_or_else(|_| panic!("timed out waiting for {what}; got: {:#?}", self.backlog))
    }

    /// The answer to command `id`: `{"ok", "result"|"error"}`.
    pub async fn answer(&mut self, id: u64) -> Value {
        self.recv_where(&format!("answer {id}"), |v| v["id"] == json!(id))
            .await
    }

    pub async fn request(&mut self, cmd: Value) -> Value {
        let id = self.send(cmd).await;
        self.answer(id).await
    }

    /// Send and return the result, failing the test on an error answer.
    pub async fn ok(&mut self, cmd: Value) -> Value {
        let what = cmd.to_string();
        let a = self.request(cmd).await;
        assert_eq!(a["ok"], true, "{what} failed: {a}");
        a["result"].clone()
    }

    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.ok(json!({"op": "callTool", "name": name, "arguments": arguments}))
            .await
    }

    /// Wait for a notification with this method.
    pub async fn notification(&mut self, method: &str) -> Value {
        self.recv_where(method, |v| {
            v["event"] == "notification" && v["method"] == method
        })
        .await
    }
}

pub fn mcp_url(hub: &TestHub) -> String {
    format!("http://{}/mcp", hub.addr)
}

/// The text of a CallToolResult's text items, joined.
pub fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
