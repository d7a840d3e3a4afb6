//! The assertion tools against real @playwright/mcp and Debian's chromium,
//! on pages a local HTTP server serves: text present, absent and hidden;
//! an element visible, hidden by each CSS rule, absent, and off-screen but
//! scrollable; waiting with `timeout`; a closed page; a batch that heals on
//! retry; a replay that finds the page changed; and the failures that are
//! not misses (no browser, server down).
//!
//! Waiting is on events only: a page reveals its late element after
//! `/gate` answers, and the test opens the gate when the hub has logged a
//! miss (or sent `retrying`), so the order is certain, not timed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::playwright::playwright_entry;
use crate::servers::wait_running;
use crate::support::{Client, TestHub};

const TEXT_PAGE: &str = r##"<!doctype html><html><head><title>Orders</title></head><body>
<h1>Order status</h1>
<p>Your order was <b>shipped</b> today.</p>
<div style="display:none">Secret coupon inside</div>
<p>Save draft</p>
</body></html>"##;

const ELEMENT_PAGE: &str = r##"<!doctype html><html><head><title>Elements</title>
<style>body { margin: 8px }</style></head><body>
<button>Submit</button>
<button style="display:none">Delete</button>
<button style="visibility:hidden">Archive</button>
<button style="opacity:0">Publish</button>
<button style="width:0;height:0;padding:0;border:0;overflow:hidden">Share</button>
<button style="position:absolute;left:-9999px">Print</button>
<div style="opacity:0"><button>Options</button></div>
<div style="overflow:hidden;height:20px"><div style="height:20px"></div><button>Zoom</button></div>
<input placeholder="Email address">
<div id="late"></div>
<div style="height:3000px"></div>
<a href="#top">Back to top</a>
<script>
fetch('/gate').then(() => setTimeout(() => {
  const b = document.createElement('button');
  b.textContent = 'Continue';
  document.getElementById('late').append(b);
}, 500));
</script>
</body></html>"##;

/// Shows "Continue" as soon as `/gate` answers.
const HEAL_PAGE: &str = r##"<!doctype html><html><body><h1>Checkout</h1><div id="late"></div>
<script>
fetch('/gate').then(() => {
  const b = document.createElement('button');
  b.textContent = 'Continue';
  document.getElementById('late').append(b);
});
</script></body></html>"##;

/// A small site on 127.0.0.1:0: pages by path (changeable while it runs)
/// and `/gate`, which answers only once [`Site::open_gate`] is called.
struct Site {
    url: String,
    pages: Arc<Mutex<HashMap<String, String>>>,
    gate: watch::Sender<bool>,
}

impl Site {
    async fn start(pages: &[(&str, &str)]) -> Site {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let map: HashMap<String, String> = pages
            .iter()
            .map(|(p, html)| (p.to_string(), html.to_string()))
            .collect();
        let pages = Arc::new(Mutex::new(map));
        let (gate, _) = watch::channel(false);
        let (served, opened) = (pages.clone(), gate.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let (pages, mut open) = (served.clone(), opened.subscribe());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&buf[..n]).to_string();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let (status, body) = if path == "/gate" {
                        let _ = open.wait_for(|o| *o).await;
                        ("200 OK", "open".to_string())
                    } else {
                        match pages.lock().expect("pages").get(&path) {
                            Some(html) => ("200 OK", html.clone()),
                            None => ("404 Not Found", "not found".to_string()),
                        }
                    };
                    let resp = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
        Site {
            url: format!("http://{addr}"),
            pages,
            gate,
        }
    }

    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    fn open_gate(&self) {
        self.gate.send_replace(true);
    }

    fn set_page(&self, path: &str, html: &str) {
        self.pages
            .lock()
            .expect("pages")
            .insert(path.to_string(), html.to_string());
    }
}

/// A hub with @playwright/mcp (Debian's chromium) as server `pw`.
async fn browser_hub() -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("pw-out");
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"pw": playwright_entry(&out, "/usr/bin/chromium")}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "pw").await;
    (hub, c)
}

async fn navigate(c: &mut Client, url: &str) {
    let r = c.call("pw__browser_navigate", json!({ "url": url })).await;
    assert_eq!(r["success"], true, "{r}");
}

/// One call, not retried, so each answer is one look at the page.
async fn check(c: &mut Client, tool: &str, params: Value) -> Value {
    c.request(json!({"type": "tool_call", "tool": tool, "params": params, "retry": false}))
        .await
}

fn assert_pass(r: &Value) -> &Value {
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"]["ok"], true, "{r}");
    assert!(r.to_string().len() < 1500, "results stay short: {r}");
    &r["result"]
}

