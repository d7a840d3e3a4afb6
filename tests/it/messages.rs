//! Issue 16.3: every message a person reads says what happened in words.
//! One tour through the fault tests' situations (a crash with an exit
//! status, a hang, a flaky call, a failing call, a JSON-RPC error, garbage
//! on stdout, a server that cannot start, a wedged server, bad frames and
//! batches) collects every error message, suggestion, lastError, reason and
//! check the client sees, and the hub's log at info level and above, and
//! fails on Rust debug output in any of them.

use serde_json::{json, Value};

use crate::servers::wait_running;
use crate::support::{testserver_entry, Client, TestHub};

/// Rust `Debug` output that must never reach a person.
fn debug_shape(text: &str) -> Option<&'static str> {
    let patterns: [(&str, &str); 5] = [
        (r"\bOk\(", "Ok("),
        (r"\bErr\(", "Err("),
        (r"\bSome\(", "Some("),
        (r"\bNone\b", "None"),
        (
            r"\b[A-Z][A-Za-z]+ \{ [a-z_]+: ",
            "a struct dump { field: … }",
        ),
    ];
    patterns.into_iter().find_map(|(re, name)| {
        regex::Regex::new(re)
            .expect("regex")
            .is_match(text)
            .then_some(name)
    })
}

/// Every human-facing string in a message: error texts, suggestions,
/// lastError, reasons, check messages and fixes.
fn texts(v: &Value, key: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                texts(x, k, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| texts(x, key, out)),
        Value::String(s)
            if matches!(
                key,
                "message" | "suggestion" | "lastError" | "reason" | "fix" | "error" | "note"
            ) =>
        {
            out.push(format!("{key}: {s}"))
        }
        _ => {}
    }
}

async fn wait_state(c: &mut Client, server: &str, states: &[&str]) -> Value {
    let (server, states) = (
        server.to_string(),
        states.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    );
    c.recv_where("server_status", move |v| {
        v["type"] == "server_status"
            && v["name"] == server.as_str()
            && v["state"]
                .as_str()
                .is_some_and(|s| states.iter().any(|x| x == s))
    })
    .await
}

#[tokio::test]
async fn no_message_a_person_reads_carries_rust_debug_output() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {
                "t": testserver_entry(&p, "t", &[]),
                "gone": {"command": "/nonexistent/mcp-server"},
            },
            // Pings of a second: at 200 ms a loaded machine (load average 10+)
            // missed two and the prober restarted the server mid-test.
            "healthCheck": {"interval": 1000, "autoFix": true},
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;

    // A crash with an exit status, mid-call.
    let r = c
        .request(
            json!({"type": "tool_call", "tool": "t__crash", "params": {"code": 3}, "retry": false}),
        )
        .await;
    assert_eq!(r["success"], false, "{r}");
    let down = wait_state(&mut c, "t", &["restarting", "crash_loop"]).await;
    let last = down["lastError"].as_str().unwrap_or_default().to_string();
    assert!(!last.is_empty(), "{down}");
    wait_state(&mut c, "t", &["running"]).await;

    // A hang past its timeout, a flaky call, a failing one, a JSON-RPC
    // error, garbage on stdout, an unknown tool.
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__hang", "params": {}, "timeout": 300, "retry": false}))
        .await;
    assert_eq!(r["error"]["errorType"], "TIMEOUT", "{r}");
    let r = c
        .request(
            json!({"type": "tool_call", "tool": "t__flaky", "params": {"key": "m", "failures": 1},
            "retry": {"maxRetries": 1, "delay": 10}}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    c.call("t__fail", json!({"message": "the disk is full"}))
        .await;
    c.request(
        json!({"type": "tool_call", "tool": "t__jsonrpc_error", "params": {}, "retry": false}),
    )
    .await;
    c.call("t__garbage", json!({})).await;
    c.call("t__no_such_tool", json!({})).await;
    c.call("gone__anything", json!({})).await;

    // Bad frames and a bad batch.
    c.send_text("{not json").await;
    c.recv_type("error").await;
    let e = c
        .request(json!({"type": "tool_batch", "steps": [{"tool": "t__echo", "params": {"message": "{{nope.result}}"}}]}))
        .await;
    assert_eq!(e["type"], "error", "{e}");
    c.send(json!({"type": "tool_batch", "id": "fb", "steps": [
            {"tool": "t__fail", "params": {"message": "step failed"}},
            {"tool": "t__echo", "params": {"message": "x"}, "when": "success"}
        ], "options": {"stopOnError": false}}))
        .await;
    c.recv_where("batch_complete", |v| {
        v["type"] == "batch_complete" && v["batchId"] == "fb"
    })
    .await;

    // A wedged server, found by the prober and restarted.
    c.send(json!({"type": "tool_call", "id": "frozen", "tool": "t__freeze", "params": {}, "timeout": 60000, "retry": false}))
        .await;
    c.recv_where("the frozen call's result", |v| v["replyTo"] == "frozen")
        .await;
    wait_state(&mut c, "t", &["running"]).await;

    // The server that cannot start has said why by now.
    let h = c.request(json!({"type": "health_check"})).await;
    let gone = h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "gone")
        .cloned()
        .expect("gone listed");
    assert!(gone["lastError"].is_string(), "{gone}");

    let mut found = Vec::new();
    for m in &c.seen {
        texts(m, "", &mut found);
    }
    let mut bad: Vec<String> = found
        .iter()
        .filter_map(|t| debug_shape(t).map(|shape| format!("{shape} in {t}")))
        .collect();
    for line in hub.logs().lines() {
        let shown = [" INFO ", " WARN ", " ERROR "]
            .iter()
            .any(|l| line.contains(l));
        if shown {
            if let Some(shape) = debug_shape(line) {
                bad.push(format!("{shape} in log line: {line}"));
            }
        }
    }
    assert!(
        found.len() > 20,
        "the tour should produce many messages: {found:#?}"
    );
    assert!(
        bad.is_empty(),
        "debug output a person would read:\n{}",
        bad.join("\n")
    );
}
