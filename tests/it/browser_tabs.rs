//! Issue 31, "a browser per tab", with the real @playwright/mcp and
//! Debian's chromium: two fixture pages on loopback, one browser per
//! client context, over /ws (labels as tab ids) and /mcp (one per MCP
//! session). Process checks read /proc: an instance's whole tree, the
//! chromium processes included, must be gone, not only the hub's word.

use std::time::Duration;

use serde_json::{json, Value};

use crate::instances::{health_until, server_health, session_id};
use crate::mcp::driver::{text_of, Driver};
use crate::pages::serve_html;
use crate::playwright::playwright_entry;
use crate::procs::{self, wait_gone, Proc};
use crate::servers::wait_running;
use crate::support::{with_test_defaults, Client, TestHub};

const ALPHA: &str = "<!doctype html><html><head><title>Alpha tab</title></head>\
<body><h1>alpha-marker</h1></body></html>";
const BETA: &str = "<!doctype html><html><head><title>Beta tab</title></head>\
<body><h1>beta-marker</h1></body></html>";

/// A hub with `pw` per context, its template running, and a client.
async fn start(max: usize, idle_ms: u64) -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let mut pw = playwright_entry(&dir.path().join("pw-out"), "/usr/bin/chromium");
    pw["scope"] = json!("context");
    pw["maxInstances"] = json!(max);
    pw["instanceIdleMs"] = json!(idle_ms);
    let cfg = with_test_defaults(json!({
        "mcpServers": {"pw": pw},
        "server": {"sessionGraceMs": 0},
    }));
    let hub = TestHub::start_in(dir, cfg).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "pw").await;
    (hub, c)
}

/// A `tool_call` of `pw__<tool>` in tab `label`.
fn in_tab(label: &str, tool: &str, params: Value) -> Value {
    json!({"type": "tool_call", "tool": format!("pw__{tool}"), "params": params, "context": label})
}

/// Call in tab `label`, asserting success; the result as text.
async fn ok_in(c: &mut Client, label: &str, tool: &str, params: Value) -> String {
    let r = c.request(in_tab(label, tool, params)).await;
    assert_eq!(r["success"], true, "{tool} in {label}: {r}");
    r["result"].to_string()
}

/// Navigate tabs to their pages at the same time: both calls are sent
/// before either reply is read.
async fn navigate_together(c: &mut Client, tabs: &[(&str, &str)]) {
    for (label, url) in tabs {
        let mut msg = in_tab(label, "browser_navigate", json!({"url": url}));
        msg["id"] = json!(format!("nav-{label}"));
        c.send(msg).await;
    }
    for (label, _) in tabs {
        let id = format!("nav-{label}");
        let r = c
            .recv_where(&id.clone(), move |v| v["replyTo"] == id.as_str())
            .await;
        assert_eq!(r["success"], true, "navigate in {label}: {r}");
    }
}

/// What tab `label`'s page shows now.
async fn snapshot(c: &mut Client, label: &str) -> String {
    ok_in(c, label, "browser_snapshot", json!({})).await
}

/// Assert `snap` shows `mine` and not `theirs`.
fn shows_only(snap: &str, mine: &str, theirs: &str) {
    assert!(snap.contains(mine), "{mine} not on the page: {snap}");
    assert!(
        !snap.contains(theirs),
        "{theirs} leaked into the page: {snap}"
    );
}

/// `pw`'s instances in `health_status`: context -> pid.
async fn instance_pids(c: &mut Client) -> Vec<(String, i32)> {
    pids_in(&server_health(c, "pw").await)
}

fn pids_in(pw: &Value) -> Vec<(String, i32)> {
    pw["instances"]
        .as_array()
        .unwrap_or_else(|| panic!("no instances in {pw}"))
        .iter()
        .map(|i| {
            let pid = i["pid"].as_i64().unwrap_or_else(|| panic!("no pid in {i}"));
            (
                i["context"].as_str().expect("context").to_string(),
                pid as i32,
            )
        })
        .collect()
}

fn pid_of(pids: &[(String, i32)], context: &str) -> i32 {
    pids.iter()
        .find(|(c, _)| c == context)
        .unwrap_or_else(|| panic!("no instance for {context} in {pids:?}"))
        .1
}

/// An instance's live process tree, which must hold a browser.
fn browser_tree(pid: i32) -> Vec<Proc> {
    let t = procs::tree(pid);
    assert!(
        procs::chromium_count(&t) > 0,
        "no chromium under instance {pid}: {t:?}"
    );
    t
}

