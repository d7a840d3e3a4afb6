//! Stores that stay fast: the recordings index (rebuilt, repaired, kept in
//! step with edits made outside the hub), search and paging of
//! `list_recordings`, `list_tasks` and `list_runs`, and tool lists stored once by hash
//! (with old inline recordings still listed, replayed and exported).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::recording::{hub_with_t, record_flow, replay};
use crate::support::Client;

fn rec_file(hub_dir: &Path, id: &str) -> PathBuf {
    hub_dir.join("recordings").join(id).join("recording.jsonl")
}

/// Rewrite a recording's header line in place, as a person with an editor would.
fn edit_header(path: &Path, edit: impl FnOnce(&mut Value)) {
    let text = std::fs::read_to_string(path).expect("read recording");
    let (first, rest) = text.split_once('\n').expect("a header line");
    let mut h: Value = serde_json::from_str(first).expect("header json");
    edit(&mut h);
    std::fs::write(path, format!("{h}\n{rest}")).expect("write recording");
}

async fn list(c: &mut Client, params: Value) -> Value {
    let mut msg = params;
    msg["type"] = json!("list_recordings");
    let l = c.request(msg).await;
    assert_eq!(l["type"], "recordings", "{l}");
    l
}

fn ids(l: &Value) -> Vec<String> {
    l["recordings"]
        .as_array()
        .expect("recordings")
        .iter()
        .map(|r| r["recordingId"].as_str().expect("id").to_string())
        .collect()
}

async fn record_one(c: &mut Client, start: Value, tool: &str, params: Value) -> String {
    let mut msg = start;
    msg["type"] = json!("start_recording");
    let started = c.request(msg).await;
    let id = started["recordingId"].as_str().expect("id").to_string();
    let r = c.call(tool, params).await;
    assert_eq!(r["success"], true, "{r}");
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["stepCount"], 1, "{stopped}");
    id
}

#[tokio::test]
async fn recordings_index_is_rebuilt_after_deleting_it() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    let index = hub.path().join("recordings/.index.jsonl");
    assert!(index.exists(), "the hub writes its index");
    let hub = hub
        .crash_and_restart_with(|p| {
            std::fs::remove_file(p.join("recordings/.index.jsonl")).expect("remove index")
        })
        .await;
    hub.wait_log("recordings index was missing; rebuilt from the recordings")
        .await;
    let mut c = hub.connect().await;
    let l = list(&mut c, json!({})).await;
    assert_eq!(ids(&l), vec![id.clone()], "{l}");
    let item = &l["recordings"][0];
    assert_eq!(item["stepCount"], 3, "{item}");
    assert_eq!(item["servers"], json!(["t"]), "{item}");
    assert_eq!(
        item["tools"],
        json!(["t__echo", "t__echo_structured"]),
        "{item}"
    );
    assert_eq!(l["total"], 1);
    assert!(index.exists(), "written again");
}

#[tokio::test]
async fn a_recording_edited_behind_the_hubs_back_is_picked_up() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    assert_eq!(
        ids(&list(&mut c, json!({"query": "edited-elsewhere"})).await).len(),
        0
    );
    edit_header(&rec_file(&hub.path(), &id), |h| {
        h["name"] = json!("edited-elsewhere");
        h["tags"] = json!(["hand-made"]);
    });
    // The index is checked against the files every few seconds.
    hub.wait_log("picked up recordings changed outside the hub")
        .await;
    let l = list(&mut c, json!({"query": "edited-elsewhere"})).await;
    assert_eq!(ids(&l), vec![id.clone()], "{l}");
    assert_eq!(l["recordings"][0]["tags"], json!(["hand-made"]));
    // A folder deleted outside the hub leaves the listing too.
    std::fs::remove_dir_all(hub.path().join("recordings").join(&id)).expect("rm");
    hub.wait_log("removed=1").await;
    assert_eq!(list(&mut c, json!({})).await["total"], 0);
}

