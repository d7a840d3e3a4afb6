//! Supervised MCP servers: real npm servers and the fault-injecting test server.

use serde_json::{json, Value};

use crate::support::{npm_bin, testserver_entry, Client, TestHub};

pub async fn hub_with(servers: impl FnOnce(&std::path::Path) -> Value) -> TestHub {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    std::fs::create_dir_all(p.join("workspace")).expect("ws");
    TestHub::start_in(dir, json!({"mcpServers": servers(&p)})).await
}

/// Wait until `server` reports `running` (from hello or later events).
pub async fn wait_running(c: &mut Client, server: &str) {
    let h = c.request(json!({"type": "health_check"})).await;
    let up = h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| s["name"] == server && s["state"] == "running");
    if !up {
        let s = server.to_string();
        c.recv_where("server_status running", move |v| {
            v["type"] == "server_status" && v["name"] == s.as_str() && v["state"] == "running"
        })
        .await;
    }
}

#[tokio::test]
async fn server_everything_echo_and_value_rules() {
    let hub = hub_with(
        |_| json!({"everything": {"command": npm_bin("mcp-server-everything"), "args": ["stdio"]}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "everything").await;
    let r = c
        .call("everything__echo", json!({"message": "hello hub"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert!(
        r["result"].as_str().unwrap_or("").contains("hello hub"),
        "{r}"
    );
    assert!(
        r["raw"]["content"].is_array(),
        "full CallToolResult under raw: {r}"
    );
    assert_eq!(r["attempts"], 1);
    // Bare name resolves when unique.
    let r = c.call("echo", json!({"message": "bare"})).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["server"], "everything");
}

#[tokio::test]
async fn structured_content_wins_and_is_error_is_a_failure() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let r = c.call("t__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["result"], json!({"sum": 5}), "{r}");
    let r = c
        .call(
            "t__fail",
            json!({"message": "ENOENT: no such file or directory, open '/x'"}),
        )
        .await;
    assert_eq!(r["success"], false);
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");
    assert_eq!(r["error"]["server"], "t");
    assert!(!r["error"]["suggestion"].as_str().unwrap_or("").is_empty());
}

#[tokio::test]
async fn crash_mid_call_fails_fast_and_the_server_restarts() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__crash", "params": {}, "retry": false}))
        .await;
    assert_eq!(r["success"], false);
    assert_eq!(r["error"]["errorType"], "SERVER_UNAVAILABLE", "{r}");
    assert_eq!(r["error"]["recoverable"], true);
    c.recv_where("restart", |v| {
        v["type"] == "server_status" && v["name"] == "t" && v["state"] == "running"
    })
    .await;
    let r = c.call("t__echo", json!({"message": "back"})).await;
    assert_eq!(r["success"], true, "{r}");
    let h = c.request(json!({"type": "health_check"})).await;
    assert!(
        h["servers"][0]["restarts"].as_u64().unwrap_or(0) >= 1,
        "{h}"
    );
}

/// Rust debug output a person should never have to read.
fn debug_shaped(s: &str) -> bool {
    ["Ok(", "Err(", "Some(", "None", " { "]
        .iter()
        .any(|p| s.contains(p))
}

#[tokio::test]
async fn a_crashed_server_is_described_in_words() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__crash", "params": {}, "retry": false}))
        .await;
    let msg = r["error"]["message"].as_str().unwrap_or("").to_string();
    assert!(!msg.is_empty() && !debug_shaped(&msg), "{r}");
    let down = c
        .recv_where("t down with a last error", |v| {
            v["type"] == "server_status" && v["name"] == "t" && v["lastError"].is_string()
        })
        .await;
    let last = down["lastError"].as_str().unwrap_or("");
    assert!(!debug_shaped(last), "lastError: {last}");
    assert!(
        last.contains("exited") || last.contains("closed its connection"),
        "lastError: {last}"
    );
    let h = c.request(json!({"type": "health_check"})).await;
    for check in h["checks"].as_array().into_iter().flatten() {
        let m = check["message"].as_str().unwrap_or("");
        assert!(!debug_shaped(m), "health check message: {m}");
    }
}

/// Transient upstream failures recover without the client: a rate limit
/// (waiting what the server asked for) and an internal error (once).
#[tokio::test]
async fn rate_limits_and_internal_errors_recover_by_themselves() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let limited = "HTTP 429 Too Many Requests; retry-after: 1";
    let r = c
        .call(
            "t__flaky",
            json!({"key": "rl", "failures": 1, "errorText": limited}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["attempts"], 2, "{r}");
    assert_eq!(r["retries"][0]["errorType"], "RATE_LIMITED", "{r}");
    assert!(
        r["retries"][0]["delayMs"].as_u64().unwrap_or(0) >= 1000,
        "Retry-After obeyed: {r}"
    );
    let internal = "MCP error -32603: Internal error";
    let r = c
        .call(
            "t__flaky",
            json!({"key": "ie", "failures": 1, "errorText": internal}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["retries"][0]["errorType"], "UPSTREAM_ERROR", "{r}");
    // Retried once, not more: two internal errors in a row fail the call.
    let r = c
        .call(
            "t__flaky",
            json!({"key": "ie2", "failures": 2, "errorText": internal}),
        )
        .await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["attempts"], 2, "{r}");
    assert_eq!(r["error"]["errorType"], "UPSTREAM_ERROR", "{r}");
    assert_eq!(r["error"]["recoverable"], true, "{r}");
}

#[tokio::test]
async fn timeout_cancels_the_call_at_the_server() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__hang", "params": {}, "timeout": 300, "retry": false}))
        .await;
    assert_eq!(r["error"]["errorType"], "TIMEOUT", "{r}");
    // notifications/cancelled reached the server.
    hub.wait_log("testserver t cancelled hang").await;
    let r = c.call("t__echo", json!({"message": "still fine"})).await;
    assert_eq!(r["success"], true);
}

#[tokio::test]
async fn a_slow_call_never_delays_another() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    c.send(json!({"type": "tool_call", "id": "slow", "tool": "t__hang", "params": {}, "timeout": 60000})).await;
    c.send(
        json!({"type": "tool_call", "id": "fast", "tool": "t__echo", "params": {"message": "x"}}),
    )
    .await;
    let first = c
        .recv_where("a tool_result", |v| v["type"] == "tool_result")
        .await;
    assert_eq!(
        first["replyTo"], "fast",
        "the fast call must answer while the slow one is in flight"
    );
}

