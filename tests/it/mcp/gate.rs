//! The gate in front of `/mcp`: Host, Origin and the Bearer token, checked
//! before rmcp sees the request.

use serde_json::{json, Value};

use crate::support::TestHub;

/// One raw HTTP/1.1 POST of an `initialize` to `/mcp`: (status, body).
async fn post_initialize(hub: &TestHub, headers: &[(&str, &str)]) -> (u16, String) {
    post_initialize_at(hub, headers, "2025-06-18").await
}

async fn post_initialize_at(
    hub: &TestHub,
    headers: &[(&str, &str)],
    version: &str,
) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {}\r\n", hub.addr));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    // rmcp answers an initialize with an SSE stream that it closes after the
    // response; the gate's refusals close at once.
    let text = super::raw_http(hub, &req).await;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

#[tokio::test]
async fn mcp_gate_refuses_no_token_wrong_token_foreign_origin_and_host() {
    let hub = TestHub::start(json!({})).await;
    let token = hub.token.clone().expect("a generated token");
    let bearer = format!("Bearer {token}");

    let (status, body) = post_initialize(&hub, &[]).await;
    assert_eq!(status, 401, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON-RPC error body");
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    let msg = v["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("Authorization: Bearer"), "{v}");
    assert_eq!(v["error"]["data"]["errorType"], "UNAUTHORIZED", "{v}");

    let (status, body) = post_initialize(&hub, &[("Authorization", "Bearer nope")]).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("wrong"), "{body}");

    let (status, body) = post_initialize(
        &hub,
        &[
            ("Authorization", &bearer),
            ("Origin", "http://evil.example"),
        ],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("allowedOrigins"), "{body}");

    let (status, body) = post_initialize(
        &hub,
        &[("Authorization", &bearer), ("Host", "evil.example:80")],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("DNS-rebinding"), "{body}");

    let (status, body) = post_initialize(&hub, &[("Authorization", &bearer)]).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"serverInfo\""), "{body}");
}

#[tokio::test]
async fn mcp_negotiates_each_legacy_protocol_version() {
    let hub = TestHub::start(json!({"server": {"token": false}})).await;
    for v in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let (status, body) = post_initialize_at(&hub, &[], v).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(&format!("\"protocolVersion\":\"{v}\"")),
            "{v}: {body}"
        );
    }
    // A version the hub does not know gets one it speaks instead.
    let (status, body) = post_initialize_at(&hub, &[], "1999-01-01").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"protocolVersion\":\"20"), "{body}");
}
