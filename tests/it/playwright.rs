//! @playwright/mcp driving Debian's chromium through the hub: a batch, a
//! recording with screenshots, and the browser health check.

use serde_json::{json, Value};

use crate::pages::serve_html;
use crate::servers::wait_running;
use crate::support::{npm_bin, TestHub};

const PAGE: &str = "<!doctype html><html><head><title>Toolhub test page</title></head><body>\
<h1>Hello from the test page</h1><button onclick=\"this.textContent='Clicked!'\">Click me</button></body></html>";

/// A one-page HTTP server on 127.0.0.1:0; returns its URL.
async fn serve_page() -> String {
    serve_html(PAGE).await
}

pub fn playwright_entry(out: &std::path::Path, exe: &str) -> Value {
    json!({
        "command": npm_bin("playwright-mcp"),
        "args": ["--headless", "--isolated", "--no-sandbox", "--executable-path", exe,
                 "--output-dir", out.display().to_string()],
        "recoveryTool": "browser_close",
        "snapshotTool": "browser_snapshot",
        "screenshotTool": "browser_take_screenshot",
        "timeout": 60000
    })
}

#[tokio::test]
async fn a_browser_flow_runs_is_recorded_with_screenshots_and_replays() {
    let url = serve_page().await;
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"pw": playwright_entry(&p.join("pw-out"), "/usr/bin/chromium")},
               "recording": {"screenshotOnStep": true}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "pw").await;
    let h = c.request(json!({"type": "health_check"})).await;
    let browser = h["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "browser:pw")
        .cloned();
    assert_eq!(browser.expect("browser check")["ok"], true, "{h}");
    let rec = c
        .request(json!({"type": "start_recording", "name": "browse"}))
        .await;
    let id = rec["recordingId"].as_str().expect("id").to_string();
    c.send(json!({"type": "tool_batch", "id": "web", "steps": [
        {"id": "open", "tool": "browser_navigate", "params": {"url": "{{vars.url}}"}},
        {"id": "look", "tool": "browser_snapshot", "params": {}, "saveAs": "snap",
         "expect": {"contains": "Click me"}}
    ], "options": {"variables": {"url": url}}}))
        .await;
    let done = c
        .recv_where("web done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "web"
        })
        .await;
    assert_eq!(done["state"], "success", "{done}");
    c.request(json!({"type": "stop_recording"})).await;
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let shot = got["recording"]["steps"][1]["screenshot"]
        .as_str()
        .expect("screenshot on step")
        .to_string();
    let png = std::fs::read(p.join(format!("recordings/{id}/{shot}"))).expect("png");
    assert_eq!(&png[..4], b"\x89PNG");
    c.send(json!({"type": "replay_recording", "id": "rp", "recordingId": id, "variables": {"url": url}})).await;
    let replayed = c.recv_where("replay done", |v| v["replyTo"] == "rp").await;
    assert_eq!(replayed["type"], "replay_complete", "{replayed}");
    assert_eq!(replayed["successCount"], 2, "{replayed}");
}

#[tokio::test]
async fn a_missing_browser_is_reported_with_the_exact_fix() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut entry = playwright_entry(&p.join("pw-out"), "/nonexistent/chromium");
    entry["disabled"] = json!(false);
    let hub = TestHub::start_in(dir, json!({"mcpServers": {"pw": entry}})).await;
    let mut c = hub.connect().await;
    let h = c.request(json!({"type": "health_check"})).await;
    let browser = h["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "browser:pw")
        .cloned();
    let browser = browser.expect("browser check");
    assert_eq!(browser["ok"], false);
    let fix = browser["fix"].as_str().unwrap_or("");
    assert!(
        fix.contains("npx playwright install chromium") && fix.contains("--executable-path"),
        "{fix}"
    );
    assert_ne!(h["status"], "ok");
}

#[tokio::test]
async fn a_browser_screenshot_under_a_run_is_kept_in_the_run() {
    let url = serve_page().await;
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"pw": playwright_entry(&p.join("pw-out"), "/usr/bin/chromium")}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "pw").await;
    let r = c
        .request(json!({"type": "create_run", "theme": "browse", "runId": "browse"}))
        .await;
    assert_eq!(r["type"], "run_created", "{r}");
    c.request(json!({"type": "set_run", "runId": "browse"}))
        .await;
    let nav = c.call("browser_navigate", json!({"url": url})).await;
    assert_eq!(nav["success"], true, "{nav}");
    let shot = c.call("browser_take_screenshot", json!({})).await;
    assert_eq!(shot["success"], true, "{shot}");
    let png = std::fs::read(p.join("runs/browse/screenshots/001_browser-take-screenshot.png"))
        .expect("screenshot in the run");
    assert_eq!(&png[..4], b"\x89PNG");
    let got = c
        .request(json!({"type": "get_run", "runId": "browse", "tail": 5}))
        .await;
    let e = got["entries"].as_array().expect("entries");
    assert_eq!(e[0]["action_type"], "navigation", "{got}");
    assert_eq!(e[1]["action_type"], "screenshot", "{got}");
    assert_eq!(
        e[1]["data"]["screenshot"],
        "screenshots/001_browser-take-screenshot.png"
    );
}
