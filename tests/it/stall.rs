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

/// Steps of the large recording and the size of each one's result: 200 ×
/// 60 KB = 12 MB. The issue measured 48 MB on a release build; a quarter
/// of it keeps this debug-build test within seconds and its own client's
/// parsing of the export (on the same two cores) small, and the old code
/// still held the worker for about a second here.
const STEPS: usize = 200;
const RESULT_BYTES: usize = 60 * 1024;
const SCREENSHOTS: usize = 1_000;

/// The worst ping allowed while the work runs. The issue asks for 20 ms;
/// the relay bench's stall phase measures that on a release build. This
/// is a debug build on a shared 2-core machine, where the hub's blocking
/// thread, this test's client and other builds compete with the hub's
/// worker for the cores: at a load average of 8–12 pings waited up to
/// 133 ms during the export, 81 ms during the update and 76 ms during the
/// tiny-replied `get_recording` (10–17 ms when the export ran at its usual
/// pace), so the bound is generous. The
/// old code still fails it by far: 1.43 s during the export and 1.0 s
/// during the update (its 140 ms during the get falls under this bound;
/// the bench shows that one).
const WORST_PING: Duration = Duration::from_millis(250);

/// The reply has this `type` (quotes inside a string are escaped, so only
/// the reply's own key can match).
fn has_type(reply: &str, ty: &str) -> bool {
    reply.contains(&format!("\"type\":\"{ty}\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_file_work_never_stalls_another_clients_ping() {
    let hub = TestHub::start(json!({"runs": {"storagePath": "./runs"}})).await;
    let recordings = hub.dir.path().join("recordings");
    fixture::write_recording(&recordings, "rec-large", STEPS, RESULT_BYTES);
    fixture::write_run(&hub.dir.path().join("runs"), "many-shots", SCREENSHOTS);
    let token = hub.token.clone().expect("token");
    // Replies are matched unparsed: this test's own client must not spend
    // the cores on a multi-megabyte parse while the pings are timed.
    let mut worker = fixture::Worker::connect(hub.url(), &token).await;
    let pinger = fixture::Pinger::start(hub.url(), token);

    let requests = [
        (
            "export",
            "recording_export",
            json!({"type": "export_recording", "recordingId": "rec-large", "format": "html"}),
        ),
        (
            "get",
            "recording",
            json!({"type": "get_recording", "recordingId": "rec-large", "limit": 1}),
        ),
        (
            "update",
            "recording_updated",
            json!({"type": "update_recording", "recordingId": "rec-large", "name": "renamed"}),
        ),
        (
            "delete run",
            "run_deleted",
            json!({"type": "delete_run", "runId": "many-shots"}),
        ),
    ];
    let mut ops = Vec::new();
    for (name, answer, msg) in requests {
        let t = Instant::now();
        let reply = worker.request(msg).await;
        ops.push((name, t, Instant::now()));
        assert!(has_type(&reply, answer), "{name}: {reply:.300}");
    }
    assert!(!hub.dir.path().join("runs/many-shots").exists());

    let rtts = pinger.stop();
    let report: Vec<String> = ops
        .iter()
        .map(|(name, from, to)| {
            let (worst, n) = fixture::worst_between(&rtts, *from, *to);
            format!("{name} {:?} ({n} pings, worst {worst:?})", *to - *from)
        })
        .collect();
    eprintln!("{}", report.join("; "));
    // The pings overlapped the work.
    assert!(rtts.len() >= 5, "only {} pings", rtts.len());
    for (name, from, to) in &ops {
        let (worst, _) = fixture::worst_between(&rtts, *from, *to);
        assert!(
            worst < WORST_PING,
            "a ping waited {worst:?} while another client's {name} ran: {}",
            report.join("; ")
        );
    }
}

/// Large results off the async workers (issue 38.5): while one client
/// receives three 8 MB tool results, another client's worst ping is held
/// against its worst in a quiet half second before, as a ratio (printed;
/// the relay bench's stall phase prints it for a release build and a
/// baseline). Every tree walk of such a result (its parse into a `Value`,
/// the outcome, redaction, serialisation) runs off the worker; the
/// bound is generous for a debug build on a shared 2-core machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_results_never_stall_another_clients_ping() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": crate::support::testserver_entry(&p, "t", &[])}}),
    )
    .await;
    let mut c = hub.connect().await;
    crate::servers::wait_running(&mut c, "t").await;
    let token = hub.token.clone().expect("token");
    let mut worker = fixture::Worker::connect(hub.url(), &token).await;
    let call =
        |bytes: u64| json!({"type": "tool_call", "tool": "t__big", "params": {"bytes": bytes}});
    let pinger = fixture::Pinger::start(hub.url(), token);
    // The machine's own noise with nothing else running: the worst of 40
    // pings answered before the work starts.
    let quiet = Instant::now();
    pinger.wait_pongs(40);
    let (quiet_to, work) = (Instant::now(), Instant::now());
    for _ in 0..3 {
        let r = worker.request(call(8_000_000)).await;
        assert!(
            has_type(&r, "tool_result") && r.len() > 8_000_000,
            "{r:.300}"
        );
    }
    let done = Instant::now();
    let rtts = pinger.stop();
    let (idle, _) = fixture::worst_between(&rtts, quiet, quiet_to);
    let (during, n) = fixture::worst_between(&rtts, work, done);
    eprintln!(
        "3 × 8 MB results in {:?}: worst ping {during:?} ({n} pings) against {idle:?} quiet: ratio {:.1}",
        done - work,
        during.as_secs_f64() / idle.as_secs_f64().max(1e-4)
    );
    assert!(n >= 3, "only {n} pings during the results");
    assert!(
        during < WORST_PING,
        "a ping waited {during:?} while another client received 8 MB results (quiet worst {idle:?})"
    );
}
