//! The runs index (`runs/.index.jsonl`, issue 19): `list_runs` answers from
//! it, it is rebuilt when deleted, it picks up runs changed behind the
//! hub's back, and a crash between a run's files and its index line is
//! repaired at the next start.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{sorted_ids, Client, TestHub};

async fn create(c: &mut Client, id: &str) {
    let r = c
        .request(json!({"type": "create_run", "theme": format!("topic {id}"), "runId": id}))
        .await;
    assert_eq!(r["type"], "run_created", "{r}");
}

async fn list(c: &mut Client, params: Value) -> Value {
    let mut msg = params;
    msg["type"] = json!("list_runs");
    let l = c.request(msg).await;
    assert_eq!(l["type"], "runs", "{l}");
    l
}

/// The run ids of a listing, sorted.
fn ids(l: &Value) -> Vec<String> {
    sorted_ids(l, "runs", "runId")
}

fn theme_of(l: &Value, id: &str) -> Value {
    l["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["runId"] == id)
        .map(|r| r["theme"].clone())
        .unwrap_or(Value::Null)
}

/// Write `.metadata.json` of run `id` the way an editor saves (temp file,
/// rename), so the hub never sees it half written.
fn write_meta(runs: &Path, id: &str, theme: &str, status: &str) {
    let dir = runs.join(id);
    std::fs::create_dir_all(dir.join("logs")).expect("run dir");
    let meta = json!({"run_id": id, "theme_description": theme,
        "created_at": "2026-01-01T00:00:00Z", "last_accessed": "2026-01-02T00:00:00Z",
        "status": status, "schema_version": "1.0"});
    let tmp = runs.join(format!(".{id}.tmp"));
    std::fs::write(&tmp, meta.to_string()).expect("write meta");
    std::fs::rename(&tmp, dir.join(".metadata.json")).expect("rename meta");
}

/// A whole run folder made outside the hub, moved in at once.
fn add_run_by_hand(root: &Path, id: &str) {
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    write_meta(&outside, id, "made by hand", "active");
    std::fs::rename(outside.join(id), root.join("runs").join(id)).expect("move in");
}

#[tokio::test]
async fn runs_index_is_rebuilt_after_deleting_it() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    for id in ["one", "two", "three"] {
        create(&mut c, id).await;
    }
    let a = c
        .request(json!({"type": "archive_run", "runId": "two"}))
        .await;
    assert_eq!(a["type"], "run_archived", "{a}");
    let index = hub.path().join("runs/.index.jsonl");
    assert!(index.exists(), "the hub writes its runs index");
    let hub = hub
        .crash_and_restart_with(|p| std::fs::remove_file(p.join("runs/.index.jsonl")).expect("rm"))
        .await;
    let line = hub
        .wait_log("runs index was missing; rebuilt from the runs")
        .await;
    assert!(line.contains("rebuilt=3"), "{line}");
    let mut c = hub.connect().await;
    let l = list(&mut c, json!({})).await;
    assert_eq!(ids(&l), ["one", "three", "two"], "{l}");
    assert_eq!(l["total"], 3, "{l}");
    let archived = list(&mut c, json!({"status": "archived"})).await;
    assert_eq!(ids(&archived), ["two"], "{archived}");
    assert!(index.exists(), "written again");
}

#[tokio::test]
async fn a_run_changed_behind_the_hubs_back_is_picked_up() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    create(&mut c, "kept").await;
    create(&mut c, "edited").await;
    create(&mut c, "removed").await;
    let runs = hub.path().join("runs");
    assert_eq!(
        theme_of(&list(&mut c, json!({})).await, "edited"),
        "topic edited"
    );

    // Edited: picked up by the check that runs every few seconds.
    write_meta(&runs, "edited", "edited elsewhere", "archived");
    hub.wait_log("changed=1").await;
    let l = list(&mut c, json!({"status": "archived"})).await;
    assert_eq!(ids(&l), ["edited"], "{l}");
    assert_eq!(theme_of(&l, "edited"), "edited elsewhere", "{l}");

    // Made by hand, and deleted by hand: a run folder added or removed
    // changes the runs folder, so the next listing sees it at once.
    add_run_by_hand(&hub.path(), "by-hand");
    std::fs::remove_dir_all(runs.join("removed")).expect("rm run");
    let l = list(&mut c, json!({})).await;
    assert_eq!(ids(&l), ["by-hand", "edited", "kept"], "{l}");
    assert_eq!(theme_of(&l, "by-hand"), "made by hand", "{l}");

    // Metadata deleted by hand: listed from its log, named as a problem,
    // and the run itself is left as it was (checking never writes a run).
    std::fs::remove_file(runs.join("kept/.metadata.json")).expect("rm meta");
    hub.wait_log_count("changed=1", 2).await;
    let l = list(&mut c, json!({})).await;
    assert_eq!(l["total"], 3, "{l}");
    let problems = l["problems"].to_string();
    assert!(problems.contains("kept: .metadata.json was missing"), "{l}");
    assert!(!runs.join("kept/.metadata.json").exists());
}

#[tokio::test]
async fn a_crash_between_a_run_and_its_index_entry_is_repaired_on_restart() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    create(&mut c, "first").await;
    create(&mut c, "second").await;
    // SIGKILL, and what a kill between a run's write and its index line
    // leaves: a run made whose line never came, and an archive whose
    // metadata was renamed into place but whose line never came.
    let hub = hub
        .crash_and_restart_with(|p| {
            add_run_by_hand(p, "cut-short");
            write_meta(&p.join("runs"), "second", "topic second", "archived");
        })
        .await;
    let line = hub
        .wait_log("runs index: picked up runs changed outside the hub")
        .await;
    assert!(
        line.contains("added=1") && line.contains("changed=1") && line.contains("removed=0"),
        "{line}"
    );
    let mut c = hub.connect().await;
    let l = list(&mut c, json!({})).await;
    assert_eq!(ids(&l), ["cut-short", "first", "second"], "{l}");
    let archived = list(&mut c, json!({"status": "archived"})).await;
    assert_eq!(ids(&archived), ["second"], "{archived}");
    // The repair is in the index file too: the next start has nothing to do.
    let hub = hub.crash_and_restart().await;
    hub.wait_log("runs index ready").await;
    assert_eq!(
        hub.log_count("runs index: picked up runs changed outside the hub"),
        0,
        "{}",
        hub.logs()
    );
}
