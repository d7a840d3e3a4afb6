//! Recording and replay against the test server and the built-ins.

use serde_json::{json, Value};

use crate::servers::wait_running;
use crate::support::{call_log, testserver_entry, Client, TestHub};

pub(crate) async fn hub_with_t(extra: Value) -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut cfg = json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])}});
    if let (Some(o), Value::Object(e)) = (cfg.as_object_mut(), extra) {
        o.extend(e);
    }
    let hub = TestHub::start_in(dir, cfg).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    (hub, c)
}

/// Record a login-like flow: a single call and a two-step batch with a secret.
pub(crate) async fn record_flow(c: &mut Client) -> String {
    let started = c
        .request(json!({"type": "start_recording", "name": "login", "description": "demo"}))
        .await;
    assert_eq!(started["type"], "recording_started", "{started}");
    let id = started["recordingId"].as_str().expect("id").to_string();
    let r = c.call("t__echo", json!({"message": "hello"})).await;
    assert_eq!(r["success"], true);
    c.send(json!({"type": "tool_batch", "id": "rb", "steps": [
        {"id": "a", "tool": "t__echo_structured", "params": {"value": "{{vars.user}}", "password": "{{vars.password}}"}, "saveAs": "u"},
        {"id": "b", "tool": "t__echo", "params": {"message": "user={{u.result.value}}"}, "expect": {"contains": "user="}}
    ], "options": {"variables": {"user": "ann", "password": "hunter2"}}}))
    .await;
    let done = c
        .recv_where("rb done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "rb"
        })
        .await;
    assert_eq!(done["state"], "success", "{done}");
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["type"], "recording_stopped", "{stopped}");
    assert_eq!(stopped["stepCount"], 3);
    assert!(stopped["metadata"]["successRate"].as_f64().is_some());
    id
}

pub(crate) async fn replay(c: &mut Client, req: Value) -> (Vec<Value>, Value) {
    let mut msg = req;
    msg["type"] = json!("replay_recording");
    msg["id"] = json!("rp");
    c.send(msg).await;
    let mut steps = Vec::new();
    loop {
        let m = c
            .recv_where("replay", |v| {
                v["type"] == "replay_step_result" || v["replyTo"] == "rp"
            })
            .await;
        if m["type"] == "replay_step_result" {
            steps.push(m);
        } else {
            // A live replay runs as a task: each step names it.
            if m["taskId"].is_string() {
                for s in steps.iter().filter(|s| s["mode"] == "live") {
                    assert_eq!(s["taskId"], m["taskId"], "{s}");
                }
            }
            return (steps, m);
        }
    }
}

#[tokio::test]
async fn record_list_get_export_delete_and_secrets_never_stored() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    let list = c.request(json!({"type": "list_recordings"})).await;
    let item = list["recordings"]
        .as_array()
        .expect("list")
        .iter()
        .find(|r| r["recordingId"] == id.as_str())
        .cloned();
    let item = item.expect("listed");
    assert_eq!(item["name"], "login");
    assert_eq!(item["incomplete"], false);
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let steps = got["recording"]["steps"].as_array().expect("steps").clone();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0]["source"]["type"], "tool_call");
    assert_eq!(steps[1]["saveAs"], "u");
    assert_eq!(steps[1]["paramsTemplate"]["value"], "{{vars.user}}");
    assert_eq!(
        steps[1]["params"]["password"],
        json!({"$redacted": "password"})
    );
    // Every file under the hub's folders (the test server's own call log is
    // the tool's business, not the hub's), and the hub's log.
    assert!(!hub.logs().contains("hunter2"), "secret in the hub log");
    let hub_dirs = ["state", "recordings", "workspace"].map(|d| hub.path().join(d));
    for f in hub_dirs.iter().flat_map(|d| walk(d)) {
        let text = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains("hunter2"),
            "secret found in {}",
            f.display()
        );
    }
    for format in ["json", "markdown", "html"] {
        let e = c
            .request(json!({"type": "export_recording", "recordingId": id, "format": format}))
            .await;
        assert_eq!(e["type"], "recording_export", "{e}");
    }
    let del = c
        .request(json!({"type": "delete_recording", "recordingId": id}))
        .await;
    assert_eq!(del["type"], "recording_deleted");
    let gone = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    assert_eq!(gone["error"]["errorType"], "NOT_FOUND");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                if !p.ends_with("node_modules") {
                    out.extend(walk(&p));
                }
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test]
async fn live_replay_without_changes_finds_no_differences_and_new_variables_show() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    let (_, missing) = replay(
        &mut c,
        json!({"recordingId": id, "variables": {"user": "ann"}}),
    )
    .await;
    assert_eq!(missing["type"], "error");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("password"),
        "names the secret: {missing}"
    );
    let (steps, done) = replay(
        &mut c,
        json!({"recordingId": id, "variables": {"user": "ann", "password": "pw"}}),
    )
    .await;
    assert_eq!(steps.len(), 3);
    assert_eq!(done["type"], "replay_complete", "{done}");
    assert_eq!(done["success"], true, "{done}");
    assert_eq!(done["differences"], json!([]));
    let (steps, done) = replay(
        &mut c,
        json!({"recordingId": id, "variables": {"user": "bob", "password": "pw"}}),
    )
    .await;
    assert_eq!(done["success"], false, "{done}");
    let d = steps[1]["diff"].to_string();
    assert!(
        d.contains("ann") && d.contains("bob"),
        "the diff shows the change: {d}"
    );
}

