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

/// `toolhub stdio --view chat --token-file F`: a client with its own token
/// (which opens only the view "chat") gets the view's tools over stdin and
/// stdout, and a tool outside the view is unknown there (issue 40: no path
/// steps around a view). A bad view name is refused before anything starts.
#[tokio::test]
async fn stdio_with_a_view_relays_only_the_view_s_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("chat.token");
    std::fs::write(&token, "chat-client-token-0123456789\n").expect("token");
    let cfg = json!({
        "mcpServers": {"t": crate::support::testserver_entry(dir.path(), "t", &[])},
        "views": {"chat": {"tools": ["t__echo"]}},
        "clients": {"chat": {"token": "chat-client-token-0123456789", "views": ["chat"]}}
    });
    let hub = TestHub::start_in(dir, cfg).await;
    let mut child = tokio::process::Command::new(bin())
        .arg("stdio")
        .arg("--config")
        .arg(hub.path().join("config.json"))
        .arg("--url")
        .arg(format!("http://{}/mcp", hub.addr))
        .arg("--view")
        .arg("chat")
        .arg("--token-file")
        .arg(&token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn toolhub stdio");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for m in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "stdio-view-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "t__slow", "arguments": {"ms": 1}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "t__echo", "arguments": {"message": "in the view"}}}),
    ] {
        let mut line = m.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.expect("write");
    }
    let mut got = std::collections::HashMap::new();
    while got.len() < 4 {
        let r = next(&mut out).await;
        if let Some(id) = r["id"].as_i64() {
            got.insert(id, r);
        }
    }
    let list: Vec<String> = got[&2]["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    assert_eq!(list, ["t__echo"], "{}", got[&2]);
    let hidden = got[&3].to_string();
    assert!(
        hidden.contains("TOOL_NOT_FOUND") || got[&3]["error"].is_object(),
        "{hidden}"
    );
    assert!(got[&4].to_string().contains("in the view"), "{}", got[&4]);
    assert!(
        !crate::support::call_log(&hub.path(), "t")
            .iter()
            .any(|c| c["tool"] == "slow"),
        "the hidden tool never ran"
    );
    drop(stdin);
    let _ = tokio::time::timeout(WAIT, child.wait()).await;
    let bad = tokio::process::Command::new(bin())
        .args(["stdio", "--view", "no/such"])
        .arg("--config")
        .arg(hub.path().join("config.json"))
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run");
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("a view's name is"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
