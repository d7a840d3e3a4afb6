use std::collections::HashSet;
use std::fs::File;
use std::io::Write;

use serde_json::json;

use super::*;
use crate::protocol::paging::{Paging, Since};

/// A finished recording with one step per `(server, tool)`.
fn write_rec(storage: &Path, id: &str, name: &str, created: &str, steps: &[(&str, &str)]) {
    let dir = storage.join(id);
    fs::create_dir_all(&dir).unwrap();
    let mut f = File::create(dir.join(super::super::FILE)).unwrap();
    let header = json!({"kind": "header", "schemaVersion": 2, "recordingId": id, "name": name,
        "description": format!("about {name}"), "tags": ["t-".to_string() + name], "createdAt": created, "hubVersion": "0"});
    writeln!(f, "{header}").unwrap();
    for (i, (server, tool)) in steps.iter().enumerate() {
        let step = json!({"kind": "step", "seq": i, "source": {"type": "tool_call"}, "tool": tool,
            "qualifiedName": format!("{server}__{tool}"), "server": server, "params": {},
            "timestamp": created, "tOffsetMs": 0, "durationMs": 1, "success": true});
        writeln!(f, "{step}").unwrap();
    }
    let end = json!({"kind": "end", "stepCount": steps.len(), "totalDurationMs": 1, "successRate": 1.0,
        "stoppedAt": created, "reason": "stopped"});
    writeln!(f, "{end}").unwrap();
}

fn req(v: serde_json::Value) -> ListReq {
    serde_json::from_value(v).unwrap()
}

fn ids_of(p: &Page) -> Vec<String> {
    p.items
        .iter()
        .map(|v| v["recordingId"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_missing_index_is_rebuilt_from_the_recordings_and_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path();
    write_rec(
        s,
        "rec-a",
        "alpha",
        "2026-01-01T00:00:00.000Z",
        &[("fs", "read_file")],
    );
    write_rec(s, "rec-b", "beta", "2026-01-02T00:00:00.000Z", &[]);
    let idx = RecordingIndex::new();
    let r = idx.open(s);
    assert_eq!(r, Repairs::default(), "a rebuild is not a repair");
    assert!(s.join(FILE).exists());
    let page = idx.list(s, &ListReq::default(), None);
    assert_eq!(page.total, 2);
    assert_eq!(ids_of(&page), ["rec-b", "rec-a"]);
    assert_eq!(page.items[1]["stepCount"], 1);
    assert_eq!(page.items[1]["tools"], json!(["fs__read_file"]));
    // A second hub reads the file instead of the recordings.
    fs::remove_dir_all(s.join("rec-a")).unwrap();
    let again = RecordingIndex::new();
    let _ = RecordingIndex::state(&mut again.lock(), s);
    assert_eq!(
        again.list(s, &ListReq::default(), None).total,
        2,
        "read from the index file"
    );
    assert_eq!(again.verify(s, &HashSet::new()).removed, 1);
    assert_eq!(again.list(s, &ListReq::default(), None).total, 1);
}

#[test]
fn verify_picks_up_edits_new_folders_and_deletions_made_behind_the_hubs_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path();
    write_rec(s, "rec-a", "alpha", "2026-01-01T00:00:00.000Z", &[]);
    write_rec(s, "rec-b", "beta", "2026-01-02T00:00:00.000Z", &[]);
    let idx = RecordingIndex::new();
    idx.open(s);
    // Edited: a different name (and size).
    write_rec(
        s,
        "rec-a",
        "renamed elsewhere",
        "2026-01-01T00:00:00.000Z",
        &[("x", "y")],
    );
    write_rec(s, "rec-c", "gamma", "2026-01-03T00:00:00.000Z", &[]);
    fs::remove_dir_all(s.join("rec-b")).unwrap();
    let r = idx.verify(s, &HashSet::new());
    assert_eq!(
        r,
        Repairs {
            added: 1,
            changed: 1,
            removed: 1
        }
    );
    let page = idx.list(s, &req(json!({"sort": "name"})), None);
    assert_eq!(ids_of(&page), ["rec-c", "rec-a"]);
    assert_eq!(page.items[1]["name"], "renamed elsewhere");
    assert_eq!(
        idx.verify(s, &HashSet::new()),
        Repairs::default(),
        "nothing twice"
    );
    // The deleted index file is written again from memory.
    fs::remove_file(s.join(FILE)).unwrap();
    idx.verify(s, &HashSet::new());
    assert!(s.join(FILE).exists());
}

#[test]
fn each_filter_sort_and_page() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path();
    write_rec(
        s,
        "rec-1",
        "Login flow",
        "2026-01-01T00:00:00.000Z",
        &[("web", "click")],
    );
    write_rec(
        s,
        "rec-2",
        "checkout",
        "2026-02-01T00:00:00.000Z",
        &[("fs", "read_file")],
    );
    write_rec(
        s,
        "rec-3",
        "logout",
        "2026-03-01T00:00:00.000Z",
        &[("web", "read_file")],
    );
    let idx = RecordingIndex::new();
    idx.open(s);
    let q = |v| ids_of(&idx.list(s, &req(v), None));
    assert_eq!(q(json!({"query": "LOG"})), ["rec-3", "rec-1"]);
    assert_eq!(
        q(json!({"query": "about flow"})),
        ["rec-1"],
        "description, every word"
    );
    assert_eq!(q(json!({"query": "t-checkout"})), ["rec-2"], "tags");
    assert_eq!(
        q(json!({"tool": "read_file"})),
        ["rec-3", "rec-2"],
        "bare name"
    );
    assert_eq!(
        q(json!({"tool": "fs__read_file"})),
        ["rec-2"],
        "qualified name"
    );
    assert_eq!(q(json!({"server": "web"})), ["rec-3", "rec-1"]);
    assert_eq!(q(json!({"since": "2026-02-01"})), ["rec-3", "rec-2"]);
    assert_eq!(q(json!({"sort": "oldest"})), ["rec-1", "rec-2", "rec-3"]);
    assert_eq!(q(json!({"sort": "name"})), ["rec-2", "rec-1", "rec-3"]);
    let page = idx.list(
        s,
        &req(json!({"sort": "oldest", "offset": 1, "limit": 1})),
        None,
    );
    assert_eq!((ids_of(&page), page.total), (vec!["rec-2".to_string()], 3));
    let r = ListReq {
        since: Since::parse("2027-01-01"),
        page: Paging {
            offset: 0,
            limit: Some(0),
        },
        ..ListReq::default()
    };
    assert_eq!(idx.list(s, &r, None).total, 0);
}