#[tokio::test]
async fn two_tabs_browse_apart_a_third_is_refused_and_a_close_leaves_the_other() {
    let (alpha, beta) = (serve_html(ALPHA).await, serve_html(BETA).await);
    let (_hub, mut c) = start(2, 600_000).await;
    let sid = session_id(&c);
    navigate_together(&mut c, &[("tab-1", &alpha), ("tab-2", &beta)]).await;
    shows_only(
        &snapshot(&mut c, "tab-1").await,
        "alpha-marker",
        "beta-marker",
    );
    shows_only(
        &snapshot(&mut c, "tab-2").await,
        "beta-marker",
        "alpha-marker",
    );
    // Two browsers: two process trees, no process shared.
    let pids = instance_pids(&mut c).await;
    let (t1, t2) = (
        browser_tree(pid_of(&pids, &format!("{sid}/tab-1"))),
        browser_tree(pid_of(&pids, &format!("{sid}/tab-2"))),
    );
    assert!(t1.iter().all(|p| !t2.contains(p)), "{t1:?} {t2:?}");

    // maxInstances 2: a third tab is refused, naming the cap and holders.
    let r = c
        .request(in_tab("tab-3", "browser_navigate", json!({"url": alpha})))
        .await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"]["errorType"], "LIMIT_EXCEEDED", "{r}");
    let msg = r["error"]["message"].as_str().expect("message");
    for needle in [
        "mcpServers.pw.maxInstances",
        &format!("{sid}/tab-1"),
        &format!("{sid}/tab-2"),
    ] {
        assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
    }

    // browser_close in tab-1 closes tab-1's page only.
    ok_in(&mut c, "tab-1", "browser_close", json!({})).await;
    shows_only(
        &snapshot(&mut c, "tab-2").await,
        "beta-marker",
        "alpha-marker",
    );
    let after = snapshot(&mut c, "tab-1").await;
    assert!(
        !after.contains("alpha-marker"),
        "tab-1's page survived its close: {after}"
    );
    assert!(
        !after.contains("beta-marker"),
        "tab-1 shows tab-2's page: {after}"
    );
}

#[tokio::test]
async fn an_ended_session_and_an_idle_tab_leave_no_browser_process() {
    const IDLE_MS: u64 = 4000;
    let limit = Duration::from_millis(IDLE_MS) + Duration::from_secs(5);
    let (alpha, beta) = (serve_html(ALPHA).await, serve_html(BETA).await);
    let (hub, mut watcher) = start(8, IDLE_MS).await;
    let mut ending = hub.connect().await;
    let mut idle = hub.connect().await;
    let (se, si) = (session_id(&ending), session_id(&idle));
    // Each tree is read right after its tab's last call, long before it
    // could be idle; the ending session closes right after its own.
    ok_in(&mut idle, "tab", "browser_navigate", json!({"url": beta})).await;
    let idle_ctx = format!("{si}/tab");
    let idle_tree = browser_tree(pid_of(&instance_pids(&mut watcher).await, &idle_ctx));
    navigate_together(&mut ending, &[("tab-1", &alpha), ("tab-2", &beta)]).await;
    let pids = instance_pids(&mut watcher).await;
    let mut doomed = browser_tree(pid_of(&pids, &format!("{se}/tab-1")));
    doomed.extend(browser_tree(pid_of(&pids, &format!("{se}/tab-2"))));

    // The session ends (socket closed, sessionGraceMs 0): both browsers go,
    // stopped for that reason (not for idleness).
    ending.ws.close(None).await.expect("close");
    drop(ending);
    let took = wait_gone(&doomed, limit, "an ended session's browsers").await;
    eprintln!("ended session: {} processes gone in {took:?}", doomed.len());
    for tab in ["tab-1", "tab-2"] {
        let why = format!("context={se}/{tab} reason=its session ended");
        hub.wait_log(&why).await;
    }

    // The other session's tab, unused for instanceIdleMs, goes too.
    let took = wait_gone(&idle_tree, limit, "an idle tab's browser").await;
    eprintln!("idle tab: {} processes gone in {took:?}", idle_tree.len());
    let why = format!("context={idle_ctx} reason=it was idle for instanceIdleMs");
    hub.wait_log(&why).await;
    assert!(instance_pids(&mut watcher).await.is_empty());
    // The template's own tree holds no browser: nothing of a tab is left.
    let template: Vec<Proc> = procs::descendants(hub.pid());
    assert_eq!(procs::chromium_count(&template), 0, "{template:?}");
    drop(idle);
}

