use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

fn header(task_id: &str) -> Record {
    Record::Header {
        schema_version: SCHEMA_VERSION,
        task_id: task_id.to_string(),
        batch_id: json!("batch-001"),
        steps: json!([
            {"id": "step1", "tool": "read_file", "params": {"path": "/a.json"}, "saveAs": "fileA"},
            {"id": "step2", "tool": "run_command", "params": {"command": "echo {{fileA.result}}"}}
        ]),
        options: json!({"stopOnError": true, "timeout": 120000}),
        created_ms: 1_750_000_000_000,
        hub_version: "0.1.0".to_string(),
        call_key: None,
        context: None,
        view: None,
        unattended: None,
        client: None,
    }
}

/// One record of every kind after the header, with awkward content (newlines,
/// quotes, unicode) so a line break inside a record would show.
fn every_other_kind() -> Vec<Record> {
    vec![
        Record::State {
            state: "running".into(),
            error: None,
            ts: 1,
        },
        Record::StepStarted {
            index: 0,
            params: json!({"path": "/a.json", "note": "line1\nline2 \"q\" ü\u{0}"}),
            ts: 2,
        },
        Record::StepFinished {
            index: 0,
            state: "success".into(),
            outcome: json!({"success": true, "result": {"text": "a\r\nb"}, "attempts": 2}),
            var: Some(json!({"name": "fileA", "value": {"success": true}})),
            ts: 3,
        },
        Record::State {
            state: "retrying".into(),
            error: Some(json!({"errorType": "TIMEOUT", "message": "took too long"})),
            ts: 4,
        },
        Record::NeedUser {
            index: 1,
            reason: "matches rm\\s+-rf".into(),
            params_hash: "sha256-abc".into(),
            ts: 5,
        },
        Record::Decision {
            index: 1,
            approve: true,
            params_hash: "sha256-abc".into(),
            ts: 6,
        },
        Record::Resume { from: 1, ts: 7 },
        Record::StepFinished {
            index: 1,
            state: "skipped".into(),
            outcome: json!({"skipped": true}),
            var: None,
            ts: 8,
        },
        Record::End {
            state: "success".into(),
            ts: 9,
        },
    ]
}

fn state(ts: u64) -> Record {
    Record::State {
        state: "running".into(),
        error: None,
        ts,
    }
}

/// A journal with a header and `n` state records, written by the real writer.
fn journal_with(dir: &Path, id: &str, n: u64) -> PathBuf {
    let mut w = JournalWriter::create(dir, &header(id), SyncPolicy::Batch).unwrap();
    for ts in 0..n {
        w.append(&state(ts)).unwrap();
    }
    w.path().to_path_buf()
}

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

fn dir_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

mod recovery;

