//! Held messages: nothing reaches the owner ahead of the journal record it
//! reports, and the order never changes.

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::Task;
use crate::engine::validate::Plan;
use crate::protocol::BatchOptions;
use crate::session::{Outbox, OutboxReceiver as Receiver};
use crate::store::journal::{JournalWriter, Record, SyncPolicy, SCHEMA_VERSION};

fn task() -> (Task, Receiver) {
    let limits = crate::session::OutboxLimits {
        queue: 64,
        bytes: 1 << 20,
        resumable: false,
    };
    let (out, rx) = Outbox::new("s1".into(), limits, CancellationToken::new());
    let plan = Plan {
        steps: Vec::new(),
        options: BatchOptions::default(),
    };
    let t = Task::new(
        "t1".into(),
        json!("b1"),
        plan,
        Some(out),
        CancellationToken::new(),
    );
    (t, rx)
}

fn journal(dir: &std::path::Path, durability: SyncPolicy) -> JournalWriter {
    let header = Record::Header {
        schema_version: SCHEMA_VERSION,
        task_id: "t1".into(),
        batch_id: json!("b1"),
        steps: json!([]),
        options: json!({}),
        created_ms: 1,
        hub_version: "test".into(),
        call_key: None,
        context: None,
        view: None,
        unattended: None,
        client: None,
    };
    JournalWriter::create(dir, &header, durability).unwrap()
}

fn finished(index: usize) -> Record {
    Record::StepFinished {
        index,
        state: "success".into(),
        outcome: json!({"success": true}),
        var: None,
        ts: 2,
    }
}

fn started(index: usize) -> Record {
    Record::StepStarted {
        index,
        params: json!({}),
        ts: 3,
    }
}

fn drained(rx: &mut Receiver) -> Vec<Value> {
    let mut v = Vec::new();
    while let Some(s) = rx.try_recv() {
        let mut m: Value = serde_json::from_slice(&s).unwrap();
        // The outbox numbers every frame; these tests look at the rest.
        m.as_object_mut().unwrap().remove("seq");
        v.push(m);
    }
    v
}

#[test]
fn a_step_result_is_held_until_the_sync_that_makes_it_durable() {
    let tmp = tempfile::tempdir().unwrap();
    let (t, mut rx) = task();
    t.set_journal(Some(journal(tmp.path(), SyncPolicy::Step)));
    t.with_journal(|w| w.unwrap().append(&started(0))).unwrap();
    t.emit(json!({"n": 0}));
    assert_eq!(
        drained(&mut rx),
        [json!({"n": 0})],
        "nothing unsynced: sent at once"
    );

    // Step 0's result is written, not synced: its message waits.
    t.with_journal(|w| w.unwrap().append(&finished(0))).unwrap();
    t.emit(json!({"type": "batch_step_result", "stepIndex": 0}));
    t.emit(json!({"n": 1}));
    t.release();
    assert!(drained(&mut rx).is_empty(), "sent ahead of its record");
    assert_eq!(t.held(), 2);

    // Step 1's start is a barrier: one sync covers step 0's result too.
    t.with_journal(|w| w.unwrap().append(&started(1))).unwrap();
    assert_eq!(t.with_journal(|w| w.unwrap().syncs()), 2);
    t.release();
    assert_eq!(
        drained(&mut rx),
        [
            json!({"type": "batch_step_result", "stepIndex": 0}),
            json!({"n": 1})
        ],
        "released in order after the sync"
    );

    // A flush (before a wait) releases too.
    t.with_journal(|w| w.unwrap().append(&finished(1))).unwrap();
    t.emit(json!({"n": 2}));
    assert!(drained(&mut rx).is_empty());
    t.with_journal(|w| w.unwrap().flush()).unwrap();
    t.release();
    assert_eq!(drained(&mut rx), [json!({"n": 2})]);
}

#[test]
fn a_new_journals_header_holds_messages_until_its_first_sync() {
    let tmp = tempfile::tempdir().unwrap();
    let (t, mut rx) = task();
    t.set_journal(Some(journal(tmp.path(), SyncPolicy::Step)));
    t.emit(json!({"type": "task_state", "state": "running"}));
    assert!(drained(&mut rx).is_empty());
    t.with_journal(|w| w.unwrap().append(&started(0))).unwrap();
    t.release();
    assert_eq!(drained(&mut rx).len(), 1);
}

#[test]
fn without_a_journal_to_sync_per_step_nothing_is_held() {
    let tmp = tempfile::tempdir().unwrap();
    let (t, mut rx) = task();
    t.emit(json!({"n": 0}));
    t.set_journal(Some(journal(tmp.path(), SyncPolicy::Batch)));
    t.with_journal(|w| w.unwrap().append(&finished(0))).unwrap();
    t.emit(json!({"n": 1}));
    assert_eq!(drained(&mut rx), [json!({"n": 0}), json!({"n": 1})]);
}

#[test]
fn a_journal_dropped_with_messages_held_sends_them_before_the_next() {
    // A journal that fails is dropped (the task goes on, not durable): what
    // it held goes out, in order, ahead of the warning that says so.
    let tmp = tempfile::tempdir().unwrap();
    let (t, mut rx) = task();
    t.set_journal(Some(journal(tmp.path(), SyncPolicy::Step)));
    t.emit(json!({"n": 0}));
    t.set_journal(None);
    t.emit(json!({"type": "warning"}));
    assert_eq!(
        drained(&mut rx),
        [json!({"n": 0}), json!({"type": "warning"})]
    );
}
