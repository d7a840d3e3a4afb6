use super::*;
use std::time::Duration;

fn limits(queue: usize, bytes: usize, resumable: bool) -> Limits {
    Limits {
        queue,
        bytes,
        resumable,
    }
}

fn text(b: Option<Bytes>) -> String {
    String::from_utf8(b.map(|b| b.to_vec()).unwrap_or_default()).unwrap_or_default()
}

fn seq_of(b: &Bytes) -> u64 {
    let v: Value = serde_json::from_slice(b).unwrap();
    v["seq"].as_u64().unwrap()
}

#[test]
fn seq_is_the_last_field_and_counts_up() {
    assert_eq!(log::with_seq("{\"a\":1}".into(), 7), "{\"a\":1,\"seq\":7}");
    assert_eq!(log::with_seq("{}".into(), 1), "{\"seq\":1}");
    assert_eq!(log::with_seq("{ }\n".into(), 2), "{ \"seq\":2}");
    let (out, mut rx) = Outbox::new(
        "s".into(),
        limits(8, 1 << 20, true),
        CancellationToken::new(),
    );
    assert!(out.send(serde_json::json!({"n": 1})));
    assert!(out.send_text("{\"n\":2}".into()));
    assert_eq!(text(rx.try_recv()), "{\"n\":1,\"seq\":1}");
    assert_eq!(text(rx.try_recv()), "{\"n\":2,\"seq\":2}");
    assert_eq!(rx.try_recv(), None);
    assert_eq!(out.last_seq(), 2);
}

#[tokio::test]
async fn a_waiting_reader_is_woken() {
    let (out, mut rx) = Outbox::new(
        "s".into(),
        limits(8, 1 << 20, true),
        CancellationToken::new(),
    );
    let waiting = tokio::spawn(async move { rx.recv().await });
    tokio::task::yield_now().await;
    assert!(out.send_text("{\"n\":3}".into()));
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken within 10 s")
        .expect("join");
    assert_eq!(text(got), "{\"n\":3,\"seq\":1}");
}

#[test]
fn a_socket_that_does_not_read_is_evicted_and_the_session_goes_on() {
    let evict = CancellationToken::new();
    let (out, rx) = Outbox::new("s".into(), limits(2, 1 << 20, true), evict.clone());
    assert!(out.send_text("{}".into()));
    assert!(out.send_text("{}".into()));
    assert!(!evict.is_cancelled());
    assert!(out.send_text("{}".into()), "kept for a resume");
    assert!(
        evict.is_cancelled(),
        "a socket that does not read is evicted"
    );
    assert!(!out.is_attached());
    assert!(!out.is_closed(), "the session outlives its socket");
    assert!(!rx.taken_over(), "evicted, not taken over");
    drop(rx);
    let (mut rx2, replayed) = out.attach(0, CancellationToken::new()).unwrap();
    assert_eq!(replayed, 3);
    let seqs: Vec<u64> = std::iter::from_fn(|| rx2.try_recv())
        .map(|b| seq_of(&b))
        .collect();
    assert_eq!(seqs, vec![1, 2, 3]);
}

#[test]
fn a_resume_replays_after_last_seq_and_refuses_what_it_cannot() {
    let (out, mut rx) = Outbox::new(
        "s".into(),
        limits(64, 1 << 20, true),
        CancellationToken::new(),
    );
    for n in 0..5 {
        out.send(serde_json::json!({ "n": n }));
    }
    // The client got two of the three written before its socket dropped.
    for _ in 0..3 {
        rx.try_recv().unwrap();
    }
    rx.detach();
    assert_eq!(
        out.attach(9, CancellationToken::new()).err(),
        Some(ResumeRefusal::Beyond {
            last_seq: 9,
            sent: 5
        })
    );
    let (mut rx, replayed) = out.attach(2, CancellationToken::new()).unwrap();
    assert_eq!(replayed, 3);
    let seqs: Vec<u64> = std::iter::from_fn(|| rx.try_recv())
        .map(|b| seq_of(&b))
        .collect();
    assert_eq!(seqs, vec![3, 4, 5]);
    // Frames 1 and 2 were acknowledged by the resume: gone.
    assert_eq!(
        out.attach(1, CancellationToken::new()).err(),
        Some(ResumeRefusal::TooOld {
            last_seq: 1,
            oldest: 3
        })
    );
    out.ack(4);
    assert!(out.attach(3, CancellationToken::new()).is_err());
    assert!(out.attach(4, CancellationToken::new()).is_ok());
}

