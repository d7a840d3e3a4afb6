//! Tool views (issue 40): a view's session lists its tools under its
//! names, and a tool outside it is TOOL_NOT_FOUND on every path (single
//! call, batch step, hub__tool_batch, replay, /mcp, the discovery
//! meta-tools); client tokens open only their views; a reload that takes a
//! tool out tells the view; a discovery view's list is a tenth of the
//! aggregate's or less.

use serde_json::{json, Value};

use crate::mcp::driver::{mcp_url, Driver};
use crate::support::{call_log, testserver_entry, write_config, TestHub};

const EXT: &str = "ext-token-0123456789abcdef";

fn config(dir: &std::path::Path, hide: &[&str], with_client: bool) -> Value {
    let mut c = json!({
        "mcpServers": {"t": testserver_entry(dir, "t", &[])},
        "views": {
            "chat": {
                "tools": ["hub__list_tools", "hub__tool_batch", "t__*"],
                "hide": hide,
                "rename": {"t__echo": {"name": "say", "description": "Say it back."}}
            },
            "other": {"tools": ["t__slow"]}
        }
    });
    if with_client {
        c["clients"] = json!({"ext": {"token": EXT, "views": ["chat"]}});
    }
    c
}

pub(crate) fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            t["qualifiedName"]
                .as_str()
                .or(t["name"].as_str())
                .map(String::from)
        })
        .collect()
}

fn not_found(r: &Value) -> bool {
    r["success"] == false && r["error"]["errorType"] == "TOOL_NOT_FOUND"
}

fn slow_calls(hub: &TestHub) -> usize {
    call_log(&hub.path(), "t")
        .iter()
        .filter(|c| c["tool"] == "slow")
        .count()
}

async fn start() -> TestHub {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path(), &["t__slow"], true);
    let hub = TestHub::start_in(dir, cfg).await;
    let mut main = hub.connect().await;
    crate::mcp::wait_running(&mut main, &["t"]).await;
    hub
}

