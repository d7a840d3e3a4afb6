//! tool_batch: validation, templates, conditions, expectations, execution,
//! cancellation and retries, against the test server and the built-ins.

use serde_json::{json, Value};

use crate::barrier;
use crate::servers::wait_running;
use crate::support::{call_log, testserver_entry, Client, TestHub};

async fn hub_with_t() -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, c)
}

/// Send a batch; collect its step results until batch_complete.
async fn run_batch(c: &mut Client, id: &str, steps: Value, options: Value) -> (Vec<Value>, Value) {
    c.send(json!({"type": "tool_batch", "id": id, "steps": steps, "options": options}))
        .await;
    let mut steps = Vec::new();
    loop {
        let id2 = id.to_string();
        let m = c
            .recv_where("batch event", move |v| {
                v["batchId"] == id2.as_str()
                    && (v["type"] == "batch_step_result" || v["type"] == "batch_complete")
                    || (v["replyTo"] == id2.as_str() && v["type"] == "error")
            })
            .await;
        match m["type"].as_str() {
            Some("batch_step_result") => steps.push(m),
            _ => return (steps, m),
        }
    }
}

#[tokio::test]
async fn the_protocol_seed_example_runs_unchanged() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    std::fs::create_dir_all(hub.path().join("workspace")).expect("ws");
    std::fs::write(hub.path().join("workspace/a.json"), r#"{"ok":true}"#).expect("write");
    let msg = json!({"type":"tool_batch","id":"batch-001",
     "steps":[
       {"id":"step1","tool":"read_file","params":{"path":"/a.json"},"saveAs":"fileA"},
       {"id":"step2","tool":"run_command","params":{"command":"echo {{fileA.result}}"},
        "when":"{{fileA.success}}"}],
     "options":{"stopOnError":true,"timeout":120000}});
    c.send(msg).await;
    let s0 = c
        .recv_where("step 0", |v| {
            v["type"] == "batch_step_result" && v["stepIndex"] == 0
        })
        .await;
    assert_eq!(s0["batchId"], "batch-001");
    assert_eq!(s0["stepId"], "step1");
    assert_eq!(s0["success"], true, "{s0}");
    let s1 = c
        .recv_where("step 1", |v| {
            v["type"] == "batch_step_result" && v["stepIndex"] == 1
        })
        .await;
    assert_eq!(s1["result"]["stdout"], "{ok:true}\n", "{s1}");
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["success"], true);
    assert_eq!(done["state"], "success");
    assert_eq!(done["stepsCompleted"], 2);
    assert_eq!(done["totalSteps"], 2);
    assert!(done["taskId"].is_string());
}

#[tokio::test]
async fn an_invalid_batch_lists_every_problem_and_runs_nothing() {
    let (hub, mut c) = hub_with_t().await;
    let steps = json!([
        {"id": "a", "tool": "t__counter", "params": {"key": "k"}},
        {"id": "a", "tool": "no_such_tool"},
        {"tool": "t__echo", "params": {"message": "{{later.result}}"}},
        {"tool": "t__echo", "params": {"message": "x"}, "saveAs": "later", "when": {"var": "a", "regex": "("}},
        {"tool": "t__echo", "params": {"message": "{{#if}}"}},
        {"tool": "t__echo", "params": {"message": "x"}, "saveAs": "later"},
    ]);
    let (steps_seen, reply) = run_batch(&mut c, "bad", steps, json!({})).await;
    assert!(steps_seen.is_empty());
    assert_eq!(reply["type"], "error");
    let msg = reply["error"]["message"].as_str().unwrap_or("").to_string();
    for needle in [
        "step 1 (a): duplicate step id",
        "no_such_tool",
        "step 2",
        "before the step that saves it",
        "step 3",
        "step 4",
        "duplicate saveAs \"later\"",
    ] {
        assert!(msg.contains(needle), "missing {needle:?} in {msg}");
    }
    assert!(
        call_log(&hub.path(), "t")
            .iter()
            .all(|c| c["tool"] != "counter"),
        "nothing may run"
    );
    let too_many: Vec<Value> = (0..5)
        .map(|_| json!({"tool": "t__echo", "params": {"message": "x"}}))
        .collect();
    drop(c);
    let dir = tempfile::tempdir().expect("dir");
    let hub2 = TestHub::start_in(dir, json!({"taskEngine": {"maxBatchSteps": 3}})).await;
    let mut c2 = hub2.connect().await;
    let (_, reply) = run_batch(&mut c2, "big", json!(too_many), json!({})).await;
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("maxBatchSteps"),
        "{reply}"
    );
}

