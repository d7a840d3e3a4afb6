//! The test harness: a real `toolhub` process on 127.0.0.1:0 with its own
//! temp folder, and a real WebSocket client. Tests wait on the messages and
//! log lines they expect, each with a bounded timeout; nothing sleeps.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

pub const WAIT: Duration = Duration::from_secs(30);

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_toolhub")
}

/// The fault-injecting test server (testserver/, built on first use).
pub fn testserver() -> &'static str {
    crate::testserver_bin::path()
}

/// A node MCP server installed by `npm ci --prefix tests`.
pub fn npm_bin(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/node_modules/.bin")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run `npm ci --prefix tests` (the README's test command does)",
        p.display()
    );
    p.display().to_string()
}

/// A config entry for the fault-injecting test server.
pub fn testserver_entry(dir: &Path, name: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "--name".to_string(),
        name.to_string(),
        "--log".to_string(),
        dir.join(format!("{name}.calls.jsonl"))
            .display()
            .to_string(),
        "--state-dir".to_string(),
        dir.join(format!("{name}.state")).display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    json!({"command": testserver(), "args": args})
}

pub struct TestHub {
    pub dir: tempfile::TempDir,
    pub child: Child,
    pub addr: String,
    pub token: Option<String>,
    logs: broadcast::Sender<String>,
    pub log_lines: Arc<Mutex<Vec<String>>>,
}