#[tokio::test]
async fn a_view_lists_and_reaches_only_its_tools_over_ws() {
    let hub = start().await;
    let main_token = hub.token.clone().expect("token");
    let mut c = hub
        .connect_at("/ws/chat", EXT)
        .await
        .expect("ext opens chat");
    let list = c.request(json!({"type": "list_tools"})).await;
    let listed = names(&list);
    assert!(listed.contains(&"say".to_string()), "{listed:?}");
    for hidden in ["t__echo", "t__slow", "hub__write_file", "hub__run_command"] {
        assert!(
            !listed.contains(&hidden.to_string()),
            "{hidden} in {listed:?}"
        );
    }
    assert_eq!(list["view"], "chat");

    // The renamed tool runs; the result names the view and the real tool.
    // The client records it: the recording names the client.
    let rec = c
        .request(json!({"type": "start_recording", "name": "ext's"}))
        .await;
    assert_eq!(rec["type"], "recording_started", "{rec}");
    let r = c.call("say", json!({"message": "hi"})).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["qualifiedName"], "say", "{r}");
    assert_eq!(r["realTool"], "t__echo", "{r}");
    assert_eq!(r["view"], "chat", "{r}");
    c.request(json!({"type": "stop_recording"})).await;
    let list = c.request(json!({"type": "list_recordings"})).await;
    let mine = list["recordings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["name"] == "ext's")
        .cloned()
        .unwrap_or_default();
    assert_eq!(mine["client"], "ext", "{list}");

    // A hidden tool by any name: unknown in the view.
    for name in ["t__slow", "slow", "hub__write_file", "write_file"] {
        let r = c
            .call(name, json!({"ms": 1, "path": "x", "content": "x"}))
            .await;
        assert!(not_found(&r), "{name}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("view"),
            "{r}"
        );
    }
    // A batch step outside the view: refused before the batch starts.
    let b = c
        .request(json!({"type": "tool_batch", "steps": [
            {"tool": "say", "params": {"message": "first"}},
            {"tool": "t__slow", "params": {"ms": 1}}]}))
        .await;
    assert_eq!(b["type"], "error", "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("t__slow"),
        "{b}"
    );
    // The hub's own batch tool stays in the view too.
    let r = c
        .call(
            "hub__tool_batch",
            json!({"steps": [{"tool": "t__slow", "params": {"ms": 1}}]}),
        )
        .await;
    assert_eq!(r["success"], false, "{r}");
    let r = c
        .call(
            "hub__tool_batch",
            json!({"steps": [{"tool": "say", "params": {"message": "in"}}]}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(slow_calls(&hub), 0, "a hidden tool ran");

    // History names the view's name, the real tool and the client.
    let mut main = hub.connect().await;
    let r = main.call("t__echo", json!({"message": "main's"})).await;
    assert_eq!(r["success"], true, "{r}");
    let h = main.request(json!({"type": "history", "limit": 50})).await;
    let said = h["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["tool"] == "say")
        .cloned()
        .unwrap_or_default();
    assert_eq!(said["realTool"], "t__echo", "{h}");
    assert_eq!(said["view"], "chat", "{h}");
    assert_eq!(said["client"], "ext", "{h}");
    let entries = h["entries"].as_array().cloned().unwrap_or_default();
    for e in &entries {
        let main_s = e["params"]["message"] == "main's";
        assert_eq!(
            e.get("client").is_none(),
            main_s,
            "only the client's calls name it: {e}"
        );
    }

    // The gate: the client token opens only its view.
    assert_eq!(hub.connect_at("/ws", EXT).await.err(), Some(403));
    assert_eq!(hub.connect_at("/ws/other", EXT).await.err(), Some(403));
    assert_eq!(
        hub.connect_at("/ws/nope", &main_token).await.err(),
        Some(404)
    );
    assert_eq!(
        hub.connect_at("/ws/chat", "wrong-token-0123456789")
            .await
            .err(),
        Some(401)
    );
    // Health names the views and clients, never a token.
    let health = main.request(json!({"type": "health_check"})).await;
    let chat = health["views"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "chat")
        .cloned()
        .unwrap_or_default();
    assert_eq!(chat["toolCount"], listed.len(), "{health}");
    // Who is connected where: the client's socket in chat, the main
    // token's in the aggregate.
    assert_eq!(
        chat["connected"],
        json!({"sessions": 1, "ws": 1, "mcp": 0, "clients": ["ext"]}),
        "{health}"
    );
    assert_eq!(health["connected"][""]["clients"], json!(["(main token)"]));
    assert_eq!(
        health["clients"],
        json!([{"name": "ext", "views": ["chat"], "sessions": 1}])
    );
    assert!(!health.to_string().contains(EXT), "a token in health");
    // The main token opens every view.
    let mut o = hub
        .connect_at("/ws/other", &main_token)
        .await
        .expect("main opens other");
    assert_eq!(
        names(&o.request(json!({"type": "list_tools"})).await),
        ["t__slow"]
    );
}

#[tokio::test]
async fn a_replay_in_a_view_cannot_run_a_hidden_tool() {
    let hub = start().await;
    let mut main = hub.connect().await;
    let started = main
        .request(json!({"type": "start_recording", "name": "slow"}))
        .await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    assert_eq!(
        main.call("t__slow", json!({"ms": 1})).await["success"],
        true
    );
    let stopped = main.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["type"], "recording_stopped", "{stopped}");
    assert_eq!(slow_calls(&hub), 1);

    // The client's token does not see the main token's recording at all
    // (tests/it/owners.rs); the main token replaying it in the view runs
    // it in the view.
    let mut ext = hub.connect_at("/ws/chat", EXT).await.expect("chat");
    let r = ext
        .request(json!({"type": "replay_recording", "recordingId": id, "mode": "live"}))
        .await;
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");
    let token = hub.token.clone().expect("token");
    let mut c = hub.connect_at("/ws/chat", &token).await.expect("chat");
    let r = c
        .request(json!({"type": "replay_recording", "recordingId": id, "mode": "live"}))
        .await;
    assert!(r.to_string().contains("t__slow"), "{r}");
    assert_eq!(
        slow_calls(&hub),
        1,
        "the replay ran a tool outside the view: {r}"
    );
    // A dry replay in the view judges the steps as the live one would: the
    // hidden tool is a problem there, while the aggregate finds none.
    let dry = c
        .request(json!({"type": "replay_recording", "recordingId": id, "mode": "dry"}))
        .await;
    assert_eq!(dry["verdict"], "failed", "{dry}");
    assert!(dry["differences"].to_string().contains("t__slow"), "{dry}");
    let whole = main
        .request(json!({"type": "replay_recording", "recordingId": id, "mode": "dry"}))
        .await;
    assert_eq!(whole["verdict"], "same", "{whole}");
}

#[tokio::test]
async fn mcp_at_a_view_lists_and_calls_only_its_tools() {
    let hub = start().await;
    let mut d = Driver::start().await;
    let url = format!("{}/chat", mcp_url(&hub));
    d.ok(json!({"op": "connect", "url": url, "token": EXT}))
        .await;
    let list = d.ok(json!({"op": "listTools"})).await;
    let listed = names(&list);
    assert!(listed.contains(&"say".to_string()), "{listed:?}");
    assert!(
        !listed.iter().any(|n| n == "t__slow" || n == "t__echo"),
        "{listed:?}"
    );
    let r = d.call("say", json!({"message": "over mcp"})).await;
    assert_ne!(r["isError"], true, "{r}");
    for (tool, args) in [
        ("t__slow", json!({"ms": 1})),
        ("hub__write_file", json!({"path": "x", "content": "x"})),
        (
            "hub__tool_batch",
            json!({"steps": [{"tool": "t__slow", "params": {"ms": 1}}]}),
        ),
    ] {
        let r = d.call(tool, args).await;
        assert_eq!(r["isError"], true, "{tool}: {r}");
    }
    assert_eq!(slow_calls(&hub), 0, "a hidden tool ran over /mcp");
    // History names the client of the MCP session, and health counts it.
    let mut main = hub.connect().await;
    let h = main.request(json!({"type": "history", "limit": 50})).await;
    let over = h["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["params"]["message"] == "over mcp")
        .cloned()
        .unwrap_or_default();
    assert_eq!(over["client"], "ext", "{h}");
    let health = main.request(json!({"type": "health_check"})).await;
    assert_eq!(health["connected"]["chat"]["mcp"], 1, "{health}");
}

#[tokio::test]
async fn a_reload_takes_a_tool_out_and_revokes_a_client() {
    let hub = start().await;
    let main_token = hub.token.clone().expect("token");
    let mut c = hub.connect_at("/ws/chat", &main_token).await.expect("chat");
    // The client's own socket, open across the reload that removes it.
    let mut ext = hub.connect_at("/ws/chat", EXT).await.expect("ext");
    assert_eq!(
        ext.call("say", json!({"message": "as the client"})).await["success"],
        true
    );
    assert_eq!(
        c.call("say", json!({"message": "before"})).await["success"],
        true
    );
    let path = hub.path();
    write_config(
        &path.join("config.json"),
        &crate::support::with_test_defaults(config(&path, &["t__slow", "t__echo"], false)),
    );
    let update = c.recv_type("tools_updated").await;
    assert_eq!(update["view"], "chat", "{update}");
    assert!(!names(&update).contains(&"say".to_string()), "{update}");
    hub.wait_log("view changed").await;
    hub.wait_log("gate updated from the config").await;
    let r = c.call("say", json!({"message": "after"})).await;
    assert!(not_found(&r), "{r}");
    // The client is gone from the config: its open socket is closed (1008)
    // and its token opens nothing now; the main token's socket stays.
    assert_eq!(crate::lifecycle::close_code(&mut ext).await, Some(1008));
    hub.wait_log("client revoked in config.json").await;
    assert_eq!(hub.connect_at("/ws/chat", EXT).await.err(), Some(401));
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
}

/// The characters of a tool list as a client receives it, and a rough
/// token count (4 characters a token, as tokenizers average on JSON).
fn size(list: &Value) -> (usize, usize) {
    let chars = list["tools"].to_string().chars().count();
    (chars, chars.div_ceil(4))
}

#[tokio::test]
async fn discovery_finds_describes_and_calls_only_the_views_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path(), &["t__slow"], true);
    cfg["views"]["agent"] = json!({"discovery": true, "hide": ["t__slow", "hub__run_command"]});
    let hub = TestHub::start_in(dir, cfg).await;
    let mut main = hub.connect().await;
    crate::mcp::wait_running(&mut main, &["t"]).await;
    let token = hub.token.clone().expect("token");
    let mut a = hub.connect_at("/ws/agent", &token).await.expect("agent");

    // The view lists the meta-tools only.
    let list = a.request(json!({"type": "list_tools"})).await;
    let mut listed = names(&list);
    listed.sort();
    assert_eq!(
        listed,
        ["hub__call_tool", "hub__describe_tool", "hub__search_tools"]
    );
    // Its other tools by name only, for a prompt; never a hidden one.
    let catalog: Vec<&str> = list["catalog"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(catalog.contains(&"t__echo"), "{list}");
    assert!(
        !catalog.contains(&"t__slow") && !catalog.contains(&"hub__search_tools"),
        "{list}"
    );
    let whole = main.request(json!({"type": "list_tools"})).await;
    let ((d_chars, d_tokens), (w_chars, w_tokens)) = (size(&list), size(&whole));
    println!(
        "discovery view lists {} tools: {d_chars} characters (~{d_tokens} tokens); the aggregate {} tools: {w_chars} characters (~{w_tokens} tokens)",
        listed.len(),
        names(&whole).len()
    );
    // 1,332 against 26,381 characters when this was written (57 tools).
    assert!(d_chars * 10 < w_chars, "{d_chars} vs {w_chars}");

    // Search by a word of the description; a hidden tool is not found.
    let found = a
        .call("hub__search_tools", json!({"query": "echo message text"}))
        .await;
    assert_eq!(found["success"], true, "{found}");
    let hits: Vec<&str> = found["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(hits.first(), Some(&"t__echo"), "{found}");
    for query in ["slow", "milliseconds wait", "run_command", "search_tools"] {
        let r = a.call("hub__search_tools", json!({"query": query})).await;
        let hits: Vec<&str> = r["result"]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(r["success"], true, "{r}");
        for hidden in ["t__slow", "hub__run_command", "hub__search_tools"] {
            assert!(!hits.contains(&hidden), "{query}: {r}");
        }
    }

    // Describe: the schema of a tool of the view; not of a hidden one.
    let d = a
        .call("hub__describe_tool", json!({"name": "t__echo"}))
        .await;
    assert_eq!(
        d["result"]["inputSchema"]["required"],
        json!(["message"]),
        "{d}"
    );
    let d = a
        .call("hub__describe_tool", json!({"name": "t__slow"}))
        .await;
    assert!(not_found(&d), "{d}");

    // Call through the meta-tool: the view's tool runs, a hidden one not.
    let r = a
        .call(
            "hub__call_tool",
            json!({"name": "echo", "arguments": {"message": "via discovery"}}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert!(r["result"].to_string().contains("via discovery"), "{r}");
    for name in ["t__slow", "slow", "hub__run_command"] {
        let r = a
            .call(
                "hub__call_tool",
                json!({"name": name, "arguments": {"ms": 1, "command": "true"}}),
            )
            .await;
        assert!(not_found(&r), "{name}: {r}");
    }
    let r = a
        .call(
            "hub__call_tool",
            json!({"name": "hub__call_tool", "arguments": {"name": "t__slow"}}),
        )
        .await;
    assert_eq!(r["success"], false, "{r}");
    // Nor directly, though the view does not list the tools.
    assert!(not_found(&a.call("t__slow", json!({"ms": 1})).await));
    assert_eq!(slow_calls(&hub), 0, "a hidden tool ran through discovery");
}

#[tokio::test]
async fn tasks_and_history_of_another_view_are_not_found_in_a_view() {
    let hub = start().await;
    let mut main = hub.connect().await;
    main.send(json!({"type": "tool_batch", "id": "b1", "steps": [
        {"tool": "t__slow", "params": {"ms": 1}}]}))
        .await;
    let done = main.recv_type("batch_complete").await;
    let task = done["taskId"].as_str().expect("taskId").to_string();
    let mut c = hub.connect_at("/ws/chat", EXT).await.expect("chat");
    assert_eq!(
        c.call("say", json!({"message": "mine"})).await["success"],
        true
    );
    // The aggregate's task: unknown in the view, by message and by tool.
    for msg in ["task_status", "cancel_task"] {
        let r = c.request(json!({"type": msg, "taskId": task})).await;
        assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{msg}: {r}");
    }
    let listed = c.request(json!({"type": "list_tasks"})).await;
    assert!(!listed.to_string().contains(&task), "{listed}");
    assert!(main
        .request(json!({"type": "list_tasks"}))
        .await
        .to_string()
        .contains(&task));
    // History: the view's calls only.
    let h = c.request(json!({"type": "history", "limit": 100})).await;
    let entries = h["entries"].as_array().cloned().unwrap_or_default();
    assert!(!entries.is_empty(), "{h}");
    assert!(entries.iter().all(|e| e["view"] == "chat"), "{h}");
    let h = main.request(json!({"type": "history", "limit": 100})).await;
    assert!(h.to_string().contains("t__slow"), "{h}");
}

/// One raw HTTP/1.1 request to `/mcp/chat` with the client's token:
/// (status, headers, body).
async fn mcp_chat(hub: &TestHub, session: Option<&str>, body: Value) -> (u16, String, String) {
    let body = body.to_string();
    let mut req = format!(
        "POST /mcp/chat HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {EXT}\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\nConnection: close\r\n",
        hub.addr,
        body.len()
    );
    if let Some(s) = session {
        req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    let text = crate::mcp::raw_http(hub, &req).await;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

/// A revoked client's open `/mcp` session ends at the reload, its SSE
/// stream with it, and its session id is refused afterwards.
#[tokio::test]
async fn a_reload_that_revokes_a_client_ends_its_open_mcp_stream() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let hub = start().await;
    let (status, head, body) = mcp_chat(&hub, None, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})).await;
    assert_eq!(status, 200, "{body}");
    let sid = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .map(|v| v.trim().to_string())
        .expect("a session id");
    let (status, _, body) = mcp_chat(
        &hub,
        Some(&sid),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    // The session's standalone stream, open across the reload.
    let mut stream = tokio::net::TcpStream::connect(&hub.addr)
        .await
        .expect("connect");
    let get = format!(
        "GET /mcp/chat HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {EXT}\r\nMcp-Session-Id: {sid}\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n",
        hub.addr
    );
    stream.write_all(get.as_bytes()).await.expect("write");
    let mut first = vec![0u8; 4096];
    let n = tokio::time::timeout(crate::support::WAIT, stream.read(&mut first))
        .await
        .expect("the stream's head")
        .expect("read");
    let head = String::from_utf8_lossy(&first[..n]).to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.1 200") && head.contains("text/event-stream"),
        "{head}"
    );
    let mut main = hub.connect().await;
    let health = main.request(json!({"type": "health_check"})).await;
    assert_eq!(health["connected"]["chat"]["mcp"], 1, "{health}");

    let path = hub.path();
    write_config(
        &path.join("config.json"),
        &crate::support::with_test_defaults(config(&path, &["t__slow"], false)),
    );
    hub.wait_log("closing its MCP session").await;
    // The stream ends (the rest of it read to its end, within the wait).
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(crate::support::WAIT, stream.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the revoked client's stream is still open");
    // Its token opens nothing now, its session id included.
    let (status, _, body) = mcp_chat(
        &hub,
        Some(&sid),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 401, "{body}");
}