/// A miss: ASSERTION_FAILED, recoverable, a suggestion, the ToolResult in
/// `raw`, and a short message containing `says`.
fn assert_miss(r: &Value, says: &str) {
    assert_eq!(r["success"], false, "{r}");
    let e = &r["error"];
    assert_eq!(e["errorType"], "ASSERTION_FAILED", "{r}");
    assert_eq!(e["recoverable"], true, "{r}");
    assert!(!e["suggestion"].as_str().unwrap_or("").is_empty(), "{r}");
    let message = e["message"].as_str().unwrap_or("");
    assert!(message.contains(says), "{message:?} should say {says:?}");
    assert!(message.len() < 400, "messages stay short: {message}");
    let tr = &r["raw"]["structuredContent"];
    assert_eq!(tr["ok"], false, "{r}");
    assert_eq!(tr["error"]["code"], "ASSERTION_FAILED", "{r}");
    assert_eq!(tr["error"]["retriable"], true, "{r}");
    assert_eq!(r["raw"]["isError"], true, "{r}");
}

#[tokio::test]
async fn text_present_absent_and_only_hidden() {
    let site = Site::start(&[("/text", TEXT_PAGE)]).await;
    let (_hub, mut c) = browser_hub().await;
    navigate(&mut c, &site.at("/text")).await;

    let r = check(
        &mut c,
        "hub__assert_text_present",
        json!({"text": "your ORDER was shipped"}),
    )
    .await;
    let ev = assert_pass(&r);
    assert_eq!(ev["match"], "case-insensitive");
    assert_eq!(ev["element"], "<p>");
    assert_eq!(ev["context"], "Your order was shipped today.");
    assert_eq!(ev["inViewport"], true);

    // The seed's name, and exact (the whole text of an element, case-sensitive).
    let r = check(
        &mut c,
        "assertTextPresent",
        json!({"text": "Order status", "exact": true}),
    )
    .await;
    assert_eq!(assert_pass(&r)["match"], "exact");
    let r = check(
        &mut c,
        "assertTextPresent",
        json!({"text": "order status", "exact": true}),
    )
    .await;
    assert_miss(&r, "is not on the page as an element's whole text");

    let r = check(&mut c, "hub__assert_text_present", json!({"text": "Saved"})).await;
    assert_miss(
        &r,
        "text \"Saved\" is not on the page; nearest text: \"Save draft\"",
    );

    let r = check(
        &mut c,
        "hub__assert_text_present",
        json!({"text": "Secret coupon"}),
    )
    .await;
    assert_miss(&r, "only in hidden elements: <div> (display:none)");
}

#[tokio::test]
async fn elements_visible_hidden_by_each_rule_absent_and_scrollable() {
    let site = Site::start(&[("/el", ELEMENT_PAGE)]).await;
    let (hub, mut c) = browser_hub().await;
    navigate(&mut c, &site.at("/el")).await;

    let r = check(
        &mut c,
        "hub__assert_element_visible",
        json!({"description": "the Submit button"}),
    )
    .await;
    let ev = assert_pass(&r);
    assert_eq!(
        (
            &ev["role"],
            &ev["name"],
            &ev["matchedBy"],
            &ev["match"],
            &ev["inViewport"]
        ),
        (
            &json!("button"),
            &json!("Submit"),
            &json!("role and name"),
            &json!("exact"),
            &json!(true)
        ),
        "{r}"
    );
    let r = check(
        &mut c,
        "assertElementVisible",
        json!({"description": "email address field"}),
    )
    .await;
    let ev = assert_pass(&r);
    assert_eq!(
        (&ev["role"], &ev["name"]),
        (&json!("textbox"), &json!("Email address")),
        "{r}"
    );

    for (name, rule) in [
        ("Delete", "display:none"),
        ("Archive", "visibility:hidden"),
        ("Publish", "opacity:0"),
        ("Share", "zero size"),
        ("Print", "off-screen, out of the page's scroll range"),
        ("Options", "opacity:0 on <div>"),
        ("Zoom", "clipped by overflow:hidden on <div>"),
    ] {
        let r = check(
            &mut c,
            "hub__assert_element_visible",
            json!({"description": format!("{name} button")}),
        )
        .await;
        assert_miss(&r, &format!("found a hidden button \"{name}\" ({rule}"));
    }

    let r = check(
        &mut c,
        "hub__assert_element_visible",
        json!({"description": "Checkout button"}),
    )
    .await;
    assert_miss(&r, "no element matches \"Checkout button\"");

    // Below the fold but reachable by scrolling: visible, not in the viewport.
    let r = check(
        &mut c,
        "hub__assert_element_visible",
        json!({"description": "Back to top link"}),
    )
    .await;
    let ev = assert_pass(&r);
    assert_eq!(
        (&ev["role"], &ev["inViewport"]),
        (&json!("link"), &json!(false)),
        "{r}"
    );

    // "Continue" appears 500 ms after /gate answers. Without timeout: one
    // look, a miss (the gate is still shut, so it cannot be there yet).
    let r = check(
        &mut c,
        "hub__assert_element_visible",
        json!({"description": "Continue button"}),
    )
    .await;
    assert_miss(&r, "no element matches \"Continue button\"");
    // With timeout: the first look misses (logged), then the gate opens and
    // a later look finds it, at least 500 ms on.
    c.send(
        json!({"type": "tool_call", "id": "late", "tool": "hub__assert_element_visible",
                  "params": {"description": "Continue button", "timeout": 20000}, "retry": false}),
    )
    .await;
    hub.wait_log("assertion not met yet").await;
    let opened = tokio::time::Instant::now();
    site.open_gate();
    let r = c.recv_where("late", |v| v["replyTo"] == "late").await;
    assert_eq!(assert_pass(&r)["name"], "Continue");
    assert_eq!(r["attempts"], 1, "{r}");
    assert!(
        opened.elapsed().as_millis() >= 500,
        "found only after it appeared"
    );
}

