//! Issue 31, per-context instances, on the test server: its `memo` tool
//! keeps a value in its process (as a browser keeps its page) and says
//! its pid, so a test sees which instance served a call and what state
//! it had. The playwright flavour is `browser_tabs.rs`.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::barrier;
use crate::mcp::driver::Driver;
use crate::procs::{self, wait_gone};
use crate::servers::wait_running;
use crate::support::{testserver_entry, with_test_defaults, write_config, Client, TestHub};

/// Room for an instance's process to go once the hub stopped it.
const GONE: Duration = Duration::from_secs(10);

/// A `scope: "context"` entry for the test server `t`.
fn context_entry(dir: &Path, max: usize, idle_ms: u64) -> Value {
    let mut e = testserver_entry(dir, "t", &[]);
    e["scope"] = json!("context");
    e["maxInstances"] = json!(max);
    e["instanceIdleMs"] = json!(idle_ms);
    e
}

/// The config of these tests: `t` per context, sessions that end as
/// their socket closes.
fn config(dir: &Path, max: usize, idle_ms: u64) -> Value {
    with_test_defaults(json!({
        "mcpServers": {"t": context_entry(dir, max, idle_ms)},
        "server": {"sessionGraceMs": 0},
    }))
}

/// A hub with `t` per context (its template running) and a client.
async fn start(max: usize, idle_ms: u64) -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let cfg = config(dir.path(), max, idle_ms);
    let hub = TestHub::start_in(dir, cfg).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, c)
}

/// The session id from the client's `hello`.
pub(crate) fn session_id(c: &Client) -> String {
    let hello = c.seen.iter().find(|v| v["type"] == "hello").expect("hello");
    hello["sessionId"].as_str().expect("sessionId").to_string()
}

/// What a `memo` call saw: the value its process remembers, its pid, and
/// the context the hub says it ran in.
#[derive(Debug)]
struct Memo {
    memo: Value,
    pid: i32,
    context: String,
}

/// The `tool_call` of `t__memo` in `label`'s context (the session's own
/// when `None`), storing `value` when given.
fn memo_msg(label: Option<&str>, value: Option<&str>) -> Value {
    let mut params = json!({});
    if let Some(v) = value {
        params["value"] = json!(v);
    }
    let mut msg = json!({"type": "tool_call", "tool": "t__memo", "params": params});
    if let Some(l) = label {
        msg["context"] = json!(l);
    }
    msg
}

fn memo_of(r: &Value) -> Memo {
    assert_eq!(r["type"], "tool_result", "{r}");
    assert_eq!(r["success"], true, "{r}");
    Memo {
        memo: r["result"]["memo"].clone(),
        pid: r["result"]["pid"]
            .as_i64()
            .unwrap_or_else(|| panic!("no pid in {r}")) as i32,
        context: r["context"]
            .as_str()
            .unwrap_or_else(|| panic!("no context in {r}"))
            .to_string(),
    }
}

async fn memo(c: &mut Client, label: Option<&str>, value: Option<&str>) -> Memo {
    let r = c.request(memo_msg(label, value)).await;
    memo_of(&r)
}

/// `server`'s entry in `health_status`.
pub(crate) async fn server_health(c: &mut Client, server: &str) -> Value {
    let h = c.request(json!({"type": "health_check"})).await;
    assert_eq!(h["type"], "health_status", "{h}");
    h["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .find(|s| s["name"] == server)
        .cloned()
        .unwrap_or_else(|| panic!("no server {server} in {h}"))
}

async fn health_of_t(c: &mut Client) -> Value {
    server_health(c, "t").await
}

/// `t`'s instance for `context` in health, if any.
fn instance<'a>(t: &'a Value, context: &str) -> Option<&'a Value> {
    t["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .find(|i| i["context"] == context)
}

fn instance_count(t: &Value) -> usize {
    t["instances"].as_array().expect("instances").len()
}