#[tokio::test]
async fn a_server_that_cannot_start_does_not_block_the_others() {
    let hub = hub_with(|d| {
        json!({
            "broken": {"command": "/nonexistent/server-binary"},
            "t": testserver_entry(d, "t", &[]),
        })
    })
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let h = c.request(json!({"type": "health_check"})).await;
    assert_eq!(h["status"], "degraded", "{h}");
    let broken = h["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .find(|s| s["name"] == "broken")
        .cloned();
    let broken = broken.expect("broken listed");
    assert_ne!(broken["state"], "running");
    assert!(
        broken["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("nonexistent"),
        "{broken}"
    );
    let check = h["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "server:broken")
        .cloned();
    assert!(check.expect("check for broken")["fix"].as_str().is_some());
}

#[tokio::test]
async fn stderr_tail_is_kept_for_health() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    hub.wait_log("testserver t started").await;
    let h = c.request(json!({"type": "health_check"})).await;
    let tail = h["servers"][0]["stderrTail"].to_string();
    assert!(tail.contains("testserver t started"), "{h}");
    assert!(h["servers"][0]["uptimeMs"].is_number());
}

#[tokio::test]
async fn filesystem_server_errors_are_classified() {
    let hub = hub_with(|d| {
        json!({"filesystem": {"command": npm_bin("mcp-server-filesystem"), "args": [d.join("workspace").display().to_string()]}})
    })
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "filesystem").await;
    let ws = hub.path().join("workspace");
    std::fs::write(ws.join("a.txt"), "alpha").expect("write");
    // The bare name is shared with the built-in: refused, naming both.
    let r = c
        .call(
            "read_file",
            json!({"path": ws.join("a.txt").display().to_string()}),
        )
        .await;
    assert_eq!(r["error"]["errorType"], "AMBIGUOUS_TOOL", "{r}");
    let r = c
        .call(
            "filesystem__read_file",
            json!({"path": ws.join("a.txt").display().to_string()}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["server"], "filesystem", "{r}");
    // The built-in stays reachable by its qualified name.
    let r = c.call("hub__read_file", json!({"path": "a.txt"})).await;
    assert_eq!(r["server"], "hub", "{r}");
    assert!(r["result"].to_string().contains("alpha"), "{r}");
    let r = c
        .call("filesystem__read_text_file", json!({"path": "/etc/passwd"}))
        .await;
    assert_eq!(r["success"], false);
    assert_eq!(r["error"]["errorType"], "PERMISSION", "{r}");
    let r = c
        .call(
            "filesystem__read_text_file",
            json!({"path": ws.join("missing.txt").display().to_string()}),
        )
        .await;
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");
}

#[tokio::test]
async fn a_wedged_server_is_found_by_the_health_probe_and_restarted() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])},
               "healthCheck": {"interval": 200, "autoFix": true}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    c.send(json!({"type": "tool_call", "id": "f", "tool": "t__freeze", "params": {}, "timeout": 60000, "retry": false}))
        .await;
    hub.wait_log("server stopped answering").await;
    // The frozen call fails at once when the wedged server is replaced.
    let r = c.recv_where("freeze result", |v| v["replyTo"] == "f").await;
    assert_eq!(r["error"]["errorType"], "SERVER_UNAVAILABLE", "{r}");
    c.recv_where("back up", |v| {
        v["type"] == "server_status"
            && v["name"] == "t"
            && v["state"] == "running"
            && v["restarts"].as_u64() >= Some(1)
    })
    .await;
    let r = c.call("t__echo", json!({"message": "alive"})).await;
    assert_eq!(r["success"], true, "{r}");
}

