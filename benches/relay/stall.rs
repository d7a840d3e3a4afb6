//! The stall phase (issue 32): one client exports (HTML), reads
//! (`get_recording`, limit 1) and updates a 48 MB recording (800 steps of
//! 60 KB results) and deletes a run with 1,000 screenshots, while another
//! client pings every 10 ms. Printed: each operation's duration and the
//! worst ping in flight during it. Nothing a client sends may hold the
//! hub's worker, so the pings stay in the low milliseconds.

use std::time::Instant;

use serde_json::json;

use super::stall_fixture::{worst_between, write_recording, write_run, Pinger, Worker};
use super::Hub;

/// One client receives `rounds` results of 8 MB (the test server's `big`)
/// while another pings every 10 ms: the worst ping then against the worst
/// of a quiet second before, as a ratio, for this build and (with
/// `TOOLHUB_BASELINE_BIN`, another build of the hub) the baseline, in the
/// same run on the same machine (issue 38.5).
pub async fn large_results(quick: bool) {
    let rounds = if quick { 1 } else { 3 };
    println!("\n## One client's {rounds} × 8 MB results, another client's ping (every 10 ms)\n");
    println!("| hub | quiet worst ping | worst ping during the results | ratio | took |");
    println!("|---|---:|---:|---:|---:|");
    let mut builds = Vec::new();
    if let Ok(b) = std::env::var("TOOLHUB_BASELINE_BIN") {
        builds.push(("baseline", Some(b)));
    }
    builds.push(("this build", None));
    for (name, bin) in builds {
        let servers = json!({"t": {"command": crate::testserver_bin::path(), "args": []}});
        let hub = Hub::start_bin(bin.as_deref(), "step", 64, servers, json!({}), json!({})).await;
        let url = format!("ws://{}/ws", hub.addr);
        let mut client = Worker::connect(url.clone(), &hub.token).await;
        // The server is up once a small call answers.
        let call =
            |bytes: u64| json!({"type": "tool_call", "tool": "t__big", "params": {"bytes": bytes}});
        let first = client.request(call(1)).await;
        assert!(first.contains("\"success\":true"), "{first:.300}");
        let pinger = Pinger::start(url, hub.token.clone());
        let quiet = Instant::now();
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let (quiet_to, work) = (Instant::now(), Instant::now());
        for _ in 0..rounds {
            let r = client.request(call(8_000_000)).await;
            assert!(r.len() > 8_000_000, "{r:.300}");
        }
        let done = Instant::now();
        let rtts = pinger.stop();
        let (idle, _) = worst_between(&rtts, quiet, quiet_to);
        let (during, _) = worst_between(&rtts, work, done);
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.1} | {:.0} ms |",
            idle.as_secs_f64() * 1e3,
            during.as_secs_f64() * 1e3,
            during.as_secs_f64() / idle.as_secs_f64().max(1e-4),
            (done - work).as_secs_f64() * 1e3
        );
    }
}

pub async fn phase(hub: &Hub, quick: bool) {
    let (steps, shots) = if quick { (100, 100) } else { (800, 1_000) };
    let result_bytes = 60 * 1024;
    write_recording(
        &hub.dir.path().join("recordings"),
        "rec-large",
        steps,
        result_bytes,
    );
    write_run(&hub.dir.path().join("runs"), "many-shots", shots);
    let url = format!("ws://{}/ws", hub.addr);
    let mut client = Worker::connect(url.clone(), &hub.token).await;
    let pinger = Pinger::start(url, hub.token.clone());
    let requests = [
        (
            "export_recording html",
            json!({"type": "export_recording", "recordingId": "rec-large", "format": "html"}),
        ),
        (
            "get_recording limit 1",
            json!({"type": "get_recording", "recordingId": "rec-large", "limit": 1}),
        ),
        (
            "update_recording (name)",
            json!({"type": "update_recording", "recordingId": "rec-large", "name": "renamed"}),
        ),
        (
            "delete_run",
            json!({"type": "delete_run", "runId": "many-shots"}),
        ),
    ];
    // The machine's own noise first: a second of pings with nothing else.
    let idle = Instant::now();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let mut ops = vec![("nothing (the machine's own noise)", idle, Instant::now())];
    for (name, msg) in requests {
        let t = Instant::now();
        let r = client.request(msg).await;
        // Quotes inside a string are escaped, so only the reply's own
        // "type" can match.
        assert!(!r.contains("\"type\":\"error\""), "{name}: {r:.300}");
        ops.push((name, t, Instant::now()));
    }
    let rtts = pinger.stop();
    let mb = (steps * result_bytes) as f64 / 1e6;
    println!(
        "\n## One client's file work, another client's ping ({mb:.0} MB recording, run with {shots} screenshots; ping every 10 ms)\n"
    );
    println!("| operation | took | pings meanwhile | worst ping |");
    println!("|---|---:|---:|---:|");
    for (name, from, to) in ops {
        let (worst, n) = worst_between(&rtts, from, to);
        println!(
            "| {name} | {:.0} ms | {n} | {:.1} ms |",
            (to - from).as_secs_f64() * 1e3,
            worst.as_secs_f64() * 1e3
        );
    }
}
