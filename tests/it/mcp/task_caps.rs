//! Caps that hold for MCP tasks and stateless calls (issue 49.6): a
//! `tools/call` that becomes a task keeps its place under its caller's cap
//! (`server.maxInFlightPerSession`) until the task ends; a token's
//! stateless requests count as one session; `server.maxUnattendedTasks`
//! bounds the tasks no client drives over the whole hub. Over a cap the
//! call is refused at once with `LIMIT_EXCEEDED` naming the key. The work
//! waits at the test server's barrier, so what runs at once is counted by
//! the server, not guessed from timing.

use serde_json::{json, Value};

use super::direct::{message, reply_of};
use super::{hub_with, raw_http};
use crate::barrier;
use crate::support::{testserver_entry, Client, TestHub, WAIT};

const TASKS: &str = "io.modelcontextprotocol/tasks";
pub(super) const EXT: &str = "ext-token-0123456789abcdef";
const CAP: usize = 16;
const SENT: usize = 100;

/// A hub with the test server `t`, the client `ext` (view `chat`: `t`'s
/// tools), `server` settings, and a main-token `/ws` client.
async fn hub(server: Value) -> (TestHub, Client) {
    let hub = hub_with(
        |d| json!({"t": testserver_entry(d, "t", &[])}),
        json!({
            "server": server,
            "views": {"chat": {"tools": ["t__*"]}},
            "clients": {"ext": {"token": EXT, "views": ["chat"]}},
        }),
    )
    .await;
    let mut ws = hub.connect().await;
    super::wait_running(&mut ws, &["t"]).await;
    (hub, ws)
}

/// Who sends: a token, the path it may open, and its session (`None`: a
/// stateless 2026-07-28 request).
pub(super) struct Asker<'a> {
    pub token: &'a str,
    pub path: &'a str,
    pub session: Option<&'a str>,
}

/// One JSON-RPC request as `from` sends it (a stateless one declares
/// elicitation and the tasks extension, as client "raw"); the answer.
pub(super) async fn send(
    hub: &TestHub,
    from: &Asker<'_>,
    id: u64,
    method: &str,
    mut params: Value,
) -> Value {
    let version = match from.session {
        Some(_) => "2025-11-25",
        None => "2026-07-28",
    };
    if from.session.is_none() {
        let meta = params["_meta"].as_object().cloned().unwrap_or_default();
        let mut m = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        });
        for (k, v) in meta {
            m[k] = v;
        }
        params["_meta"] = m;
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let mut req = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {}\r\nMcp-Protocol-Version: {version}\r\nContent-Length: {}\r\nConnection: close\r\n",
        from.path,
        hub.addr,
        from.token,
        body.len()
    );
    match from.session {
        Some(s) => req.push_str(&format!("Mcp-Session-Id: {s}\r\n")),
        None => {
            req.push_str(&format!("Mcp-Method: {method}\r\n"));
            if let Some(n) = params["name"].as_str() {
                req.push_str(&format!("Mcp-Name: {n}\r\n"));
            }
        }
    }
    req.push_str("\r\n");
    req.push_str(&body);
    message(&reply_of(&raw_http(hub, &req).await))
}

/// A session of the main token at `/mcp` that declared the tasks
/// extension; its id.
async fn open_session(hub: &TestHub) -> String {
    let caps = json!({"extensions": {TASKS: {}}});
    let (sid, version) = super::direct::open_asking(hub, caps, "2025-11-25").await;
    assert_eq!(version, "2025-11-25");
    sid
}

/// What a task-augmented call of the barrier `name` got.
enum Got {
    Task(String),
    Refused(Value),
}

async fn task_call(hub: &TestHub, from: &Asker<'_>, id: u64, name: &str) -> Got {
    let params = json!({"name": "t__barrier", "arguments": {"name": name},
        "_meta": {"toolhub/task": true}});
    let m = send(hub, from, id, "tools/call", params).await;
    let r = &m["result"];
    if r["isError"] == true {
        return Got::Refused(r["structuredContent"].clone());
    }
    let task = r["taskId"].as_str().or(r["task"]["taskId"].as_str());
    match task {
        Some(t) => Got::Task(t.to_string()),
        None => panic!("neither a task nor a refusal: {m}"),
    }
}

fn limit(error: &Value, key: &str) -> bool {
    error["errorType"] == "LIMIT_EXCEEDED"
        && error["message"].as_str().is_some_and(|m| m.contains(key))
        && error["suggestion"]
            .as_str()
            .is_some_and(|s| s.contains(&format!("raise {key}")))
}

/// Send `n` task calls; (task ids, refusals).
async fn task_calls(
    hub: &TestHub,
    from: &Asker<'_>,
    n: usize,
    name: &str,
) -> (Vec<String>, Vec<Value>) {
    let (mut tasks, mut refused) = (Vec::new(), Vec::new());
    for i in 0..n {
        match task_call(hub, from, 100 + i as u64, name).await {
            Got::Task(t) => tasks.push(t),
            Got::Refused(e) => refused.push(e),
        }
    }
    (tasks, refused)
}