#[test]
fn a_second_taker_leaves_the_first_receiver_with_nothing() {
    let first = CancellationToken::new();
    let (out, mut rx1) = Outbox::new("s".into(), limits(64, 1 << 20, true), first.clone());
    out.send_text("{}".into());
    let (mut rx2, _) = out.attach(0, CancellationToken::new()).unwrap();
    assert!(first.is_cancelled(), "the old socket is told to go");
    assert!(rx1.taken_over());
    assert_eq!(rx1.try_recv(), None);
    assert!(rx2.try_recv().is_some());
    // The old socket ending later does not detach the new one.
    rx1.detach();
    assert!(out.is_attached());
}

#[test]
fn a_detached_session_over_its_bound_ends_and_says_what_it_dropped() {
    let (out, rx) = Outbox::new(
        "s".into(),
        limits(1000, 100, true),
        CancellationToken::new(),
    );
    // One frame over the bound alone is kept (a large reply is written
    // whole), with or without a socket.
    let (big, _big_rx) = Outbox::new(
        "s".into(),
        limits(1000, 100, true),
        CancellationToken::new(),
    );
    assert!(big.send_text(format!("{{\"a\":\"{}\"}}", "x".repeat(400))));
    assert!(big.is_attached());
    rx.detach();
    assert!(out.send_text(format!("{{\"a\":\"{}\"}}", "x".repeat(40))));
    assert!(!out.send_text(format!("{{\"a\":\"{}\"}}", "x".repeat(80))));
    assert!(out.is_closed());
    assert!(!out.send_text("{}".into()));
    assert_eq!(
        out.attach(0, CancellationToken::new()).err(),
        Some(ResumeRefusal::Ended)
    );
}

#[test]
fn written_frames_are_kept_within_the_bound_only_when_resumable() {
    let (out, mut rx) = Outbox::new(
        "s".into(),
        limits(64, 1 << 20, false),
        CancellationToken::new(),
    );
    out.send_text("{}".into());
    rx.try_recv().unwrap();
    rx.detach();
    // Not resumable: the written frame is gone.
    assert!(matches!(
        out.attach(0, CancellationToken::new()),
        Err(ResumeRefusal::TooOld { .. })
    ));
    // Resumable with a small bound: the oldest written frames go first.
    let (out, mut rx) = Outbox::new("s".into(), limits(64, 200, true), CancellationToken::new());
    for _ in 0..4 {
        out.send_text("{\"pad\":\"0123456789\"}".into());
        rx.try_recv().unwrap();
    }
    assert!(matches!(
        out.attach(0, CancellationToken::new()),
        Err(ResumeRefusal::TooOld { .. })
    ));
    assert!(out.attach(3, CancellationToken::new()).is_ok());
}

#[tokio::test]
async fn ending_the_session_wakes_its_reader_with_none() {
    let (out, mut rx) = Outbox::new(
        "s".into(),
        limits(8, 1 << 20, true),
        CancellationToken::new(),
    );
    let waiting = tokio::spawn(async move { rx.recv().await });
    tokio::task::yield_now().await;
    let dropped = out.end();
    assert_eq!(dropped, Dropped::default());
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken")
        .expect("join");
    assert!(got.is_none());
    assert!(out.is_closed());
    // Frames queued but never written are reported when it ends.
    let (out, _rx) = Outbox::new(
        "s".into(),
        limits(8, 1 << 20, true),
        CancellationToken::new(),
    );
    out.send_text("{}".into());
    assert_eq!(out.end().frames, 1);
}

#[test]
fn replies_are_coming_while_a_call_runs() {
    let (out, rx) = Outbox::new(
        "s".into(),
        limits(8, 1 << 20, true),
        CancellationToken::new(),
    );
    assert!(!rx.replies_coming());
    let take = |o: &Outbox| o.in_flight().take(8, "call").ok();
    let (a, b) = (take(&out), take(&out.clone()));
    assert!(rx.replies_coming());
    assert_eq!(out.in_flight().count(), 2);
    drop(a);
    assert!(rx.replies_coming());
    drop(b);
    assert!(!rx.replies_coming());
}
