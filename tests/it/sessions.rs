//! Sessions that outlive their socket (`resume_session`, `seq`, `ack`) and
//! call keys (`callKey`): nothing a dropped socket was owed is lost, and a
//! request sent again does not run twice. A call that must still be
//! running when something happens waits at the test server's barrier
//! (`barrier.rs`) until the test lets it go.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use crate::barrier;
use crate::procs;
use crate::servers::wait_running;
use crate::support::{call_log, testserver_entry, until_changed, TestHub, Ws};

const WAIT: Duration = Duration::from_secs(30);

/// A raw socket that checks the hub's numbering: every frame but
/// `session_resumed` carries the next `seq` of the session it serves.
struct Sock {
    ws: Ws,
    last_seq: u64,
    session: String,
    token: String,
    /// Every numbered frame of the session this socket serves, in order.
    frames: Vec<Value>,
}

enum Got {
    Frame(Value),
    Closed(Option<CloseFrame>),
}

impl Sock {
    async fn open(hub: &TestHub) -> Sock {
        let ws = hub.connect_raw().await;
        let mut s = Sock {
            ws,
            last_seq: 0,
            session: String::new(),
            token: String::new(),
            frames: Vec::new(),
        };
        let hello = s.frame().await;
        assert_eq!(hello["type"], "hello");
        assert_eq!(hello["seq"], 1, "hello is a session's first frame");
        s.session = hello["sessionId"].as_str().expect("sessionId").into();
        s.token = hello["resumeToken"].as_str().expect("resumeToken").into();
        assert!(s.token.len() >= 32, "128 bits or more: {}", s.token);
        assert!(hello["bootId"].is_string(), "{hello}");
        s
    }

    async fn send(&mut self, v: Value) {
        self.ws
            .send(Message::Text(v.to_string().into()))
            .await
            .expect("send");
    }

    async fn next(&mut self) -> Got {
        let r = tokio::time::timeout(WAIT, async {
            loop {
                match self.ws.next().await {
                    None | Some(Err(_)) => return Got::Closed(None),
                    Some(Ok(Message::Text(t))) => {
                        let v: Value = serde_json::from_str(t.as_str()).expect("json");
                        if v["type"] != "session_resumed" {
                            let seq = v["seq"].as_u64().unwrap_or_else(|| panic!("no seq: {v}"));
                            assert_eq!(seq, self.last_seq + 1, "a gap or a repeat in seq at {v}");
                            self.last_seq = seq;
                            self.frames.push(v.clone());
                        }
                        return Got::Frame(v);
                    }
                    Some(Ok(Message::Close(f))) => return Got::Closed(f),
                    Some(Ok(_)) => {}
                }
            }
        })
        .await;
        r.unwrap_or_else(|_| panic!("nothing from the hub within {WAIT:?}"))
    }

    async fn frame(&mut self) -> Value {
        match self.next().await {
            Got::Frame(v) => v,
            Got::Closed(f) => panic!("socket closed: {f:?}"),
        }
    }

    async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let v = self.frame().await;
            if pred(&v) {
                return v;
            }
        }
    }

    /// Send `msg` and read up to its reply.
    async fn request(&mut self, msg: Value) -> Value {
        let id = msg["id"].clone();
        self.send(msg).await;
        self.until(|v| v["replyTo"] == id).await
    }

    /// Take over `(session, token)` having processed every frame up to
    /// `last_seq`; the reply (`session_resumed` or an error).
    async fn resume(&mut self, session: &str, token: &str, last_seq: u64) -> Value {
        self.send(json!({"type": "resume_session", "id": "resume", "sessionId": session, "resumeToken": token, "lastSeq": last_seq}))
            .await;
        let v = self.until(|v| v["replyTo"] == "resume").await;
        if v["type"] == "session_resumed" {
            self.last_seq = last_seq;
            self.session = session.into();
            self.token = token.into();
            self.frames.clear();
        }
        v
    }
}

async fn hub_with(extra: Value) -> TestHub {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut config = json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])}});
    if let (Some(c), Value::Object(e)) = (config.as_object_mut(), extra) {
        c.extend(e);
    }
    let hub = TestHub::start_in(dir, config).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    hub
}

