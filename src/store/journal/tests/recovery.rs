//! Reading journals back: torn tails, corruption, versions, size.

use std::fs::{self, File};

use serde_json::json;

use super::*;

#[test]
fn unknown_fields_are_ignored_within_a_version() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 0);
    append_raw(
        &path,
        b"{\"kind\":\"resume\",\"from\":2,\"ts\":5,\"by\":{\"sessionId\":\"s\"}}\n",
    );
    let got = read(&path).unwrap();
    assert_eq!(got.records[1], Record::Resume { from: 2, ts: 5 });
    assert_eq!(got.torn, None);
}

#[test]
fn torn_half_record_is_truncated_reported_and_appendable_again() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 2);
    let good_len = fs::metadata(&path).unwrap().len();
    let half = br#"{"kind":"step_finished","index":0,"sta"#;
    append_raw(&path, half);

    let got = read(&path).unwrap();
    assert_eq!(got.records.len(), 3);
    let torn = got.torn.expect("the tear is reported");
    assert!(
        torn.contains(&format!(
            "dropped {} bytes at offset {good_len}",
            half.len()
        )),
        "{torn}"
    );
    assert!(torn.contains("line 4"), "{torn}");
    assert!(torn.contains("no trailing newline"), "{torn}");
    let bytes = fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, good_len);
    assert_eq!(bytes.last(), Some(&b'\n'));

    let mut w = JournalWriter::open_append(&path, SyncPolicy::Step).unwrap();
    w.append(&Record::Resume { from: 0, ts: 9 }).unwrap();
    let again = read(&path).unwrap();
    assert_eq!(again.torn, None);
    assert_eq!(again.records.len(), 4);
    assert_eq!(again.records[3], Record::Resume { from: 0, ts: 9 });
}

#[test]
fn complete_but_garbage_last_line_is_a_tear() {
    for garbage in [
        &b"{\"kind\":\"state\",\"sta\n"[..],
        &b"\0\0\0\0\0\0\0\0\n"[..],
        &b"{\"kind\":\"no_such_kind\",\"ts\":1}\n"[..],
        &b"\n"[..],
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let path = journal_with(tmp.path(), "t1", 1);
        let good = fs::read(&path).unwrap();
        append_raw(&path, garbage);

        let got = read(&path).unwrap();
        let torn = got.torn.expect("the tear is reported");
        assert!(
            torn.contains("(line 3): last line does not parse"),
            "{torn}"
        );
        assert_eq!(got.records.len(), 2);
        assert_eq!(
            fs::read(&path).unwrap(),
            good,
            "file ends at the last good line"
        );

        JournalWriter::open_append(&path, SyncPolicy::Step)
            .unwrap()
            .append(&state(7))
            .unwrap();
        let again = read(&path).unwrap();
        assert_eq!(again.torn, None);
        assert_eq!(again.records.last(), Some(&state(7)));
    }
}

#[test]
fn nul_run_tail_from_power_loss_is_a_tear() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 1);
    let good = fs::read(&path).unwrap();
    append_raw(&path, &[0u8; 4096]);
    let got = read(&path).unwrap();
    assert!(got.torn.unwrap().contains("dropped 4096 bytes"));
    assert_eq!(fs::read(&path).unwrap(), good);
}

#[test]
fn corrupt_middle_line_is_reported_with_its_number_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 1);
    append_raw(&path, b"{\"kind\":\"state\",\"sta\n");
    append_raw(
        &path,
        b"{\"kind\":\"end\",\"state\":\"success\",\"ts\":3}\n",
    );
    let before = fs::read(&path).unwrap();

    let err = read(&path).unwrap_err();
    match &err {
        JournalError::Corrupt { line, message, .. } => {
            assert_eq!(*line, 3);
            assert!(
                !message.contains("at line"),
                "serde's own line number is dropped: {message}"
            );
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("t1.jsonl:3: corrupt journal record: "),
        "{err}"
    );
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "corruption is never truncated"
    );
}

