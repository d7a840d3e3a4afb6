//! The dashboard at `/ui`: its headers and gate (plain HTTP), and the real
//! page driven in headless Chromium (tests/ui/dashboard.mjs, Playwright)
//! against this hub and the fault-injecting test server.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::gate::upgrade_status;
use crate::servers::wait_running;
use crate::support::{call_log, testserver_entry, TestHub};

/// A plain GET on the hub; the status line and headers (lowercase), and body.
async fn get(addr: &str, path: &str, host: &str) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(crate::support::WAIT, s.read_to_end(&mut buf))
        .await
        .expect("no answer")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad response {head:?}"));
    (code, head.to_lowercase(), body.to_string())
}

#[tokio::test]
async fn the_page_is_served_with_strict_headers_and_no_token() {
    let hub = TestHub::start(json!({})).await;
    let (code, head, body) = get(&hub.addr, "/ui", &hub.addr).await;
    assert_eq!(code, 200, "{head}");
    assert!(body.contains("<script type=\"module\" src=\"/ui/app.js\">"));
    assert!(!body.contains("<script>"), "no inline script");
    let token = hub.token.clone().expect("token");
    assert!(!body.contains(&token), "the page holds no secret");
    for h in [
        "content-security-policy: default-src 'self'; script-src 'self';",
        "x-frame-options: deny",
        "referrer-policy: no-referrer",
        "x-content-type-options: nosniff",
    ] {
        assert!(head.contains(h), "missing {h:?} in {head}");
    }
    assert!(!head.contains("unsafe-"), "{head}");
    let (code, head, _) = get(&hub.addr, "/ui/app.js", &hub.addr).await;
    assert_eq!(code, 200);
    assert!(head.contains("content-type: text/javascript"), "{head}");
    assert_eq!(get(&hub.addr, "/ui/secret.txt", &hub.addr).await.0, 404);
    assert_eq!(get(&hub.addr, "/ui/../health", &hub.addr).await.0, 404);
    // The Host check applies to the page as to everything else.
    let port = hub.addr.rsplit(':').next().expect("port");
    let (code, _, _) = get(&hub.addr, "/ui", &format!("evil.example:{port}")).await;
    assert_eq!(code, 403, "DNS rebinding is refused on /ui too");
}

#[tokio::test]
async fn the_hubs_own_origin_may_open_the_socket_and_no_other_page() {
    let hub = TestHub::start(json!({})).await;
    let token = hub.token.clone().expect("token");
    let port = hub.addr.rsplit(':').next().expect("port").to_string();
    let host = ("Host", hub.addr.clone());
    let protocols = (
        "Sec-WebSocket-Protocol",
        format!("toolhub.v1, toolhub.token.{token}"),
    );
    let with_origin = |o: String| vec![host.clone(), protocols.clone(), ("Origin", o)];
    for own in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        let code = upgrade_status(&hub.addr, &with_origin(own.clone())).await;
        assert_eq!(code, 101, "{own}");
    }
    for other in [
        "http://127.0.0.1:1".to_string(),
        format!("https://127.0.0.1:{port}"),
        format!("http://evil.example:{port}"),
        "null".to_string(),
    ] {
        let code = upgrade_status(&hub.addr, &with_origin(other.clone())).await;
        assert_eq!(code, 403, "{other}");
    }
    // The own origin still needs the token.
    let code = upgrade_status(
        &hub.addr,
        &[host, ("Origin", format!("http://127.0.0.1:{port}"))],
    )
    .await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn toolhub_ui_prints_the_ready_link() {
    let hub = TestHub::start(json!({})).await;
    let out = tokio::process::Command::new(crate::support::bin())
        .arg("ui")
        .arg("--config")
        .arg(hub.path().join("config.json"))
        .arg("--listen")
        .arg(&hub.addr)
        .output()
        .await
        .expect("run toolhub ui");
    assert!(out.status.success(), "{out:?}");
    let link = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let token = hub.token.clone().expect("token");
    assert_eq!(link, format!("http://{}/ui#token={token}", hub.addr));
}

fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui-screenshots")
}

/// The whole dashboard in Chromium: servers (a crash and its restart),
/// tools (a form's result, an error's suggestion), tasks (a streamed
/// timeline, a need_user approved from the page), recordings (a live replay
/// with a difference, an export), runs, history, keyboard, phone size, no
/// console errors, and a page from another origin refused.
#[tokio::test]
async fn the_dashboard_drives_the_hub_in_chromium() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": testserver_entry(&p, "t", &[])},
            "safety": {"rules": [
                {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}
            ]},
            "runs": {"storagePath": "./runs"}
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    // A recording whose replay must differ: a counter answers 1, then 2.
    c.request(json!({"type": "start_recording", "name": "counter demo"}))
        .await;
    let r = c.call("t__counter", json!({"key": "ui"})).await;
    assert_eq!(r["success"], true, "{r}");
    c.request(json!({"type": "stop_recording"})).await;
    let run = c
        .request(json!({"type": "create_run", "theme": "Dashboard demo"}))
        .await;
    let run_id = run["run"]["runId"].as_str().expect("runId").to_string();
    let logged = c
        .request(json!({"type": "log_run_entry", "runId": run_id, "step": "looked at the dashboard",
            "status": "success", "action_type": "analysis", "execution_method": "analysis", "data": {}}))
        .await;
    assert_eq!(logged["type"], "run_entry_logged", "{logged}");

    let out = screenshots();
    std::fs::create_dir_all(&out).expect("screenshot folder");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/dashboard.mjs");
    let mut node = tokio::process::Command::new("node")
        .arg(&script)
        .env("HUB", format!("http://{}", hub.addr))
        .env("TOKEN", hub.token.clone().expect("token"))
        .env("OUT", &out)
        .env("RECORDING", "counter demo")
        .env("RUN", &run_id)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node (tests need Node.js and npm ci --prefix tests)");
    let stdout = node.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let status = tokio::time::timeout(std::time::Duration::from_secs(300), async {
        while let Ok(Some(l)) = lines.next_line().await {
            eprintln!("[ui] {l}");
            seen.push(l);
        }
        node.wait().await
    })
    .await
    .expect("the browser script did not finish in 300 s")
    .expect("wait");
    let mut err = String::new();
    if let Some(mut e) = node.stderr.take() {
        let _ = e.read_to_string(&mut err).await;
    }
    assert!(
        status.success(),
        "the page failed (screenshots in {}):\n{}\n{err}",
        out.display(),
        seen.join("\n")
    );
    assert_eq!(seen.last().map(String::as_str), Some("done"));
    // What the page did reached the hub: the approved step ran, once.
    let danger = call_log(&hub.path(), "t")
        .iter()
        .filter(|l| l["arguments"]["message"] == "danger zone")
        .count();
    assert_eq!(danger, 1, "the step approved from the page ran once");
    for view in [
        "servers",
        "servers-after-crash",
        "tools",
        "tasks-need-user",
        "tasks",
        "recordings",
        "runs",
        "history",
        "servers-phone",
    ] {
        assert!(out.join(format!("{view}.png")).exists(), "{view}.png");
    }
}