/// How many calls of `tool` the test server `t` logged.
fn calls_of(hub: &TestHub, tool: &str) -> usize {
    call_log(hub.dir.path(), "t")
        .iter()
        .filter(|c| c["tool"] == tool)
        .count()
}

/// The hub has handled the close of `session`'s socket (with no grace,
/// ended the session).
async fn socket_closed(hub: &TestHub, session: &str) {
    hub.wait_log(&format!("client disconnected session={session}"))
        .await;
}

/// Make sure the hub has read everything sent so far on this socket.
async fn settle(s: &mut Sock, n: u32) {
    let id = format!("settle-{n}");
    s.request(json!({"type": "ping", "id": id})).await;
}

#[tokio::test]
async fn a_call_running_as_its_socket_drops_is_answered_once_on_resume() {
    let hub = hub_with(json!({})).await;
    let mut gate = hub.connect().await;
    let mut a = Sock::open(&hub).await;
    a.send(json!({"type": "tool_call", "id": "held", "tool": "t__barrier", "params": {"name": "held"}}))
        .await;
    // The call runs at the server when the socket drops, and until the
    // session is resumed.
    barrier::await_waiting(&mut gate, "t", "held", 1).await;
    let (session, token, seen) = (a.session.clone(), a.token.clone(), a.last_seq);
    drop(a);
    socket_closed(&hub, &session).await;
    let mut b = Sock::open(&hub).await;
    let resumed = b.resume(&session, &token, seen).await;
    assert_eq!(resumed["type"], "session_resumed", "{resumed}");
    assert_eq!(resumed["sessionId"], session.as_str());
    assert_eq!(resumed["fromSeq"], seen + 1);
    assert_eq!(barrier::release(&mut gate, "t", "held").await, 1);
    let result = b.until(|v| v["replyTo"] == "held").await;
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["result"], "released");
    // Exactly once: nothing else answers it, and the tool ran once.
    settle(&mut b, 2).await;
    let answers = b.frames.iter().filter(|v| v["replyTo"] == "held").count();
    assert_eq!(answers, 1);
    assert_eq!(calls_of(&hub, "barrier"), 1);
}

#[tokio::test]
async fn a_batch_dropped_at_random_points_delivers_every_step_once_in_order() {
    let hub = hub_with(json!({})).await;
    let steps: Vec<Value> = (0..20)
        .map(|i| json!({"id": format!("s{i}"), "tool": "t__slow", "params": {"ms": 15, "message": format!("step {i}")}}))
        .collect();
    for round in 0..20 {
        let mut a = Sock::open(&hub).await;
        let batch_id = format!("b{round}");
        a.send(json!({"type": "tool_batch", "id": batch_id, "steps": steps}))
            .await;
        // Read a random number of the batch's frames, then drop the socket.
        let stop = rand::random_range(0..24usize);
        let mut first = a.frames.len();
        for _ in 0..stop {
            let v = a.frame().await;
            if v["type"] == "batch_complete" {
                break;
            }
        }
        first = first.min(a.frames.len());
        let mut seen: Vec<Value> = a.frames[first..].to_vec();
        let (session, token, last) = (a.session.clone(), a.token.clone(), a.last_seq);
        drop(a);
        let mut b = Sock::open(&hub).await;
        let r = b.resume(&session, &token, last).await;
        assert_eq!(r["type"], "session_resumed", "round {round}: {r}");
        if !seen.iter().any(|v| v["type"] == "batch_complete") {
            b.until(|v| v["type"] == "batch_complete").await;
        }
        seen.extend(b.frames.iter().cloned());
        let steps_seen: Vec<u64> = seen
            .iter()
            .filter(|v| v["type"] == "batch_step_result" && v["batchId"] == batch_id.as_str())
            .map(|v| v["stepIndex"].as_u64().expect("stepIndex"))
            .collect();
        assert_eq!(
            steps_seen,
            (0..20).collect::<Vec<u64>>(),
            "round {round} (dropped after {stop} frames): every step once, in order"
        );
        let completes = seen
            .iter()
            .filter(|v| v["type"] == "batch_complete" && v["batchId"] == batch_id.as_str())
            .count();
        assert_eq!(completes, 1, "round {round}");
    }
    assert_eq!(calls_of(&hub, "slow"), 400, "every step ran once");
}