#[tokio::test]
async fn a_crash_between_a_recording_and_its_index_entry_is_repaired_on_restart() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    // A second recording is in flight when the hub is killed: its index
    // entry says "no steps yet"; the file has one.
    let started = c
        .request(json!({"type": "start_recording", "name": "cut short"}))
        .await;
    let cut = started["recordingId"].as_str().expect("id").to_string();
    let r = c.call("t__echo", json!({"message": "last words"})).await;
    assert_eq!(r["success"], true);
    // And a recording whose file was written but whose index line never
    // was (the SIGKILL fell between the two): a copy under a new id.
    let copy = "rec-written-before-the-crash";
    let original = rec_file(&hub.path(), &id);
    let hub = hub
        .crash_and_restart_with(|p| {
            let dir = p.join("recordings").join(copy);
            std::fs::create_dir_all(&dir).expect("mkdir");
            let to = dir.join("recording.jsonl");
            std::fs::copy(&original, &to).expect("copy");
            edit_header(&to, |h| {
                h["recordingId"] = json!(copy);
                h["name"] = json!("orphan");
            });
        })
        .await;
    let repaired = hub
        .wait_log("picked up recordings changed outside the hub")
        .await;
    assert!(repaired.contains("added=1"), "{repaired}");
    let mut c = hub.connect().await;
    let l = list(&mut c, json!({"sort": "name"})).await;
    assert_eq!(l["total"], 3, "{l}");
    let by_id = |want: &str| {
        l["recordings"]
            .as_array()
            .expect("recordings")
            .iter()
            .find(|r| r["recordingId"] == want)
            .cloned()
            .unwrap_or_else(|| panic!("{want} not listed: {l}"))
    };
    assert_eq!(by_id(copy)["name"], "orphan");
    assert_eq!(by_id(copy)["stepCount"], 3);
    let cut = by_id(&cut);
    assert_eq!(cut["incomplete"], true, "{cut}");
    assert_eq!(
        cut["stepCount"], 1,
        "the step written before the crash: {cut}"
    );
    let got = c
        .request(json!({"type": "get_recording", "recordingId": copy}))
        .await;
    assert_eq!(got["type"], "recording", "{got}");
}

#[tokio::test]
async fn list_recordings_searches_by_each_filter_and_pages() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    let a = record_one(
        &mut c,
        json!({"name": "alpha login", "tags": ["smoke"]}),
        "t__echo",
        json!({"message": "hi"}),
    )
    .await;
    let b = record_one(
        &mut c,
        json!({"name": "beta", "description": "the checkout flow"}),
        "t__add",
        json!({"a": 1, "b": 2}),
    )
    .await;
    let c_id = record_one(
        &mut c,
        json!({"name": "Gamma"}),
        "hub__list_tools",
        json!({}),
    )
    .await;
    let all = list(&mut c, json!({})).await;
    assert_eq!(
        ids(&all),
        [c_id.clone(), b.clone(), a.clone()],
        "newest first"
    );
    assert_eq!(
        (all["total"].clone(), all["limit"].clone()),
        (json!(3), json!(100))
    );
    let q = |v: Value| v;
    for (params, want) in [
        (q(json!({"query": "LOGIN"})), vec![a.clone()]),
        (q(json!({"query": "checkout flow"})), vec![b.clone()]),
        (q(json!({"query": "smoke"})), vec![a.clone()]),
        (q(json!({"tool": "add"})), vec![b.clone()]),
        (q(json!({"tool": "t__echo"})), vec![a.clone()]),
        (q(json!({"server": "hub"})), vec![c_id.clone()]),
        (q(json!({"server": "t"})), vec![b.clone(), a.clone()]),
        (q(json!({"since": "2999-01-01"})), vec![]),
        (
            q(json!({"sort": "oldest"})),
            vec![a.clone(), b.clone(), c_id.clone()],
        ),
        (
            q(json!({"sort": "name"})),
            vec![a.clone(), b.clone(), c_id.clone()],
        ),
        (
            q(json!({"sort": "oldest", "offset": 1, "limit": 1})),
            vec![b.clone()],
        ),
    ] {
        let l = list(&mut c, params.clone()).await;
        assert_eq!(ids(&l), want, "{params}: {l}");
    }
    let since = all["recordings"][0]["createdAt"].clone();
    assert_eq!(
        ids(&list(&mut c, json!({"since": since})).await),
        vec![c_id.clone()]
    );
    let paged = list(&mut c, json!({"offset": 1, "limit": 1})).await;
    assert_eq!(paged["total"], 3, "the total counts every page: {paged}");
    // The same search through the control tool.
    let r = c.call("hub__record_list", json!({"query": "beta"})).await;
    assert_eq!(r["result"]["total"], 1, "{r}");
    assert_eq!(r["result"]["recordings"][0]["recordingId"], json!(b));
    // A bad time is refused with what a time looks like.
    let bad = c
        .request(json!({"type": "list_recordings", "since": "last tuesday"}))
        .await;
    assert_eq!(bad["type"], "error", "{bad}");
    let msg = bad["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("since") && msg.contains("RFC 3339"), "{bad}");
}