/// The live processes of a pid's tree (the test server has no children,
/// so this is the process itself).
fn live(pid: i32) -> Vec<procs::Proc> {
    let t = procs::tree(pid);
    assert!(!t.is_empty(), "process {pid} is not alive");
    t
}

#[tokio::test]
async fn two_sessions_get_their_own_instance_with_its_own_memo() {
    let (hub, mut a) = start(8, 600_000).await;
    let mut b = hub.connect().await;
    let (sa, sb) = (session_id(&a), session_id(&b));
    let ma = memo(&mut a, None, Some("alpha")).await;
    let mb = memo(&mut b, None, Some("beta")).await;
    assert_ne!(ma.pid, mb.pid, "two contexts, one process: {ma:?} {mb:?}");
    assert_eq!(
        (ma.context.as_str(), mb.context.as_str()),
        (sa.as_str(), sb.as_str())
    );
    // Each reads back its own, from its own process.
    let ra = memo(&mut a, None, None).await;
    let rb = memo(&mut b, None, None).await;
    assert_eq!((ra.memo, ra.pid), (json!("alpha"), ma.pid));
    assert_eq!((rb.memo, rb.pid), (json!("beta"), mb.pid));
    // The template serves no calls: neither is its pid.
    let t = health_of_t(&mut a).await;
    let template = t["pid"].as_i64().expect("template pid") as i32;
    assert!(template != ma.pid && template != mb.pid, "{t}");
    // The history entries say which context each call ran in.
    let h = a.request(json!({"type": "history", "limit": 10})).await;
    let contexts: Vec<&Value> = h["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries in {h}"))
        .iter()
        .map(|e| &e["context"])
        .collect();
    assert!(contexts.contains(&&json!(sa)), "{h}");
    assert!(contexts.contains(&&json!(sb)), "{h}");
}

#[tokio::test]
async fn labels_split_a_session_and_the_same_label_shares_its_instance() {
    let (_hub, mut c) = start(8, 600_000).await;
    let sid = session_id(&c);
    let a1 = memo(&mut c, Some("tab-1"), Some("one")).await;
    let b1 = memo(&mut c, Some("tab-2"), None).await;
    let own = memo(&mut c, None, None).await;
    assert_eq!(a1.context, format!("{sid}/tab-1"));
    assert_eq!(b1.context, format!("{sid}/tab-2"));
    assert_eq!(own.context, sid);
    assert_eq!(b1.memo, Value::Null, "tab-2 saw tab-1's memo: {b1:?}");
    assert_eq!(
        own.memo,
        Value::Null,
        "the session saw tab-1's memo: {own:?}"
    );
    let pids = [a1.pid, b1.pid, own.pid];
    assert!(
        pids[0] != pids[1] && pids[1] != pids[2] && pids[0] != pids[2],
        "{pids:?}"
    );
    let a2 = memo(&mut c, Some("tab-1"), None).await;
    assert_eq!(
        (a2.memo, a2.pid),
        (json!("one"), a1.pid),
        "same label, same instance"
    );
    // A label the hub cannot take is refused before anything runs.
    let bad = c.request(memo_msg(Some(""), None)).await;
    assert_eq!(bad["type"], "error", "{bad}");
    assert_eq!(bad["error"]["errorType"], "INVALID_MESSAGE", "{bad}");
}

