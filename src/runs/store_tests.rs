//! The run store on a temp folder: creation and unique ids, hostile ids,
//! recovery (torn line, missing metadata, an older schema), tails read from
//! the end, screenshot numbering and concurrent appends.

use std::io::Write;

use serde_json::Map;

use super::model::*;
use super::store::*;

fn entry(step: &str) -> LogEntry {
    LogEntry {
        timestamp: "2026-01-01T00:00:00Z".into(),
        step: step.into(),
        status: EntryStatus::Success,
        action_type: ActionType::Analysis,
        execution_method: ExecutionMethod::Analysis,
        data: Map::new(),
        schema_version: ENTRY_SCHEMA.into(),
    }
}

#[test]
fn ids_come_from_the_theme_and_are_made_unique() {
    let d = tempfile::tempdir().expect("dir");
    let a = create(d.path(), "Find a Python job on Upwork", None, None).expect("a");
    let b = create(d.path(), "Find a Python job on Upwork", None, None).expect("b");
    assert_eq!(a.run_id, "find-a-python-job-on-upwork");
    assert_eq!(b.run_id, "find-a-python-job-on-upwork-2");
    for sub in SUBDIRS {
        assert!(d.path().join(&a.run_id).join(sub).is_dir(), "{sub}");
    }
    let again = create(d.path(), "x", Some(&a.run_id), None).expect_err("taken");
    assert_eq!(again.error_type, crate::errors::ErrorType::InvalidParams);
    assert_eq!(
        create(d.path(), "找工作", None, None).expect("c").run_id,
        "run"
    );
}

#[test]
fn hostile_ids_never_reach_the_filesystem() {
    let d = tempfile::tempdir().expect("dir");
    for id in ["../x", "/etc", ".", "a/b", "A", ""] {
        let e = dir_of(d.path(), id).expect_err(id);
        assert_eq!(
            e.error_type,
            crate::errors::ErrorType::InvalidParams,
            "{id}"
        );
        assert!(create(d.path(), "t", Some(id), None).is_err(), "{id}");
    }
    let e = dir_of(d.path(), "nope").expect_err("missing");
    assert_eq!(e.error_type, crate::errors::ErrorType::NotFound);
}

#[test]
fn unknown_runs_suggest_the_nearest_id() {
    let d = tempfile::tempdir().expect("dir");
    create(d.path(), "t", Some("upwork-jobs"), None).expect("run");
    let e = dir_of(d.path(), "upwork-job").expect_err("missing");
    assert!(e.suggestion.contains("upwork-jobs"), "{}", e.suggestion);
}

#[test]
fn a_torn_line_is_skipped_and_counted() {
    let d = tempfile::tempdir().expect("dir");
    let m = create(d.path(), "t", Some("r"), None).expect("run");
    append(d.path(), &m.run_id, &entry("one")).expect("one");
    let log = d.path().join("r").join(LOG);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("open");
    f.write_all(b"{\"timestamp\":\"2026-01-0\n").expect("torn");
    append(d.path(), "r", &entry("two")).expect("two");
    let t = tail(d.path(), "r", 10).expect("tail");
    assert_eq!(t.skipped, 1);
    let steps: Vec<&str> = t.entries.iter().map(|e| e.step.as_str()).collect();
    assert_eq!(steps, ["one", "two"]);
}

#[test]
fn the_tail_is_read_from_the_end() {
    let d = tempfile::tempdir().expect("dir");
    create(d.path(), "t", Some("r"), None).expect("run");
    for i in 0..3000 {
        append(d.path(), "r", &entry(&format!("step {i}"))).expect("append");
    }
    let t = tail(d.path(), "r", 3).expect("tail");
    let steps: Vec<&str> = t.entries.iter().map(|e| e.step.as_str()).collect();
    assert_eq!(steps, ["step 2997", "step 2998", "step 2999"]);
    assert_eq!(t.skipped, 0);
    assert!(tail(d.path(), "r", 0).expect("none").entries.is_empty());
}