impl TestHub {
    /// Start a hub with `config` (merged over test defaults) in a fresh dir.
    pub async fn start(config: Value) -> TestHub {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, config).await
    }

    pub async fn start_in(dir: tempfile::TempDir, config: Value) -> TestHub {
        Self::start_in_with(dir, config, |_| {}).await
    }

    /// `start_in`, with `customise` applied to the hub's `Command` (rlimits,
    /// signal dispositions) before it is spawned.
    pub async fn start_in_with(
        dir: tempfile::TempDir,
        config: Value,
        customise: impl FnOnce(&mut Command),
    ) -> TestHub {
        let mut config = config;
        config = with_test_defaults(config);
        let path = dir.path().join("config.json");
        std::fs::write(&path, serde_json::to_string_pretty(&config).expect("json"))
            .expect("write config");
        Self::spawn_with(dir, &path, customise).await
    }

    /// Start the binary on an existing config file.
    pub async fn spawn(dir: tempfile::TempDir, config_path: &Path) -> TestHub {
        Self::spawn_with(dir, config_path, |_| {}).await
    }

    pub async fn spawn_with(
        dir: tempfile::TempDir,
        config_path: &Path,
        customise: impl FnOnce(&mut Command),
    ) -> TestHub {
        let mut cmd = Command::new(bin());
        cmd.arg("--config")
            .arg(config_path)
            .env("RUST_LOG", "info,toolhub=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        customise(&mut cmd);
        let mut child = cmd.spawn().expect("spawn toolhub");
        let (logs, mut rx) = broadcast::channel(10_000);
        let log_lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        {
            let logs = logs.clone();
            let store = log_lines.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if std::env::var_os("TOOLHUB_TEST_LOG").is_some() {
                        eprintln!("[hub] {line}");
                    }
                    store.lock().expect("log lock").push(line.clone());
                    let _ = logs.send(line);
                }
            });
        }
        let addr = tokio::time::timeout(WAIT, async {
            loop {
                let line = rx.recv().await.expect("hub exited before listening");
                if let Some(rest) = line.split("listening on ws://").nth(1) {
                    return rest
                        .trim_end_matches("/ws")
                        .split("/ws")
                        .next()
                        .expect("addr")
                        .to_string();
                }
            }
        })
        .await
        .expect("hub did not log `listening on` in time");
        let token = std::fs::read_to_string(dir.path().join("state/token"))
            .ok()
            .map(|t| t.trim().to_string());
        TestHub {
            dir,
            child,
            addr,
            token,
            logs,
            log_lines,
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub fn url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// A socket with the token as a Bearer header, nothing read yet.
    pub async fn connect_raw(&self) -> Ws {
        let mut req = self.url().into_client_request().expect("request");
        if let Some(t) = &self.token {
            req.headers_mut().insert(
                "Authorization",
                format!("Bearer {t}").parse().expect("header"),
            );
        }
        let (ws, _) = tokio_tungstenite::connect_async(req)
            .await
            .expect("connect");
        ws
    }

    /// Connect with the token as a Bearer header.
    pub async fn connect(&self) -> Client {
        let ws = self.connect_raw().await;
        let mut c = Client {
            ws,
            next_id: 0,
            backlog: Vec::new(),
            seen: Vec::new(),
        };
        let hello = c.recv_type("hello").await;
        assert_eq!(hello["protocol"], 1);
        c
    }

    /// Connect to `path` (`/ws`, `/ws/<view>`) with `token`; the HTTP
    /// status when the gate refuses.
    pub async fn connect_at(&self, path: &str, token: &str) -> Result<Client, u16> {
        let url = format!("ws://{}{path}", self.addr);
        let mut req = url.into_client_request().expect("request");
        let bearer = format!("Bearer {token}").parse().expect("header");
        req.headers_mut().insert("Authorization", bearer);
        match tokio_tungstenite::connect_async(req).await {
            Ok((ws, _)) => {
                let mut c = Client {
                    ws,
                    next_id: 0,
                    backlog: Vec::new(),
                    seen: Vec::new(),
                };
                c.recv_type("hello").await;
                Ok(c)
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err(r.status().as_u16()),
            Err(e) => panic!("connect to {path}: {e}"),
        }
    }

    /// Wait until a log line containing `needle` appears (past or future).
    pub async fn wait_log(&self, needle: &str) -> String {
        let mut rx = self.logs.subscribe();
        if let Some(l) = self
            .log_lines
            .lock()
            .expect("lock")
            .iter()
            .find(|l| l.contains(needle))
        {
            return l.clone();
        }
        tokio::time::timeout(WAIT, async {
            loop {
                match rx.recv().await {
                    Ok(l) if l.contains(needle) => return l,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => panic!("hub log ended before {needle:?}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("log line {needle:?} did not appear"))
    }

    /// How many log lines so far contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        self.log_lines
            .lock()
            .expect("lock")
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Wait until at least `n` log lines contain `needle`.
    /// Whether `needle` reaches `n` log lines within `limit` (false when it
    /// does not: for events that must not happen).
    pub async fn log_count_reaches(&self, needle: &str, n: usize, limit: Duration) -> bool {
        let mut rx = self.logs.subscribe();
        let reached = async {
            loop {
                if self.log_count(needle) >= n {
                    return true;
                }
                if let Err(broadcast::error::RecvError::Closed) = rx.recv().await {
                    return self.log_count(needle) >= n;
                }
            }
        };
        tokio::time::timeout(limit, reached).await.unwrap_or(false)
    }

    pub async fn wait_log_count(&self, needle: &str, n: usize) {
        let mut rx = self.logs.subscribe();
        if self.log_count(needle) >= n {
            return;
        }
        tokio::time::timeout(WAIT, async {
            loop {
                match rx.recv().await {
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if self.log_count(needle) >= n {
                            return;
                        }
                    }
                    Err(_) => panic!("hub log ended before {n}× {needle:?}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{n}× {needle:?} did not appear (have {})",
                self.log_count(needle)
            )
        })
    }

    pub fn logs(&self) -> String {
        self.log_lines.lock().expect("lock").join("\n")
    }

    pub fn pid(&self) -> i32 {
        self.child.id().expect("pid") as i32
    }

    /// SIGKILL the hub (no chance to clean up), then start it again on the
    /// same folder and config, as after a crash.
    pub async fn crash_and_restart(self) -> TestHub {
        self.crash_and_restart_with(|_| {}).await
    }

    /// [`TestHub::crash_and_restart`], running `between` on the hub's
    /// folder while no hub is running (to damage or edit its files).
    pub async fn crash_and_restart_with(mut self, between: impl FnOnce(&Path)) -> TestHub {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
        between(self.dir.path());
        let path = self.dir.path().join("config.json");
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("dir"));
        TestHub::spawn(dir, &path).await
    }

    /// SIGTERM and wait for the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        unsafe {
            libc::kill(self.pid(), libc::SIGTERM);
        }
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("hub did not exit")
            .expect("wait")
    }
}

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct Client {
    pub ws: Ws,
    next_id: u64,
    /// Messages read while waiting for something else.
    backlog: Vec<Value>,
    /// Every message received, in order (for checks over all of them).
    pub seen: Vec<Value>,
}

impl Client {
    pub async fn send(&mut self, v: Value) {
        self.ws
            .send(Message::Text(v.to_string().into()))
            .await
            .expect("send");
    }

    pub async fn send_text(&mut self, s: &str) {
        self.ws
            .send(Message::Text(s.to_string().into()))
            .await
            .expect("send");
    }

    async fn next_json(&mut self) -> Value {
        loop {
            let m = self
                .ws
                .next()
                .await
                .expect("socket closed")
                .expect("socket error");
            match m {
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(t.as_str()).expect("hub sent invalid JSON");
                    self.seen.push(v.clone());
                    return v;
                }
                Message::Close(f) => panic!("socket closed by hub: {f:?}"),
                _ => {}
            }
        }
    }

    /// The first message (backlog first) matching `pred`, within `WAIT`.
    pub async fn recv_where(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i);
        }
        let r = tokio::time::timeout(WAIT, async {
            loop {
                let v = self.next_json().await;
                if pred(&v) {
                    return v;
                }
                self.backlog.push(v);
            }
        })
        .await;
        match r {
            Ok(v) => v,
            Err(_) => panic!(
                "timed out waiting for {what}; got meanwhile: {:#?}",
                self.backlog
            ),
        }
    }

    pub async fn recv_type(&mut self, ty: &str) -> Value {
        self.recv_where(ty, |v| v["type"] == ty).await
    }

    /// Send `msg` with a fresh id and return the reply carrying it.
    pub async fn request(&mut self, mut msg: Value) -> Value {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        msg["id"] = json!(id);
        self.send(msg).await;
        self.recv_where(&format!("reply to {id}"), |v| v["replyTo"] == json!(id))
            .await
    }

    pub async fn call(&mut self, tool: &str, params: Value) -> Value {
        self.request(json!({"type": "tool_call", "tool": tool, "params": params}))
            .await
    }
}

/// Read the test server's call log (one JSON object per call).
pub fn call_log(dir: &Path, server: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("{server}.calls.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Wait (at most `limit`) until `ready()` holds, checking it again at
/// each change in the folder `dir` (a file watcher, no polling); whether
/// it held.
pub async fn until_changed(dir: &Path, limit: Duration, ready: impl Fn() -> bool) -> bool {
    use notify::Watcher;
    let (tx, mut changed) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |_| {
        let _ = tx.send(());
    })
    .expect("watcher");
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .expect("watch the folder");
    let _ = tokio::time::timeout(limit, async {
        while !ready() {
            if changed.recv().await.is_none() {
                return;
            }
        }
    })
    .await;
    ready()
}

/// Is a process alive? `kill(pid, 0)`, counting a zombie as dead: in some
/// sandboxes PID 1 never reaps orphans, so a killed grandchild stays `Z`.
pub fn alive(pid: i32) -> bool {
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            state != Some("Z")
        }
        Err(_) => false,
    }
}

