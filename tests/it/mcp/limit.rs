//! `server.maxConnections` counts `/mcp` sessions like `/ws` connections:
//! one over the limit is refused with 503 and a JSON-RPC error saying the
//! limit and what to do; a DELETEd or reaped session frees its slot.

use serde_json::{json, Value};

use super::direct::{open, post, Reply};
use crate::support::TestHub;

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

/// A refused `initialize`: 503, the JSON-RPC error says why and what to do.
fn assert_refused(r: &Reply, id: u64) {
    assert_eq!(r.status, 503, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).expect("a JSON-RPC error body");
    assert_eq!(v["id"], id, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("server.maxConnections"), "{v}");
    let data = &v["error"]["data"];
    assert_eq!(data["errorType"], "LIMIT_EXCEEDED", "{v}");
    let suggestion = data["suggestion"].as_str().unwrap_or("");
    assert!(
        suggestion.contains("DELETE /mcp") && suggestion.contains("raise server.maxConnections"),
        "{v}"
    );
}

/// The `/ws` upgrade, raw: its HTTP status.
async fn ws_status(hub: &TestHub) -> String {
    let mut req = format!(
        "GET /ws HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
        hub.addr
    );
    if let Some(t) = &hub.token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    let text = super::raw_http(hub, &req).await;
    text.split_whitespace().nth(1).unwrap_or("").to_string()
}

async fn delete(hub: &TestHub, sid: &str) -> u16 {
    let mut req = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nMcp-Session-Id: {sid}\r\nMcp-Protocol-Version: 2025-06-18\r\nConnection: close\r\n",
        hub.addr
    );
    if let Some(t) = &hub.token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    let text = super::raw_http(hub, &req).await;
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn mcp_sessions_count_in_max_connections_and_a_deleted_one_frees_its_slot() {
    let hub = TestHub::start(json!({"server": {"maxConnections": 2}})).await;
    let _ws = hub.connect().await;
    let a = open(&hub, json!({})).await;

    // Full: one /ws connection and one MCP session.
    let r = post(&hub, None, true, initialize(11)).await;
    assert_refused(&r, 11);
    assert!(
        ws_status(&hub).await.starts_with("503"),
        "an MCP session counts for /ws as well"
    );
    // Requests of the open session are served as before.
    let r = post(
        &hub,
        Some(&a),
        true,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);

    // DELETE ends the session and frees its slot.
    let status = delete(&hub, &a).await;
    assert!((200..300).contains(&status), "DELETE answered {status}");
    hub.wait_log("MCP session closed").await;
    let r = post(&hub, None, true, initialize(12)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("\"serverInfo\""), "{}", r.body);
}

#[tokio::test]
async fn a_reaped_idle_mcp_session_frees_its_slot() {
    let hub =
        TestHub::start(json!({"server": {"maxConnections": 1, "mcpSessionIdle": 3000}})).await;
    let _a = open(&hub, json!({})).await;
    let r = post(&hub, None, true, initialize(21)).await;
    assert_refused(&r, 21);

    // No request for mcpSessionIdle: rmcp ends the session.
    hub.wait_log("MCP session closed").await;
    let r = post(&hub, None, true, initialize(22)).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// A call longer than `mcpSessionIdle` keeps its session (rmcp's own clock
/// ended it mid-call); once nothing of the session is in flight, the idle
/// time runs and the session ends, and its id is unknown afterwards.
#[tokio::test]
async fn a_call_longer_than_mcp_session_idle_keeps_its_session_then_it_is_reaped() {
    let dir = tempfile::tempdir().expect("dir");
    let t = crate::support::testserver_entry(dir.path(), "t", &[]);
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": t}, "server": {"mcpSessionIdle": 2000}}),
    )
    .await;
    let mut ws = hub.connect().await;
    crate::servers::wait_running(&mut ws, "t").await;
    let a = open(&hub, json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "t__slow", "arguments": {"ms": 4500, "message": "slow done"}}});
    let r = post(&hub, Some(&a), true, call).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let answer = super::direct::message(&r);
    assert_eq!(answer["id"], 5, "{answer}");
    assert!(
        answer["result"].to_string().contains("slow done"),
        "{answer}"
    );
    let list = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"});
    let r = post(&hub, Some(&a), true, list.clone()).await;
    assert_eq!(r.status, 200, "the session outlived its call: {}", r.body);

    hub.wait_log("MCP session idle").await;
    hub.wait_log("MCP session closed").await;
    let r = post(&hub, Some(&a), true, list).await;
    assert_eq!(r.status, 404, "a reaped session is gone: {}", r.body);
}
