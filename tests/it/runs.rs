//! Runs (topic workspaces) against the real daemon, the test server and the
//! built-in tools: the messages and tools, the automatic log and its
//! inference, the current-run context across restarts, screenshots,
//! recovery and concurrent writers.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::servers::wait_running;
use crate::support::{testserver_entry, Client, TestHub};

pub(crate) async fn hub_with_t(server_extra: Value) -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    std::fs::create_dir_all(p.join("workspace/scripts")).expect("workspace");
    let mut t = testserver_entry(&p, "t", &[]);
    if let (Some(o), Value::Object(e)) = (t.as_object_mut(), server_extra) {
        o.extend(e);
    }
    let hub = TestHub::start_in(dir, json!({"mcpServers": {"t": t}})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, c)
}

pub(crate) async fn create_and_set(c: &mut Client, theme: &str) -> String {
    let r = c
        .request(json!({"type": "create_run", "theme": theme}))
        .await;
    assert_eq!(r["type"], "run_created", "{r}");
    let id = r["run"]["runId"].as_str().expect("runId").to_string();
    let s = c.request(json!({"type": "set_run", "runId": id})).await;
    assert_eq!(s["type"], "run_set", "{s}");
    id
}

pub(crate) async fn entries(c: &mut Client, id: &str, tail: usize) -> Vec<Value> {
    let r = c
        .request(json!({"type": "get_run", "runId": id, "tail": tail}))
        .await;
    assert_eq!(r["type"], "run", "{r}");
    r["entries"].as_array().expect("entries").clone()
}

pub(crate) fn run_dir(hub: &TestHub, id: &str) -> PathBuf {
    hub.path().join("runs").join(id)
}

/// The names of the files in `dir`, sorted.
pub(crate) fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every file under `dir`, as text (lossy), for secret scans.
fn all_text(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push_str(&all_text(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&p).expect("read")));
        }
    }
    out
}

