//! Secrets masked by value: after batches, a recording, its edits and a
//! replay, no file the hub wrote (and not its log) holds a secret value.

use std::path::Path;

use serde_json::{json, Value};

use crate::servers::wait_running;
use crate::support::{testserver_entry, TestHub};

const PASSWORD: &str = "hunter2-PASSWORD-71";
const MARKED: &str = "marked-SECRET-72";
const ENV_KEY: &str = "sk-live-ENVKEY-73";
const INSERTED: &str = "inserted-APIKEY-74";
const MODIFIED: &str = "modified-PASSWORD-75";
const REPLAY_KEY: &str = "replay-APIKEY-76";

/// Every file under `dir`, except what the hub did not write or must keep:
/// the config, the token file and the test server's own files.
fn hub_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let server_file = name.starts_with("t.") || name.starts_with("leaky.");
        if name == "config.json" || name == "token" || server_file {
            continue;
        }
        if p.is_dir() {
            hub_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[tokio::test]
async fn no_secret_value_reaches_any_file_the_hub_wrote() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut entry = testserver_entry(&p, "t", &[]);
    entry["env"] = json!({"TESTSERVER_ECHO_ENV": "SERVICE_API_KEY", "SERVICE_API_KEY": ENV_KEY});
    // A server that prints its API key to stderr, which the hub logs.
    let mut leaky = testserver_entry(&p, "leaky", &[]);
    let mut args = vec![
        json!("-c"),
        json!("echo \"leaky key $SERVICE_API_KEY\" >&2; exec \"$0\" \"$@\""),
    ];
    args.push(leaky["command"].clone());
    args.extend(leaky["args"].as_array().cloned().unwrap_or_default());
    leaky["command"] = json!("/bin/sh");
    leaky["args"] = Value::Array(args);
    leaky["env"] = json!({"SERVICE_API_KEY": ENV_KEY});
    let mut hub = TestHub::start_in(dir, json!({"mcpServers": {"t": entry, "leaky": leaky}})).await;
    hub.wait_log("leaky key ***").await;
    let token = hub.token.clone().expect("token");
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let r = c
        .request(json!({"type": "start_recording", "name": "secrets"}))
        .await;
    let rec_id = r["recordingId"].clone();
    c.send(json!({"type": "tool_batch", "id": "b1", "steps": [
        {"id": "login", "tool": "t__echo", "saveAs": "s0",
         "params": {"message": "login with {{vars.password}} and {{vars.mine}}"}},
        {"id": "env", "tool": "t__echo", "params": {"message": "env"},
         "when": {"var": "s0", "contains": PASSWORD},
         "expect": {"contains": ENV_KEY}},
        {"id": "fail", "tool": "t__fail", "params": {"message": format!("bad {MARKED}")}}
    ], "options": {"stopOnError": false,
                   "variables": {"password": PASSWORD, "mine": MARKED, "plain": "not secret"},
                   "secrets": ["mine"]}}))
        .await;
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["stepsCompleted"], 3, "{done}");
    // The client itself sees the real values.
    let one = c
        .call("t__echo", json!({"message": format!("token {token}")}))
        .await;
    assert_eq!(one["success"], true, "{one}");
    let stopped = c
        .request(json!({"type": "stop_recording", "save": true}))
        .await;
    assert_eq!(stopped["type"], "recording_stopped", "{stopped}");
    let updated = c
        .request(json!({"type": "update_recording", "recordingId": rec_id,
            "modifySteps": [{"index": 0, "changes": {"params": {"message": "m", "password": MODIFIED}}}],
            "insertSteps": [{"index": 1, "step": {"tool": "t__echo",
                "params": {"message": "ins", "apiKey": INSERTED}}}]}))
        .await;
    assert_eq!(updated["type"], "recording_updated", "{updated}");
    c.send(
        json!({"type": "replay_recording", "id": "rp", "recordingId": rec_id,
        "continueOnError": true,
        "variables": {"password": PASSWORD, "apiKey": REPLAY_KEY, "mine": MARKED}}),
    )
    .await;
    let rc = c.recv_type("replay_complete").await;
    assert!(rc["totalSteps"].as_u64().unwrap_or(0) >= 3, "{rc}");
    for fmt in ["json", "markdown", "html", "batch"] {
        let e = c
            .request(json!({"type": "export_recording", "recordingId": rec_id, "format": fmt}))
            .await;
        assert_eq!(e["type"], "recording_export", "{e}");
        let text = e.to_string();
        for s in [PASSWORD, MARKED, ENV_KEY, INSERTED, MODIFIED, REPLAY_KEY] {
            assert!(!text.contains(s), "export {fmt} holds {s}: {text}");
        }
    }
    // Keep the folder past the hub's exit (which flushes the history).
    let _kept = std::mem::replace(&mut hub.dir, tempfile::tempdir().expect("dir"));
    let log_lines = hub.log_lines.clone();
    let status = hub.terminate().await;
    let logs = log_lines.lock().expect("lock").join("\n");
    assert!(status.success());
    let mut files = Vec::new();
    hub_files(&p, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("history.jsonl")),
        "{files:?}"
    );
    assert!(files
        .iter()
        .any(|f| f.to_string_lossy().contains("/tasks/")));
    assert!(files.iter().any(|f| f.ends_with("recording.jsonl")));
    let secrets = [
        PASSWORD, MARKED, ENV_KEY, INSERTED, MODIFIED, REPLAY_KEY, &token,
    ];
    for f in &files {
        let bytes = std::fs::read(f).expect("read");
        let text = String::from_utf8_lossy(&bytes);
        for s in secrets {
            assert!(
                !text.contains(s),
                "{} holds a secret {s}:\n{text}",
                f.display()
            );
        }
    }
    for s in secrets {
        assert!(!logs.contains(s), "the log holds a secret {s}");
    }
    // The masking left the rest readable.
    let history = std::fs::read_to_string(p.join("state/history.jsonl")).expect("history");
    assert!(history.contains("login with *** and ***"), "{history}");
    let _: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
}