#[test]
fn every_record_kind_round_trips_through_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = JournalWriter::create(tmp.path(), &header("t1"), SyncPolicy::Step).unwrap();
    assert_eq!(w.path(), tmp.path().join("t1.jsonl"));
    for rec in every_other_kind() {
        w.append(&rec).unwrap();
    }
    drop(w);

    let got = read(&tmp.path().join("t1.jsonl")).unwrap();
    let mut want = vec![header("t1")];
    want.extend(every_other_kind());
    assert_eq!(got.records, want);
    assert_eq!(got.torn, None);
    assert_eq!(got.path, tmp.path().join("t1.jsonl"));

    // The on-disk names are part of the format: snake_case kinds, camelCase fields.
    let text = fs::read_to_string(tmp.path().join("t1.jsonl")).unwrap();
    assert_eq!(text.lines().count(), want.len(), "one record per line");
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["kind"], "header");
    assert_eq!(first["schemaVersion"], 1);
    assert_eq!(first["taskId"], "t1");
    assert_eq!(first["createdMs"], 1_750_000_000_000u64);
    assert_eq!(first["hubVersion"], "0.1.0");
    assert!(text.contains(r#""kind":"step_started""#));
    assert!(text.contains(
        r#""kind":"need_user","index":1,"reason":"matches rm\\s+-rf","paramsHash":"sha256-abc""#
    ));
}

#[test]
fn step_durability_syncs_at_barriers_covering_what_came_before_and_batch_only_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let mut step = JournalWriter::create(tmp.path(), &header("s"), SyncPolicy::Step).unwrap();
    assert_eq!(step.syncs, 0, "the header waits for the first sync");
    assert!(step.unsynced());
    step.append(&state(1)).unwrap();
    assert_eq!(step.syncs, 0, "a state record is only written");
    let started = Record::StepStarted {
        index: 0,
        params: serde_json::json!({}),
        ts: 2,
    };
    step.append(&started).unwrap();
    assert_eq!(
        step.syncs, 1,
        "a step's start is a barrier: one sync for all three"
    );
    assert!(!step.unsynced());
    assert!(step.dir.is_none(), "the first sync syncs the new name too");
    step.append(&Record::StepFinished {
        index: 0,
        state: "success".into(),
        outcome: serde_json::json!({"success": true}),
        var: None,
        ts: 3,
    })
    .unwrap();
    assert_eq!(step.syncs, 1, "a result waits for the next barrier");
    assert!(step.unsynced());
    step.flush().unwrap();
    step.flush().unwrap();
    assert_eq!(
        step.syncs, 2,
        "a flush syncs once, and only what is unsynced"
    );
    step.append(&started).unwrap();
    step.append(&Record::End {
        state: "success".into(),
        ts: 4,
    })
    .unwrap();
    assert_eq!(step.syncs, 4);

    let mut batch = JournalWriter::create(tmp.path(), &header("b"), SyncPolicy::Batch).unwrap();
    assert_eq!(
        batch.syncs, 1,
        "the header is synced at create in batch mode"
    );
    batch.append(&state(1)).unwrap();
    batch.append(&started).unwrap();
    batch.flush().unwrap();
    assert!(
        !batch.unsynced(),
        "batch durability owes no sync per record"
    );
    assert_eq!(batch.syncs, 1);
    batch
        .append(&Record::End {
            state: "success".into(),
            ts: 3,
        })
        .unwrap();
    assert_eq!(batch.syncs, 2);

    // The re-opened writer keeps the policy too.
    let mut again = JournalWriter::open_append(step.path(), SyncPolicy::Step).unwrap();
    assert!(!again.unsynced());
    again.append(&state(3)).unwrap();
    assert_eq!(again.syncs, 0);
    again.flush().unwrap();
    assert_eq!(again.syncs, 1);
    assert_eq!(read(step.path()).unwrap().records.len(), 7);
}

#[test]
fn syncs_on_names_exactly_the_appends_that_sync() {
    // The engine writes inline what does not sync and hands the worker over
    // only for what does: the prediction must match what append does.
    let tmp = tempfile::tempdir().unwrap();
    for (id, durability) in [("s", SyncPolicy::Step), ("b", SyncPolicy::Batch)] {
        let mut w = JournalWriter::create(tmp.path(), &header(id), durability).unwrap();
        w.flush().unwrap();
        for rec in every_other_kind() {
            let before = w.syncs;
            let predicted = w.syncs_on(&rec);
            w.append(&rec).unwrap();
            assert_eq!(
                w.syncs - before,
                u64::from(predicted),
                "{durability:?} {rec:?}"
            );
        }
    }
    let w = JournalWriter::create(tmp.path(), &header("x"), SyncPolicy::Batch).unwrap();
    assert!(
        !w.syncs_on(&state(1)),
        "batch: a state record is only written"
    );
    assert!(w.syncs_on(&Record::End {
        state: "success".into(),
        ts: 1
    }));
}

#[test]
fn a_journal_whose_header_never_completed_is_never_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("e.jsonl");
    std::fs::write(&empty, b"").unwrap();
    assert!(never_committed(&empty).unwrap());
    let torn = tmp.path().join("t.jsonl");
    std::fs::write(&torn, br#"{"kind":"header","schemaVer"#).unwrap();
    assert!(never_committed(&torn).unwrap());
    let w = JournalWriter::create(tmp.path(), &header("whole"), SyncPolicy::Step).unwrap();
    assert!(!never_committed(w.path()).unwrap());
    // A damaged but complete first line is corruption to report, not this.
    let bad = tmp.path().join("b.jsonl");
    std::fs::write(&bad, b"garbage\n").unwrap();
    assert!(!never_committed(&bad).unwrap());
}