#[tokio::test]
async fn past_the_cap_a_new_context_gets_limit_exceeded_naming_the_cap_and_holders() {
    let (_hub, mut c) = start(2, 600_000).await;
    let sid = session_id(&c);
    let a = memo(&mut c, Some("a"), Some("kept")).await;
    memo(&mut c, Some("b"), None).await;
    let r = c.request(memo_msg(Some("c"), None)).await;
    assert_eq!(r["success"], false, "{r}");
    let e = &r["error"];
    assert_eq!(e["errorType"], "LIMIT_EXCEEDED", "{r}");
    let msg = e["message"].as_str().expect("message");
    for needle in [
        "mcpServers.t.maxInstances".to_string(),
        format!("{sid}/a"),
        format!("{sid}/b"),
        format!("{sid}/c"),
        "2".to_string(),
    ] {
        assert!(msg.contains(&needle), "{needle:?} not in {msg:?}");
    }
    // The contexts holding the cap are untouched.
    let t = health_of_t(&mut c).await;
    assert_eq!(instance_count(&t), 2, "{t}");
    let again = memo(&mut c, Some("a"), None).await;
    assert_eq!((again.memo, again.pid), (json!("kept"), a.pid));
    // One stopped frees its place for the refused context.
    let s = c
        .request(json!({"type": "stop_instance", "server": "t", "context": format!("{sid}/b")}))
        .await;
    assert_eq!(s["type"], "instance_stopped", "{s}");
    let m = memo(&mut c, Some("c"), None).await;
    assert_eq!(m.context, format!("{sid}/c"));
}

#[tokio::test]
async fn an_idle_instance_is_stopped_and_its_process_is_gone() {
    let (_hub, mut c) = start(8, 1000).await;
    let m = memo(&mut c, Some("idle"), Some("before")).await;
    let procs = live(m.pid);
    // Unused for instanceIdleMs (1 s): stopped, its process gone (the
    // reaper's timing, plus room for the stop).
    let took = wait_gone(
        &procs,
        Duration::from_millis(1000) + GONE,
        "an idle instance",
    )
    .await;
    assert!(
        took >= Duration::from_millis(500),
        "stopped after {took:?}, before it was idle"
    );
    let t = health_of_t(&mut c).await;
    assert_eq!(instance_count(&t), 0, "{t}");
    // Every client heard of its start, its running and its stop.
    c.recv_where("the idle instance's stop", |v| {
        v["type"] == "instance_status" && v["state"] == "stopped"
    })
    .await;
    let heard: Vec<(Value, Value)> = c
        .seen
        .iter()
        .filter(|v| v["type"] == "instance_status" && v["context"] == m.context.as_str())
        .map(|v| (v["state"].clone(), v["reason"].clone()))
        .collect();
    assert_eq!(
        heard,
        vec![
            (json!("starting"), json!("a new context")),
            (json!("running"), Value::Null),
            (json!("stopped"), json!("it was idle for instanceIdleMs")),
        ],
        "{heard:?}"
    );
    // The context's next call starts a fresh one: its memo is gone.
    let fresh = memo(&mut c, Some("idle"), None).await;
    assert_ne!(fresh.pid, m.pid);
    assert_eq!(fresh.memo, Value::Null);
}

#[tokio::test]
async fn a_session_that_ends_stops_its_instances_and_leaves_the_others() {
    let (hub, mut keep) = start(8, 600_000).await;
    let mut gone = hub.connect().await;
    let g1 = memo(&mut gone, None, None).await;
    let g2 = memo(&mut gone, Some("tab"), None).await;
    let k = memo(&mut keep, None, Some("mine")).await;
    let mut doomed = live(g1.pid);
    doomed.extend(live(g2.pid));
    // The socket closes; with sessionGraceMs 0 the session ends now.
    gone.ws.close(None).await.expect("close");
    drop(gone);
    wait_gone(&doomed, GONE, "a closed session's instances").await;
    let t = health_of_t(&mut keep).await;
    assert_eq!(instance_count(&t), 1, "{t}");
    assert!(instance(&t, &k.context).is_some(), "{t}");
    let again = memo(&mut keep, None, None).await;
    assert_eq!((again.memo, again.pid), (json!("mine"), k.pid));
}

