//! `toolhub stdio`: MCP over stdin/stdout relayed to a running hub's /mcp.

use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::{bin, TestHub, WAIT};

#[tokio::test]
async fn stdio_relays_to_the_running_hub_with_its_token() {
    let hub = TestHub::start(json!({})).await;
    assert!(hub.token.is_some(), "the hub requires its generated token");
    let mut child = tokio::process::Command::new(bin())
        .arg("stdio")
        .arg("--config")
        .arg(hub.path().join("config.json"))
        .arg("--url")
        .arg(format!("http://{}/mcp", hub.addr))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn toolhub stdio");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let send = |v: Value| {
        let mut line = v.to_string();
        line.push('\n');
        line
    };
    let init = send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "stdio-test", "version": "0"}}}),
    );
    stdin.write_all(init.as_bytes()).await.expect("write");
    let r = next(&mut out).await;
    assert_eq!(r["result"]["serverInfo"]["name"], "toolhub", "{r}");
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18", "{r}");
    let initialized = send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    stdin
        .write_all(initialized.as_bytes())
        .await
        .expect("write");
    stdin.write_all(list.as_bytes()).await.expect("write");
    let r = next(&mut out).await;
    assert_eq!(r["id"], 2, "{r}");
    assert!(r["result"].to_string().contains("hub__health_check"), "{r}");
    // EOF on stdin ends the bridge.
    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("toolhub stdio exits on EOF")
        .expect("wait");
    assert!(status.success(), "{status:?}");
}

async fn next(out: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> Value {
    let line = tokio::time::timeout(WAIT, out.next_line())
        .await
        .expect("an answer in time")
        .expect("read")
        .expect("a line");
    serde_json::from_str::<Value>(&line).expect("JSON-RPC on stdout")
}

#[tokio::test]
async fn stdio_without_a_hub_says_how_to_start_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let cfg = dir.path().join("config.json");
    std::fs::write(
        &cfg,
        json!({"server": {"listen": format!("127.0.0.1:{port}"), "token": false}}).to_string(),
    )
    .expect("write");
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(bin())
            .arg("stdio")
            .arg("--config")
            .arg(&cfg)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("exits in time")
    .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("no hub is listening"), "{err}");
    assert!(lines[0].contains("toolhub --config"), "{err}");
}