pub fn write_config(path: &std::path::Path, v: &Value) {
    // Save the way editors do: write a temp file, then rename over.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(v).expect("json")).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// `config` with the test defaults (ephemeral port, folders beside the
/// config, no periodic health probe) filled in where it says nothing. Tests
/// that rewrite config.json start from this so a rewrite keeps them.
pub fn with_test_defaults(mut config: Value) -> Value {
    let base = json!({
        "server": {"listen": "127.0.0.1:0"},
        "taskEngine": {"stateDir": "./state"},
        "builtin": {"workspace": "./workspace"},
        "recording": {"storagePath": "./recordings"},
        "healthCheck": {"interval": 3600000},
    });
    let Some(obj) = config.as_object_mut() else {
        panic!("config must be a JSON object");
    };
    for (k, v) in base.as_object().into_iter().flatten() {
        match obj.get_mut(k) {
            Some(Value::Object(existing)) => {
                for (k2, v2) in v.as_object().into_iter().flatten() {
                    existing.entry(k2.clone()).or_insert(v2.clone());
                }
            }
            Some(_) => {}
            None => {
                obj.insert(k.clone(), v.clone());
            }
        }
    }
    config
}

/// The `key` of every object in `l[array]`, sorted (a listing's ids).
pub fn sorted_ids(l: &Value, array: &str, key: &str) -> Vec<String> {
    let mut v: Vec<String> = l[array]
        .as_array()
        .unwrap_or_else(|| panic!("no {array} in {l}"))
        .iter()
        .map(|x| {
            x[key]
                .as_str()
                .unwrap_or_else(|| panic!("no {key} in {x}"))
                .to_string()
        })
        .collect();
    v.sort();
    v
}

/// A batch's messages in `seen`, in order, as short labels
/// (`state:running`, `step:0`, `need_user`, `batch_complete`, …).
pub fn batch_events(seen: &[Value], batch_id: &str) -> Vec<String> {
    seen.iter()
        .filter(|m| m["batchId"] == batch_id)
        .map(|m| match m["type"].as_str() {
            Some("task_state") => format!("state:{}", m["state"].as_str().unwrap_or("?")),
            Some("batch_step_result") => format!("step:{}", m["stepIndex"]),
            other => other.unwrap_or("?").to_string(),
        })
        .collect()
}