#[tokio::test]
async fn a_killed_instance_restarts_alone_and_the_other_keeps_its_memo() {
    let (hub, mut c) = start(8, 600_000).await;
    let a = memo(&mut c, Some("a"), Some("lost")).await;
    let b = memo(&mut c, Some("b"), Some("kept")).await;
    let t = health_of_t(&mut c).await;
    let template = t["pid"].clone();
    let pid = instance(&t, &a.context).expect("instance a")["pid"]
        .as_i64()
        .expect("pid") as i32;
    assert_eq!(pid, a.pid, "health's pid is the instance's process: {t}");
    let victim = live(pid);
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait_gone(&victim, GONE, "the killed instance").await;
    hub.wait_log(&format!("context={} state=Running restarts=1", a.context))
        .await;
    let a2 = memo(&mut c, Some("a"), None).await;
    assert_ne!(a2.pid, a.pid, "the instance did not restart");
    assert_eq!(a2.memo, Value::Null, "a restarted instance starts afresh");
    let b2 = memo(&mut c, Some("b"), None).await;
    assert_eq!(
        (b2.memo, b2.pid),
        (json!("kept"), b.pid),
        "the other was touched"
    );
    let t = health_of_t(&mut c).await;
    assert_eq!(t["pid"], template, "the template restarted: {t}");
    assert_eq!(t["restarts"], 0, "{t}");
    assert_eq!(instance(&t, &a.context).expect("a")["restarts"], 1, "{t}");
    assert_eq!(instance(&t, &b.context).expect("b")["restarts"], 0, "{t}");
}