#[tokio::test]
async fn runs_are_created_set_listed_read_logged_archived_and_deleted() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = create_and_set(&mut c, "Find a Python job on Upwork").await;
    assert_eq!(id, "find-a-python-job-on-upwork");
    let dup = c
        .request(json!({"type": "create_run", "theme": "Find a Python job on Upwork"}))
        .await;
    assert_eq!(
        dup["run"]["runId"], "find-a-python-job-on-upwork-2",
        "{dup}"
    );
    let bad = c
        .request(json!({"type": "create_run", "theme": "x", "runId": "../etc"}))
        .await;
    assert_eq!(bad["error"]["errorType"], "INVALID_PARAMS", "{bad}");
    let typo = c.request(json!({"type": "creat_run", "theme": "x"})).await;
    assert!(
        typo["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("create_run"),
        "{typo}"
    );

    let r = c
        .call("t__echo", json!({"message": "hi", "password": "hunter2"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let logged = c
        .request(
            json!({"type": "log_run_entry", "step": "compared offers", "status": "success",
                        "action_type": "analysis", "execution_method": "analysis",
                        "data": {"conclusion": "two fit", "apiKey": "sk-secret"}}),
        )
        .await;
    assert_eq!(logged["type"], "run_entry_logged", "{logged}");
    let wrong = c
        .request(
            json!({"type": "log_run_entry", "step": "x", "status": "success",
                        "action_type": "thinking", "execution_method": "analysis"}),
        )
        .await;
    assert_eq!(wrong["error"]["errorType"], "INVALID_PARAMS", "{wrong}");
    assert!(
        wrong["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("analysis"),
        "{wrong}"
    );

    let e = entries(&mut c, &id, 10).await;
    assert_eq!(e.len(), 2, "{e:#?}");
    assert_eq!(e[0]["action_type"], "other");
    assert_eq!(e[0]["execution_method"], "tool");
    assert_eq!(e[0]["status"], "success");
    assert_eq!(e[0]["schema_version"], "1.0");
    assert_eq!(e[0]["data"]["tool"], "t__echo");
    assert_eq!(e[0]["data"]["params"]["password"]["$redacted"], "password");
    assert!(e[0]["data"]["durationMs"].is_u64());
    assert_eq!(e[1]["action_type"], "analysis");
    let text = all_text(&run_dir(&hub, &id));
    assert!(
        !text.contains("hunter2") && !text.contains("sk-secret"),
        "{text}"
    );

    let listed = c.request(json!({"type": "list_runs"})).await;
    assert_eq!(listed["runs"].as_array().map(Vec::len), Some(2), "{listed}");
    let a = c.request(json!({"type": "archive_run", "runId": id})).await;
    assert_eq!(a["run"]["status"], "archived", "{a}");
    let archived = c
        .request(json!({"type": "list_runs", "status": "archived"}))
        .await;
    assert_eq!(archived["runs"][0]["runId"], json!(id), "{archived}");
    let again = c.request(json!({"type": "set_run", "runId": id})).await;
    assert_eq!(again["run"]["status"], "active", "{again}");

    let d = c.request(json!({"type": "delete_run", "runId": id})).await;
    assert_eq!(d["type"], "run_deleted", "{d}");
    assert!(!run_dir(&hub, &id).exists());
    let missing = c
        .request(json!({"type": "get_run", "runId": "find-a-python-job-on-upwork"}))
        .await;
    assert_eq!(missing["error"]["errorType"], "NOT_FOUND", "{missing}");
    assert!(
        missing["error"]["suggestion"]
            .as_str()
            .unwrap_or_default()
            .contains("-2"),
        "{missing}"
    );
    let unset = c
        .request(
            json!({"type": "log_run_entry", "step": "x", "status": "success",
                        "action_type": "analysis", "execution_method": "analysis"}),
        )
        .await;
    assert!(
        unset["error"]["suggestion"]
            .as_str()
            .unwrap_or_default()
            .contains("set_run"),
        "{unset}"
    );
}

#[tokio::test]
async fn each_kind_of_call_is_logged_with_its_action_type_and_method() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    std::fs::write(
        hub.path().join("workspace/scripts/count.sh"),
        "echo counted\n",
    )
    .expect("script");
    let rec = c
        .request(json!({"type": "start_recording", "name": "echoes"}))
        .await;
    let rec_id = rec["recordingId"].as_str().expect("rec").to_string();
    assert_eq!(
        c.call("t__echo", json!({"message": "r"})).await["success"],
        true
    );
    c.request(json!({"type": "stop_recording"})).await;

    // The run tools work as tools, and are not logged themselves.
    let created = c
        .call(
            "hub__run_create",
            json!({"theme": "kinds", "runId": "kinds"}),
        )
        .await;
    assert_eq!(created["success"], true, "{created}");
    let set = c.call("hub__run_set", json!({"runId": "kinds"})).await;
    assert_eq!(set["success"], true, "{set}");

    let cmd = c
        .call("hub__run_command", json!({"command": "echo hi"}))
        .await;
    assert_eq!(cmd["success"], true, "{cmd}");
    let script = c
        .call(
            "hub__run_command",
            json!({"command": "sh scripts/count.sh"}),
        )
        .await;
    assert_eq!(script["success"], true, "{script}");
    let read = c.call("hub__list_directory", json!({"path": "."})).await;
    assert_eq!(read["success"], true, "{read}");
    let failed = c.call("t__fail", json!({"message": "boom"})).await;
    assert_eq!(failed["success"], false, "{failed}");
    c.send(json!({"type": "tool_batch", "id": "b", "steps": [
        {"id": "s1", "tool": "t__echo", "params": {"message": "in a batch"}}
    ]}))
    .await;
    c.recv_where("batch", |v| v["type"] == "batch_complete")
        .await;
    c.send(json!({"type": "replay_recording", "id": "rp", "recordingId": rec_id}))
        .await;
    let done = c.recv_where("replay", |v| v["replyTo"] == "rp").await;
    assert_eq!(done["type"], "replay_complete", "{done}");

    let e = entries(&mut c, "kinds", 50).await;
    let kinds: Vec<(String, String, String)> = e
        .iter()
        .map(|x| {
            (
                x["data"]["tool"].as_str().unwrap_or_default().to_string(),
                x["action_type"].as_str().unwrap_or_default().to_string(),
                x["execution_method"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let k = |t: &str, a: &str, m: &str| (t.to_string(), a.to_string(), m.to_string());
    assert_eq!(
        kinds,
        vec![
            k("hub__run_command", "data_processing", "command"),
            k("hub__run_command", "data_processing", "file"),
            k("hub__list_directory", "extraction", "tool"),
            k("t__fail", "other", "tool"),
            k("t__echo", "other", "tool"),
            k("t__echo", "recipe_execution", "recipe"),
        ],
        "{e:#?}"
    );
    assert_eq!(e[1]["data"]["file"], "scripts/count.sh");
    assert_eq!(e[3]["status"], "error");
    assert!(e[3]["data"]["errorType"].is_string(), "{}", e[3]);
    assert_eq!(e[4]["data"]["source"]["type"], "batch_step");
    assert_eq!(e[4]["data"]["source"]["stepId"], "s1");
}

#[tokio::test]
async fn the_context_survives_a_restart_and_is_cleared_when_its_run_goes() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = create_and_set(&mut c, "survive").await;
    let ctx: Value = serde_json::from_slice(
        &std::fs::read(hub.path().join("state/current_run")).expect("current_run"),
    )
    .expect("json");
    assert_eq!(ctx["run_id"], json!(id));
    assert_eq!(ctx["theme_description"], "survive");
    drop(c);

    let hub = hub.crash_and_restart().await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    assert_eq!(
        c.call("t__echo", json!({"message": "after"})).await["success"],
        true
    );
    let e = entries(&mut c, &id, 5).await;
    assert_eq!(e.len(), 1, "{e:#?}");

    // A person removes the folder: the next call clears the context and says why.
    std::fs::remove_dir_all(run_dir(&hub, &id)).expect("rm");
    c.send(json!({"type": "tool_call", "id": "x", "tool": "t__echo", "params": {"message": "m"}}))
        .await;
    let ev = c.recv_type("run_context_cleared").await;
    assert_eq!(ev["runId"], json!(id), "{ev}");
    c.recv_where("echo", |v| v["replyTo"] == "x").await;
    assert!(!hub.path().join("state/current_run").exists());

    // delete_run clears the hub-wide default too.
    let other = create_and_set(&mut c, "other").await;
    assert!(hub.path().join("state/current_run").exists());
    c.request(json!({"type": "delete_run", "runId": other}))
        .await;
    assert!(!hub.path().join("state/current_run").exists());
}

#[tokio::test]
async fn toolhub_current_run_names_the_run_for_every_connection() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let cfg = json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])}});
    let hub = TestHub::start_in_with(dir, cfg, |cmd| {
        cmd.env("TOOLHUB_CURRENT_RUN", "from-env");
    })
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    // The run it names does not exist yet: the client is told once.
    c.send(
        json!({"type": "tool_call", "id": "early", "tool": "t__echo", "params": {"message": "m"}}),
    )
    .await;
    let ev = c.recv_type("run_context_cleared").await;
    assert!(
        ev["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("TOOLHUB_CURRENT_RUN"),
        "{ev}"
    );
    c.recv_where("early", |v| v["replyTo"] == "early").await;
    let r = c
        .request(json!({"type": "create_run", "theme": "env", "runId": "from-env"}))
        .await;
    assert_eq!(r["type"], "run_created", "{r}");
    assert_eq!(
        c.call("t__echo", json!({"message": "e"})).await["success"],
        true
    );
    let e = entries(&mut c, "from-env", 5).await;
    assert_eq!(e.len(), 1, "{e:#?}");
}

#[tokio::test]
async fn screenshots_are_numbered_across_a_restart() {
    let (hub, mut c) = hub_with_t(json!({"screenshotTool": "image"})).await;
    let id = create_and_set(&mut c, "shots").await;
    assert_eq!(c.call("t__image", json!({})).await["success"], true);
    drop(c);
    let hub = hub.crash_and_restart().await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    assert_eq!(c.call("t__image", json!({})).await["success"], true);
    let shots = run_dir(&hub, &id).join("screenshots");
    assert_eq!(file_names(&shots), ["001_image.png", "002_image.png"]);
    let png = std::fs::read(shots.join("002_image.png")).expect("png");
    assert_eq!(&png[1..4], b"PNG");
    let e = entries(&mut c, &id, 5).await;
    assert_eq!(e[1]["action_type"], "screenshot", "{e:#?}");
    assert_eq!(e[1]["data"]["screenshot"], "screenshots/002_image.png");
}

#[tokio::test]
async fn a_torn_line_missing_metadata_and_an_older_entry_are_recovered() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = create_and_set(&mut c, "recover").await;
    let dir = run_dir(&hub, &id);
    std::fs::write(
        dir.join("logs/execution.jsonl"),
        concat!(
            "{\"ts\":\"2025-11-21T10:30:00Z\",\"step\":\"old navigation\",\"status\":\"success\",\"action\":\"navigation\",\"method\":\"command\",\"details\":\"ok\"}\n",
            "{\"timestamp\":\"2025-11-21T10:31:00Z\",\"step\":\"torn\n",
        ),
    )
    .expect("log");
    std::fs::remove_file(dir.join(".metadata.json")).expect("rm meta");
    assert_eq!(
        c.call("t__echo", json!({"message": "new"})).await["success"],
        true
    );
    let r = c
        .request(json!({"type": "get_run", "runId": id, "tail": 10}))
        .await;
    assert_eq!(r["skippedLines"], 1, "{r}");
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("rebuilt") && warnings.contains("corrupt"),
        "{r}"
    );
    assert_eq!(r["run"]["createdAt"], "2025-11-21T10:30:00Z", "{r}");
    let e = r["entries"].as_array().expect("entries");
    assert_eq!(e.len(), 2, "{r}");
    assert_eq!(e[0]["action_type"], "navigation");
    assert_eq!(e[0]["schema_version"], "1.0");
    assert_eq!(e[1]["data"]["tool"], "t__echo");
    assert!(dir.join(".metadata.json").is_file());
}

