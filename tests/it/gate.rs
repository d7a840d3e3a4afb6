//! The gate runs before the upgrade: Host, Origin, token.

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::TestHub;

/// Send a raw upgrade request; return the HTTP status code.
pub async fn upgrade_status(addr: &str, headers: &[(&str, String)]) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = String::from("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(crate::support::WAIT, s.read(&mut buf))
        .await
        .expect("no answer")
        .expect("read");
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad response {text:?}"))
}

#[tokio::test]
async fn web_page_origin_is_refused_and_extension_origin_accepted() {
    let hub = TestHub::start(json!({})).await;
    let token = hub.token.clone().expect("token generated at first start");
    let host = ("Host", hub.addr.clone());
    let auth = ("Authorization", format!("Bearer {token}"));
    // A web page with a valid token is still refused (CSWSH).
    let web = upgrade_status(
        &hub.addr,
        &[
            host.clone(),
            auth.clone(),
            ("Origin", "https://evil.example".into()),
        ],
    )
    .await;
    assert_eq!(web, 403);
    let ext = upgrade_status(
        &hub.addr,
        &[
            host.clone(),
            auth.clone(),
            (
                "Origin",
                "chrome-extension://abcdefghijklmnopabcdefghijklmnop".into(),
            ),
        ],
    )
    .await;
    assert_eq!(ext, 101);
    let no_origin = upgrade_status(&hub.addr, &[host, auth]).await;
    assert_eq!(no_origin, 101);
}

#[tokio::test]
async fn host_check_refuses_dns_rebinding() {
    let hub = TestHub::start(json!({})).await;
    let token = hub.token.clone().expect("token");
    let port = hub.addr.rsplit(':').next().expect("port").to_string();
    let auth = ("Authorization", format!("Bearer {token}"));
    for bad in [
        format!("evil.example:{port}"),
        format!("localhost.evil.com:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        "127.0.0.1:1".to_string(),
    ] {
        let code = upgrade_status(&hub.addr, &[("Host", bad.clone()), auth.clone()]).await;
        assert_eq!(code, 403, "Host {bad}");
    }
    assert_eq!(
        upgrade_status(&hub.addr, std::slice::from_ref(&auth)).await,
        403,
        "missing Host"
    );
    assert_eq!(
        upgrade_status(&hub.addr, &[("Host", format!("localhost:{port}")), auth]).await,
        101
    );
}

#[tokio::test]
async fn token_is_required_by_header_or_subprotocol() {
    let hub = TestHub::start(json!({})).await;
    let token = hub.token.clone().expect("token");
    assert_eq!(token.len(), 64, "256-bit hex token");
    let mode = std::fs::metadata(hub.path().join("state/token")).expect("token file");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.permissions().mode() & 0o777, 0o600);
    let host = ("Host", hub.addr.clone());
    assert_eq!(
        upgrade_status(&hub.addr, std::slice::from_ref(&host)).await,
        401,
        "missing"
    );
    assert_eq!(
        upgrade_status(
            &hub.addr,
            &[host.clone(), ("Authorization", "Bearer nope".into())]
        )
        .await,
        401,
        "wrong"
    );
    let truncated = token[..token.len() - 1].to_string();
    assert_eq!(
        upgrade_status(
            &hub.addr,
            &[
                host.clone(),
                ("Authorization", format!("Bearer {truncated}"))
            ]
        )
        .await,
        401
    );
    let proto = (
        "Sec-WebSocket-Protocol",
        format!("toolhub.v1, toolhub.token.{token}"),
    );
    assert_eq!(upgrade_status(&hub.addr, &[host.clone(), proto]).await, 101);
    // The token never reaches the logs.
    assert!(!hub.logs().contains(&token), "token leaked into the log");
}

#[tokio::test]
async fn beyond_loopback_without_token_refuses_to_start() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("config.json");
    std::fs::write(
        &path,
        r#"{"server": {"listen": "0.0.0.0:0", "token": false}}"#,
    )
    .expect("write");
    let out = tokio::process::Command::new(crate::support::bin())
        .arg("--config")
        .arg(&path)
        .output()
        .await
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("token"), "{err}");
}

/// Send a raw request (request line and headers as given); return the status.
async fn raw_status(addr: &str, head: &str) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("{head}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(crate::support::WAIT, s.read(&mut buf))
        .await
        .expect("no answer")
        .expect("read");
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad response {text:?}"))
}

#[tokio::test]
async fn duplicate_host_or_origin_and_foreign_absolute_target_are_refused() {
    let hub = TestHub::start(json!({})).await;
    let token = hub.token.clone().expect("token");
    let addr = hub.addr.clone();
    let upgrade = format!("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}");
    let ext = "Origin: chrome-extension://abcdefghijklmnopabcdefghijklmnop";
    // The good Host first, a second one after it.
    let two_hosts = format!("GET /ws HTTP/1.1\r\nHost: {addr}\r\nHost: evil.example\r\n{upgrade}");
    assert_eq!(raw_status(&addr, &two_hosts).await, 400, "two Host headers");
    let two_origins = format!(
        "GET /ws HTTP/1.1\r\nHost: {addr}\r\n{ext}\r\nOrigin: https://evil.example\r\n{upgrade}"
    );
    assert_eq!(raw_status(&addr, &two_origins).await, 400, "two Origins");
    let foreign = format!("GET http://evil.example/ws HTTP/1.1\r\nHost: {addr}\r\n{upgrade}");
    assert_eq!(raw_status(&addr, &foreign).await, 400, "absolute-form");
    let foreign_port = format!("GET http://127.0.0.1:1/ws HTTP/1.1\r\nHost: {addr}\r\n{upgrade}");
    assert_eq!(raw_status(&addr, &foreign_port).await, 400, "other port");
    // Every route, also /health and a path that does not exist.
    for path in ["/health", "/nowhere"] {
        let two = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nHost: evil.example\r\nAuthorization: Bearer {token}"
        );
        assert_eq!(raw_status(&addr, &two).await, 400, "{path}");
    }
    // The same requests, well formed, pass.
    let own = format!("GET http://{addr}/ws HTTP/1.1\r\nHost: {addr}\r\n{ext}\r\n{upgrade}");
    assert_eq!(raw_status(&addr, &own).await, 101, "own absolute-form");
    let health = format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}");
    assert_eq!(raw_status(&addr, &health).await, 200);
    // Each refusal is logged with its reason.
    hub.wait_log("2 host headers").await;
    hub.wait_log("is not this hub").await;
}

/// Issue 16.10: the 401 body says where the token really is and gives no
/// advice meant for an upstream server's API key.
#[tokio::test]
async fn the_401_body_names_the_real_token_file_and_no_api_key_advice() {
    let hub = TestHub::start(json!({})).await;
    let host = ("Host", hub.addr.clone());
    let file = hub.path().join("state").join("token");
    let file = file.display().to_string();
    for headers in [
        vec![host.clone()],
        vec![host.clone(), ("Authorization", "Bearer wrong".to_string())],
    ] {
        let (code, body) = crate::threats::http_get(&hub.addr, "/health", &headers).await;
        assert_eq!(code, 401, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
        let e = &v["error"];
        assert_eq!(e["errorType"], "UNAUTHORIZED", "{v}");
        let text = format!("{} {}", e["message"], e["suggestion"]);
        assert!(text.contains(&file), "{text}");
        assert!(!text.contains("<stateDir>"), "{text}");
        assert!(!text.contains("API key"), "{text}");
        assert!(!text.contains("expired"), "{text}");
    }
}