#[tokio::test]
async fn health_lists_each_instance_and_get_health_says_the_same() {
    let (hub, mut c) = start(3, 45_000).await;
    let a = memo(&mut c, Some("a"), Some("x")).await;
    memo(&mut c, Some("a"), None).await;
    let b = memo(&mut c, Some("b"), None).await;
    let t = health_of_t(&mut c).await;
    assert_eq!(t["scope"], "context", "{t}");
    assert_eq!(t["maxInstances"], 3, "{t}");
    assert_eq!(t["instanceIdleMs"], 45_000, "{t}");
    assert_eq!(instance_count(&t), 2, "{t}");
    for (m, calls) in [(&a, 2), (&b, 1)] {
        let i = instance(&t, &m.context).unwrap_or_else(|| panic!("no {} in {t}", m.context));
        assert_eq!(i["server"], "t", "{i}");
        assert_eq!(i["state"], "running", "{i}");
        assert_eq!(i["pid"], m.pid, "{i}");
        assert_eq!(i["calls"], calls, "{i}");
        assert_eq!(i["active"], 0, "{i}");
        assert_eq!(i["restarts"], 0, "{i}");
        for key in ["startedAt", "lastUse"] {
            assert!(
                i[key].as_str().is_some_and(|s| s.contains('T')),
                "{key}: {i}"
            );
        }
        for key in ["uptimeMs", "idleMs"] {
            assert!(i[key].is_u64(), "{key}: {i}");
        }
        assert!(i.get("lastError").is_none(), "{i}");
    }
    // GET /health is the same JSON.
    let token = hub.token.clone().expect("token");
    let (code, body) = crate::threats::http_get(
        &hub.addr,
        "/health",
        &[
            ("Host", hub.addr.clone()),
            ("Authorization", format!("Bearer {token}")),
        ],
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    let ht = v["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .find(|s| s["name"] == "t")
        .cloned()
        .expect("t");
    assert_eq!(ht["scope"], "context", "{ht}");
    assert_eq!(ht["maxInstances"], 3, "{ht}");
    let pids = |t: &Value| {
        let mut p: Vec<(String, i64)> = t["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .map(|i| {
                (
                    i["context"].as_str().unwrap_or("").to_string(),
                    i["pid"].as_i64().unwrap_or(0),
                )
            })
            .collect();
        p.sort();
        p
    };
    assert_eq!(pids(&ht), pids(&t));
}

#[tokio::test]
async fn stop_instance_stops_its_process_and_an_unknown_one_is_not_found() {
    let (_hub, mut c) = start(8, 600_000).await;
    let a = memo(&mut c, Some("a"), Some("x")).await;
    let b = memo(&mut c, Some("b"), Some("y")).await;
    let procs = live(a.pid);
    let r = c
        .request(json!({"type": "stop_instance", "server": "t", "context": a.context}))
        .await;
    assert_eq!(r["type"], "instance_stopped", "{r}");
    assert_eq!(
        (&r["server"], &r["context"]),
        (&json!("t"), &json!(a.context))
    );
    wait_gone(&procs, GONE, "a stopped instance").await;
    let again = c
        .request(json!({"type": "stop_instance", "server": "t", "context": a.context}))
        .await;
    assert_eq!(again["type"], "error", "{again}");
    assert_eq!(again["error"]["errorType"], "NOT_FOUND", "{again}");
    let other = c
        .request(json!({"type": "stop_instance", "server": "nope", "context": b.context}))
        .await;
    assert_eq!(other["error"]["errorType"], "NOT_FOUND", "{other}");
    // The other instance runs on; the stopped context starts afresh.
    let b2 = memo(&mut c, Some("b"), None).await;
    assert_eq!((b2.memo, b2.pid), (json!("y"), b.pid));
    let a2 = memo(&mut c, Some("a"), None).await;
    assert_ne!(a2.pid, a.pid);
    assert_eq!(a2.memo, Value::Null);
}

#[tokio::test]
async fn the_tool_list_does_not_change_as_instances_come_and_go() {
    let (_hub, mut c) = start(8, 600_000).await;
    let list = |v: &Value| {
        let hash = v["hash"]
            .as_str()
            .unwrap_or_else(|| panic!("no hash in {v}"))
            .to_string();
        let memos = v["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter(|t| t["qualifiedName"] == "t__memo")
            .count();
        (hash, memos)
    };
    let before = list(&c.request(json!({"type": "list_tools"})).await);
    assert_eq!(before.1, 1, "t__memo listed once");
    // From here on (the template's own start announced its tools before).
    let mark = c.seen.len();
    let mut ms = Vec::new();
    for label in ["a", "b", "c"] {
        ms.push(memo(&mut c, Some(label), None).await);
    }
    let during = list(&c.request(json!({"type": "list_tools"})).await);
    let doomed: Vec<procs::Proc> = ms.iter().flat_map(|m| live(m.pid)).collect();
    for m in &ms {
        let r = c
            .request(json!({"type": "stop_instance", "server": "t", "context": m.context}))
            .await;
        assert_eq!(r["type"], "instance_stopped", "{r}");
    }
    wait_gone(&doomed, GONE, "the stopped instances").await;
    let after = list(&c.request(json!({"type": "list_tools"})).await);
    assert_eq!(during, before, "starting instances changed the tool list");
    assert_eq!(after, before, "stopping instances changed the tool list");
    let updates: Vec<&Value> = c.seen[mark..]
        .iter()
        .filter(|v| v["type"] == "tools_updated")
        .collect();
    assert!(
        updates.is_empty(),
        "instances sent tools_updated: {updates:?}"
    );
}

#[tokio::test]
async fn a_reload_of_the_entry_restarts_instances_and_a_limit_change_keeps_them() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut cfg = config(&p, 8, 600_000);
    let hub = TestHub::start_in(dir, cfg.clone()).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let a = memo(&mut c, Some("a"), Some("x")).await;
    let b = memo(&mut c, Some("b"), Some("y")).await;

    // Only the limits: applied as they are, no instance restarts.
    cfg["mcpServers"]["t"]["maxInstances"] = json!(5);
    cfg["mcpServers"]["t"]["instanceIdleMs"] = json!(300_000);
    write_config(&p.join("config.json"), &cfg);
    hub.wait_log_count("config reloaded", 1).await;
    let reloaded = hub.wait_log("config reloaded").await;
    assert!(reloaded.contains("changed=[]"), "{reloaded}");
    // The line is logged once the reload is in force.
    let t = server_health(&mut c, "t").await;
    assert_eq!(t["maxInstances"], 5, "{t}");
    assert_eq!(t["instanceIdleMs"], 300_000, "{t}");
    for (m, v) in [(&a, "x"), (&b, "y")] {
        let i = instance(&t, &m.context).expect("instance");
        assert_eq!(
            (i["pid"].as_i64(), &i["restarts"]),
            (Some(m.pid as i64), &json!(0)),
            "{t}"
        );
        let again = memo(
            &mut c,
            Some(m.context.rsplit('/').next().expect("label")),
            None,
        )
        .await;
        assert_eq!((again.memo, again.pid), (json!(v), m.pid));
    }

    // The args: every instance restarts with them (new processes).
    let doomed: Vec<procs::Proc> = [a.pid, b.pid].into_iter().flat_map(live).collect();
    let args = cfg["mcpServers"]["t"]["args"].as_array_mut().expect("args");
    let log = p.join("t2.calls.jsonl").display().to_string();
    let i = args.iter().position(|a| a == "--log").expect("--log") + 1;
    args[i] = json!(log);
    write_config(&p.join("config.json"), &cfg);
    hub.wait_log_count("config reloaded", 2).await;
    wait_gone(&doomed, GONE, "instances of the old entry").await;
    let a2 = memo(&mut c, Some("a"), None).await;
    let b2 = memo(&mut c, Some("b"), None).await;
    assert!(a2.pid != a.pid && b2.pid != b.pid, "{a2:?} {b2:?}");
    assert_eq!((a2.memo, b2.memo), (Value::Null, Value::Null));
    // The new args are in force: the calls are logged where they now say.
    let logged = crate::support::call_log(&p, "t2");
    assert!(logged.iter().any(|l| l["tool"] == "memo"), "{logged:?}");
}

/// `server`'s health entry once it satisfies `ok`: asked again after each
/// `instance_status` event of that server (the hub sends one when an
/// instance starts, changes state or stops, once health shows it).
pub(crate) async fn health_until(
    c: &mut Client,
    server: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        let t = server_health(c, server).await;
        if ok(&t) {
            return t;
        }
        c.recv_where(&format!("an instance_status of {server} (now {t})"), |v| {
            v["type"] == "instance_status" && v["server"] == server
        })
        .await;
    }
}

