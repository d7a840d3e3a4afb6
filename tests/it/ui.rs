//! The dashboard at `/ui`: its headers and gate (plain HTTP), and the real
//! page driven in headless Chromium (tests/ui/dashboard.mjs, Playwright)
//! against this hub and the fault-injecting test server.

use std::path::{Path, PathBuf};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::gate::upgrade_status;
use crate::node_script::{self, NodeScript};
use crate::servers::{hub_with, wait_running};
use crate::support::{call_log, testserver_entry, write_config, TestHub};

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
    assert_eq!(get(&hub.addr, "/ui/", &hub.addr).await.0, 200);
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
    node_script::screenshots("ui-screenshots")
}

/// `node tests/ui/dashboard.mjs` against `hub`: its output line by line
/// (`ok: …`, `restart-now`, `done`, `FAILED: …`), its stdin to answer a
/// `restart-now`.
struct Page;

impl Page {
    fn start(hub: &TestHub, env: &[(&str, String)]) -> NodeScript {
        let mut all = vec![
            ("HUB", format!("http://{}", hub.addr)),
            ("TOKEN", hub.token.clone().expect("token")),
        ];
        all.extend(env.iter().cloned());
        NodeScript::start("tests/ui/dashboard.mjs", "ui", screenshots(), &all)
    }
}

/// A test server with one instance per client context.
fn per_context(dir: &std::path::Path) -> serde_json::Value {
    let mut e = testserver_entry(dir, "pc", &[]);
    e["scope"] = json!("context");
    e
}

/// The whole dashboard in Chromium: the token from the link or pasted;
/// servers (a crash and its restart, a changed tool approved); tools (a
/// form's result, an error's suggestion); tasks (a streamed timeline, a
/// need_user approved and one denied from the page, cancel, resume);
/// recordings (a live replay with a difference, offline, export, recording
/// the page's own call); runs; history filters; keyboard; phone size; no
/// console errors; and a page from another origin refused.
#[tokio::test]
async fn the_dashboard_drives_the_hub_in_chromium() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": testserver_entry(&p, "t", &[]), "pc": per_context(&p)},
            "safety": {"rules": [
                {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}
            ]},
            "runs": {"storagePath": "./runs"},
            // A client in a view, connected while the page looks: the
            // servers page shows who is connected where, history names it.
            "views": {"chat": {"tools": ["t__*"]}},
            "clients": {"ext": {"token": "ext-token-0123456789abcdef", "views": ["chat"]}}
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    wait_running(&mut c, "pc").await;
    // A recording whose replay must differ: a counter answers 1, then 2.
    c.request(json!({"type": "start_recording", "name": "counter demo"}))
        .await;
    let r = c.call("t__counter", json!({"key": "ui"})).await;
    assert_eq!(r["success"], true, "{r}");
    // A step with an image item, kept beside the recording and shown inline.
    let r = c.call("t__image", json!({})).await;
    assert_eq!(r["success"], true, "{r}");
    c.request(json!({"type": "stop_recording"})).await;
    // A recording a dry replay finds a problem in: its params lack the
    // message t__echo requires.
    c.request(json!({"type": "start_recording", "name": "dry demo"}))
        .await;
    c.call("t__echo", json!({})).await;
    c.request(json!({"type": "stop_recording"})).await;
    // Another client's task, running until the page cancels it.
    // The page crashes `t` later while this hangs on it: generous retries
    // keep it running (or retrying) however long the restart takes on a
    // loaded machine, until the page cancels it.
    c.send(
        json!({"type": "tool_batch", "id": "elsewhere", "steps": [{"tool": "t__hang",
        "retry": {"maxRetries": 20, "delay": 250, "backoff": 1.0}}]}),
    )
    .await;
    c.recv_where("elsewhere running", |v| {
        v["type"] == "task_state" && v["batchId"] == "elsewhere" && v["state"] == "running"
    })
    .await;
    // A call of another server, for the history's server filter.
    let r = c.call("hub__list_directory", json!({"path": "."})).await;
    assert_eq!(r["success"], true, "{r}");
    let run = c
        .request(json!({"type": "create_run", "theme": "Dashboard demo"}))
        .await;
    let run_id = run["run"]["runId"].as_str().expect("runId").to_string();
    let logged = c
        .request(json!({"type": "log_run_entry", "runId": run_id, "step": "looked at the dashboard",
            "status": "success", "action_type": "analysis", "execution_method": "analysis", "data": {}}))
        .await;
    assert_eq!(logged["type"], "run_entry_logged", "{logged}");
    // An image the run keeps (saveImages), for the page's gallery.
    let set = c.request(json!({"type": "set_run", "runId": run_id})).await;
    assert_eq!(set["type"], "run_set", "{set}");
    c.send(
        json!({"type": "tool_call", "id": "shot", "tool": "t__image", "params": {},
                  "saveImages": "dashboard shot"}),
    )
    .await;
    let r = c.recv_where("shot", |v| v["replyTo"] == "shot").await;
    assert_eq!(r["success"], true, "{r}");
    let mut ext = hub
        .connect_at("/ws/chat", "ext-token-0123456789abcdef")
        .await
        .expect("the client opens its view");
    let r = ext.call("t__echo", json!({"message": "from ext"})).await;
    assert_eq!(r["success"], true, "{r}");

    let out = screenshots();
    Page::start(
        &hub,
        &[
            ("RECORDING", "counter demo".into()),
            ("RECORDING_DRY", "dry demo".into()),
            ("RUN", run_id.clone()),
        ],
    )
    .finish()
    .await;
    drop(ext);
    // What the page did reached the hub: the approved step ran, once.
    let danger = call_log(&hub.path(), "t")
        .iter()
        .filter(|l| l["arguments"]["message"] == "danger zone")
        .count();
    assert_eq!(danger, 1, "the step approved from the page ran once");
    let single = call_log(&hub.path(), "t")
        .iter()
        .filter(|l| l["arguments"]["message"] == "danger single")
        .count();
    assert_eq!(single, 1, "the single call approved from the page ran once");
    assert!(
        call_log(&hub.path(), "t")
            .iter()
            .all(|l| l["arguments"]["message"] != "danger again"),
        "the step denied from the page never ran"
    );
    for view in [
        "servers",
        "servers-after-crash",
        "tools",
        "tools-need-user",
        "tasks-need-user",
        "recordings-dry",
        "tasks",
        "recordings",
        "runs",
        "history",
        "servers-phone",
    ] {
        assert!(out.join(format!("{view}.png")).exists(), "{view}.png");
    }
}

