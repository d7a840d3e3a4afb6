//! Call data on disk is private and redacted (issue 49.4, 49.7): every
//! file under the state dir (history, spilled call-key answers, journals,
//! the token, pins, …) and every kept result is 0600 in 0700 folders, also
//! when an older version left them looser, and none holds the hub's token
//! or a secret value verbatim; kept results have a quota per principal;
//! a call key keeps only outcomes of calls that ran.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::servers::wait_running;
use crate::support::{call_log, testserver_entry, until_changed, TestHub};

const PASSWORD: &str = "hunter2-DISK-PASSWORD-81";
const MARKED: &str = "marked-DISK-SECRET-82";
const EXT: &str = "ext-client-token-0123456789abcdef";

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("meta")
        .permissions()
        .mode()
        & 0o777
}

/// Every file and folder under `dir` (not following links).
fn walk(dir: &Path, files: &mut Vec<PathBuf>, dirs: &mut Vec<PathBuf>) {
    dirs.push(dir.to_path_buf());
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        let t = e.file_type().expect("type");
        if t.is_dir() {
            walk(&p, files, dirs);
        } else {
            files.push(p);
        }
    }
}

/// Folders 0700, files 0600, and no file but `token` holds any of `secrets`.
fn assert_private(root: &Path, secrets: &[&str]) -> Vec<PathBuf> {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    walk(root, &mut files, &mut dirs);
    for d in &dirs {
        assert_eq!(mode(d), 0o700, "folder {} is {:o}", d.display(), mode(d));
    }
    for f in &files {
        assert_eq!(mode(f), 0o600, "file {} is {:o}", f.display(), mode(f));
        if f.file_name().is_some_and(|n| n == "token") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(f).expect("read")).into_owned();
        for s in secrets {
            assert!(
                !text.contains(s),
                "{} holds a secret {s}:\n{text}",
                f.display()
            );
        }
    }
    files
}

/// A state dir as an older version left it: world-readable.
fn loose_state_dir(state: &Path) {
    std::fs::create_dir_all(state.join("tasks")).expect("state");
    std::fs::write(state.join("tool_pins.json"), "{}").expect("pins");
    for (p, m) in [
        (state.to_path_buf(), 0o755),
        (state.join("tasks"), 0o755),
        (state.join("tool_pins.json"), 0o644),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m)).expect("chmod");
    }
}

#[tokio::test]
async fn every_file_under_the_state_dir_is_private_and_holds_no_secret() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let state = p.join("state");
    loose_state_dir(&state);
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": testserver_entry(&p, "t", &[])},
            // Every keyed answer past 2 KB moves to disk.
            "server": {"callKeyMaxBytes": 2000}
        }),
    )
    .await;
    let token = hub.token.clone().expect("token");
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;

    // A keyed call whose answer (the hub's token echoed, 4 KB) is spilled.
    let message = format!("token is {token} {}", "x".repeat(4000));
    let keyed = json!({"type": "tool_call", "tool": "t__echo",
        "params": {"message": message}, "callKey": "spill-1"});
    let first = c.request(keyed.clone()).await;
    assert_eq!(first["success"], true, "{}", first["error"]);
    assert!(
        first.to_string().contains(&token),
        "the caller gets it whole"
    );
    let spill = state.join("callkeys");
    let spilled = || {
        std::fs::read_dir(&spill)
            .map(|d| {
                d.flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "json"))
            })
            .unwrap_or(false)
    };
    assert!(
        until_changed(&spill, Duration::from_secs(10), spilled).await,
        "the answer was spilled"
    );
    // A repeat gets what the file holds: redacted, and says so.
    let again = c.request(keyed).await;
    assert_eq!(again["deduplicated"], true, "{again}");
    assert_eq!(again["redacted"], true, "{}", again["error"]);
    assert!(!again.to_string().contains(&token));
    assert!(
        again.to_string().contains("token is ***"),
        "masked in place"
    );

    // A journal, with secret variables.
    c.send(json!({"type": "tool_batch", "id": "b1", "steps": [
        {"id": "s", "tool": "t__echo",
         "params": {"message": "login with {{vars.password}} and {{vars.mine}}"}}
    ], "options": {"variables": {"password": PASSWORD, "mine": MARKED},
                   "secrets": ["mine"]}}))
        .await;
    let done = c.recv_type("batch_complete").await;
    assert_eq!(done["success"], true, "{done}");
    // A kept result holding the token and a secret key's value.
    let text = format!(r#"{{"password": "{PASSWORD}", "echo": "token is {token}"}}"#);
    let kept = c
        .request(json!({"type": "keep_result", "name": "k1", "text": text}))
        .await;
    assert_eq!(kept["type"], "result_kept", "{kept}");

    let ws = p.join("workspace");
    // Keep the folder past the hub's exit (which flushes the history).
    let mut hub = hub;
    let _kept = std::mem::replace(&mut hub.dir, tempfile::tempdir().expect("dir"));
    assert!(hub.terminate().await.success());

    let secrets = [PASSWORD, MARKED, token.as_str()];
    let files = assert_private(&state, &secrets);
    for want in ["history.jsonl", "token", "tool_pins.json", "toolhub.lock"] {
        assert!(files.iter().any(|f| f.ends_with(want)), "{want}: {files:?}");
    }
    assert!(
        files.iter().any(|f| f.starts_with(state.join("tasks"))),
        "{files:?}"
    );
    assert!(files.iter().any(|f| f.starts_with(&spill)), "{files:?}");
    let results = assert_private(&ws.join(".toolhub/results"), &secrets);
    assert_eq!(results.len(), 1, "{results:?}");
    let history = std::fs::read_to_string(state.join("history.jsonl")).expect("history");
    assert!(history.contains("token is ***"), "{history}");
}

