//! The agent pattern: one client making sequential calls with 2–50 ms gaps
//! between them (an LLM thinking between tool calls), the hub's CPU per
//! call and the p50, with one hub setting against another in paired runs
//! (A, B, A, B, …) so the machine's drift hits both alike.
//!
//! `cargo bench --bench relay -- --agent` runs the pairs (see [`tables`]).
//! CPU per call counts everything the hub burned between the first and the
//! last call, gaps included: that is what a laptop's battery pays.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::procfs::cpu_seconds;
use super::{Caller, Hub};

/// One run: `calls` sequential echo calls, each after a gap drawn from
/// 2–50 ms (the same sequence in every run).
pub struct Run {
    pub cpu_us_per_call: f64,
    pub p50: Duration,
}

pub async fn run(server: Value, calls: u64, batch: bool) -> Run {
    let hub = Hub::start_tuned("step", 64, server).await;
    let client = hub.connect().await;
    client.wait_running().await;
    for i in 0..20 {
        client.echo(i).await; // warm-up
    }
    let pid = hub.pid();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut lat = Vec::with_capacity(calls as usize);
    let c0 = cpu_seconds(pid);
    for i in 0..calls {
        // xorshift: a fixed, even spread of gaps, no dependency.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        tokio::time::sleep(Duration::from_millis(2 + seed % 49)).await;
        let t = Instant::now();
        if batch {
            // Three steps: three journal syncs, each a `block_in_place`.
            let step = json!({"tool": "t__echo", "params": {"message": "x"}});
            let done = client
                .request(json!({"type": "tool_batch", "steps": [step, step, step]}))
                .await;
            debug_assert_eq!(done["success"], true, "{done}");
        } else {
            client.echo(i).await;
        }
        lat.push(t.elapsed());
    }
    let cpu = cpu_seconds(pid) - c0;
    lat.sort();
    Run {
        cpu_us_per_call: cpu * 1e6 / calls as f64,
        p50: lat[lat.len() / 2],
    }
}

/// `pairs` paired runs of setting `a` against setting `b`, one table row
/// per run.
pub async fn paired(
    title: &str,
    a: (&str, Value),
    b: (&str, Value),
    pairs: usize,
    calls: u64,
    batch: bool,
) {
    let what = if batch {
        "3-step `tool_batch`es"
    } else {
        "calls"
    };
    println!(
        "\n## Agent pattern: {title} ({calls} sequential {what}, 2–50 ms gaps, paired runs)\n"
    );
    println!("| run | setting | hub CPU per call | p50 |");
    println!("|---:|---|---:|---:|");
    for k in 1..=pairs {
        for (name, server) in [&a, &b] {
            let r = run(server.clone(), calls, batch).await;
            println!(
                "| {k} | {name} | {:.0} µs | {:.0} µs |",
                r.cpu_us_per_call,
                r.p50.as_secs_f64() * 1e6
            );
        }
    }
}

/// The `--agent` tables: `server.workerThreads` 1 against 2, for single
/// calls and for 3-step batches (each step's journal sync is a
/// `block_in_place`, which hands the runtime to another thread). With
/// `TOOLHUB_BIN` set to a build from before spin-before-park was removed,
/// first `server.spinMicros` 250 against 0 (the table in the README).
pub async fn tables(quick: bool) {
    let (pairs, calls) = if quick { (1, 60) } else { (3, 400) };
    let one = ("`workerThreads` 1", json!({"workerThreads": 1}));
    let two = ("`workerThreads` 2", json!({"workerThreads": 2}));
    let mut runs = vec![
        ("worker threads", one.clone(), two.clone(), false),
        ("worker threads", one, two, true),
    ];
    if std::env::var_os("TOOLHUB_BIN").is_some() {
        let on = (
            "`spinMicros` 250",
            json!({"spinMicros": 250, "workerThreads": 1}),
        );
        let off = (
            "`spinMicros` 0",
            json!({"spinMicros": 0, "workerThreads": 1}),
        );
        runs.insert(0, ("spin before parking", on, off, false));
    }
    for (title, a, b, batch) in runs {
        paired(title, a, b, pairs, calls, batch).await;
    }
}