#[tokio::test]
async fn templates_keep_json_types_and_interpolate_text() {
    let (_hub, mut c) = hub_with_t().await;
    let steps = json!([
        {"tool": "t__echo_structured", "params": {"value": {"a": [1, 2]}}, "saveAs": "s"},
        {"tool": "t__echo_structured", "params": {"value": "{{s.result.value}}"}, "saveAs": "typed"},
        {"tool": "t__echo", "params": {"message": "got {{s.result.value}} id={{s.result.items.1.id}} by {{vars.who}}"}},
        {"tool": "t__echo", "params": {"message": "{{s.result.nope}}"}},
    ]);
    let (r, done) = run_batch(
        &mut c,
        "tpl",
        steps,
        json!({"variables": {"who": "ann"}, "stopOnError": false}),
    )
    .await;
    assert_eq!(r[1]["result"]["value"], json!({"a": [1, 2]}), "{}", r[1]);
    assert_eq!(r[2]["result"], "got {\"a\":[1,2]} id=2 by ann", "{}", r[2]);
    assert_eq!(r[3]["error"]["errorType"], "TEMPLATE_ERROR", "{}", r[3]);
    let m = r[3]["error"]["message"].as_str().unwrap_or("");
    assert!(
        m.contains("nope") && m.contains("value"),
        "names the variable and what exists: {m}"
    );
    assert_eq!(done["state"], "failed");
}

#[tokio::test]
async fn conditions_skip_with_a_reason() {
    let (_hub, mut c) = hub_with_t().await;
    let steps = json!([
        {"id": "f", "tool": "t__fail", "params": {"message": "boom"}, "saveAs": "f", "retry": false},
        {"id": "on_fail", "tool": "t__echo", "params": {"message": "ran"}, "when": "failure"},
        {"id": "ok", "tool": "t__echo", "params": {"message": "version 42"}, "saveAs": "v"},
        {"id": "re", "tool": "t__echo", "params": {"message": "x"}, "when": {"var": "v", "regex": "version\\s+\\d+"}},
        {"id": "not", "tool": "t__echo", "params": {"message": "x"}, "when": {"not": {"var": "f", "success": false}}},
        {"id": "all", "tool": "t__echo", "params": {"message": "x"}, "when": {"all": [{"var": "v", "contains": "42"}, "{{v.success}}"]}},
        {"id": "any", "tool": "t__echo", "params": {"message": "x"}, "when": {"any": [{"var": "f", "success": true}, {"var": "v", "contains": "nope"}]}},
    ]);
    let (r, done) = run_batch(&mut c, "cond", steps, json!({"stopOnError": false})).await;
    assert_eq!(r.len(), 7);
    assert_eq!(r[1]["result"], "ran");
    assert!(r[3]["skipped"].is_null(), "regex matched: {}", r[3]);
    assert_eq!(r[4]["skipped"], true, "{}", r[4]);
    assert!(
        r[4]["reason"].as_str().unwrap_or("").contains("not"),
        "{}",
        r[4]
    );
    assert!(r[5]["skipped"].is_null(), "{}", r[5]);
    assert_eq!(r[6]["skipped"], true);
    assert!(!r[6]["reason"].as_str().unwrap_or("").is_empty());
    assert_eq!(
        done["state"], "failed",
        "a failed step fails the batch when stopOnError is false"
    );
    assert_eq!(done["stepsCompleted"], 7);
}

