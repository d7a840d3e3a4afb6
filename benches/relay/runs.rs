//! The `list_runs` figure: 1,000 runs on disk (metadata and a 20-entry log
//! each), listed over the WebSocket. Cold = every `.metadata.json` read
//! (a `create_run` drops the hub's 5 s cache first); cached = the answer
//! within those 5 s. The target is ≤ 100 ms cold.

use std::time::Instant;

use serde_json::json;

use super::{Hub, WsClient};

pub async fn list_runs(hub: &Hub, client: &WsClient, n: usize) {
    let root = hub.dir.path().join("runs");
    super::runs_fixture::make_runs(&root, n);
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for k in 0..5 {
        let made = client
            .request(json!({"type": "create_run", "theme": "bench", "runId": format!("bench-{k}")}))
            .await;
        assert_eq!(made["type"], "run_created", "{made}");
        for times in [&mut cold, &mut warm] {
            let t = Instant::now();
            // One page of the largest size: every run's metadata is read
            // (cold) to sort them, 1,000 are serialised.
            let r = client
                .request(json!({"type": "list_runs", "limit": 1000}))
                .await;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(
                r["total"].as_u64().is_some_and(|t| t as usize > n),
                "list_runs: {r}"
            );
        }
    }
    cold.sort_by(f64::total_cmp);
    warm.sort_by(f64::total_cmp);
    println!(
        "\n## list_runs over {n} runs\n\ncold (every .metadata.json read) p50 {:.1} ms, best {:.1} ms; cached p50 {:.2} ms (target ≤ 100 ms)",
        cold[2], cold[0], warm[2]
    );
}