#[test]
fn bad_line_followed_by_a_torn_tail_is_still_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 1);
    append_raw(&path, b"garbage\n{\"kind\":\"end\"");
    let before = fs::read(&path).unwrap();
    assert!(matches!(
        read(&path),
        Err(JournalError::Corrupt { line: 3, .. })
    ));
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn second_header_is_corruption_not_a_tear() {
    let tmp = tempfile::tempdir().unwrap();
    let path = journal_with(tmp.path(), "t1", 1);
    let mut line = serde_json::to_vec(&header("t1")).unwrap();
    line.push(b'\n');
    append_raw(&path, &line);
    assert!(matches!(
        read(&path),
        Err(JournalError::Corrupt { line: 3, .. })
    ));
}

#[test]
fn newer_schema_version_is_refused_and_left_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t1.jsonl");
    // A future header may carry fields and kinds this hub cannot parse.
    let text = concat!(
        r#"{"kind":"header","schemaVersion":2,"taskId":"t1","newThing":[1]}"#,
        "\n",
        r#"{"kind":"teleport","ts":1}"#,
        "\n",
        r#"{"kind":"teleport","#
    );
    fs::write(&path, text).unwrap();
    let err = read(&path).unwrap_err();
    assert!(
        matches!(
            err,
            JournalError::TooNew {
                found: 2,
                supported: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("upgrade toolhub"), "{err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn older_schema_version_is_corrupt_header() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t1.jsonl");
    let mut v = serde_json::to_value(header("t1")).unwrap();
    v["schemaVersion"] = json!(0);
    fs::write(&path, format!("{v}\n{v}\n")).unwrap();
    assert!(matches!(
        read(&path),
        Err(JournalError::Corrupt { line: 1, .. })
    ));
}

#[test]
fn missing_header_is_no_header_and_left_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [&[u8]; 4] = [
        b"",
        b"{\"kind\":\"state\",\"state\":\"running\",\"error\":null,\"ts\":1}\n",
        // The crash hit the create: a lone torn header, with or without newline.
        b"{\"kind\":\"header\",\"schemaVer",
        b"{\"kind\":\"header\",\"schemaVer\n",
    ];
    for (i, bytes) in cases.iter().enumerate() {
        let path = tmp.path().join(format!("t{i}.jsonl"));
        fs::write(&path, bytes).unwrap();
        let err = read(&path).unwrap_err();
        assert!(
            matches!(err, JournalError::NoHeader { .. }),
            "case {i}: {err:?}"
        );
        assert!(err.to_string().ends_with("journal has no header line"));
        assert_eq!(&fs::read(&path).unwrap()[..], *bytes, "case {i} untouched");
    }
}

#[test]
fn ten_thousand_records_read_back_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = JournalWriter::create(tmp.path(), &header("big"), SyncPolicy::Batch).unwrap();
    for i in 0..10_000usize {
        let rec = if i % 2 == 0 {
            Record::StepStarted {
                index: i,
                params: json!({"i": i}),
                ts: i as u64,
            }
        } else {
            Record::StepFinished {
                index: i - 1,
                state: "success".into(),
                outcome: json!({"success": true, "result": i}),
                var: None,
                ts: i as u64,
            }
        };
        w.append(&rec).unwrap();
    }
    drop(w);
    let got = read(&tmp.path().join("big.jsonl")).unwrap();
    assert_eq!(got.torn, None);
    assert_eq!(got.records.len(), 10_001);
    for (i, rec) in got.records[1..].iter().enumerate() {
        let ts = match rec {
            Record::StepStarted { ts, .. } | Record::StepFinished { ts, .. } => *ts,
            other => panic!("unexpected record {other:?}"),
        };
        assert_eq!(ts, i as u64);
    }
}

#[test]
fn read_of_a_directory_is_an_io_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d.jsonl");
    fs::create_dir(&dir).unwrap();
    // Opening a directory read-only succeeds; the regular-file check refuses it.
    let _ = File::open(&dir).unwrap();
    assert!(matches!(read(&dir), Err(JournalError::Io { .. })));
}