#[tokio::test]
async fn dry_and_offline_replays_call_no_server() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    let before = call_log(&hub.path(), "t").len();
    let (steps, done) = replay(
        &mut c,
        json!({"recordingId": id, "mode": "dry", "variables": {"user": "x", "password": "y"}}),
    )
    .await;
    assert_eq!(steps.len(), 3);
    assert_eq!(done["success"], true, "{done}");
    let (steps, done) = replay(&mut c, json!({"recordingId": id, "mode": "offline"})).await;
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0]["actual"]["result"], "hello");
    assert_eq!(done["successCount"], 3);
    assert_eq!(
        call_log(&hub.path(), "t").len(),
        before,
        "no server was called"
    );
}

#[tokio::test]
async fn exported_batch_runs_and_hostile_ids_are_refused() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    let e = c
        .request(json!({"type": "export_recording", "recordingId": id, "format": "batch"}))
        .await;
    let mut batch = e["content"].clone();
    assert_eq!(batch["type"], "tool_batch");
    // user was recorded as a default; only the secret must be given.
    assert_eq!(e["requiredVariables"], json!(["password"]), "{e}");
    assert_eq!(batch["options"]["variables"], json!({"user": "ann"}), "{e}");
    batch["id"] = json!("exported");
    batch["options"]["variables"] = json!({"user": "ann", "password": "pw"});
    c.send(batch).await;
    let done = c
        .recv_where("exported done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == "exported"
        })
        .await;
    assert_eq!(done["state"], "success", "{done}");
    for bad in ["../x", "..%2F", "/etc/passwd", "a\u{0}b"] {
        let r = c
            .request(json!({"type": "get_recording", "recordingId": bad}))
            .await;
        assert_eq!(r["type"], "error", "{bad}");
        assert_ne!(
            r["error"]["errorType"], "NOT_FOUND",
            "refused before any lookup: {r}"
        );
    }
}

#[tokio::test]
async fn the_size_cap_stops_the_recording() {
    let (_hub, mut c) = hub_with_t(json!({"recording": {"maxBytes": 3000}})).await;
    c.request(json!({"type": "start_recording"})).await;
    let mut stopped = None;
    for _ in 0..20 {
        c.send(
            json!({"type": "tool_call", "id": "big", "tool": "t__big", "params": {"bytes": 500}}),
        )
        .await;
        let m = c
            .recv_where("result or stop", |v| {
                v["replyTo"] == "big" || v["type"] == "recording_stopped"
            })
            .await;
        if m["type"] == "recording_stopped" {
            stopped = Some(m);
            break;
        }
    }
    let s = stopped.expect("recording_stopped at the cap");
    assert_eq!(s["reason"], "size_limit", "{s}");
}

