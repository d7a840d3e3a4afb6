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