#[tokio::test]
async fn a_batch_runs_its_steps_in_its_context_and_journals_it() {
    let (hub, mut c) = start(8, 600_000).await;
    let sid = session_id(&c);
    c.send(
        json!({"type": "tool_batch", "id": "b", "context": "tab-9", "steps": [
            {"tool": "t__memo", "params": {"value": "from the batch"}},
            {"tool": "t__memo", "params": {}}
        ]}),
    )
    .await;
    let done = c
        .recv_where("batch b done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "b"
        })
        .await;
    assert_eq!(done["success"], true, "{done}");
    let steps: Vec<Value> = c
        .seen
        .iter()
        .filter(|v| v["type"] == "batch_step_result" && v["batchId"] == "b")
        .cloned()
        .collect();
    assert_eq!(steps.len(), 2, "{steps:?}");
    let pid = |s: &Value| {
        s["result"]["pid"]
            .as_i64()
            .unwrap_or_else(|| panic!("no pid in {s}"))
    };
    assert_eq!(pid(&steps[0]), pid(&steps[1]), "{steps:?}");
    assert_eq!(steps[1]["result"]["memo"], "from the batch", "{steps:?}");
    // The batch's context is the session's tab-9: a call there sees it.
    let there = memo(&mut c, Some("tab-9"), None).await;
    assert_eq!(
        (there.memo, there.pid as i64),
        (json!("from the batch"), pid(&steps[0]))
    );
    assert_eq!(there.context, format!("{sid}/tab-9"));
    let own = memo(&mut c, None, None).await;
    assert_eq!(
        own.memo,
        Value::Null,
        "the batch ran in the session's own context"
    );
    // The task journal's header records the context.
    let task = done["taskId"].as_str().expect("taskId");
    let journal = std::fs::read_to_string(hub.path().join(format!("state/tasks/{task}.jsonl")))
        .expect("journal");
    let header: Value =
        serde_json::from_str(journal.lines().next().expect("header")).expect("header JSON");
    assert_eq!(header["context"], format!("{sid}/tab-9"), "{header}");
}