#[test]
fn created_dir_is_0700_and_journal_is_0600() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state").join("tasks");
    let w = JournalWriter::create(&dir, &header("t1"), SyncPolicy::Step).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(w.path()), 0o600);
}

#[test]
fn create_refuses_an_existing_journal() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 3);
    let before = fs::read(&path).unwrap();
    let err = JournalWriter::create(tmp.path(), &header("t1"), SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn create_refuses_hostile_ids_without_touching_the_fs() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("keep.txt"), "x").unwrap();
    let missing = tmp.path().join("not-yet");
    let long = "a".repeat(300);
    for id in [
        "../x",
        "..%2F",
        "/etc/passwd",
        "a\0b",
        "",
        ".",
        long.as_str(),
    ] {
        for dir in [tmp.path(), missing.as_path()] {
            let err = JournalWriter::create(dir, &header(id), SyncPolicy::Step).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{id:?}");
        }
        assert_eq!(dir_entries(tmp.path()), vec!["keep.txt"], "{id:?}");
        assert!(
            !missing.exists(),
            "the missing dir stays missing for {id:?}"
        );
    }
    let parent_entries = dir_entries(tmp.path().parent().unwrap());
    assert!(!parent_entries.iter().any(|n| n == "x.jsonl"));
}

#[test]
fn create_refuses_a_non_header_or_other_version_first_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    let err = JournalWriter::create(&dir, &state(1), SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let mut h = header("t1");
    if let Record::Header { schema_version, .. } = &mut h {
        *schema_version = 2;
    }
    let err = JournalWriter::create(&dir, &h, SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(!dir.exists());
}

#[test]
fn create_refuses_a_symlinked_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    symlink(&real, &link).unwrap();
    let err = JournalWriter::create(&link, &header("t1"), SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(dir_entries(&real).is_empty());
    // And list refuses it the same way.
    assert_eq!(list(&link).unwrap_err().kind(), ErrorKind::InvalidInput);
}

#[test]
fn create_refuses_a_symlink_where_the_journal_would_go() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target.txt");
    fs::write(&target, "precious").unwrap();
    symlink(&target, tmp.path().join("t1.jsonl")).unwrap();
    let err = JournalWriter::create(tmp.path(), &header("t1"), SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
}

#[test]
fn open_append_and_read_refuse_symlinks() {
    let tmp = tempfile::tempdir().unwrap();
    let real = journal_with(tmp.path(), "real", 1);
    let link = tmp.path().join("link.jsonl");
    symlink(&real, &link).unwrap();
    let err = JournalWriter::open_append(&link, SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(matches!(read(&link), Err(JournalError::Io { .. })));
}

#[test]
fn open_append_refuses_bad_names_empty_files_and_torn_tails() {
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("notes.txt");
    fs::write(&other, "x\n").unwrap();
    let err = JournalWriter::open_append(&other, SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);

    let empty = tmp.path().join("e.jsonl");
    fs::write(&empty, "").unwrap();
    let err = JournalWriter::open_append(&empty, SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData);

    let path = journal_with(tmp.path(), "t1", 1);
    append_raw(&path, b"{\"kind\":");
    let err = JournalWriter::open_append(&path, SyncPolicy::Step).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert!(err.to_string().contains("read it first"), "{err}");
}

#[test]
fn append_refuses_a_second_header() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = JournalWriter::create(tmp.path(), &header("t1"), SyncPolicy::Step).unwrap();
    let err = w.append(&header("t1")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(read(w.path()).unwrap().records.len(), 1);
}

#[test]
fn a_failed_write_poisons_the_writer() {
    // /dev/full fails every write with ENOSPC, like a full disk.
    let file = OpenOptions::new().write(true).open("/dev/full").unwrap();
    let mut w = JournalWriter {
        file,
        path: PathBuf::from("/dev/full"),
        durability: SyncPolicy::Step,
        poisoned: false,
        dirty: false,
        dir: None,
        syncs: 0,
    };
    let first = w.append(&state(1)).unwrap_err();
    assert_eq!(first.raw_os_error(), None, "wrapped with the path");
    assert!(first.to_string().starts_with("/dev/full: "), "{first}");
    let second = w.append(&state(2)).unwrap_err();
    assert!(
        second
            .to_string()
            .contains("an earlier journal write failed"),
        "{second}"
    );
}

#[test]
fn open_append_uses_o_append_so_writes_always_land_at_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 1);
    let mut w = JournalWriter::open_append(&path, SyncPolicy::Step).unwrap();
    // SAFETY: F_GETFL on a descriptor the writer owns and keeps open.
    let flags = unsafe { libc::fcntl(w.file.as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0);
    assert_ne!(flags & libc::O_APPEND, 0, "journal opened without O_APPEND");

    // Without O_APPEND the writer's stale offset would overwrite this line.
    append_raw(&path, b"{\"kind\":\"resume\",\"from\":0,\"ts\":2}\n");
    w.append(&state(3)).unwrap();
    let got = read(&path).unwrap();
    assert_eq!(got.torn, None);
    assert_eq!(got.records[2], Record::Resume { from: 0, ts: 2 });
    assert_eq!(got.records[3], state(3));

    let created = JournalWriter::create(tmp.path(), &header("t2"), SyncPolicy::Step).unwrap();
    // SAFETY: as above.
    let flags = unsafe { libc::fcntl(created.file.as_raw_fd(), libc::F_GETFL) };
    assert_ne!(
        flags & libc::O_APPEND,
        0,
        "created journal without O_APPEND"
    );
}

#[test]
fn list_returns_sorted_journals_and_skips_symlinks_and_bad_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tasks");
    journal_with(&dir, "b-task", 0);
    journal_with(&dir, "a_task", 0);
    journal_with(&dir, "0f8fad5b-d9cb-469f-a165-70867728950e", 0);
    for bad in [
        ".hidden.jsonl",
        "a b.jsonl",
        "x.jsonl.torn",
        "x.json",
        ".jsonl",
        "-x.jsonl",
    ] {
        fs::write(dir.join(bad), "{}\n").unwrap();
    }
    fs::create_dir(dir.join("sub.jsonl")).unwrap();
    let outside = tmp.path().join("outside.jsonl");
    fs::write(&outside, "secret\n").unwrap();
    symlink(&outside, dir.join("linked.jsonl")).unwrap();
    symlink(tmp.path().join("dangling"), dir.join("dangling.jsonl")).unwrap();

    let got = list(&dir).unwrap();
    let names: Vec<_> = got
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec![
            "0f8fad5b-d9cb-469f-a165-70867728950e.jsonl",
            "a_task.jsonl",
            "b-task.jsonl"
        ]
    );
    assert!(got.iter().all(|p| p.parent() == Some(dir.as_path())));
}

#[test]
fn list_of_a_missing_dir_is_empty() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(list(&tmp.path().join("none")).unwrap().is_empty());
}

#[test]
fn remove_deletes_a_journal_and_refuses_other_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 1);
    let other = tmp.path().join("config.json");
    fs::write(&other, "{}").unwrap();
    assert_eq!(remove(&other).unwrap_err().kind(), ErrorKind::InvalidInput);
    assert!(other.exists());
    remove(&path).unwrap();
    assert!(!path.exists());
    assert_eq!(remove(&path).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn remove_unlinks_a_symlink_not_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target.txt");
    fs::write(&target, "precious").unwrap();
    let link = tmp.path().join("t1.jsonl");
    symlink(&target, &link).unwrap();
    remove(&link).unwrap();
    assert!(fs::symlink_metadata(&link).is_err());
    assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
}