#[tokio::test]
async fn a_need_user_issued_while_detached_is_delivered_on_resume() {
    let hub = hub_with(json!({"safety": {"confirmTimeout": 60000, "rules": [
        {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}
    ]}}))
    .await;
    let mut gate = hub.connect().await;
    let mut a = Sock::open(&hub).await;
    a.send(json!({"type": "tool_batch", "id": "gated", "steps": [
        {"tool": "t__barrier", "params": {"name": "gated"}},
        {"tool": "t__echo", "params": {"message": "danger"}}
    ]}))
    .await;
    barrier::await_waiting(&mut gate, "t", "gated", 1).await;
    let (session, token, last) = (a.session.clone(), a.token.clone(), a.last_seq);
    drop(a);
    // The batch reaches the question only once the socket is gone.
    socket_closed(&hub, &session).await;
    barrier::release(&mut gate, "t", "gated").await;
    hub.wait_log("waiting for a person to confirm").await;
    let mut b = Sock::open(&hub).await;
    let r = b.resume(&session, &token, last).await;
    assert_eq!(r["type"], "session_resumed", "{r}");
    let ask = b.until(|v| v["type"] == "need_user").await;
    let ok = b
        .request(json!({"type": "confirm", "id": "yes", "taskId": ask["taskId"], "approve": true}))
        .await;
    assert_eq!(ok["type"], "confirmed", "{ok}");
    let done = b.until(|v| v["type"] == "batch_complete").await;
    assert_eq!(done["success"], true, "{done}");

    // A single call's need_user names the call it asks about.
    b.send(json!({"type": "tool_call", "id": "q1", "tool": "t__echo", "params": {"message": "danger"}, "callKey": "nk"}))
        .await;
    let ask = b.until(|v| v["type"] == "need_user").await;
    assert_eq!(ask["requestId"], "q1", "{ask}");
    assert_eq!(ask["callKey"], "nk", "{ask}");
    b.request(json!({"type": "confirm", "id": "yes2", "taskId": ask["taskId"], "approve": true}))
        .await;
    let r = b.until(|v| v["replyTo"] == "q1").await;
    assert_eq!(r["success"], true, "{r}");
}

#[tokio::test]
async fn refused_resumes_say_why_and_a_second_taker_closes_the_first() {
    let hub = hub_with(json!({"server": {"resumeBufferBytes": 16384}})).await;
    let mut a = Sock::open(&hub).await;
    let (session, token) = (a.session.clone(), a.token.clone());

    let mut x = Sock::open(&hub).await;
    let wrong = x
        .resume(&session, "00112233445566778899aabbccddeeff", 0)
        .await;
    assert_eq!(wrong["error"]["errorType"], "UNAUTHORIZED", "{wrong}");
    let unknown = x.resume("no-such-session", &token, 0).await;
    assert_eq!(unknown["error"]["errorType"], "NOT_FOUND", "{unknown}");
    let sugg = unknown["error"]["suggestion"].as_str().unwrap_or_default();
    assert!(
        sugg.contains("list_tasks") && sugg.contains("task_status"),
        "{sugg}"
    );
    let beyond = x.resume(&session, &token, 1000).await;
    assert_eq!(beyond["error"]["errorType"], "INVALID_MESSAGE", "{beyond}");
    // The refusals were answered in x's own session, which goes on.
    let pong = x.request(json!({"type": "ping", "id": "p"})).await;
    assert_eq!(pong["type"], "pong");
    // resume_session later than first is refused.
    let late = x.resume(&session, &token, 0).await;
    assert_eq!(late["error"]["errorType"], "INVALID_MESSAGE", "{late}");

    // Frames the buffer no longer keeps: fill it past 16 KiB.
    for i in 0..800 {
        a.request(json!({"type": "ping", "id": format!("fill-{i}")}))
            .await;
    }
    let mut y = Sock::open(&hub).await;
    let old = y.resume(&session, &token, 1).await;
    assert_eq!(old["error"]["errorType"], "LIMIT_EXCEEDED", "{old}");

    // A second taker while a is still attached: a is closed with 4001.
    let mut z = Sock::open(&hub).await;
    let taken = z.resume(&session, &token, a.last_seq).await;
    assert_eq!(taken["type"], "session_resumed", "{taken}");
    loop {
        match a.next().await {
            Got::Frame(_) => continue,
            Got::Closed(f) => {
                let f = f.expect("a close frame");
                assert_eq!(u16::from(f.code), 4001, "{f:?}");
                break;
            }
        }
    }
    let pong = z.request(json!({"type": "ping", "id": "z"})).await;
    assert_eq!(pong["type"], "pong");
}