#[tokio::test]
async fn two_connections_logging_into_one_run_never_tear_a_line() {
    let (hub, mut a) = hub_with_t(json!({})).await;
    let id = create_and_set(&mut a, "busy").await;
    let mut b = hub.connect().await;
    b.request(json!({"type": "set_run", "runId": id})).await;
    let big = "z".repeat(20_000);
    for (n, c) in [&mut a, &mut b].into_iter().enumerate() {
        for i in 0..40 {
            c.send(json!({"type": "log_run_entry", "id": format!("l{n}-{i}"), "step": format!("c{n} {i}"),
                          "status": "success", "action_type": "analysis", "execution_method": "analysis",
                          "data": {"blob": big}}))
                .await;
        }
    }
    for (n, c) in [&mut a, &mut b].into_iter().enumerate() {
        for i in 0..40 {
            let want = json!(format!("l{n}-{i}"));
            let r = c.recv_where("logged", |v| v["replyTo"] == want).await;
            assert_eq!(r["type"], "run_entry_logged", "{r}");
        }
    }
    let text =
        std::fs::read_to_string(run_dir(&hub, &id).join("logs/execution.jsonl")).expect("log");
    assert_eq!(text.lines().count(), 80);
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("whole line");
        assert_eq!(v["data"]["blob"].as_str().map(str::len), Some(20_000));
    }
}