/// Release the barrier `name` once `n` wait (asserting exactly `n` ran at
/// once), then wait until `n` more tasks have finished.
async fn release_and_finish(hub: &TestHub, ws: &mut Client, name: &str, n: usize, before: usize) {
    let waited = barrier::release_when_waiting(ws, "t", name, n).await;
    assert_eq!(waited, n as u64, "the server had exactly {n} at once");
    hub.wait_log_count("toolhub::engine::runner: task finished", before + n)
        .await;
}

/// A task call from `from` is taken again once the ended tasks' places are
/// back (each is given back right after its "task finished" line).
async fn taken_again(hub: &TestHub, from: &Asker<'_>, name: &str) -> String {
    let got = tokio::time::timeout(WAIT, async {
        loop {
            if let Got::Task(t) = task_call(hub, from, 999, name).await {
                return t;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    got.expect("a place came back when the tasks ended")
}

#[tokio::test]
async fn a_hundred_mcp_tasks_of_one_session_against_a_cap_of_sixteen() {
    let (hub, mut ws) = hub(json!({"maxInFlightPerSession": CAP})).await;
    let token = hub.token.clone().expect("token");
    let sid = open_session(&hub).await;
    let me = Asker {
        token: &token,
        path: "/mcp",
        session: Some(&sid),
    };
    let (tasks, refused) = task_calls(&hub, &me, SENT, "tasks").await;
    assert_eq!((tasks.len(), refused.len()), (CAP, SENT - CAP));
    for e in &refused {
        assert!(limit(e, "server.maxInFlightPerSession"), "{e}");
    }
    // The running tasks hold the session's places: a plain call is refused
    // too, while another session is not held back.
    let plain = json!({"name": "t__echo", "arguments": {"message": "x"}});
    let m = send(&hub, &me, 7, "tools/call", plain.clone()).await;
    assert!(
        limit(
            &m["result"]["structuredContent"],
            "server.maxInFlightPerSession"
        ),
        "{m}"
    );
    let other = open_session(&hub).await;
    let them = Asker {
        session: Some(&other),
        ..me
    };
    let m = send(&hub, &them, 8, "tools/call", plain).await;
    assert_ne!(m["result"]["isError"], true, "{m}");
    release_and_finish(&hub, &mut ws, "tasks", CAP, 0).await;
    let t = taken_again(&hub, &me, "after").await;
    barrier::release(&mut ws, "t", "after").await;
    assert!(!tasks.contains(&t));
}

#[tokio::test]
async fn stateless_calls_count_under_a_cap_per_token() {
    let (hub, mut ws) = hub(json!({"maxInFlightPerSession": CAP})).await;
    let token = hub.token.clone().expect("token");
    let ext = Asker {
        token: EXT,
        path: "/mcp/chat",
        session: None,
    };
    // Each stateless request is a session of its own, yet the client's
    // together stop at the cap.
    let (tasks, refused) = task_calls(&hub, &ext, CAP + 4, "stateless").await;
    assert_eq!((tasks.len(), refused.len()), (CAP, 4));
    for e in &refused {
        assert!(limit(e, "server.maxInFlightPerSession"), "{e}");
        assert!(
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("client \"ext\"")),
            "{e}"
        );
    }
    // A plain stateless call of that client is refused as well...
    let plain = json!({"name": "t__echo", "arguments": {"message": "x"}});
    let m = send(&hub, &ext, 1, "tools/call", plain.clone()).await;
    let e = &m["result"]["structuredContent"];
    assert!(limit(e, "server.maxInFlightPerSession"), "{m}");
    // ... and the main token's stateless calls have their own count.
    let main = Asker {
        token: &token,
        path: "/mcp",
        session: None,
    };
    let m = send(&hub, &main, 2, "tools/call", plain).await;
    assert_ne!(m["result"]["isError"], true, "{m}");
    release_and_finish(&hub, &mut ws, "stateless", CAP, 0).await;
    taken_again(&hub, &ext, "after").await;
    barrier::release(&mut ws, "t", "after").await;
}

#[tokio::test]
async fn the_hub_runs_at_most_max_unattended_tasks_of_all_clients() {
    let (hub, mut ws) = hub(json!({"maxInFlightPerSession": CAP, "maxUnattendedTasks": 3})).await;
    let token = hub.token.clone().expect("token");
    let main = Asker {
        token: &token,
        path: "/mcp",
        session: None,
    };
    let ext = Asker {
        token: EXT,
        path: "/mcp/chat",
        session: None,
    };
    let (mine, none) = task_calls(&hub, &main, 2, "unattended").await;
    assert_eq!((mine.len(), none.len()), (2, 0));
    let (theirs, refused) = task_calls(&hub, &ext, 2, "unattended").await;
    assert_eq!((theirs.len(), refused.len()), (1, 1));
    let (more, refused_main) = task_calls(&hub, &main, 1, "unattended").await;
    assert!(more.is_empty());
    for e in refused.iter().chain(&refused_main) {
        assert!(limit(e, "server.maxUnattendedTasks"), "{e}");
        let s = e["suggestion"].as_str().unwrap_or("");
        assert!(
            s.contains("tasks/cancel") && s.contains("without a task"),
            "{e}"
        );
    }
    // A call that is no task is not held back by the tasks' cap.
    let plain = json!({"name": "t__echo", "arguments": {"message": "x"}});
    let m = send(&hub, &ext, 1, "tools/call", plain).await;
    assert_ne!(m["result"]["isError"], true, "{m}");
    // Exactly three ran; the refused ones never started.
    release_and_finish(&hub, &mut ws, "unattended", 3, 0).await;
    taken_again(&hub, &ext, "after").await;
    barrier::release(&mut ws, "t", "after").await;
}

/// Held calls count per token too (review S11): a stateless call whose
/// session-era server asks mid-call is held open for the client's retry,
/// and keeps its place under its token's cap while held, so one client
/// cannot hold more than the cap (and none of another's); the retry that
/// answers a held call takes no second place, so a client at its cap can
/// still answer. (One held call per server: a session-era server's
/// question is only relayed while one client has calls on it.)
#[tokio::test]
async fn held_calls_keep_their_place_under_their_tokens_cap() {
    let servers = ["a", "b", "c"];
    let hub = hub_with(
        |d| {
            let mut all = json!({});
            for s in servers {
                all[s] = testserver_entry(d, s, &["--conformance"]);
            }
            all
        },
        json!({
            "server": {"maxInFlightPerSession": 2},
            "views": {"chat": {"tools": ["a__*", "b__*", "c__*"]}},
            "clients": {"ext": {"token": EXT, "views": ["chat"]}},
        }),
    )
    .await;
    let mut ws = hub.connect().await;
    super::wait_running(&mut ws, &servers).await;
    let token = hub.token.clone().expect("token");
    let ext = Asker {
        token: EXT,
        path: "/mcp/chat",
        session: None,
    };
    let main = Asker {
        token: &token,
        path: "/mcp",
        session: None,
    };
    let twice = |s: &str| json!({"name": format!("{s}__toolhub_elicit_twice"), "arguments": {}});
    let held = |m: &Value| -> String {
        assert_eq!(m["result"]["resultType"], "input_required", "{m}");
        m["result"]["requestState"]
            .as_str()
            .expect("state")
            .to_string()
    };
    let first = held(&send(&hub, &ext, 1, "tools/call", twice("a")).await);
    held(&send(&hub, &ext, 2, "tools/call", twice("b")).await);
    let m = send(&hub, &ext, 3, "tools/call", twice("c")).await;
    let e = &m["result"]["structuredContent"];
    assert!(limit(e, "server.maxInFlightPerSession"), "{m}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("client \"ext\"")),
        "{m}"
    );
    // The main token's stateless calls are not held back by ext's.
    held(&send(&hub, &main, 4, "tools/call", twice("c")).await);
    // ext answers its first held call at its cap: the call goes on.
    let mut retry = twice("a");
    retry["requestState"] = json!(first);
    retry["inputResponses"] =
        json!({"toolhub_input": {"action": "accept", "content": {"name": "Ada"}}});
    let m = send(&hub, &ext, 5, "tools/call", retry).await;
    held(&m);
    assert!(m.to_string().contains("Step 2"), "{m}");
}

/// A `/ws` batch whose session ended runs on with no client to drive it:
/// it counts under `server.maxUnattendedTasks` too (and is never stopped
/// for it), so opening and dropping sessions cannot pile up work past the
/// hub-wide cap.
#[tokio::test]
async fn a_ws_batch_whose_session_ended_counts_as_unattended() {
    let (hub, mut ws) = hub(json!({
        "maxInFlightPerSession": CAP,
        "maxUnattendedTasks": 1,
        "sessionGraceMs": 0,
    }))
    .await;
    let mut gone = hub.connect().await;
    gone.send(json!({"type": "tool_batch", "id": "left", "steps": [
        {"tool": "t__barrier", "params": {"name": "detached"}}
    ]}))
    .await;
    barrier::await_waiting(&mut ws, "t", "detached", 1).await;
    drop(gone);
    // The session is gone once health no longer counts it.
    tokio::time::timeout(WAIT, async {
        loop {
            let h = ws.request(json!({"type": "health_check"})).await;
            if h["connected"][""]["ws"] == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the dropped session ended");
    let token = hub.token.clone().expect("token");
    let main = Asker {
        token: &token,
        path: "/mcp",
        session: None,
    };
    let (tasks, refused) = task_calls(&hub, &main, 1, "later").await;
    assert_eq!((tasks.len(), refused.len()), (0, 1), "{refused:?}");
    assert!(
        limit(&refused[0], "server.maxUnattendedTasks"),
        "{}",
        refused[0]
    );
    // The batch ran on, and once it ends its room comes back.
    barrier::release(&mut ws, "t", "detached").await;
    hub.wait_log_count("toolhub::engine::runner: task finished", 1)
        .await;
    taken_again(&hub, &main, "after").await;
    barrier::release(&mut ws, "t", "after").await;
}