#[tokio::test]
async fn a_closed_page_is_page_closed_not_a_miss() {
    let site = Site::start(&[("/text", TEXT_PAGE)]).await;
    let (_hub, mut c) = browser_hub().await;
    // Never opened: the browser has only its blank page.
    let r = check(
        &mut c,
        "hub__assert_text_present",
        json!({"text": "Order status"}),
    )
    .await;
    assert_eq!(r["error"]["errorType"], "PAGE_CLOSED", "{r}");
    assert_eq!(
        r["raw"]["structuredContent"]["error"]["code"], "PAGE_CLOSED",
        "{r}"
    );

    navigate(&mut c, &site.at("/text")).await;
    let r = check(
        &mut c,
        "hub__assert_text_present",
        json!({"text": "Order status"}),
    )
    .await;
    assert_pass(&r);
    let closed = c.call("pw__browser_close", json!({})).await;
    assert_eq!(closed["success"], true, "{closed}");
    // With the default retry (PAGE_CLOSED once more) and with a timeout, it
    // is still PAGE_CLOSED, at once, never ASSERTION_FAILED.
    let r = c
        .call("hub__assert_text_present", json!({"text": "Order status"}))
        .await;
    assert_eq!(r["error"]["errorType"], "PAGE_CLOSED", "{r}");
    assert_eq!(r["attempts"], 2, "{r}");
    let r = check(
        &mut c,
        "hub__assert_element_visible",
        json!({"description": "Order status heading", "timeout": 20000}),
    )
    .await;
    assert_eq!(r["error"]["errorType"], "PAGE_CLOSED", "{r}");
    assert!(r["durationMs"].as_u64().unwrap_or(u64::MAX) < 15000, "{r}");
}

#[tokio::test]
async fn a_batch_assertion_fails_then_heals_on_its_retry() {
    let site = Site::start(&[("/heal", HEAL_PAGE)]).await;
    let (_hub, mut c) = browser_hub().await;
    c.send(json!({"type": "tool_batch", "id": "heal", "steps": [
        {"id": "open", "tool": "pw__browser_navigate", "params": {"url": site.at("/heal")}},
        {"id": "ready", "tool": "hub__assert_element_visible", "params": {"description": "Continue button"},
         "saveAs": "ready", "expect": {"path": "role", "equals": "button"}},
        {"id": "title", "tool": "assertTextPresent", "params": {"text": "checkout"},
         "when": {"var": "ready", "success": true}}
    ]}))
    .await;
    // The first look misses (the gate is shut); when the hub says it will
    // retry, the page is healed before the retry's look.
    c.recv_where("retrying", |v| {
        v["type"] == "task_state" && v["state"] == "retrying"
    })
    .await;
    site.open_gate();
    let done = c
        .recv_where("batch done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "heal"
        })
        .await;
    assert_eq!(done["state"], "success", "{done}");
    let step = c
        .recv_where("ready step", |v| {
            v["type"] == "batch_step_result" && v["stepId"] == "ready"
        })
        .await;
    assert_eq!(step["success"], true, "{step}");
    assert_eq!(step["attempts"], 2, "{step}");
    assert_eq!(
        step["retries"][0]["errorType"], "ASSERTION_FAILED",
        "{step}"
    );
    assert_eq!(step["result"]["name"], "Continue", "{step}");
    let title = c
        .recv_where("title step", |v| {
            v["type"] == "batch_step_result" && v["stepId"] == "title"
        })
        .await;
    assert_eq!(title["success"], true, "{title}");
    assert_eq!(title["result"]["context"], "Checkout", "{title}");
}