/// Issue 16.6: a recording's `when`, `expect` and error text get the same
/// rules as its params: values of secret keys redacted (also inside an
/// error message that quotes a result or an expectation) and known secret
/// values masked.
#[tokio::test]
async fn recorded_when_expect_and_errors_are_redacted_like_params() {
    const IN_RESULT: &str = "result-TOKEN-81";
    const IN_EXPECT: &str = "expect-TOKEN-82";
    const IN_WHEN: &str = "when-PASSWORD-83";
    let dir = tempfile::tempdir().expect("dir");
    let entry = testserver_entry(dir.path(), "t", &[]);
    let hub = TestHub::start_in(dir, json!({"mcpServers": {"t": entry}})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let r = c
        .request(json!({"type": "start_recording", "name": "redaction"}))
        .await;
    let rec_id = r["recordingId"].clone();
    c.send(json!({"type": "tool_batch", "id": "b6", "steps": [
        // Fails its expectation: the error quotes the result, {"token": …}.
        {"id": "quote", "tool": "t__echo_structured", "saveAs": "r",
         "params": {"value": {"token": IN_RESULT}},
         "expect": {"contains": "never there"}},
        // Runs (its condition holds) and keeps the secret value in `when`.
        {"id": "cond", "tool": "t__echo", "params": {"message": "m"},
         "when": {"not": {"var": "r", "contains": IN_WHEN}}},
        // An expectation holding a secret key; the miss quotes it.
        {"id": "exp", "tool": "t__echo", "params": {"message": "hi"},
         "expect": {"equals": {"token": IN_EXPECT}}}
    ], "options": {"stopOnError": false, "variables": {"password": IN_WHEN}}}))
        .await;
    let mut results = Vec::new();
    for _ in 0..3 {
        results.push(c.recv_type("batch_step_result").await);
    }
    c.recv_type("batch_complete").await;
    // The client sees what happened, unredacted.
    let quoted = results[0]["error"]["message"].as_str().unwrap_or("");
    assert!(quoted.contains(IN_RESULT), "{}", results[0]);
    assert_eq!(results[1]["success"], true, "{}", results[1]);
    assert!(
        results[2]["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains(IN_EXPECT),
        "{}",
        results[2]
    );
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["stepCount"], 3, "{stopped}");
    let file = Path::new(r["path"].as_str().unwrap_or("")).join("recording.jsonl");
    let text = std::fs::read_to_string(&file).expect("recording");
    let mut shown = vec![text.clone()];
    for fmt in ["json", "markdown", "html", "batch"] {
        let e = c
            .request(json!({"type": "export_recording", "recordingId": rec_id, "format": fmt}))
            .await;
        assert_eq!(e["type"], "recording_export", "{e}");
        shown.push(e.to_string());
    }
    for t in &shown {
        for s in [IN_RESULT, IN_EXPECT, IN_WHEN] {
            assert!(!t.contains(s), "{s} is in {t}");
        }
    }
    // Redacted, not dropped: each field still says what it held.
    let steps: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["kind"] == "step")
        .collect();
    let msg = steps[0]["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains(r#""token":"[redacted]""#), "{msg}");
    assert_eq!(
        steps[1]["when"],
        json!({"not": {"var": "r", "contains": "***"}})
    );
    assert_eq!(
        steps[2]["expect"],
        json!({"equals": {"token": {"$redacted": "token"}}})
    );
    let msg = steps[2]["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains(r#"{"token":"[redacted]"}"#), "{msg}");
}
