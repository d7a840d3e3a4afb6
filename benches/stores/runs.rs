//! The `runs` phase: `list_runs` over `n` runs on disk (metadata and a
//! 20-entry log each, as in the relay benchmark): the first listing on the
//! folder (an index is built), the first listing after the next start, then a page of 50 and the whole list, each the median
//! of 20, and the whole list again right after a `create_run`.

use std::time::Instant;

use serde_json::json;

use super::{median, Running};

pub async fn list(n: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    super::runs_fixture::make_runs(&dir.path().join("runs"), n);
    // A first start lists them once (a hub with an index builds it: the
    // runs were made without one), then a second start is measured.
    let hub = Running::start(dir.path()).await;
    let t = Instant::now();
    hub.connect()
        .await
        .request(json!({"type": "list_runs", "limit": 1}))
        .await;
    let indexing = t.elapsed().as_secs_f64() * 1000.0;
    hub.kill().await;
    let hub = Running::start(dir.path()).await;
    let mut c = hub.connect().await;
    let all = json!({"type": "list_runs", "limit": 1000});
    let t = Instant::now();
    let r = c.request(all.clone()).await;
    let first = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(r["total"], json!(n), "{}", r["total"]);
    let page = json!({"type": "list_runs", "limit": 50});
    let (page_ms, _) = c.time(&page, 20).await;
    let (all_ms, _) = c.time(&all, 20).await;
    // After a change: the old hub dropped its 5 s cache and read every
    // metadata file again.
    let mut changed = Vec::new();
    for k in 0..5 {
        let made = c
            .request(json!({"type": "create_run", "theme": "bench", "runId": format!("bench-{k}")}))
            .await;
        assert_eq!(made["type"], "run_created", "{made}");
        let t = Instant::now();
        c.request(all.clone()).await;
        changed.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let changed_ms = median(&mut changed);
    hub.kill().await;
    println!("| `list_runs` over {n} runs: first on a folder without an index, one run | {indexing:.1} ms |");
    println!("| `list_runs` over {n} runs: first after the next start, all | {first:.1} ms |");
    println!("| `list_runs` page of 50 / all {n} (median of 20) | {page_ms:.1} / {all_ms:.1} ms |");
    println!("| `list_runs` all, right after a `create_run` (median of 5) | {changed_ms:.1} ms |");
}