#[tokio::test]
async fn a_replayed_recording_verifies_the_page_and_reports_the_change() {
    let site = Site::start(&[("/text", TEXT_PAGE)]).await;
    let (_hub, mut c) = browser_hub().await;
    let rec = c
        .request(json!({"type": "start_recording", "name": "orders"}))
        .await;
    let id = rec["recordingId"].as_str().expect("id").to_string();
    navigate(&mut c, &site.at("/text")).await;
    assert_pass(
        &c.call("hub__assert_text_present", json!({"text": "was shipped"}))
            .await,
    );
    assert_pass(
        &c.call(
            "hub__assert_element_visible",
            json!({"description": "Order status heading"}),
        )
        .await,
    );
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["stepCount"], 3, "{stopped}");

    // Unchanged page: the replay passes.
    c.send(json!({"type": "replay_recording", "id": "same", "recordingId": id}))
        .await;
    let same = c.recv_where("replay", |v| v["replyTo"] == "same").await;
    assert_eq!(same["successCount"], 3, "{same}");

    // The page changes: the replay's assertions fail and say how.
    site.set_page(
        "/text",
        &TEXT_PAGE
            .replace("was <b>shipped</b>", "is <b>delayed</b>")
            .replace(
                "<h1>Order status</h1>",
                "<h2 style=\"display:none\">Order status</h2>",
            ),
    );
    c.send(json!({"type": "replay_recording", "id": "changed", "recordingId": id, "continueOnError": true}))
        .await;
    let mut steps = Vec::new();
    let done = loop {
        let m = c
            .recv_where("replay events", |v| {
                v["type"] == "replay_step_result" || v["replyTo"] == "changed"
            })
            .await;
        if m["type"] == "replay_step_result" {
            steps.push(m);
        } else {
            break m;
        }
    };
    assert_eq!(done["type"], "replay_complete", "{done}");
    assert_eq!(done["success"], false, "{done}");
    assert_eq!(done["failureCount"], 2, "{done}");
    for (i, says) in [
        (1, "text \"was shipped\" is not on the page"),
        (2, "found a hidden heading \"Order status\" (display:none)"),
    ] {
        let s = steps
            .iter()
            .find(|s| s["stepIndex"] == i && s["replayId"] == done["replayId"])
            .expect("step result of this replay");
        assert_eq!(s["recorded"]["success"], true, "{s}");
        assert_eq!(s["actual"]["error"]["errorType"], "ASSERTION_FAILED", "{s}");
        let msg = s["actual"]["error"]["message"].as_str().unwrap_or("");
        assert!(msg.contains(says), "{msg}");
        assert!(!s["diff"].as_array().expect("diff").is_empty(), "{s}");
        assert!(
            done["differences"]
                .as_array()
                .expect("differences")
                .iter()
                .any(|d| d["stepIndex"] == i),
            "{done}"
        );
    }
}

#[tokio::test]
async fn failures_that_are_not_misses_keep_their_class() {
    // No browser configured at all.
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    let r = check(&mut c, "hub__assert_text_present", json!({"text": "x"})).await;
    assert_eq!(r["error"]["errorType"], "BROWSER_MISSING", "{r}");
    assert!(
        r["error"]["suggestion"]
            .as_str()
            .unwrap_or("")
            .contains("@playwright/mcp"),
        "{r}"
    );
    drop(c);
    drop(hub);

    // The browser server is down (its command does not exist).
    let hub = TestHub::start(json!({"mcpServers": {"pw": {
        "command": "/nonexistent/playwright-mcp", "snapshotTool": "browser_snapshot", "timeout": 1500}}}))
    .await;
    let mut c = hub.connect().await;
    let r = check(
        &mut c,
        "hub__assert_element_visible",
        json!({"description": "Submit button"}),
    )
    .await;
    assert_eq!(r["error"]["errorType"], "SERVER_UNAVAILABLE", "{r}");
    drop(c);
    drop(hub);

    // Playwright is there, its browser is not.
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("pw-out");
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"pw": playwright_entry(&out, "/nonexistent/chromium")}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "pw").await;
    let r = check(
        &mut c,
        "hub__assert_text_present",
        json!({"text": "x", "server": "pw"}),
    )
    .await;
    assert_eq!(r["error"]["errorType"], "BROWSER_MISSING", "{r}");
}