#[tokio::test]
async fn expectations_fail_with_assertion_failed_and_are_retried() {
    let (_hub, mut c) = hub_with_t().await;
    let steps = json!([
        {"tool": "t__echo", "params": {"message": "hello"}, "expect": {"contains": "hell"}},
        {"tool": "t__echo_structured", "params": {"value": 1}, "expect": {"path": "/items/0/id", "equals": 1}},
        {"tool": "t__fail", "params": {"message": "nope"}, "expect": {"success": false}, "retry": false},
        {"tool": "t__echo", "params": {"message": "goodbye"}, "expect": {"regex": "^hello"}},
    ]);
    let (r, done) = run_batch(&mut c, "exp", steps, json!({"stopOnError": false})).await;
    assert_eq!(r[0]["success"], true);
    assert_eq!(r[1]["success"], true, "{}", r[1]);
    assert_eq!(
        r[2]["success"], true,
        "an expected failure passes: {}",
        r[2]
    );
    assert_eq!(r[3]["success"], false);
    assert_eq!(r[3]["error"]["errorType"], "ASSERTION_FAILED");
    assert_eq!(r[3]["error"]["recoverable"], true);
    assert!(
        r[3]["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("goodbye"),
        "shows actual: {}",
        r[3]
    );
    assert_eq!(
        r[3]["attempts"], 2,
        "default ASSERTION_FAILED strategy retries once"
    );
    assert_eq!(r[3]["retries"][0]["errorType"], "ASSERTION_FAILED");
    assert_eq!(done["state"], "failed");
}

#[tokio::test]
async fn stop_on_error_ends_the_batch_at_the_first_failure() {
    let (_hub, mut c) = hub_with_t().await;
    let steps = json!([
        {"tool": "t__fail", "params": {"message": "boom"}},
        {"tool": "t__echo", "params": {"message": "never"}},
    ]);
    let (r, done) = run_batch(&mut c, "stop", steps, json!({})).await;
    assert_eq!(r.len(), 2, "{r:?}");
    // The rest is reported, not run (issue 16.8).
    assert_eq!(r[1]["skipped"], true, "{}", r[1]);
    assert_eq!(r[1]["success"], false, "{}", r[1]);
    assert!(r[1].get("result").is_none(), "{}", r[1]);
    assert_eq!(done["state"], "failed");
    assert_eq!(done["stepsCompleted"], 1);
    assert_eq!(done["totalSteps"], 2);
}

#[tokio::test]
async fn batch_timeout_bounds_the_whole_batch() {
    let (hub, mut c) = hub_with_t().await;
    let steps = json!([{"tool": "t__hang", "params": {}}]);
    let (r, done) = run_batch(&mut c, "slow", steps, json!({"timeout": 300})).await;
    assert_eq!(r[0]["error"]["errorType"], "TIMEOUT", "{}", r[0]);
    assert_eq!(done["state"], "failed");
    hub.wait_log("testserver t cancelled hang").await;
}

#[tokio::test]
async fn cancel_task_cancels_the_call_at_the_server() {
    let (hub, mut c) = hub_with_t().await;
    c.send(json!({"type": "tool_batch", "id": "b", "steps": [{"tool": "t__hang", "params": {}}]}))
        .await;
    let st = c
        .recv_where("running", |v| {
            v["type"] == "task_state" && v["state"] == "running"
        })
        .await;
    let task_id = st["taskId"].clone();
    // The hang call must be in flight before cancelling.
    hub.wait_log("testserver t call hang").await;
    let _ = c
        .request(json!({"type": "cancel_task", "taskId": task_id}))
        .await;
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["state"], "cancelled", "{done}");
    hub.wait_log("testserver t cancelled hang").await;
}

#[tokio::test]
async fn a_batch_survives_its_client_and_others_run_alongside() {
    let (hub, mut c) = hub_with_t().await;
    c.send(json!({"type": "tool_batch", "id": "long", "steps": [
        {"tool": "t__barrier", "params": {"name": "long"}, "saveAs": "s"},
        {"tool": "t__echo", "params": {"message": "after {{s.result}}"}}
    ]}))
    .await;
    let st = c
        .recv_where("running", |v| {
            v["type"] == "task_state" && v["state"] == "running"
        })
        .await;
    let task_id = st["taskId"].clone();
    let session = crate::instances::session_id(&c);
    drop(c);
    hub.wait_log(&format!("client disconnected session={session}"))
        .await;
    // The long batch waits at the server, its client gone, while another
    // runs to its end.
    let mut other = hub.connect().await;
    barrier::await_waiting(&mut other, "t", "long", 1).await;
    let (r, done) = run_batch(
        &mut other,
        "quick",
        json!([{"tool": "t__echo", "params": {"message": "q"}}]),
        json!({}),
    )
    .await;
    assert_eq!(r[0]["success"], true);
    assert_eq!(done["state"], "success");
    assert_eq!(barrier::release(&mut other, "t", "long").await, 1);
    let t = other
        .request(json!({"type": "task_status", "taskId": task_id, "wait": true}))
        .await;
    assert_eq!(t["task"]["state"], "success", "{t}");
    assert_eq!(t["task"]["steps"][1]["result"], "after released");
}

