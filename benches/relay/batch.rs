//! `tool_batch` of echo steps: ms per step with durability `step` and
//! `batch`, the journal `fdatasync`s per step, and the engine's own
//! overhead per step.
//!
//! The overhead is what a step costs beyond its tool call: the median ms per
//! step of a batch minus the same run's sequential direct-call p50 against
//! the same echo server (a batch's steps are sequential calls too, from the
//! hub instead of the bench), with durability `batch` (no `fdatasync` per
//! step: the engine, not the disk). Beside it, the hub's CPU per step (from
//! `/proc`), which does not wait on wake-ups and so moves less between runs.
//! Flat means the 1,000-step figure is within 1.2× of the 10-step one.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{cpu_seconds, sleeps, Hub, WsClient};

/// One batch size measured on one hub.
#[derive(Clone, Copy)]
pub struct Sample {
    steps: usize,
    /// Best and median ms per step over the repetitions.
    best_ms: f64,
    median_ms: f64,
    /// Journal `fdatasync`s per step (NaN from a build that does not count).
    syncs: f64,
    /// Hub CPU µs per step over all repetitions.
    cpu_us: f64,
    /// Times the hub's threads went to sleep per step (each a wake-up).
    sleeps: f64,
}

/// The hub's journal fdatasyncs so far (`health_check` `tasks.journalSyncs`;
/// `None` from a build without the counter, given by `TOOLHUB_BIN`).
async fn journal_syncs(c: &WsClient) -> Option<u64> {
    let h = c.request(json!({"type": "health_check"})).await;
    h["tasks"]["journalSyncs"].as_u64()
}

/// `reps` batches of `steps` echo calls, one after the other.
async fn measure(c: &WsClient, pid: u32, steps: usize, reps: usize) -> Sample {
    let step = json!({"tool": "t__echo", "params": {"message": "x"}});
    let msg = json!({"type": "tool_batch", "steps": vec![step; steps]});
    let mut per_step = Vec::with_capacity(reps);
    let syncs0 = journal_syncs(c).await;
    let cpu0 = cpu_seconds(pid);
    let sleeps0 = sleeps(pid);
    for _ in 0..reps {
        let t = Instant::now();
        let done = c.request(msg.clone()).await;
        assert_eq!(done["success"], true, "{done}");
        per_step.push(t.elapsed().as_secs_f64() * 1e3 / steps as f64);
    }
    let cpu_us = (cpu_seconds(pid) - cpu0) * 1e6 / (steps * reps) as f64;
    let sleeps = (sleeps(pid) - sleeps0) as f64 / (steps * reps) as f64;
    let syncs = match (syncs0, journal_syncs(c).await) {
        (Some(a), Some(b)) => (b - a) as f64 / (steps * reps) as f64,
        _ => f64::NAN,
    };
    // The streamed step results and states went to `events`: drop them.
    let mut ev = c.events.lock().await;
    while ev.try_recv().is_ok() {}
    per_step.sort_by(f64::total_cmp);
    Sample {
        steps,
        best_ms: per_step[0],
        median_ms: per_step[per_step.len() / 2],
        syncs,
        cpu_us,
        sleeps,
    }
}

/// Repetitions of a batch of `steps`: enough for a median, few for 1,000.
fn reps(steps: usize, bench: bool, quick: bool) -> usize {
    match (bench, quick, steps) {
        (false, _, _) => 2,
        (true, true, s) if s >= 1000 => 2,
        (true, true, s) if s >= 100 => 5,
        (true, false, s) if s >= 1000 => 5,
        (true, false, s) if s >= 100 => 15,
        _ => 20,
    }
}

/// Run the batch phases (`step` on `step_hub`, `batch` on a hub of its own)
/// and print their tables; `direct_p50` is this run's sequential direct call.
pub async fn tables(
    step_hub: &Hub,
    step_client: &WsClient,
    direct_p50: Duration,
    bench: bool,
    quick: bool,
) {
    let sizes: &[usize] = if bench {
        &[1, 10, 100, 1000]
    } else {
        &[1, 10, 100]
    };
    let batch_hub = Hub::start("batch", 64).await;
    let batch_client = batch_hub.connect().await;
    batch_client.wait_running().await;
    let mut rows = Vec::new();
    for (durability, hub, c) in [
        ("step", step_hub, step_client),
        ("batch", &batch_hub, &batch_client),
    ] {
        let mut row = Vec::new();
        for &s in sizes {
            row.push(measure(c, hub.pid(), s, reps(s, bench, quick)).await);
        }
        rows.push((durability, row));
    }
    let last = sizes.len() - 1;
    let ten = 1; // sizes[1] == 10
    println!("\n## tool_batch of echo steps: ms per step (median; best in brackets)\n");
    header("durability", sizes, &format!("{} ÷ 10", sizes[last]));
    for (d, row) in &rows {
        print!("| {d} |");
        for s in row {
            print!(" {:.3} ({:.3}) |", s.median_ms, s.best_ms);
        }
        println!(" {:.2} |", row[last].median_ms / row[ten].median_ms);
    }
    println!("\njournal fdatasyncs per step (with durability step n steps cost n + 1: each start, the end; with batch 2 per task: the header, the end):\n");
    header("durability", sizes, "");
    for (d, row) in &rows {
        print!("| {d} |");
        for s in row {
            print!(" {:.2} |", s.syncs);
        }
        println!();
    }
    let direct_ms = direct_p50.as_secs_f64() * 1e3;
    println!(
        "\n## Engine overhead per step (durability batch: no fdatasync per step)\n\n\
         wall = median ms per step − this run's sequential direct-call p50 ({:.0} µs); \
         CPU = the hub's CPU per step, tool call included\n",
        direct_ms * 1e3
    );
    let Some((_, batch_row)) = rows.iter().find(|(d, _)| *d == "batch") else {
        return;
    };
    let over: Vec<(usize, f64, f64, f64)> = batch_row
        .iter()
        .filter(|s| s.steps >= 10)
        .map(|s| (s.steps, (s.median_ms - direct_ms) * 1e3, s.cpu_us, s.sleeps))
        .collect();
    println!(
        "| steps | engine overhead per step (wall) | hub CPU per step | hub sleeps per step |"
    );
    println!("|---:|---:|---:|---:|");
    for (steps, wall, cpu, naps) in &over {
        println!("| {steps} | {wall:.0} µs | {cpu:.0} µs | {naps:.1} |");
    }
    if let (Some(first), Some(last)) = (over.first(), over.last()) {
        println!(
            "| {} ÷ {} | {:.2} | {:.2} | {:.2} |",
            last.0,
            first.0,
            last.1 / first.1,
            last.2 / first.2,
            last.3 / first.3
        );
    }
}

fn header(first: &str, sizes: &[usize], last: &str) {
    print!("| {first} |");
    for s in sizes {
        print!(" {s} step{} |", if *s == 1 { "" } else { "s" });
    }
    if last.is_empty() {
        println!("\n|---|{}", "---:|".repeat(sizes.len()));
    } else {
        println!(" {last} |\n|---|{}---:|", "---:|".repeat(sizes.len()));
    }
}