#[tokio::test]
async fn a_session_past_its_grace_is_gone_and_grace_zero_drops_at_once() {
    let hub = hub_with(json!({"server": {"sessionGraceMs": 300}})).await;
    let a = Sock::open(&hub).await;
    let (session, token, last) = (a.session.clone(), a.token.clone(), a.last_seq);
    drop(a);
    hub.wait_log(&format!("session={session} reason=GraceOver"))
        .await;
    let mut b = Sock::open(&hub).await;
    let r = b.resume(&session, &token, last).await;
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");

    // With no grace a drop ends the session and cancels its calls.
    let hub = hub_with(json!({"server": {"sessionGraceMs": 0}})).await;
    let mut gate = hub.connect().await;
    let mut a = Sock::open(&hub).await;
    a.send(json!({"type": "tool_call", "id": "held", "tool": "t__barrier", "params": {"name": "held"}}))
        .await;
    barrier::await_waiting(&mut gate, "t", "held", 1).await;
    let (session, token, last) = (a.session.clone(), a.token.clone(), a.last_seq);
    drop(a);
    socket_closed(&hub, &session).await;
    let mut b = Sock::open(&hub).await;
    let r = b.resume(&session, &token, last).await;
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");
    // The server saw the cancellation, and nothing waits at the barrier.
    hub.wait_log("testserver t cancelled barrier").await;
    assert_eq!(barrier::release(&mut gate, "t", "held").await, 0);
}

