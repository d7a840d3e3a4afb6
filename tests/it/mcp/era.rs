//! Protocol eras at `/mcp`: a client that asks 2026-07-28 in `initialize`
//! (rmcp's own client does) is negotiated down to 2025-11-25 and then
//! served as 2025-11-25 requires; a stateless
//! 2026-07-28 request is served as 2026-07-28 requires.

use serde_json::{json, Value};

use super::direct::{message, open_asking, post_with, Reply};
use super::{hub_with, wait_running};
use crate::support::{testserver_entry, TestHub};

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// A 2026-07-28 request: no session, the version and capabilities in
/// `_meta` and the headers.
async fn stateless(hub: &TestHub, mut body: Value, name: Option<&str>) -> Reply {
    let method = body["method"].as_str().unwrap_or("").to_string();
    body["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    let mut headers = vec![
        ("Mcp-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method.as_str()),
    ];
    if let Some(n) = name {
        headers.push(("Mcp-Name", n));
    }
    post_with(hub, None, true, body, &headers).await
}

#[tokio::test]
async fn a_client_asking_2026_07_28_gets_2025_11_25_and_its_rules() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;

    let (sid, negotiated) = open_asking(&hub, json!({}), "2026-07-28").await;
    assert_eq!(negotiated, "2025-11-25");
    let v = [("Mcp-Protocol-Version", "2025-11-25")];

    // Results carry no 2026-07-28 fields: not on a plain call...
    for (id, name, args) in [
        (1, "t__fail", json!({"message": "boom"})),
        (2, "t__echo", json!({"message": "hi"})),
    ] {
        let r = post_with(&hub, Some(&sid), true, call(id, name, args), &v).await;
        let m = message(&r);
        assert!(m["result"]["content"].is_array(), "{m}");
        assert!(m["result"].get("resultType").is_none(), "{m}");
    }
    // ...nor on a call with a progress token (rmcp's SSE).
    let mut with_progress = call(3, "t__fail", json!({"message": "boom"}));
    with_progress["params"]["_meta"] = json!({"progressToken": "p"});
    let r = post_with(&hub, Some(&sid), true, with_progress, &v).await;
    assert!(r.headers.contains("text/event-stream"), "{}", r.headers);
    let m = message(&r);
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert!(m["result"].get("resultType").is_none(), "{m}");
    // 2025-11-25 has ping.
    let ping = json!({"jsonrpc": "2.0", "id": 4, "method": "ping"});
    let m = message(&post_with(&hub, Some(&sid), true, ping, &v).await);
    assert_eq!(m["result"], json!({}), "{m}");

    // A request of the session that says 2026-07-28 is refused (400) with
    // the version the session negotiated and what to do.
    let newer = [("Mcp-Protocol-Version", "2026-07-28")];
    let r = post_with(
        &hub,
        Some(&sid),
        true,
        call(5, "t__echo", json!({"message": "x"})),
        &newer,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let m = message(&r);
    let text = m["error"].to_string();
    assert!(text.contains("negotiated MCP 2025-11-25"), "{m}");
    assert!(
        text.contains("send MCP-Protocol-Version: 2025-11-25"),
        "{m}"
    );
}

#[tokio::test]
async fn a_stateless_2026_07_28_request_gets_2026_07_28_results() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;

    // resultType is required in 2026-07-28: on a server's own result too.
    for (id, name, args) in [
        (1, "t__echo", json!({"message": "hi"})),
        (2, "t__fail", json!({"message": "boom"})),
    ] {
        let r = stateless(&hub, call(id, name, args), Some(name)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let m = message(&r);
        assert_eq!(m["result"]["resultType"], "complete", "{m}");
    }
    // logging/setLevel was removed in 2026-07-28: not a silent no-op but
    // -32601 saying what to do (as rmcp answers resources/subscribe).
    let set = json!({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel",
                     "params": {"level": "debug"}});
    let m = message(&stateless(&hub, set, None).await);
    assert_eq!(m["error"]["code"], -32601, "{m}");
    let text = m["error"]["message"].as_str().unwrap_or("");
    assert!(
        text.contains("2026-07-28") && text.contains("initialize"),
        "{m}"
    );
    let sub = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe",
                     "params": {"uri": "test://static-text"}});
    let m = message(&stateless(&hub, sub, Some("test://static-text")).await);
    assert_eq!(m["error"]["code"], -32601, "{m}");
}

/// A stateless 2026-07-28 request has no session to keep an instance of a
/// `scope: "context"` server for: its call runs in an instance of its own,
/// which stops when the request ends (no memo survives to the next one).
#[tokio::test]
async fn a_stateless_call_to_a_per_context_server_runs_in_an_instance_of_its_own() {
    let hub = hub_with(
        |d| {
            let mut t = testserver_entry(d, "t", &[]);
            t["scope"] = json!("context");
            json!({ "t": t })
        },
        json!({}),
    )
    .await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let memo = |id, v: Value| call(id, "t__memo", v);
    let first =
        message(&stateless(&hub, memo(1, json!({"value": "kept?"})), Some("t__memo")).await);
    let pid1 = first["result"]["structuredContent"]["pid"].clone();
    assert!(pid1.is_i64(), "{first}");
    hub.wait_log("reason=its session ended").await;
    let second = message(&stateless(&hub, memo(2, json!({})), Some("t__memo")).await);
    let s = &second["result"]["structuredContent"];
    assert_eq!(s["memo"], Value::Null, "{second}");
    assert_ne!(s["pid"], pid1, "{second}");
}
