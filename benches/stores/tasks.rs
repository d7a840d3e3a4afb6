//! The `tasks-start` phase: time from spawning the hub to its first answered
//! call with `n` finished tasks in the task store, against an empty store.
//! The tasks are one hub-made journal (a one-step batch) copied under new
//! ids, so making 10,000 takes seconds, not minutes. The first start on
//! them is timed apart (it indexes them).

use std::path::Path;

use serde_json::{json, Value};

use super::{first_call_ms, median, Running};

/// Run one batch on a hub in `root`, then copy its journal to `n` in all.
async fn make_tasks(root: &Path, n: usize) {
    let hub = Running::start(root).await;
    let mut c = hub.connect().await;
    let done = c
        .request(json!({"type": "tool_batch", "steps": [{"tool": "t__echo", "params": {"message": "m"}}]}))
        .await;
    assert_eq!(done["state"], "success", "{done}");
    hub.kill().await;
    let dir = root.join("state/tasks");
    let seed = std::fs::read_dir(&dir)
        .expect("tasks dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .expect("one journal");
    let text = std::fs::read_to_string(&seed).expect("journal");
    let (first, rest) = text.split_once('\n').expect("header line");
    let header: Value = serde_json::from_str(first).expect("header json");
    for i in 1..n {
        let id = format!("00000000-0000-4000-8000-{i:012}");
        let mut h = header.clone();
        h["taskId"] = json!(id);
        std::fs::write(dir.join(format!("{id}.jsonl")), format!("{h}\n{rest}")).expect("copy");
    }
}

pub async fn start(n: usize) {
    let empty = tempfile::tempdir().expect("tempdir");
    let full = tempfile::tempdir().expect("tempdir");
    make_tasks(full.path(), n).await;
    // One start first: the copies have no index entry, so this hub replays
    // every journal and indexes them (a hub without the index does so at
    // every start). Its time is shown on its own.
    let first = first_call_ms(full.path()).await;
    let reps = if std::env::args().any(|a| a == "--bench") {
        7
    } else {
        3
    };
    let (mut e_ms, mut f_ms) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        e_ms.push(first_call_ms(empty.path()).await);
        f_ms.push(first_call_ms(full.path()).await);
    }
    let (e, f) = (median(&mut e_ms), median(&mut f_ms));
    println!(
        "| spawn to first call, no tasks / {n} finished tasks (median of {reps}, interleaved) | {e:.1} / {f:.1} ms (the first start: {first:.0} ms) |"
    );
}