#[tokio::test]
async fn a_remote_streamable_http_server_is_served_like_a_child() {
    use tokio::io::AsyncBufReadExt;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let mut remote = tokio::process::Command::new(npm_bin("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start server-everything over HTTP");
    let mut lines = tokio::io::BufReader::new(remote.stderr.take().expect("stderr")).lines();
    tokio::time::timeout(crate::support::WAIT, async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("listening on port") {
                return;
            }
        }
        panic!("server-everything exited before listening");
    })
    .await
    .expect("server-everything did not start");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let hub = hub_with(|_| json!({"remote": {"url": url, "headers": {"X-Test": "1"}}})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "remote").await;
    let r = c
        .call("remote__echo", json!({"message": "over http"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert!(
        r["result"].as_str().unwrap_or("").contains("over http"),
        "{r}"
    );
    let h = c.request(json!({"type": "health_check"})).await;
    assert_eq!(h["servers"][0]["transport"], "http", "{h}");
}

/// The hub speaks TLS to a remote server with rustls's ring provider (no
/// aws-lc): against an HTTPS server whose certificate nobody signed (openssl
/// s_server with a self-signed certificate made here), the handshake runs
/// and the certificate is refused, and the server's status says so: no
/// panic for want of a crypto provider, no plain-text fallback.
#[tokio::test]
async fn an_https_remote_with_an_unknown_certificate_is_refused_by_tls() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().expect("dir");
    let (key, crt) = (dir.path().join("key.pem"), dir.path().join("crt.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{made:?}");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    // Its handshake errors go to stderr: both streams are read as one.
    let mut tls = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec openssl s_server -www -accept {port} -key '{}' -cert '{}' 2>&1",
            key.display(),
            crt.display()
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("openssl s_server");
    let mut lines = tokio::io::BufReader::new(tls.stdout.take().expect("stdout")).lines();
    tokio::time::timeout(crate::support::WAIT, async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("ACCEPT") {
                return;
            }
        }
        panic!("openssl s_server exited before accepting");
    })
    .await
    .expect("openssl s_server did not start");
    let url = format!("https://127.0.0.1:{port}/mcp");
    let hub = hub_with(|_| json!({"remote": {"url": url}})).await;
    let mut c = hub.connect().await;
    let failed = c
        .recv_where("the remote's failure", |v| {
            v["type"] == "server_status"
                && v["name"] == "remote"
                && v["lastError"].as_str().is_some_and(|e| !e.is_empty())
        })
        .await;
    assert!(
        failed["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("MCP handshake with https://"),
        "{failed}"
    );
    // The TLS server saw the hub's handshake end with the hub's alert that
    // it does not know who signed the certificate.
    let alert = tokio::time::timeout(crate::support::WAIT, async {
        while let Ok(Some(l)) = lines.next_line().await {
            let l = l.to_lowercase();
            if l.contains("alert") || l.contains("unknown ca") || l.contains("certificate") {
                return l;
            }
        }
        String::new()
    })
    .await
    .unwrap_or_default();
    assert!(!alert.is_empty(), "no TLS alert seen by the server");
    assert!(!hub.logs().contains("CryptoProvider"), "{}", hub.logs());
}

#[tokio::test]
async fn a_server_that_keeps_failing_is_parked_in_crash_loop_until_reload_tools() {
    // `false` exits at once: the MCP handshake fails on every start.
    let hub = hub_with(|_| json!({"bad": {"command": "false"}})).await;
    let mut c = hub.connect().await;
    let parked = c
        .recv_where("crash_loop", |v| {
            v["type"] == "server_status" && v["name"] == "bad" && v["state"] == "crash_loop"
        })
        .await;
    assert!(parked["restarts"].as_u64() >= Some(5), "{parked}");
    assert!(
        parked["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("failures in a row"),
        "{parked}"
    );
    let h = c.request(json!({"type": "health_check"})).await;
    let check = h["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "server:bad")
        .cloned();
    assert!(
        check.expect("check")["fix"]
            .as_str()
            .unwrap_or("")
            .contains("paused"),
        "{h}"
    );
    // reload_tools gives it another chance: it is started (and fails) again.
    let before = parked["restarts"].as_u64().unwrap_or(0);
    c.send(json!({"type": "reload_tools", "id": "again"})).await;
    c.recv_where("another attempt", move |v| {
        v["type"] == "server_status" && v["name"] == "bad" && v["restarts"].as_u64() > Some(before)
    })
    .await;
}

/// Issue 16.9: enabling the shipped `filesystem` server must not move bare
/// `read_file` from the built-in tool to it without a word.
#[tokio::test]
async fn a_server_arriving_with_a_builtin_name_makes_the_bare_name_ambiguous_not_rerouted() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    std::fs::create_dir_all(p.join("workspace")).expect("ws");
    std::fs::write(p.join("workspace/a.txt"), "alpha").expect("write");
    let fs_entry = |disabled: bool| {
        json!({"command": npm_bin("mcp-server-filesystem"),
               "args": [p.join("workspace").display().to_string()],
               "disabled": disabled})
    };
    let mut cfg =
        crate::support::with_test_defaults(json!({"mcpServers": {"filesystem": fs_entry(true)}}));
    let hub = TestHub::start_in(dir, cfg.clone()).await;
    let mut c = hub.connect().await;
    let r = c.call("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(r["server"], "hub", "{r}");
    assert_eq!(r["success"], true, "{r}");

    cfg["mcpServers"]["filesystem"] = fs_entry(false);
    crate::support::write_config(&p.join("config.json"), &cfg);
    let update = c
        .recv_where("tools_updated naming read_file ambiguous", |v| {
            v["type"] == "tools_updated"
                && v["ambiguous"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x["name"] == "read_file"))
        })
        .await;
    let entry = update["ambiguous"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["name"] == "read_file")
        .cloned()
        .expect("entry");
    assert_eq!(
        entry["tools"],
        json!(["filesystem__read_file", "hub__read_file"]),
        "{update}"
    );
    hub.wait_log("bare tool name is now offered by several servers")
        .await;

    let r = c.call("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"]["errorType"], "AMBIGUOUS_TOOL", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("filesystem__read_file") && msg.contains("hub__read_file"),
        "{r}"
    );

    let h = c.request(json!({"type": "health_check"})).await;
    assert!(
        h["ambiguousTools"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["name"] == "read_file")),
        "{h}"
    );
    let check = h["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "ambiguousTools")
        .cloned()
        .expect("ambiguousTools check");
    assert!(
        check["message"]
            .as_str()
            .is_some_and(|m| m.contains("filesystem__read_file")),
        "{check}"
    );
}

/// The `t` entry of a `health_status`.
fn server_of(h: &Value, name: &str) -> Value {
    h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Wait until `server` is running under a pid other than `old`, giving a
/// crash-looped server another chance; returns its pid. Event-driven: a
/// health check after each `server_status` of the server.
async fn running_again(c: &mut Client, server: &str, old: Option<i64>) -> i64 {
    loop {
        let h = c.request(json!({"type": "health_check"})).await;
        let s = server_of(&h, server);
        match (s["state"].as_str(), s["pid"].as_i64()) {
            (Some("running"), Some(pid)) if Some(pid) != old => return pid,
            (Some("crash_loop"), _) => {
                c.send(json!({"type": "reload_tools", "id": "again"})).await;
            }
            _ => {}
        }
        let name = server.to_string();
        c.recv_where("a status change", move |v| {
            v["type"] == "server_status" && v["name"] == name.as_str()
        })
        .await;
    }
}

/// Issue 33.4: after a server's process dies, health said `running` with
/// the dead pid until the supervisor got round to it. Whoever sees the
/// exit first moves the state; here health itself, asked right after the
/// kill (and after the process is known dead), 20 times over.
#[tokio::test]
async fn health_never_reports_a_dead_pid_as_running() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut c = hub.connect().await;
    let mut pid = running_again(&mut c, "t", None).await;
    for round in 0..20 {
        let raw = i32::try_from(pid).expect("a pid");
        let watch = toolhub::process::ExitWatch::open(raw).expect("pidfd of the server");
        // SAFETY: a plain signal to the test server's process.
        assert_eq!(unsafe { libc::kill(raw, libc::SIGKILL) }, 0);
        tokio::time::timeout(crate::support::WAIT, watch.exited())
            .await
            .expect("the server's process exits");
        let h = c.request(json!({"type": "health_check"})).await;
        let s = server_of(&h, "t");
        let running = s["state"] == "running";
        assert!(
            s["pid"].as_i64() != Some(pid) && (!running || s["pid"].is_i64()),
            "round {round}: the dead pid {pid} reported, or running without a pid: {s}"
        );
        pid = running_again(&mut c, "t", Some(pid)).await;
    }
}
