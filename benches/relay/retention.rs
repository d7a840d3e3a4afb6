//! Memory under steady use: small batches (one echo step each), 16 in
//! flight, and the hub's RSS after 1,000 and after 10,000 of them. With
//! `taskEngine.retention.maxTasks` (1,000 by default) enforced as tasks
//! finish, the second figure stays within a few MiB of the first.

use futures::StreamExt;
use serde_json::json;

use super::{status_kib, Hub, WsClient};

/// `taskEngine.retention.maxTasks`, the bench hub's (the default).
const MAX_TASKS: usize = 1000;

/// Run `total` one-step batches; print RSS after `first` and after `total`.
pub async fn steady_batches(hub: &Hub, client: &WsClient, first: usize, total: usize) {
    let pid = hub.pid();
    let msg =
        json!({"type": "tool_batch", "steps": [{"tool": "t__echo", "params": {"message": "x"}}]});
    let run = |n: usize| {
        futures::stream::iter(0..n)
            .map(|_| client.request(msg.clone()))
            .buffer_unordered(16)
            .for_each(|done| async move {
                assert_eq!(done["success"], true, "{done}");
            })
    };
    let drain = || async {
        // Step results and states of the batches went to `events`.
        let mut ev = client.events.lock().await;
        while ev.try_recv().is_ok() {}
    };
    // Each figure once the hub has given freed heap back (it trims half a
    // second after retention prunes; bounded wait), when `done` batches
    // made it prune: up to `maxTasks` nothing is pruned, nor trimmed.
    let settled = |done: usize| async move {
        if done > MAX_TASKS {
            let mut trims = hub.trims.subscribe();
            let seen = *trims.borrow_and_update();
            let _ = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                trims.wait_for(|n| *n > seen),
            )
            .await;
        }
        status_kib(pid, "VmRSS")
    };
    let before = status_kib(pid, "VmRSS");
    run(first).await;
    drain().await;
    let at_first = settled(first).await;
    run(total - first).await;
    drain().await;
    let at_total = settled(total).await;
    let kept = client.request(json!({"type": "list_tasks"})).await;
    let kept = kept["tasks"].as_array().map_or(0, Vec::len);
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "\n## {total} small batches (one echo step each, 16 in flight)\n\nRSS {:.1} MiB before → {:.1} MiB after {first} → {:.1} MiB after {total} ({:+.1} MiB); tasks kept: {kept} (retention.maxTasks)",
        mib(before),
        mib(at_first),
        mib(at_total),
        (at_total as f64 - at_first as f64) / 1024.0
    );
}