#[tokio::test]
async fn mcp_sessions_get_their_own_instances_and_lose_them_when_they_end() {
    let (hub, mut c) = start(8, 600_000).await;
    let (mut one, _) = Driver::connect(&hub, json!({})).await;
    let (mut two, _) = Driver::connect(&hub, json!({})).await;
    let m1 = one.call("t__memo", json!({"value": "first"})).await;
    let m2 = two.call("t__memo", json!({"value": "second"})).await;
    let pid = |r: &Value| {
        r["structuredContent"]["pid"]
            .as_i64()
            .unwrap_or_else(|| panic!("{r}")) as i32
    };
    assert_ne!(pid(&m1), pid(&m2), "two MCP sessions, one process");
    let r1 = one.call("t__memo", json!({})).await;
    let r2 = two.call("t__memo", json!({})).await;
    assert_eq!(r1["structuredContent"]["memo"], "first", "{r1}");
    assert_eq!(r2["structuredContent"]["memo"], "second", "{r2}");
    let t = health_of_t(&mut c).await;
    let contexts: Vec<&str> = t["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .filter_map(|i| i["context"].as_str())
        .collect();
    assert_eq!(contexts.len(), 2, "{t}");
    assert!(contexts.iter().all(|c| c.starts_with("mcp-")), "{t}");
    // The first session ends (DELETE): its instance goes, the other stays.
    let doomed = live(pid(&m1));
    one.ok(json!({"op": "close"})).await;
    wait_gone(&doomed, GONE, "an ended MCP session's instance").await;
    let again = two.call("t__memo", json!({})).await;
    assert_eq!(again["structuredContent"]["memo"], "second", "{again}");
    assert_eq!(pid(&again), pid(&m2));
    let t = health_of_t(&mut c).await;
    assert_eq!(instance_count(&t), 1, "{t}");
}

/// The batch holds its context, not a call in it: its middle step waits at
/// the barrier of `u`, a shared server, while the session ends.
#[tokio::test]
async fn a_running_batch_holds_its_context_past_its_session_then_lets_it_go() {
    let dir = tempfile::tempdir().expect("dir");
    let mut cfg = config(dir.path(), 8, 600_000);
    cfg["mcpServers"]["u"] = testserver_entry(dir.path(), "u", &[]);
    let hub = TestHub::start_in(dir, cfg).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    wait_running(&mut c, "u").await;
    let mut gate = hub.connect().await;
    let session = session_id(&c);
    c.send(
        json!({"type": "tool_batch", "id": "held", "context": "tab", "steps": [
            {"tool": "t__memo", "params": {"value": "held"}},
            {"tool": "u__barrier", "params": {"name": "held"}},
            {"tool": "t__memo", "params": {}}
        ]}),
    )
    .await;
    let s0 = c
        .recv_where("step 0", |v| {
            v["type"] == "batch_step_result" && v["batchId"] == "held" && v["stepIndex"] == 0
        })
        .await;
    let pid = s0["result"]["pid"].as_i64().expect("pid") as i32;
    let procs = live(pid);
    barrier::await_waiting(&mut gate, "u", "held", 1).await;
    // The session ends (sessionGraceMs 0) while step 1 waits.
    c.ws.close(None).await.expect("close");
    drop(c);
    hub.wait_log(&format!("session ended session={session}"))
        .await;
    assert!(
        procs.iter().all(procs::alive),
        "the instance went with its session while its batch runs: {procs:?}"
    );
    assert_eq!(barrier::release(&mut gate, "u", "held").await, 1);
    wait_gone(&procs, GONE, "a batch's instance").await;
    // It went only once the batch's last step had run in it.
    let log = crate::support::call_log(&hub.path(), "t");
    let last = log.last().expect("calls");
    assert_eq!(
        (&last["tool"], &last["pid"]),
        (&json!("memo"), &json!(pid)),
        "{log:?}"
    );
    assert_eq!(log.len(), 2, "{log:?}");
}