#[tokio::test]
async fn sigkill_mid_recording_leaves_an_incomplete_readable_recording() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let started = c
        .request(json!({"type": "start_recording", "name": "cut"}))
        .await;
    let id = started["recordingId"].clone();
    c.call("t__echo", json!({"message": "one"})).await;
    c.call("t__echo", json!({"message": "two"})).await;
    let hub = hub.crash_and_restart().await;
    let mut c = hub.connect().await;
    let list = c.request(json!({"type": "list_recordings"})).await;
    let item = list["recordings"]
        .as_array()
        .expect("list")
        .iter()
        .find(|r| r["recordingId"] == id)
        .cloned()
        .expect("listed");
    assert_eq!(item["incomplete"], true);
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    assert_eq!(
        got["recording"]["steps"].as_array().map(|s| s.len()),
        Some(2),
        "{got}"
    );
    let (_, done) = replay(&mut c, json!({"recordingId": id, "mode": "offline"})).await;
    assert_eq!(done["totalSteps"], 2);
}

#[tokio::test]
async fn a_newer_schema_version_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("dir");
    let rdir = dir.path().join("recordings/rec-future");
    std::fs::create_dir_all(&rdir).expect("mkdir");
    std::fs::write(
        rdir.join("recording.jsonl"),
        "{\"kind\":\"header\",\"schemaVersion\":99,\"recordingId\":\"rec-future\",\"name\":\"f\",\"createdAt\":\"2030-01-01T00:00:00Z\",\"hubVersion\":\"9\"}\n",
    )
    .expect("write");
    let hub = TestHub::start_in(dir, json!({})).await;
    let mut c = hub.connect().await;
    let r = c
        .request(json!({"type": "get_recording", "recordingId": "rec-future"}))
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("newer"),
        "{r}"
    );
}

#[tokio::test]
async fn an_agent_can_record_and_replay_itself_with_builtin_tools() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let r = c.call("hub__record_start", json!({"name": "self"})).await;
    assert_eq!(r["success"], true, "{r}");
    let id = r["result"]["recordingId"].clone();
    c.call("t__echo", json!({"message": "by agent"})).await;
    let r = c.call("hub__record_stop", json!({})).await;
    assert_eq!(
        r["result"]["stepCount"], 1,
        "the controls themselves are not recorded: {r}"
    );
    let r = c.call("hub__record_list", json!({})).await;
    assert!(r["result"]["recordings"]
        .to_string()
        .contains(id.as_str().unwrap_or("?")));
    let r = c.call("hub__record_get", json!({"recordingId": id})).await;
    assert_eq!(r["result"]["steps"][0]["tool"], "t__echo", "{r}");
    let r = c
        .call("hub__record_replay", json!({"recordingId": id}))
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let task = r["result"]["taskId"].clone();
    let r = c.call("hub__task_status", json!({"taskId": task})).await;
    assert_eq!(r["result"]["state"], "success", "{r}");
    let r = c.call("hub__list_tasks", json!({})).await;
    assert!(r["result"]["tasks"]
        .as_array()
        .is_some_and(|t| !t.is_empty()));
    let r = c
        .call("hub__record_delete", json!({"recordingId": id}))
        .await;
    assert_eq!(r["success"], true, "{r}");
}

