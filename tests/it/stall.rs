//! One client never stalls another: while one client exports, reads and
//! updates a large recording and deletes a run with 1,000 screenshots,
//! another client's pings are answered at once (issue 32). The hub runs
//! its tasks on one worker thread by default, so any of that work done on
//! it shows up whole in the other client's ping.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::TestHub;

#[path = "../../benches/common/stall.rs"]
mod fixture;

/// Steps of the large recording and the size of each one's result: 400 ×
/// 60 KB = 24 MB. The issue measured 48 MB on a release build; half of it
/// keeps this test within seconds on a debug build, where the old code
/// stalled the other client for seconds.
const STEPS: usize = 400;
const RESULT_BYTES: usize = 60 * 1024;
const SCREENSHOTS: usize = 1_000;

/// The worst ping allowed while the work runs. The issue asks for 20 ms;
/// this debug build on a shared 2-core machine, where the hub's blocking
/// thread, this test's own client and the other tests of the suite (run
/// in parallel) compete with the hub's worker for the cores, measured
/// 9-12 ms alone and up to ~60 ms with the machine loaded. The bound is
/// set far above that noise and far below the regression it guards: the
/// old code held the worker for 0.97-1.78 s here. The quiet-machine
/// figure (and the 20 ms target) is the relay bench's stall phase.
const WORST_PING: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_file_work_never_stalls_another_clients_ping() {
    let hub = TestHub::start(json!({"runs": {"storagePath": "./runs"}})).await;
    let recordings = hub.dir.path().join("recordings");
    fixture::write_recording(&recordings, "rec-large", STEPS, RESULT_BYTES);
    fixture::write_run(&hub.dir.path().join("runs"), "many-shots", SCREENSHOTS);
    let mut worker = hub.connect().await;
    let token = hub.token.clone().expect("token");
    let pinger = fixture::Pinger::start(hub.url(), token);

    let mut ops = Vec::new();
    let started = Instant::now();
    let export = worker
        .request(json!({"type": "export_recording", "recordingId": "rec-large", "format": "html"}))
        .await;
    ops.push(("export", started, Instant::now()));
    let html = export["content"].as_str().unwrap_or_default();
    assert!(html.contains("<html"), "export: {}", export["type"]);
    let t = Instant::now();
    let got = worker
        .request(json!({"type": "get_recording", "recordingId": "rec-large", "limit": 1}))
        .await;
    ops.push(("get", t, Instant::now()));
    assert_eq!(got["type"], "recording", "{}", got["type"]);
    let t = Instant::now();
    let updated = worker
        .request(json!({"type": "update_recording", "recordingId": "rec-large", "name": "renamed"}))
        .await;
    ops.push(("update", t, Instant::now()));
    assert_eq!(updated["type"], "recording_updated", "{updated}");
    let t = Instant::now();
    let deleted = worker
        .request(json!({"type": "delete_run", "runId": "many-shots"}))
        .await;
    ops.push(("delete run", t, Instant::now()));
    assert_eq!(deleted["type"], "run_deleted", "{deleted}");
    assert!(!hub.dir.path().join("runs/many-shots").exists());

    let rtts = pinger.stop();
    let report: Vec<String> = ops
        .iter()
        .map(|(name, from, to)| {
            let (worst, n) = fixture::worst_between(&rtts, *from, *to);
            format!("{name} {:?} ({n} pings, worst {worst:?})", *to - *from)
        })
        .collect();
    let worst = rtts.iter().map(|r| r.1).max().unwrap_or_default();
    eprintln!("{}", report.join("; "));
    // The pings overlapped the work.
    assert!(rtts.len() >= 5, "only {} pings", rtts.len());
    assert!(
        worst < WORST_PING,
        "a ping waited {worst:?} while another client worked on files: {}",
        report.join("; ")
    );
}