#[tokio::test]
async fn retries_follow_strategies_and_report_every_attempt() {
    let (_hub, mut c) = hub_with_t().await;
    let steps = json!([
        {"tool": "t__flaky", "params": {"key": "k1", "failures": 2}, "retry": {"maxRetries": 3, "delay": 10}},
        {"tool": "t__flaky", "params": {"key": "k2", "failures": 2}, "retry": false},
        // 450 ms against 300, then 600 and 1200 ms: only a timeout that
        // grows lets it through, and a loaded machine has 750 ms to spare.
        {"tool": "t__slow", "params": {"ms": 450}, "timeout": 300, "retry": {"maxRetries": 2, "delay": 10, "action": "extend_timeout"}},
        {"tool": "t__destructive", "params": {"ms": 2000}, "timeout": 200},
    ]);
    let (r, _) = run_batch(&mut c, "retry", steps, json!({"stopOnError": false})).await;
    assert_eq!(r[0]["success"], true, "{}", r[0]);
    assert_eq!(r[0]["attempts"], 3);
    assert_eq!(r[0]["retries"][0]["errorType"], "NETWORK");
    assert_eq!(r[0]["retries"][1]["attempt"], 2);
    assert_eq!(r[1]["attempts"], 1, "retry: false");
    assert_eq!(
        r[2]["success"], true,
        "extend_timeout doubled the timeout: {}",
        r[2]
    );
    assert_eq!(r[2]["retries"][0]["action"], "extend_timeout");
    assert_eq!(
        r[3]["attempts"], 1,
        "destructive tools are not retried after a timeout: {}",
        r[3]
    );
    assert!(r[3]["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("destructive"));
    let retrying = c
        .recv_where("retrying state", |v| {
            v["type"] == "task_state" && v["state"] == "retrying"
        })
        .await;
    assert_eq!(retrying["batchId"], "retry");
    let h = c.request(json!({"type": "history", "limit": 10})).await;
    assert!(h["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .any(|e| e["attempts"] == 3));
}

/// A step's retry waits out its backoff; what the task has to say (the
/// last step's result, `retrying`) is synced and sent before that wait, not
/// held for the journal's next sync after it.
#[tokio::test]
async fn the_retrying_state_goes_out_before_the_backoff_not_after() {
    let (hub, mut c) = hub_with_t().await;
    c.send(json!({"type": "tool_batch", "id": "backoff", "steps": [
        {"tool": "t__echo", "params": {"message": "first"}},
        {"tool": "t__flaky", "params": {"key": "slowretry", "failures": 1},
         "retry": {"maxRetries": 1, "delay": 600000}}
    ]}))
    .await;
    let first = c
        .recv_where("step 0", |v| {
            v["type"] == "batch_step_result" && v["batchId"] == "backoff"
        })
        .await;
    assert_eq!(first["stepIndex"], 0, "{first}");
    let retrying = c
        .recv_where("retrying state", |v| {
            v["type"] == "task_state" && v["state"] == "retrying"
        })
        .await;
    assert_eq!(retrying["step"], 1, "{retrying}");
    let flaky = call_log(&hub.path(), "t")
        .into_iter()
        .filter(|l| l["tool"] == "flaky")
        .count();
    assert_eq!(flaky, 1, "the retry is still ten minutes away");
    let r = c
        .request(json!({"type": "cancel_task", "taskId": retrying["taskId"]}))
        .await;
    assert_eq!(r["type"], "task_cancelling", "{r}");
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["state"], "cancelled", "{done}");
}

#[tokio::test]
async fn hub_tool_batch_runs_a_batch_from_a_tool_call() {
    let (_hub, mut c) = hub_with_t().await;
    let r = c
        .call(
            "hub__tool_batch",
            json!({"steps": [
                {"tool": "t__add", "params": {"a": 1, "b": 2}, "saveAs": "x"},
                {"tool": "t__add", "params": {"a": "{{x.result.sum}}", "b": 10}}
            ]}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"]["state"], "success");
    assert_eq!(r["result"]["steps"][1]["result"], json!({"sum": 13}), "{r}");
}

/// The README's batch, as its transcript shows it.
fn readme_batch() -> Value {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("> {\"type\":\"tool_batch\"") && l.contains("\"when\":\"failure\""))
        .expect("the README's batch with a cleanup step");
    serde_json::from_str(&line[2..]).expect("the README's batch is JSON")
}

async fn send_batch(c: &mut Client, batch: &Value) -> (Vec<Value>, Value) {
    let id = batch["id"].as_str().unwrap_or("b");
    run_batch(c, id, batch["steps"].clone(), batch["options"].clone()).await
}

/// Issue 16.8: after `stopOnError` ends a batch, steps whose `when` asks for
/// a failure (or "always") still run; the others are reported not run.
#[tokio::test]
async fn cleanup_steps_run_after_stop_on_error_as_the_readme_shows() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    // As written, every step passes and the cleanup is skipped.
    let batch = readme_batch();
    assert_eq!(batch["options"]["stopOnError"], true);
    let (r, done) = send_batch(&mut c, &batch).await;
    assert_eq!(done["success"], true, "{done} {r:?}");
    assert_eq!(done["stepsCompleted"], 4);
    assert_eq!(r.len(), 4);
    assert_eq!(r[3]["stepId"], "cleanup");
    assert_eq!(r[3]["skipped"], true);
    assert_eq!(
        r[3]["reason"],
        "condition \"failure\" not met (the last step that ran succeeded)"
    );
    // The same batch where the read's expectation fails: "show" is not run,
    // the cleanup runs.
    let mut failing = batch.clone();
    failing["id"] = json!("b1-failing");
    failing["steps"][0]["params"]["content"] = json!("no version");
    let (r, done) = send_batch(&mut c, &failing).await;
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["stepsCompleted"], 3, "{done}");
    assert_eq!(done["totalSteps"], 4);
    let ids: Vec<&str> = r
        .iter()
        .map(|s| s["stepId"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(ids, ["write", "read", "show", "cleanup"], "{r:?}");
    assert_eq!(r[1]["error"]["errorType"], "ASSERTION_FAILED", "{}", r[1]);
    assert_eq!(r[2]["skipped"], true, "{}", r[2]);
    assert_eq!(r[2]["success"], false, "{}", r[2]);
    assert!(
        r[2]["reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("not run: step 1 failed and options.stopOnError stopped the batch"),
        "{}",
        r[2]
    );
    assert_eq!(r[3]["success"], true, "{}", r[3]);
    assert!(r[3].get("skipped").is_none(), "{}", r[3]);
    assert_eq!(r[3]["result"]["exitCode"], 0, "{}", r[3]);
    // task_status keeps the not-run step pending (a resume runs it).
    let t = c
        .request(json!({"type": "task_status", "taskId": done["taskId"]}))
        .await;
    assert_eq!(t["task"]["steps"][2]["state"], "pending", "{t}");
    assert_eq!(t["task"]["steps"][3]["state"], "success", "{t}");
}

/// After a stop, `"failure"` holds for every later cleanup step (the batch
/// has failed, whatever the previous cleanup did), `"always"` runs, a failed
/// cleanup step does not stop the others, and the rest is not run.
#[tokio::test]
async fn every_cleanup_step_runs_after_a_stop_and_always_runs_always() {
    let (_hub, mut c) = hub_with_t().await;
    let steps = json!([
        {"id": "a", "tool": "t__echo", "params": {"message": "a"}, "when": "always"},
        {"id": "boom", "tool": "t__fail", "params": {"message": "boom"}},
        {"id": "plain", "tool": "t__echo", "params": {"message": "never"}},
        {"id": "c1", "tool": "t__fail", "params": {"message": "cleanup fails"}, "when": "failure"},
        {"id": "c2", "tool": "t__echo", "params": {"message": "c2"}, "when": "failure"},
        {"id": "c3", "tool": "t__echo", "params": {"message": "c3"}, "when": "always"},
        {"id": "ok-only", "tool": "t__echo", "params": {"message": "x"}, "when": "success"},
        {"id": "c4", "tool": "t__echo", "params": {"message": "c4"},
         "when": {"all": ["failure", "{{eq vars.x \"no\"}}"]}},
    ]);
    let (r, done) = run_batch(&mut c, "many", steps, json!({"variables": {"x": "yes"}})).await;
    assert_eq!(r.len(), 8, "{r:?}");
    let summary: Vec<(String, bool, bool)> = r
        .iter()
        .map(|s| {
            (
                s["stepId"].as_str().unwrap_or("?").to_string(),
                s["success"] == true,
                s["skipped"] == true,
            )
        })
        .collect();
    let want = [
        ("a", true, false),
        ("boom", false, false),
        ("plain", false, true),
        ("c1", false, false),
        ("c2", true, false),
        ("c3", true, false),
        ("ok-only", false, true),
        ("c4", true, true),
    ];
    let want: Vec<(String, bool, bool)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), *b, *c))
        .collect();
    assert_eq!(summary, want, "{r:?}");
    assert!(
        r[7]["reason"].as_str().unwrap_or("").contains("not met"),
        "{}",
        r[7]
    );
    assert_eq!(done["state"], "failed");
    assert_eq!(done["stepsCompleted"], 6, "{done}");
}

/// Issue 16.1: `task_status` (and `hub__task_status`) return one page of
/// steps, always with the task's summary and where the next page starts.
#[tokio::test]
async fn task_status_pages_steps_and_always_gives_the_summary() {
    let (_hub, mut c) = hub_with_t().await;
    let steps: Vec<Value> = (0..130)
        .map(|i| json!({"tool": "t__echo", "params": {"message": format!("m{i}")}}))
        .collect();
    let (r, done) = run_batch(&mut c, "paged", json!(steps), json!({"stopOnError": false})).await;
    assert_eq!(r.len(), 130);
    let task_id = done["taskId"].clone();
    let first = c
        .request(json!({"type": "task_status", "taskId": task_id}))
        .await;
    let t = &first["task"];
    assert_eq!(t["steps"].as_array().map(Vec::len), Some(100), "{t}");
    assert_eq!(t["totalSteps"], 130);
    assert_eq!(t["stepsCompleted"], 130);
    assert_eq!(t["stepCounts"], json!({"success": 130}));
    assert_eq!(t["state"], "success");
    assert_eq!(
        t["stepsPage"],
        json!({"offset": 0, "limit": 100, "returned": 100, "total": 130, "nextOffset": 100})
    );
    // Follow nextOffset to the end: every step exactly once, in order.
    let mut seen = Vec::new();
    let mut offset = json!(0);
    while !offset.is_null() {
        let page = c
            .request(
                json!({"type": "task_status", "taskId": task_id, "offset": offset, "limit": 40}),
            )
            .await;
        for s in page["task"]["steps"].as_array().expect("steps") {
            seen.push(s["stepIndex"].as_u64().unwrap_or(999));
        }
        offset = page["task"]["stepsPage"]["nextOffset"].clone();
    }
    assert_eq!(seen, (0..130).collect::<Vec<u64>>());
    let r = c
        .call(
            "hub__task_status",
            json!({"taskId": task_id, "offset": 128}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(
        r["result"]["steps"].as_array().map(Vec::len),
        Some(2),
        "{r}"
    );
    assert_eq!(r["result"]["steps"][0]["result"], "m128");
    assert_eq!(r["result"]["totalSteps"], 130);
    let bad = c
        .call(
            "hub__task_status",
            json!({"taskId": task_id, "limit": "all"}),
        )
        .await;
    assert_eq!(bad["success"], false, "{bad}");
    assert_eq!(bad["error"]["errorType"], "INVALID_PARAMS", "{bad}");
}
