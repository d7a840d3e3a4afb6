//! Idle connections: the hub's RSS with `conns` open WebSocket connections
//! (each has had its hello and one ping), and after they close and the hub
//! has given the memory back.

use std::time::Duration;

use serde_json::json;

use super::{status_kib, Hub};

pub async fn connections(hub: &Hub, conns: usize) {
    let pid = hub.pid();
    let before = status_kib(pid, "VmRSS");
    let mut open = Vec::with_capacity(conns);
    for _ in 0..conns {
        open.push(hub.connect().await);
    }
    // Every connection has had its hello: ping each once.
    for c in &open {
        c.request(json!({"type": "ping"})).await;
    }
    let with = status_kib(pid, "VmRSS");
    // Wait (event-driven, on the hub's own log) until it saw every close.
    let mut gone = hub.disconnects.subscribe();
    let mut trims = hub.trims.subscribe();
    let target = *gone.borrow() + conns;
    let trims_before = *trims.borrow();
    drop(open);
    let _ = tokio::time::timeout(Duration::from_secs(60), gone.wait_for(|n| *n >= target)).await;
    // And until it gave the memory back (once the closes settle).
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        trims.wait_for(|n| *n > trims_before),
    )
    .await;
    let after = status_kib(pid, "VmRSS");
    println!(
        "\n## {conns} idle WebSocket connections\n\nRSS {:.1} MiB → {:.1} MiB with them ({:.1} KiB per connection) → {:.1} MiB after they closed",
        before as f64 / 1024.0,
        with as f64 / 1024.0,
        (with.saturating_sub(before)) as f64 / conns as f64,
        after as f64 / 1024.0
    );
}