/// A hub with a main token and a client `ext` (view `chat`), kept results
/// bounded to 1000 bytes per principal.
async fn quota_hub() -> TestHub {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": testserver_entry(&p, "t", &[])},
            "views": {"chat": {"tools": ["t__echo"]}},
            "clients": {"ext": {"token": EXT, "views": ["chat"]}},
            "server": {"keptResultsMaxBytes": 1000}
        }),
    )
    .await
}

async fn keep(c: &mut crate::support::Client, name: &str, bytes: usize) -> Value {
    c.request(json!({"type": "keep_result", "name": name, "text": "r".repeat(bytes)}))
        .await
}

#[tokio::test]
async fn kept_results_have_a_quota_per_principal() {
    let hub = quota_hub().await;
    let results = hub.path().join("workspace/.toolhub/results");
    let mut ext = hub.connect_at("/ws/chat", EXT).await.expect("ext");
    let mut main = hub.connect().await;

    let r = keep(&mut main, "same", 900).await;
    assert_eq!(r["path"], ".toolhub/results/same.txt", "{r}");
    // The client's own folder: the same name does not replace main's.
    let r = keep(&mut ext, "same", 800).await;
    assert_eq!(r["path"], ".toolhub/results/clients/ext/same.txt", "{r}");
    assert_eq!(
        std::fs::read_to_string(results.join("same.txt"))
            .expect("main's")
            .len(),
        900
    );
    // Over the client's quota: refused, nothing written, the reason said.
    let r = keep(&mut ext, "more", 300).await;
    assert_eq!(r["error"]["errorType"], "LIMIT_EXCEEDED", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("client \"ext\"") && msg.contains("server.keptResultsMaxBytes"),
        "{r}"
    );
    assert!(
        r["error"]["suggestion"]
            .as_str()
            .unwrap_or("")
            .contains("head and tail"),
        "{r}"
    );
    assert!(!results.join("clients/ext/more.txt").exists());
    // The client's use does not count against the main token's, nor the
    // main token's against the client's.
    let r = keep(&mut main, "main-2", 100).await;
    assert_eq!(r["type"], "result_kept", "{r}");
    let r = keep(&mut ext, "same", 1000).await;
    assert_eq!(r["type"], "result_kept", "replacing its own: {r}");
    let r = keep(&mut main, "main-3", 1).await;
    assert_eq!(r["error"]["errorType"], "LIMIT_EXCEEDED", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("the main token"),
        "{r}"
    );
    let pong = ext.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong");
}

/// A hub whose `echo "danger"` waits for a confirmation.
async fn confirm_hub() -> (TestHub, crate::support::Client) {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {"t": testserver_entry(&p, "t", &[])},
            "safety": {"rules": [
                {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}
            ]}
        }),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, c)
}

fn echoes(hub: &TestHub, message: &str) -> usize {
    call_log(&hub.path(), "t")
        .iter()
        .filter(|l| l["tool"] == "echo" && l["arguments"]["message"] == message)
        .count()
}

/// Send `call`, answer its `need_user` with `approve`; its `tool_result`.
async fn answered(c: &mut crate::support::Client, call: Value, approve: bool) -> Value {
    let id = call["id"].clone();
    c.send(call).await;
    let ask = c.recv_type("need_user").await;
    c.request(
        json!({"type": "confirm", "taskId": ask["taskId"], "approve": approve,
        "paramsHash": ask["paramsHash"]}),
    )
    .await;
    c.recv_where("its tool_result", |v| v["replyTo"] == id)
        .await
}

#[tokio::test]
async fn a_keyed_call_that_never_ran_runs_again_when_sent_again() {
    let (hub, mut c) = confirm_hub().await;
    let call = |id: &str| {
        json!({"type": "tool_call", "id": id, "tool": "t__echo",
            "params": {"message": "danger"}, "callKey": "block-1"})
    };
    // Declined: nothing ran, so the key keeps nothing.
    let r = answered(&mut c, call("a"), false).await;
    assert_eq!(r["error"]["errorType"], "SAFETY_BLOCKED", "{r}");
    // The same chat block run again asks again, and runs once approved.
    let r = answered(&mut c, call("b"), true).await;
    assert_eq!(r["success"], true, "{r}");
    assert!(r.get("deduplicated").is_none(), "{r}");
    assert_eq!(echoes(&hub, "danger"), 1);
    // What ran is kept: a third send runs nothing.
    c.send(call("c")).await;
    let r = c.recv_where("tool_result c", |v| v["replyTo"] == "c").await;
    assert_eq!(r["deduplicated"], true, "{r}");
    assert_eq!(echoes(&hub, "danger"), 1);

    // An unknown tool is not kept either: each send looks again.
    let nf = json!({"type": "tool_call", "tool": "t__nope", "params": {}, "callKey": "block-2"});
    for _ in 0..2 {
        let r = c.request(nf.clone()).await;
        assert_eq!(r["error"]["errorType"], "TOOL_NOT_FOUND", "{r}");
        assert!(r.get("deduplicated").is_none(), "not a stored failure: {r}");
    }
}
