//! SEP-1699 at `/mcp` (`server.mcpStreamPoll`): a 2025-11-25 session
//! client's call still running after the poll time has its POST stream
//! ended after a `retry` hint and without its result; `GET` with
//! `Last-Event-ID` brings the result, and the server ran the call once. A
//! 2025-06-18 client, which would not resume, keeps its stream.

use serde_json::{json, Value};

use super::direct::{message, open_asking, post_with, reply_of, Reply};
use super::wait_running;
use crate::support::{call_log, testserver_entry, TestHub};

fn slow(id: u64, ms: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "t__slow", "arguments": {"ms": ms, "message": "slow done"}}})
}

/// The SSE events of a stream's text: (id, data) for each.
fn events(body: &str) -> Vec<(Option<String>, String)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let field = |name: &str| {
                e.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_string())
            };
            (field("id:"), field("data:").unwrap_or_default())
        })
        .collect()
}

async fn resume(hub: &TestHub, sid: &str, last: &str) -> Reply {
    let mut req = format!(
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\nMcp-Protocol-Version: 2025-11-25\r\nLast-Event-ID: {last}\r\nConnection: close\r\n",
        hub.addr
    );
    if let Some(t) = &hub.token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    reply_of(&super::raw_http(hub, &req).await)
}

#[tokio::test]
async fn a_long_calls_stream_ends_and_its_result_comes_on_the_resumed_stream() {
    let dir = tempfile::tempdir().expect("dir");
    let t = testserver_entry(dir.path(), "t", &[]);
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": t}, "server": {"mcpStreamPoll": 200}}),
    )
    .await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let (sid, version) = open_asking(&hub, json!({}), "2025-11-25").await;
    assert_eq!(version, "2025-11-25");
    let v = [("Mcp-Protocol-Version", "2025-11-25")];

    // The POST stream ends (the connection reads to its end) before the
    // call does: a priming event, then the hub's event with `retry`.
    let r = post_with(&hub, Some(&sid), true, slow(7, 1500), &v).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.headers.contains("text/event-stream"), "{}", r.headers);
    assert!(
        !r.body.contains("slow done"),
        "the result came before the poll time: {}",
        r.body
    );
    assert!(r.body.contains("retry:"), "no retry hint: {}", r.body);
    let last = events(&r.body)
        .into_iter()
        .filter_map(|(id, _)| id)
        .next_back()
        .unwrap_or_else(|| panic!("no event id to resume from: {}", r.body));

    // The resumed stream brings the result, once, and then ends.
    let r = resume(&hub, &sid, &last).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let answers: Vec<Value> = events(&r.body)
        .into_iter()
        .filter_map(|(_, data)| serde_json::from_str::<Value>(&data).ok())
        .filter(|m| m["id"] == 7)
        .collect();
    assert_eq!(answers.len(), 1, "{}", r.body);
    assert!(
        answers[0]["result"].to_string().contains("slow done"),
        "{}",
        r.body
    );
    let runs = call_log(hub.dir.path(), "t")
        .iter()
        .filter(|c| c["tool"] == "slow")
        .count();
    assert_eq!(runs, 1, "the server ran the call {runs} times");

    // A 2025-06-18 client would not resume: its stream is kept whole.
    let (old, _) = open_asking(&hub, json!({}), "2025-06-18").await;
    let r = post_with(&hub, Some(&old), true, slow(8, 600), &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let answer = message(&r);
    assert_eq!(answer["id"], 8, "{answer}");
    assert!(
        answer["result"].to_string().contains("slow done"),
        "{answer}"
    );
}
