//! `tools/call` over raw HTTP: rmcp serves every request of a session (a
//! plain call as one `application/json` object, a call that needs a
//! request stream as SSE); the gate comes first. Also the helpers other
//! `/mcp` tests use to speak raw HTTP.

use serde_json::{json, Value};

use super::{hub_with, wait_running};
use crate::support::{testserver_entry, TestHub};

pub(super) struct Reply {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

pub(super) async fn post(hub: &TestHub, session: Option<&str>, auth: bool, body: Value) -> Reply {
    post_with(hub, session, auth, body, &[]).await
}

pub(super) async fn post_with(
    hub: &TestHub,
    session: Option<&str>,
    auth: bool,
    body: Value,
    extra: &[(&str, &str)],
) -> Reply {
    let body = body.to_string();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        hub.addr,
        body.len()
    );
    if let (true, Some(t)) = (auth, &hub.token) {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(s) = session {
        req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        if !extra
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("mcp-protocol-version"))
        {
            req.push_str("Mcp-Protocol-Version: 2025-06-18\r\n");
        }
    }
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    reply_of(&super::raw_http(hub, &req).await)
}

/// A raw HTTP reply's status, headers (lowercase) and body.
pub(super) fn reply_of(text: &str) -> Reply {
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
    Reply {
        status: head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        headers: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

/// initialize + notifications/initialized; the session id.
pub(super) async fn open(hub: &TestHub, capabilities: Value) -> String {
    open_asking(hub, capabilities, "2025-06-18").await.0
}

/// The same, asking for `version`: (session id, the negotiated version).
pub(super) async fn open_asking(
    hub: &TestHub,
    capabilities: Value,
    version: &str,
) -> (String, String) {
    let r = post(
        hub,
        None,
        true,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "0"}}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let sid = r
        .headers
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .map(|v| v.trim().to_string())
        .expect("a session id");
    let negotiated = r
        .body
        .split("\"protocolVersion\":\"")
        .nth(1)
        .and_then(|v| v.split('"').next())
        .unwrap_or("")
        .to_string();
    let r = post(
        hub,
        Some(&sid),
        true,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", r.body);
    (sid, negotiated)
}

/// The JSON-RPC answer in a reply, one JSON object or an SSE stream.
pub(super) fn message(r: &Reply) -> Value {
    let body = r.body.trim();
    if let Ok(v) = serde_json::from_str(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC message in {body}"))
}

fn echo(id: u64, meta: Option<Value>) -> Value {
    let mut params = json!({"name": "t__echo", "arguments": {"message": "direct"}});
    if let Some(m) = meta {
        params["_meta"] = m;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

#[tokio::test]
async fn calls_on_a_session_are_answered_and_the_gate_comes_first() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;

    let sid = open(&hub, json!({})).await;
    let r = post(&hub, Some(&sid), true, echo(1, None)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = message(&r);
    assert_eq!(v["id"], 1);
    assert_eq!(v["result"]["content"][0]["text"], "direct", "{v}");
    // The call went through the hub's call path: it is in the history.
    let h = ws.request(json!({"type": "history", "limit": 5})).await;
    assert!(h.to_string().contains("t__echo"), "{h}");

    // SEP-2243 headers that agree with the body (rmcp's client sends them).
    let routed = [("Mcp-Method", "tools/call"), ("Mcp-Name", "t__echo")];
    let r = post_with(&hub, Some(&sid), true, echo(6, None), &routed).await;
    assert!(r.body.contains("\"direct\""), "{}", r.body);

    // rmcp's own client asks for the newest version in its initialize and
    // then sends the one negotiated down to.
    let (newest, negotiated) = open_asking(&hub, json!({}), "2026-07-28").await;
    assert!(
        negotiated.as_str() < "2026-07-28" && !negotiated.is_empty(),
        "{negotiated}"
    );
    let v = [("Mcp-Protocol-Version", negotiated.as_str())];
    let r = post_with(&hub, Some(&newest), true, echo(8, None), &v).await;
    assert!(r.body.contains("\"direct\""), "{}", r.body);

    // A progress token and a client that can be asked back: answered too.
    let r = post(
        &hub,
        Some(&sid),
        true,
        echo(2, Some(json!({"progressToken": "p"}))),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("\"direct\""), "{}", r.body);
    let asking = open(&hub, json!({"sampling": {}})).await;
    let r = post(&hub, Some(&asking), true, echo(3, None)).await;
    assert!(r.body.contains("\"direct\""), "{}", r.body);

    // The gate comes first: no token, no call, even with a live session.
    if hub.token.is_some() {
        let r = post(&hub, Some(&sid), false, echo(4, None)).await;
        assert_eq!(r.status, 401, "{}", r.body);
    }
    // An unknown session is rmcp's 404.
    let r = post(&hub, Some("not-a-session"), true, echo(5, None)).await;
    assert_eq!(r.status, 404, "{}", r.body);
}