/// When the script prints `restart-now`: stop the hub (it closes the
/// page's socket with 1001), let `between` change its folder, pin its port
/// in the config and start it again there (as after an upgrade).
async fn restart_on_same_address(
    page: &mut NodeScript,
    mut hub: TestHub,
    between: impl FnOnce(&Path),
) -> TestHub {
    loop {
        let l = page.next_line().await.expect("the script ended early");
        if l == "restart-now" {
            break;
        }
    }
    let addr = hub.addr.clone();
    let config_path = hub.path().join("config.json");
    let dir = std::mem::replace(&mut hub.dir, tempfile::tempdir().expect("dir"));
    assert!(hub.terminate().await.success());
    between(dir.path());
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).expect("config"))
            .expect("json");
    config["server"]["listen"] = json!(addr);
    write_config(&config_path, &config);
    let hub = TestHub::spawn(dir, &config_path).await;
    assert_eq!(hub.addr, addr);
    hub
}

/// The connection state is visible and the page reconnects by itself when
/// the hub restarts (on the same address, as after an upgrade).
#[tokio::test]
async fn the_page_reconnects_after_the_hub_restarts() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let mut page = Page::start(&hub, &[("SCENARIO", "reconnect".into())]);
    let _hub = restart_on_same_address(&mut page, hub, |_| {}).await;
    page.say("restarted").await;
    page.finish().await;
}

/// A hub that comes back with another token: the page stops reconnecting,
/// says the token was refused and what to do, and connects again with the
/// new token pasted in.
#[tokio::test]
async fn the_page_stops_reconnecting_when_its_token_is_refused() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])})).await;
    let old = hub.token.clone().expect("token");
    let mut page = Page::start(&hub, &[("SCENARIO", "token".into())]);
    // Its generated token dropped, the hub makes a new one at start.
    let hub = restart_on_same_address(&mut page, hub, |dir| {
        std::fs::remove_file(dir.join("state/token")).expect("remove the token")
    })
    .await;
    let fresh = hub.token.clone().expect("token");
    assert_ne!(fresh, old, "the restarted hub has another token");
    page.say(&format!("restarted {fresh}")).await;
    page.finish().await;
    // The page's old token was refused by the gate.
    hub.wait_log("status=401").await;
}