#[test]
fn missing_metadata_is_rebuilt_from_the_log() {
    let d = tempfile::tempdir().expect("dir");
    create(d.path(), "t", Some("r"), None).expect("run");
    let mut e = entry("first look");
    e.timestamp = "2025-01-02T03:04:05Z".into();
    append(d.path(), "r", &e).expect("append");
    std::fs::remove_file(d.path().join("r").join(META)).expect("rm");
    let (m, problem) = read_meta(d.path(), "r").expect("rebuilt");
    assert!(problem.is_some());
    assert_eq!(m.run_id, "r");
    assert_eq!(m.created_at, "2025-01-02T03:04:05Z");
    assert!(m.theme_description.contains("first look"));
    assert!(d.path().join("r").join(META).is_file(), "written back");
    let (_, again) = read_meta(d.path(), "r").expect("read");
    assert!(again.is_none());
}

#[test]
fn newer_metadata_is_refused() {
    let d = tempfile::tempdir().expect("dir");
    let mut m = create(d.path(), "t", Some("r"), None).expect("run");
    m.schema_version = "9.0".into();
    write_meta(&d.path().join("r"), &m).expect("write");
    let e = read_meta(d.path(), "r").expect_err("newer");
    assert!(e.message.contains("9.0"), "{}", e.message);
}

#[test]
fn an_older_schema_line_is_migrated_on_read() {
    let d = tempfile::tempdir().expect("dir");
    create(d.path(), "t", Some("r"), None).expect("run");
    let log = d.path().join("r").join(LOG);
    std::fs::write(
        &log,
        "{\"ts\":\"2025-11-21T10:30:00Z\",\"step\":\"old\",\"status\":\"success\",\"action\":\"navigation\",\"method\":\"command\",\"details\":\"ok\"}\n",
    )
    .expect("write");
    let t = tail(d.path(), "r", 5).expect("tail");
    assert_eq!(t.entries.len(), 1);
    assert_eq!(t.entries[0].action_type, ActionType::Navigation);
    assert_eq!(t.entries[0].data["details"], "ok");
}

#[test]
fn screenshots_are_numbered_after_the_highest() {
    let d = tempfile::tempdir().expect("dir");
    create(d.path(), "t", Some("r"), None).expect("run");
    let (a, _) = claim_screenshot(d.path(), "r", "search-page").expect("a");
    assert!(
        a.ends_with("screenshots/001_search-page.png"),
        "{}",
        a.display()
    );
    std::fs::write(d.path().join("r/screenshots/007_manual.png"), b"x").expect("seven");
    let (b, _) = claim_screenshot(d.path(), "r", "details").expect("b");
    assert!(
        b.ends_with("screenshots/008_details.png"),
        "{}",
        b.display()
    );
}

#[test]
fn concurrent_appends_never_interleave() {
    let d = tempfile::tempdir().expect("dir");
    create(d.path(), "t", Some("r"), None).expect("run");
    let big = "y".repeat(50_000);
    std::thread::scope(|s| {
        for w in 0..4 {
            let (root, big) = (d.path(), &big);
            s.spawn(move || {
                for i in 0..50 {
                    let mut e = entry(&format!("w{w} {i}"));
                    e.data.insert("blob".into(), big.clone().into());
                    append(root, "r", &e).expect("append");
                }
            });
        }
    });
    let text = std::fs::read_to_string(d.path().join("r").join(LOG)).expect("read");
    assert_eq!(text.lines().count(), 200);
    for line in text.lines() {
        read_entry(line).expect("every line whole");
    }
}

#[test]
fn a_newer_entry_is_refused_with_a_clear_message() {
    let d = tempfile::tempdir().expect("dir");
    create(d.path(), "t", Some("r"), None).expect("run");
    let mut e = serde_json::to_value(entry("future")).expect("json");
    e["schema_version"] = "2.0".into();
    std::fs::write(d.path().join("r").join(LOG), format!("{e}\n")).expect("write");
    let err = tail(d.path(), "r", 5).err().expect("refused");
    assert!(
        err.message.contains("2.0") && err.suggestion.contains("upgrade"),
        "{err:?}"
    );
}