#[test]
fn puts_and_deletes_survive_a_restart_and_the_file_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path();
    write_rec(s, "rec-a", "alpha", "2026-01-01T00:00:00.000Z", &[]);
    let idx = RecordingIndex::new();
    idx.open(s);
    for _ in 0..200 {
        idx.refresh(s, "rec-a");
    }
    let lines = fs::read_to_string(s.join(FILE)).unwrap().lines().count();
    assert!(lines <= 2 + 64 + 1, "compacted: {lines} lines");
    fs::remove_dir_all(s.join("rec-a")).unwrap();
    idx.remove(s, "rec-a");
    write_rec(s, "rec-b", "beta", "2026-01-01T00:00:00.000Z", &[]);
    idx.refresh(s, "rec-b");
    let again = RecordingIndex::new();
    let _ = RecordingIndex::state(&mut again.lock(), s);
    assert_eq!(ids_of(&again.list(s, &ListReq::default(), None)), ["rec-b"]);
}

#[test]
fn an_unreadable_recording_is_a_problem_not_a_listing() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path();
    fs::create_dir_all(s.join("rec-bad")).unwrap();
    fs::write(s.join("rec-bad").join(super::super::FILE), "not json\n").unwrap();
    let idx = RecordingIndex::new();
    idx.open(s);
    let page = idx.list(s, &ListReq::default(), None);
    assert_eq!(page.total, 0);
    assert_eq!(page.problems.len(), 1);
    assert!(page.problems[0].contains("not a recording header"));
}

#[test]
fn entries_are_read_back_by_offset_after_updates_compaction_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path();
    let ids: Vec<String> = (0..30).map(|_| super::super::new_id()).collect();
    let name = |i: usize| {
        if i == 7 {
            "Ünïcode Ωmega".to_string()
        } else {
            format!("flow {i:02}")
        }
    };
    for (i, id) in ids.iter().enumerate() {
        let created = format!("2026-01-01T00:00:{i:02}.000Z");
        write_rec(s, id, &name(i), &created, &[("fs", "read_file")]);
    }
    let idx = RecordingIndex::new();
    idx.open(s);
    // Five puts each: past twice the entries, so the file is compacted
    // and every key moves to a new offset.
    for _ in 0..5 {
        for id in &ids {
            idx.refresh(s, id);
        }
    }
    let lines = fs::read_to_string(s.join(FILE)).unwrap().lines().count();
    assert!(lines <= 2 * 30 + 64 + 1, "compacted: {lines} lines");
    let check = |idx: &RecordingIndex| {
        let page = idx.list(s, &req(json!({"sort": "oldest"})), None);
        assert_eq!(page.total, 30);
        for (i, item) in page.items.iter().enumerate() {
            assert_eq!(item["recordingId"], json!(ids[i]));
            assert_eq!(item["name"], json!(name(i)));
        }
        let by_name = ids_of(&idx.list(s, &req(json!({"sort": "name", "limit": 2})), None));
        assert_eq!(by_name, [ids[0].clone(), ids[1].clone()]);
        assert_eq!(
            ids_of(&idx.list(s, &req(json!({"query": "ÜNÏ ωMEGA"})), None)),
            [ids[7].clone()],
            "non-ASCII words match case-insensitively"
        );
        let hits = idx.list(
            s,
            &req(json!({"query": "flow 1", "tool": "fs__read_file"})),
            None,
        );
        assert_eq!(hits.total, 12, "every word: flow 01, 10..19, 21");
        assert_eq!(
            idx.list(s, &req(json!({"query": "flow", "server": "nope"})), None)
                .total,
            0
        );
    };
    check(&idx);
    // A second hub reads the same entries from the compacted file.
    let again = RecordingIndex::new();
    assert_eq!(again.open(s), Repairs::default(), "nothing to repair");
    check(&again);
}

#[test]
fn an_index_that_cannot_be_written_lists_from_a_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path();
    write_rec(s, "rec-a", "alpha", "2026-01-01T00:00:00.000Z", &[]);
    write_rec(s, "rec-b", "beta", "2026-01-02T00:00:00.000Z", &[]);
    // A folder where the file should be: nothing can be written there.
    fs::create_dir_all(s.join(FILE)).unwrap();
    let idx = RecordingIndex::new();
    idx.open(s);
    let page = idx.list(s, &req(json!({"query": "alpha"})), None);
    assert_eq!(ids_of(&page), ["rec-a"]);
    assert_eq!(idx.list(s, &ListReq::default(), None).total, 2);
    let g = idx.lock();
    let st = g.as_ref().unwrap();
    assert_eq!(st.pending.len(), 2);
    assert!(st.pending.len() <= PENDING_MAX);
}
