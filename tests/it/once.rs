//! Never twice (issue 38): a call whose outcome is unknown (the hub's
//! deadline passed, the server went away after reading it, the hub killed
//! the work) is run again only when its tool is safe to repeat; side
//! effects are counted, not inferred.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::servers::wait_running;
use crate::support::{call_log, testserver_entry, until_changed, Client, TestHub};

/// A hub with the test server `t` running and a client; TIMEOUT retries
/// wait 10 ms, and `t__destructive` is named safe to repeat by config.
async fn hub() -> (TestHub, Client) {
    hub_with(json!({})).await
}

/// [`hub`] with `server` settings.
pub(crate) async fn hub_with(server: Value) -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    std::fs::create_dir_all(p.join("workspace")).expect("ws");
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": testserver_entry(&p, "t", &[])},
            "retry": {
                "strategies": {"TIMEOUT": {"delay": 10}, "SERVER_UNAVAILABLE": {"delay": 10}},
                "safeToRepeat": ["t__destructive"]
            },
            "server": server
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, c)
}

/// The calls of `tool` the test server logged (each before it ran), once
/// at least `min` are there (bounded wait: the log is written by the
/// server as it reads the request, which may be after the hub gave up).
async fn calls_of(dir: &Path, tool: &str, min: usize) -> usize {
    let count = || {
        call_log(dir, "t")
            .iter()
            .filter(|c| c["tool"] == tool)
            .count()
    };
    // Each change to the folder (the server appending its log) wakes the
    // check; at most 10 s.
    until_changed(dir, Duration::from_secs(10), || count() >= min).await;
    count()
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

#[tokio::test]
async fn an_unannotated_tool_that_times_out_runs_once() {
    let (hub, mut c) = hub().await;
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__hang", "params": {}, "timeout": 300}))
        .await;
    assert_eq!(r["error"]["errorType"], "TIMEOUT", "{r}");
    assert_eq!(r["attempts"], 1, "not run again: {r}");
    assert!(
        text(&r["error"]["message"]).contains("outcome unknown"),
        "{r}"
    );
    assert!(
        text(&r["error"]["suggestion"]).contains("retry.safeToRepeat"),
        "{r}"
    );
    // Not to be sent again as it is: the suggestion says check first.
    assert_eq!(r["error"]["recoverable"], false, "{r}");
    assert_eq!(calls_of(hub.dir.path(), "hang", 1).await, 1);
}

#[tokio::test]
async fn run_command_killed_at_a_timeout_ran_once() {
    let (hub, mut c) = hub().await;
    let ws = hub.dir.path().join("workspace");
    // The hub's deadline for the call.
    let r = c
        .request(json!({"type": "tool_call", "tool": "run_command",
            "params": {"command": "echo ran >> once.txt; sleep 5"}, "timeout": 1500}))
        .await;
    assert_eq!(r["error"]["errorType"], "TIMEOUT", "{r}");
    assert_eq!(r["attempts"], 1, "{r}");
    assert_eq!(lines(&ws.join("once.txt")), 1, "{r}");
    // run_command's own timeout: it killed the command, after it wrote.
    let r = c
        .call(
            "run_command",
            json!({"command": "echo ran >> twice.txt; sleep 5", "timeout": 1500}),
        )
        .await;
    assert_eq!(r["error"]["errorType"], "TIMEOUT", "{r}");
    assert_eq!(r["attempts"], 1, "{r}");
    assert!(
        text(&r["error"]["message"]).contains("outcome unknown"),
        "{r}"
    );
    assert_eq!(lines(&ws.join("twice.txt")), 1, "{r}");
}

#[tokio::test]
async fn a_read_only_tool_or_one_config_names_is_retried() {
    let (hub, mut c) = hub().await;
    // 300 ms, then 600 ms (extend_timeout): the second attempt has time.
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__slow_read", "params": {"ms": 450}, "timeout": 300}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let attempts = r["attempts"].as_u64().unwrap_or(0);
    assert!(attempts >= 2, "{r}");
    assert_eq!(r["retries"][0]["errorType"], "TIMEOUT", "{r}");
    assert_eq!(
        calls_of(hub.dir.path(), "slow_read", attempts as usize).await,
        attempts as usize
    );
    // destructiveHint, but retry.safeToRepeat names it.
    let r = c
        .request(json!({"type": "tool_call", "tool": "t__destructive", "params": {"ms": 450}, "timeout": 300}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert!(r["attempts"].as_u64().unwrap_or(0) >= 2, "{r}");
}

/// A server that exits while it runs the call: the call may have acted, so
/// an unannotated tool is not run again (before, SERVER_UNAVAILABLE was
/// retried whatever the tool); a call to the server while it is down never
/// reached it and is retried once it is back.
#[tokio::test]
async fn a_crash_during_the_call_is_not_repeated_but_a_call_while_down_is() {
    let (hub, mut c) = hub().await;
    let r = c.call("t__crash", json!({})).await;
    assert_eq!(r["error"]["errorType"], "SERVER_UNAVAILABLE", "{r}");
    assert_eq!(r["attempts"], 1, "{r}");
    assert!(
        text(&r["error"]["message"]).contains("outcome unknown"),
        "{r}"
    );
    // The hub noticed the exit with that call; this one waits for the
    // restart (the server is not running: the tool is not reached) and runs.
    let r = c.call("t__counter", json!({"key": "down"})).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"]["count"], 1, "{r}");
    assert_eq!(calls_of(hub.dir.path(), "crash", 1).await, 1);
}

/// A keyed call cancelled after the server started it (its socket closed,
/// no grace): the same key from a new socket gets that outcome, marked
/// deduplicated, and the server is not called again (it ran twice before).
#[tokio::test]
async fn a_keyed_call_cancelled_after_the_server_started_it_is_not_run_again() {
    let (hub, mut a) = hub_with(json!({"sessionGraceMs": 0})).await;
    let call = json!({"type": "tool_call", "tool": "t__hang", "params": {}, "callKey": "k-cancel"});
    a.send(call.clone()).await;
    hub.wait_log("testserver t call hang").await;
    drop(a);
    hub.wait_log("testserver t cancelled hang").await;
    let mut b = hub.connect().await;
    let r = b.request(call).await;
    assert_eq!(r["deduplicated"], true, "{r}");
    assert_eq!(r["error"]["errorType"], "CANCELLED", "{r}");
    assert!(
        text(&r["error"]["message"]).contains("will not run it again"),
        "{r}"
    );
    // One suggestion, the message's: check, or run it with a new key.
    let suggestion = text(&r["error"]["suggestion"]);
    assert!(
        !suggestion.contains("run it again") && suggestion.contains("new callKey"),
        "{r}"
    );
    assert_eq!(r["error"]["recoverable"], false, "{r}");
    assert_eq!(calls_of(hub.dir.path(), "hang", 1).await, 1);
}

fn rss_mib(pid: i32) -> u64 {
    let kb: u64 = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kb / 1024
}

/// 40 keyed calls with 2 MB results: the keys hold at most
/// `server.callKeyMaxBytes` (16 MiB here) of answers, each once; RSS grows
/// by less than 64 MiB (it grew by 156 MiB when keys held every answer
/// twice). The answers past the budget went to disk: the oldest key's
/// repeat runs nothing and still gets its whole answer, as the newest's.
#[tokio::test]
async fn keyed_results_are_held_within_a_byte_budget() {
    let (hub, mut c) = hub_with(json!({"callKeyMaxBytes": 16 * 1024 * 1024})).await;
    let call = |i: usize| json!({"type": "tool_call", "tool": "t__big", "params": {"bytes": 2_000_000}, "callKey": format!("big-{i}")});
    let first = c.request(call(0)).await;
    assert_eq!(first["success"], true, "{}", first["error"]);
    let before = rss_mib(hub.pid());
    for i in 1..40 {
        let r = c.request(call(i)).await;
        assert_eq!(r["success"], true, "{}", r["error"]);
    }
    let after = rss_mib(hub.pid());
    eprintln!("RSS {before} MiB after one keyed 2 MB result, {after} MiB after 40");
    assert!(
        after.saturating_sub(before) < 64,
        "RSS {before} → {after} MiB"
    );
    let old = c.request(call(0)).await;
    assert_eq!(old["deduplicated"], true, "{}", old["error"]);
    assert!(old.get("resultDropped").is_none(), "kept whole on disk");
    assert_eq!(old["result"], first["result"]);
    let new = c.request(call(39)).await;
    assert_eq!(new["deduplicated"], true);
    assert_eq!(new["result"].as_str().map(str::len), Some(2_000_000));
    assert_eq!(calls_of(hub.dir.path(), "big", 40).await, 40);
}

/// The session cap covers the control messages that spawn work, not only
/// `tool_call`: at its cap, a `health_check`, `list_tools` and `history`
/// are refused with LIMIT_EXCEEDED naming the key; a `ping` still answers.
#[tokio::test]
async fn control_messages_take_a_place_under_the_session_cap() {
    let (_hub, mut c) = hub_with(json!({"maxInFlightPerSession": 2})).await;
    for i in 0..2 {
        c.send(
            json!({"type": "tool_call", "id": format!("s{i}"), "tool": "t__hang", "params": {}}),
        )
        .await;
    }
    for ty in ["health_check", "list_tools", "history", "tool_call"] {
        let r = c
            .request(json!({"type": ty, "tool": "t__echo", "params": {"message": "x"}}))
            .await;
        assert_eq!(r["error"]["errorType"], "LIMIT_EXCEEDED", "{ty}: {r}");
        assert!(
            text(&r["error"]["message"]).contains("server.maxInFlightPerSession"),
            "{r}"
        );
    }
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong", "{pong}");
}

/// A retry budget per server and per session (issue 38.1): 40 calls at once
/// to a tool that fails twice before it succeeds would make 120 calls with
/// every retry; the budget (10 retries plus 20 % of the calls in a 10 s
/// window) lets 18 through, the rest fail at once saying the budget is
/// spent, and the server sees at most 40 + 18 calls.
#[tokio::test]
async fn a_failing_server_is_not_hammered_by_every_calls_retries() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": testserver_entry(&p, "t", &[])},
            "retry": {"strategies": {"NETWORK": {"delay": 10}}}
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    for i in 0..40 {
        c.send(
            json!({"type": "tool_call", "id": format!("b{i}"), "tool": "t__flaky",
            "params": {"key": format!("budget-{i}"), "failures": 2}}),
        )
        .await;
    }
    let mut results = Vec::new();
    while results.len() < 40 {
        let r = c
            .recv_where("a flaky call's result", |v| {
                v["type"] == "tool_result"
                    && v["replyTo"].as_str().is_some_and(|id| id.starts_with('b'))
            })
            .await;
        results.push(r);
    }
    let spent = results
        .iter()
        .filter(|r| {
            r["success"] == false
                && r["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("retry budget of"))
        })
        .count();
    let retries: u64 = results
        .iter()
        .map(|r| r["attempts"].as_u64().unwrap_or(1) - 1)
        .sum();
    let calls = call_log(&hub.path(), "t")
        .iter()
        .filter(|c| c["tool"] == "flaky")
        .count();
    assert!(
        spent > 0,
        "no call was stopped by the budget: {retries} retries"
    );
    assert!(
        retries <= 18,
        "{retries} retries went through the budget of 18"
    );
    assert!(
        calls <= 58,
        "the server saw {calls} calls (120 without a budget)"
    );
    let suggestion = results
        .iter()
        .find(|r| {
            r["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("retry budget of"))
        })
        .map(|r| r["error"]["suggestion"].to_string())
        .unwrap_or_default();
    assert!(suggestion.contains("hub__health_check"), "{suggestion}");
}