/// Single calls belong to their session: when it ends they are cancelled
/// (each of 100 commands is killed: its shell is gone long before its
/// `sleep` ends, and none appends; the server sees a
/// `notifications/cancelled` for each of its 20 calls); a batch goes on as
/// a task.
#[tokio::test]
async fn a_session_that_ends_cancels_its_calls_but_not_its_batches() {
    let hub =
        hub_with(json!({"server": {"sessionGraceMs": 0, "maxInFlightPerSession": 128}})).await;
    let ws = hub.dir.path().join("workspace");
    let mut gate = hub.connect().await;
    let mut a = Sock::open(&hub).await;
    for i in 0..100 {
        a.send(json!({"type": "tool_call", "id": i, "tool": "run_command", "params": {"command": "echo $$ >> started.txt; sleep 30; echo late >> dropped.txt"}}))
            .await;
    }
    for i in 0..20 {
        a.send(json!({"type": "tool_call", "id": format!("s{i}"), "tool": "t__barrier", "params": {"name": "calls"}}))
            .await;
    }
    a.send(json!({"type": "tool_batch", "id": "survives", "steps": [
        {"tool": "t__barrier", "params": {"name": "batch"}},
        {"tool": "run_command", "params": {"command": "echo batch >> batch.txt"}}
    ]}))
    .await;
    // Everything runs when the socket drops: the server's 20 calls and the
    // batch wait at their barriers, the 100 shells have started.
    barrier::await_waiting(&mut gate, "t", "calls", 20).await;
    barrier::await_waiting(&mut gate, "t", "batch", 1).await;
    let started = || {
        std::fs::read_to_string(ws.join("started.txt"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert!(
        until_changed(&ws, WAIT, || started() == 100).await,
        "the 100 commands did not all start"
    );
    // The shells as the hub's process tree shows them: in the sandbox each
    // is PID 2 of a namespace of its own, so its `$$` names nothing here.
    let shells: Vec<_> = procs::descendants(hub.pid())
        .into_iter()
        .filter(|p| p.comm == "sh")
        .collect();
    assert_eq!(shells.len(), 100, "{shells:?}");
    let session = a.session.clone();
    drop(a);
    socket_closed(&hub, &session).await;
    // The batch goes on without its session.
    assert_eq!(barrier::release(&mut gate, "t", "batch").await, 1);
    let l = gate.request(json!({"type": "list_tasks"})).await;
    let task = l["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["batchId"] == "survives")
        .unwrap_or_else(|| panic!("the batch's task is listed: {l}"))["taskId"]
        .clone();
    let st = gate
        .request(json!({"type": "task_status", "taskId": task, "wait": true}))
        .await;
    assert_eq!(st["task"]["state"], "success", "{st}");
    assert!(ws.join("batch.txt").exists());
    procs::wait_gone(&shells, Duration::from_secs(10), "a cancelled command").await;
    assert!(
        !ws.join("dropped.txt").exists(),
        "a cancelled call still ran to its end"
    );
    hub.wait_log_count("testserver t cancelled barrier", 20)
        .await;
    assert_eq!(barrier::release(&mut gate, "t", "calls").await, 0);
}

#[tokio::test]
async fn a_call_key_runs_its_call_once() {
    let hub = hub_with(json!({})).await;
    let ws = hub.dir.path().join("workspace");
    let mut s = Sock::open(&hub).await;
    let cmd = json!({"command": "echo once >> keyed.txt"});
    let first = s
        .request(json!({"type": "tool_call", "id": 1, "tool": "run_command", "params": cmd, "callKey": "k-seq"}))
        .await;
    assert_eq!(first["success"], true, "{first}");
    assert!(first.get("deduplicated").is_none(), "{first}");
    let second = s
        .request(json!({"type": "tool_call", "id": 2, "tool": "run_command", "params": cmd, "callKey": "k-seq"}))
        .await;
    assert_eq!(second["deduplicated"], true, "{second}");
    assert_eq!(second["result"], first["result"]);
    let lines = std::fs::read_to_string(ws.join("keyed.txt")).expect("file");
    assert_eq!(lines.lines().count(), 1, "{lines}");
    assert_eq!(first["callKey"], "k-seq", "the reply names its key");
    let h = s
        .request(json!({"type": "history", "id": "h", "limit": 50}))
        .await;
    let keyed = h["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["callKey"] == "k-seq")
        .count();
    assert_eq!(keyed, 1, "history notes the key of the one run: {h}");

    // The second sent while the first waits at the server: it waits for
    // the first's answer, and the server sees one call.
    let mut gate = hub.connect().await;
    let held = json!({"name": "k-par"});
    s.send(json!({"type": "tool_call", "id": 3, "tool": "t__barrier", "params": held, "callKey": "k-par"}))
        .await;
    barrier::await_waiting(&mut gate, "t", "k-par", 1).await;
    s.send(json!({"type": "tool_call", "id": 4, "tool": "t__barrier", "params": held, "callKey": "k-par"}))
        .await;
    settle(&mut s, 3).await;
    assert_eq!(barrier::release(&mut gate, "t", "k-par").await, 1);
    let a = s.until(|v| v["replyTo"] == 3 || v["replyTo"] == 4).await;
    let b = s.until(|v| v["replyTo"] == 3 || v["replyTo"] == 4).await;
    assert_eq!(a["success"], true, "{a}");
    assert_eq!(b["success"], true, "{b}");
    let dedup = [&a, &b]
        .iter()
        .filter(|v| v["deduplicated"] == true)
        .count();
    assert_eq!(dedup, 1, "{a} {b}");
    assert_eq!(calls_of(&hub, "barrier"), 1);

    // The same key with other params is refused.
    let other = s
        .request(json!({"type": "tool_call", "id": 5, "tool": "run_command", "params": {"command": "echo other"}, "callKey": "k-seq"}))
        .await;
    assert_eq!(other["error"]["errorType"], "INVALID_MESSAGE", "{other}");
    assert!(other["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("other params"));

    // A batch's key: a repeat gets the first task, deduplicated.
    let batch = json!({"type": "tool_batch", "id": "kb1", "callKey": "k-batch", "steps": [
        {"tool": "run_command", "params": {"command": "echo b >> keyed3.txt"}}
    ]});
    s.send(batch.clone()).await;
    let done = s.until(|v| v["type"] == "batch_complete").await;
    let mut again = batch;
    again["id"] = json!("kb2");
    let repeat = s.request(again).await;
    assert_eq!(repeat["type"], "task", "{repeat}");
    assert_eq!(repeat["deduplicated"], true);
    assert_eq!(repeat["task"]["taskId"], done["taskId"]);
    assert_eq!(repeat["task"]["callKey"], "k-batch");
    let lines = std::fs::read_to_string(ws.join("keyed3.txt")).expect("file");
    assert_eq!(lines.lines().count(), 1, "{lines}");
}

#[tokio::test]
async fn a_batch_call_key_outlives_a_restart() {
    let hub = hub_with(json!({})).await;
    let mut s = Sock::open(&hub).await;
    let batch = json!({"type": "tool_batch", "id": "r1", "callKey": "k-restart", "steps": [
        {"tool": "t__echo", "params": {"message": "hi"}}
    ]});
    s.send(batch.clone()).await;
    let done = s.until(|v| v["type"] == "batch_complete").await;
    drop(s);
    let hub = hub.crash_and_restart().await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let mut s = Sock::open(&hub).await;
    let mut again = batch;
    again["id"] = json!("r2");
    let repeat = s.request(again).await;
    assert_eq!(repeat["deduplicated"], true, "{repeat}");
    assert_eq!(repeat["task"]["taskId"], done["taskId"]);
}

#[tokio::test]
async fn calls_over_the_session_cap_fail_at_once() {
    // The default cap (server.maxInFlightPerSession 64) against 200 calls.
    let hub = hub_with(json!({})).await;
    let mut gate = hub.connect().await;
    let mut s = Sock::open(&hub).await;
    for i in 0..200 {
        s.send(
            json!({"type": "tool_call", "id": i, "tool": "t__barrier", "params": {"name": "cap"}}),
        )
        .await;
    }
    // At once: every refusal comes while the first 64 wait at the barrier.
    for _ in 0..136 {
        let r = s
            .until(|v| v["type"] == "tool_result" || v["type"] == "error")
            .await;
        assert_eq!(
            r["error"]["errorType"], "LIMIT_EXCEEDED",
            "a call finished before a refusal: {r}"
        );
        assert!(r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("maxInFlightPerSession"));
    }
    assert_eq!(
        barrier::release_when_waiting(&mut gate, "t", "cap", 64).await,
        64
    );
    for _ in 0..64 {
        let r = s
            .until(|v| v["type"] == "tool_result" || v["type"] == "error")
            .await;
        assert_eq!(r["success"], true, "{r}");
    }
}

/// Sessions waiting for a resume are bounded apart (they hold no slot):
/// past `server.maxConnections` of them the oldest ends.
#[tokio::test]
async fn detached_sessions_are_bounded_and_the_oldest_goes_first() {
    let hub = hub_with(json!({"server": {"maxConnections": 3}})).await;
    let waiting = "the session waits for a resume_session";
    // hub_with's own client has gone already.
    hub.wait_log_count(waiting, 1).await;
    let mut dropped = Vec::new();
    for n in 0..5 {
        let a = Sock::open(&hub).await;
        dropped.push((a.session.clone(), a.token.clone(), a.last_seq));
        drop(a);
        hub.wait_log_count(waiting, n + 2).await;
    }
    hub.wait_log("ending the oldest").await;
    let (first, last) = (&dropped[0], &dropped[4]);
    let mut x = Sock::open(&hub).await;
    let r = x.resume(&first.0, &first.1, first.2).await;
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");
    let mut y = Sock::open(&hub).await;
    let r = y.resume(&last.0, &last.1, last.2).await;
    assert_eq!(r["type"], "session_resumed", "{r}");
}