#[tokio::test]
async fn list_tasks_pages_and_filters_by_state_tool_and_time() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    for (i, tool) in ["t__echo", "t__echo", "t__fail"].iter().enumerate() {
        let batch = format!("b{i}");
        c.send(json!({"type": "tool_batch", "id": batch, "steps": [
            {"tool": tool, "params": {"message": "x"}, "retry": false}
        ]}))
        .await;
        c.recv_where("batch done", |v| {
            v["type"] == "batch_complete" && v["batchId"] == json!(batch)
        })
        .await;
    }
    let tasks = |l: &Value| -> Vec<String> {
        l["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["batchId"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let all = c.request(json!({"type": "list_tasks"})).await;
    assert_eq!(tasks(&all), ["b2", "b1", "b0"], "newest first: {all}");
    assert_eq!(all["total"], 3);
    let page = c
        .request(json!({"type": "list_tasks", "offset": 1, "limit": 1}))
        .await;
    assert_eq!(
        (tasks(&page), page["total"].clone()),
        (vec!["b1".into()], json!(3))
    );
    let failed = c
        .request(json!({"type": "list_tasks", "state": "failed"}))
        .await;
    assert_eq!(tasks(&failed), ["b2"], "{failed}");
    let by_tool = c
        .request(json!({"type": "list_tasks", "tool": "echo"}))
        .await;
    assert_eq!(tasks(&by_tool), ["b1", "b0"], "{by_tool}");
    let later = c
        .request(json!({"type": "list_tasks", "since": "2999-01-01T00:00:00Z"}))
        .await;
    assert_eq!(later["total"], 0, "{later}");
    let since = all["tasks"][0]["createdAt"].clone();
    let recent = c
        .request(json!({"type": "list_tasks", "since": since}))
        .await;
    assert_eq!(tasks(&recent), ["b2"], "{recent}");
    let bad = c
        .request(json!({"type": "list_tasks", "state": "finished"}))
        .await;
    assert_eq!(bad["type"], "error", "{bad}");
    assert!(bad["error"]["suggestion"]
        .as_str()
        .unwrap_or_default()
        .contains("success"));
    let r = c
        .call("hub__list_tasks", json!({"state": "success", "limit": 1}))
        .await;
    assert_eq!(r["result"]["total"], 2, "{r}");
    assert_eq!(r["result"]["tasks"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn tool_lists_are_stored_once_and_a_one_step_recording_is_small() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let a = record_one(&mut c, json!({}), "t__echo", json!({"message": "a"})).await;
    let b = record_one(&mut c, json!({}), "t__echo", json!({"message": "b"})).await;
    let snapshots = std::fs::read_dir(hub.path().join("recordings/.tools"))
        .expect("snapshots")
        .count();
    assert_eq!(snapshots, 1, "the same tool list is stored once");
    for id in [&a, &b] {
        let text = std::fs::read_to_string(rec_file(&hub.path(), id)).expect("read");
        assert!(text.len() < 2048, "{} bytes: {text}", text.len());
        assert!(!text.contains("inputSchema"), "{text}");
    }
    // Readers still see the list.
    let got = c
        .request(json!({"type": "get_recording", "recordingId": a}))
        .await;
    let tools = got["recording"]["header"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(tools.iter().any(|t| t["name"] == "echo"), "{got}");
}

/// A `dry` replay of `record_flow`'s recording checks all three steps.
async fn dry_replay_passes(c: &mut Client, id: &str) {
    let (steps, done) = replay(
        c,
        json!({"recordingId": id, "mode": "dry", "variables": {"user": "x", "password": "y"}}),
    )
    .await;
    assert_eq!(
        (steps.len(), done["success"].clone()),
        (3, json!(true)),
        "{done}"
    );
}

#[tokio::test]
async fn an_old_recording_with_an_inline_tool_list_lists_replays_and_exports() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = record_flow(&mut c).await;
    let path = rec_file(&hub.path(), &id);
    // Turn it into the schema-1 shape: the whole tool list in the header.
    let storage = hub.path().join("recordings");
    edit_header(&path, |h| {
        let hash = h["toolsHash"].as_str().expect("toolsHash").to_string();
        let snap =
            std::fs::read(storage.join(".tools").join(format!("{hash}.json"))).expect("snapshot");
        h["tools"] = serde_json::from_slice(&snap).expect("tools");
        h.as_object_mut().expect("obj").remove("toolsHash");
        h["schemaVersion"] = json!(1);
    });
    std::fs::remove_dir_all(storage.join(".tools")).expect("no snapshots left");
    hub.wait_log("picked up recordings changed outside the hub")
        .await;
    let l = list(&mut c, json!({"query": "login"})).await;
    let item = &l["recordings"][0];
    assert_eq!(
        (
            item["schemaVersion"].clone(),
            item["supported"].clone(),
            item["stepCount"].clone()
        ),
        (json!(1), json!(true), json!(3)),
        "{l}"
    );
    dry_replay_passes(&mut c, &id).await;
    let (steps, done) = replay(&mut c, json!({"recordingId": id, "mode": "offline"})).await;
    assert_eq!(
        (steps.len(), done["successCount"].clone()),
        (3, json!(3)),
        "{done}"
    );
    for format in ["json", "markdown", "html", "batch"] {
        let e = c
            .request(json!({"type": "export_recording", "recordingId": id, "format": format}))
            .await;
        assert_eq!(e["type"], "recording_export", "{format}: {e}");
    }
    let got = c
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    assert!(got["recording"]["header"]["tools"]
        .as_array()
        .is_some_and(|t| !t.is_empty()));
    // Rewriting it (update_recording) migrates it to the stored snapshot.
    let up = c
        .request(json!({"type": "update_recording", "recordingId": id, "name": "login v2"}))
        .await;
    assert_eq!(up["type"], "recording_updated", "{up}");
    let first = std::fs::read_to_string(&path).expect("read");
    let header: Value = serde_json::from_str(first.lines().next().expect("line")).expect("json");
    assert_eq!(header["schemaVersion"], 2, "{header}");
    assert!(
        header.get("tools").is_none() && header["toolsHash"].is_string(),
        "{header}"
    );
    let l = list(&mut c, json!({"query": "v2"})).await;
    assert_eq!(
        ids(&l),
        vec![id.clone()],
        "the index follows the update at once: {l}"
    );
    dry_replay_passes(&mut c, &id).await;
}

#[tokio::test]
async fn list_runs_pages_with_a_total() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    for theme in ["one", "two", "three"] {
        let r = c
            .request(json!({"type": "create_run", "theme": theme}))
            .await;
        assert_eq!(r["type"], "run_created", "{r}");
    }
    let all = c.request(json!({"type": "list_runs"})).await;
    assert_eq!(
        (all["total"].clone(), all["limit"].clone()),
        (json!(3), json!(100)),
        "{all}"
    );
    let page = c
        .request(json!({"type": "list_runs", "offset": 2, "limit": 2}))
        .await;
    assert_eq!(page["total"], 3, "{page}");
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(
        page["runs"][0], all["runs"][2],
        "the same order on every page"
    );
    let r = c.call("hub__run_list", json!({"limit": 1})).await;
    assert_eq!(r["result"]["runs"].as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(r["result"]["total"], 3, "{r}");
}

/// Issue 19: the history file's tail is read on the hub's history thread
/// while the hub already serves; a `history` request right after start
/// waits for it, and a call made meanwhile comes after the old entries.
#[tokio::test]
async fn history_right_after_start_has_the_entries_already_in_the_file() {
    let dir = tempfile::tempdir().expect("dir");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).expect("state");
    // Large entries, so reading the tail takes longer than connecting and
    // asking does.
    let pad = "x".repeat(8 * 1024);
    let mut text = String::new();
    for n in 0..1500 {
        let entry = json!({"ts": "2026-01-01T00:00:00.000Z", "session": "old",
            "tool": "t__echo", "params": {"n": n, "pad": pad}, "success": true,
            "errorType": null, "attempts": 1, "retries": 0, "durationMs": 1});
        text.push_str(&entry.to_string());
        text.push('\n');
    }
    std::fs::write(state.join("history.jsonl"), text).expect("history");
    let hub = crate::support::TestHub::start_in(dir, json!({})).await;
    let mut c = hub.connect().await;
    let r = c
        .call("write_file", json!({"path": "a.txt", "content": "hi"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let h = c.request(json!({"type": "history", "limit": 1000})).await;
    let entries = h["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1000);
    assert_eq!(entries[0]["params"]["n"], 501);
    assert_eq!(entries[998]["params"]["n"], 1499);
    assert_eq!(entries[999]["tool"], "hub__write_file");
}
