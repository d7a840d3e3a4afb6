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