#[tokio::test]
async fn screenshots_and_images_are_files_beside_the_recording_and_embedded_in_html() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut t = testserver_entry(&p, "t", &[]);
    t["screenshotTool"] = json!("image");
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": t}, "recording": {"screenshotOnStep": true}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let started = c.request(json!({"type": "start_recording"})).await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    c.call("t__image", json!({})).await;
    c.request(json!({"type": "stop_recording"})).await;
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let step = &got["recording"]["steps"][0];
    assert_eq!(step["screenshot"], "step-0.png", "{step}");
    let img = step["images"][0]
        .as_str()
        .expect("image stored as a file")
        .to_string();
    let raw =
        std::fs::read_to_string(p.join(format!("recordings/{id}/recording.jsonl"))).expect("jsonl");
    assert!(
        !raw.contains("iVBOR"),
        "no base64 image inlined in the JSONL"
    );
    let png = std::fs::read(p.join(format!("recordings/{id}/step-0.png"))).expect("png");
    assert_eq!(&png[..4], b"\x89PNG");
    assert!(p.join(format!("recordings/{id}/{img}")).exists());
    let html = c
        .request(json!({"type": "export_recording", "recordingId": id, "format": "html"}))
        .await;
    let html = html["content"].as_str().expect("html").to_string();
    assert!(
        html.contains("data:image/png;base64,"),
        "screenshot embedded"
    );
    std::fs::write(p.join("report.html"), &html).expect("write report");
    // Open the report in headless Chromium (installed by .ci/run) and keep
    // what it rendered: a picture of the page, not an empty one.
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|c| std::path::Path::new(c).exists())
        .expect(
            "chromium is required for this test: apt-get install chromium (.ci/run installs it)",
        );
    let shot = p.join("report.png");
    let run = tokio::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1200,900",
        ])
        .arg(format!(
            "--user-data-dir={}",
            p.join("chrome-profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", p.join("report.html").display()))
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(crate::support::WAIT, run)
        .await
        .expect("chromium hung")
        .expect("chromium ran");
    let png = std::fs::read(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(&png[..4], b"\x89PNG");
    assert!(
        png.len() > 10_000,
        "the rendered report is not blank ({} bytes)",
        png.len()
    );
    if let Ok(keep) = std::env::var("TOOLHUB_KEEP_REPORT") {
        let _ = std::fs::copy(&shot, keep);
    }
}

#[tokio::test]
async fn a_recording_serves_as_an_offline_server() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut cfg = crate::support::with_test_defaults(json!({
        "mcpServers": {"t": testserver_entry(&p, "t", &[])},
    }));
    let hub = TestHub::start_in(dir, cfg.clone()).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let started = c.request(json!({"type": "start_recording"})).await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    c.call("t__echo", json!({"message": "hello"})).await;
    c.call("t__add", json!({"a": 1, "b": 2})).await;
    c.request(json!({"type": "stop_recording"})).await;
    cfg["mcpServers"] = json!({"off": {"recording": id}});
    crate::support::write_config(&p.join("config.json"), &cfg);
    c.recv_where("off tools", |v| {
        v["type"] == "tools_updated"
            && v["added"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("off__echo")))
    })
    .await;
    let before = call_log(&p, "t").len();
    let r = c.call("off__echo", json!({"message": "hello"})).await;
    assert_eq!(r["result"], "hello", "{r}");
    let r = c.call("off__add", json!({"a": 1, "b": 3})).await;
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap_or("").contains("/b"),
        "names the differing field: {r}"
    );
    let r = c.call("off__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"], json!({"sum": 3}), "{r}");
    assert_eq!(call_log(&p, "t").len(), before, "no real server was called");
}

#[tokio::test]
async fn update_recording_renames_and_edits_steps() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    let r = c
        .request(json!({"type": "update_recording", "recordingId": id, "name": "renamed", "description": "edited",
            "deleteSteps": [0],
            "modifySteps": [{"index": 1, "changes": {"params": {"message": "changed {{u.result.value}}"}, "expect": {"contains": "changed"}}}],
            "insertSteps": [{"index": 2, "step": {"tool": "t__add", "params": {"a": 2, "b": 2}, "expect": {"path": "/sum", "equals": 4}}}]}))
        .await;
    assert_eq!(r["type"], "recording_updated", "{r}");
    assert_eq!(r["name"], "renamed");
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let steps = got["recording"]["steps"].as_array().expect("steps").clone();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0]["saveAs"], "u");
    assert_eq!(
        steps[1]["paramsTemplate"]["message"],
        "changed {{u.result.value}}"
    );
    assert_eq!(steps[2]["tool"], "t__add");
    let (r, done) = replay(&mut c, json!({"recordingId": id, "variables": {"user": "ann", "password": "pw"}, "continueOnError": true})).await;
    assert_eq!(r.len(), 3);
    assert_eq!(r[1]["actual"]["result"], "changed ann", "{}", r[1]);
    assert_eq!(r[2]["success"], true, "{}", r[2]);
    assert_eq!(done["successCount"], 3, "{done}");
    let bad = c
        .request(json!({"type": "update_recording", "recordingId": id, "deleteSteps": [9]}))
        .await;
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("does not exist"),
        "{bad}"
    );
}

mod paging_and_defaults;
mod tabs;