#[tokio::test]
async fn a_killed_browser_instance_restarts_and_the_other_keeps_its_page() {
    let (alpha, beta) = (serve_html(ALPHA).await, serve_html(BETA).await);
    let (hub, mut c) = start(8, 600_000).await;
    let sid = session_id(&c);
    navigate_together(&mut c, &[("tab-1", &alpha), ("tab-2", &beta)]).await;
    let pids = instance_pids(&mut c).await;
    let (c1, c2) = (format!("{sid}/tab-1"), format!("{sid}/tab-2"));
    let (p1, p2) = (pid_of(&pids, &c1), pid_of(&pids, &c2));
    let victim = browser_tree(p1);
    unsafe {
        libc::kill(p1, libc::SIGKILL);
    }
    hub.wait_log(&format!("context={c1} state=Running restarts=1"))
        .await;
    // The killed instance's browser does not outlive it.
    wait_gone(
        &victim,
        Duration::from_secs(10),
        "the killed instance's tree",
    )
    .await;
    // The other tab's browser never noticed.
    shows_only(
        &snapshot(&mut c, "tab-2").await,
        "beta-marker",
        "alpha-marker",
    );
    let now = instance_pids(&mut c).await;
    assert_eq!(pid_of(&now, &c2), p2, "the other instance restarted");
    assert_ne!(
        pid_of(&now, &c1),
        p1,
        "the killed instance was not restarted"
    );
    // The restarted one is a fresh browser that works.
    let fresh = snapshot(&mut c, "tab-1").await;
    assert!(!fresh.contains("alpha-marker"), "{fresh}");
    ok_in(&mut c, "tab-1", "browser_navigate", json!({"url": alpha})).await;
    shows_only(
        &snapshot(&mut c, "tab-1").await,
        "alpha-marker",
        "beta-marker",
    );
}

#[tokio::test]
async fn two_mcp_sessions_browse_apart_and_an_ended_one_leaves_no_browser() {
    let (alpha, beta) = (serve_html(ALPHA).await, serve_html(BETA).await);
    let (hub, mut c) = start(8, 600_000).await;
    let (mut one, _) = Driver::connect(&hub, json!({})).await;
    let (mut two, _) = Driver::connect(&hub, json!({})).await;
    // At the same time: both sent before either answer is read.
    let nav = |url: &str| json!({"op": "callTool", "name": "pw__browser_navigate", "arguments": {"url": url}});
    let (n1, n2) = (one.send(nav(&alpha)).await, two.send(nav(&beta)).await);
    for (d, id) in [(&mut one, n1), (&mut two, n2)] {
        let a = d.answer(id).await;
        assert_eq!(a["ok"], true, "{a}");
        assert_ne!(a["result"]["isError"], true, "{a}");
    }
    let s1 = text_of(&one.call("pw__browser_snapshot", json!({})).await);
    let s2 = text_of(&two.call("pw__browser_snapshot", json!({})).await);
    shows_only(&s1, "alpha-marker", "beta-marker");
    shows_only(&s2, "beta-marker", "alpha-marker");
    let pids = instance_pids(&mut c).await;
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(
        pids.iter().all(|(ctx, _)| ctx.starts_with("mcp-")),
        "{pids:?}"
    );
    let trees: Vec<Vec<Proc>> = pids.iter().map(|(_, p)| browser_tree(*p)).collect();
    // The first session ends (DELETE): one browser goes, the other stays.
    one.ok(json!({"op": "close"})).await;
    let one_left = |pw: &Value| pw["instances"].as_array().is_some_and(|i| i.len() == 1);
    let left = pids_in(&health_until(&mut c, "pw", one_left).await)[0]
        .0
        .clone();
    let (gone, kept): (Vec<_>, Vec<_>) = pids
        .iter()
        .zip(trees)
        .partition(|((ctx, _), _)| *ctx != left);
    wait_gone(
        &gone[0].1,
        Duration::from_secs(10),
        "an ended MCP session's browser",
    )
    .await;
    assert!(
        kept[0].1.iter().all(procs::alive),
        "the other session's browser died"
    );
    let s2 = text_of(&two.call("pw__browser_snapshot", json!({})).await);
    shows_only(&s2, "beta-marker", "alpha-marker");
}
