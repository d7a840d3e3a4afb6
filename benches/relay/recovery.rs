//! Auto-recovery: the share of transient upstream failures the hub recovers
//! from by itself (its own retries, no client involvement), over a fixed mix
//! of the failures servers really produce: network errors, timeouts, rate
//! limiting (with and without `Retry-After`), a JSON-RPC internal error and
//! unavailable services, each failing once or twice before it succeeds.
//! The test server's `flaky` tool fails its first `failures` calls per key
//! with the given text; every case has its own key.

use serde_json::json;

use super::Hub;

/// (what, the error text the server returns, how many calls fail first).
const MIX: &[(&str, &str, u64)] = &[
    ("connection refused", "connect ECONNREFUSED 127.0.0.1:9", 1),
    ("connection refused", "connect ECONNREFUSED 127.0.0.1:9", 2),
    ("connection reset", "read ECONNRESET", 1),
    ("timeout", "request timed out after 30000 ms", 1),
    ("timeout", "ETIMEDOUT", 2),
    ("rate limited", "429 Too Many Requests", 1),
    (
        "rate limited, Retry-After",
        "429 Too Many Requests; Retry-After: 1",
        1,
    ),
    ("internal error", "MCP error -32603: Internal error", 1),
    ("unavailable", "503 Service Unavailable", 1),
    ("unavailable", "502 Bad Gateway", 2),
];

///
/// A smoke run (`bench` false, `cargo test`) proves the same path with
/// every retry delay at 10 ms (a `Retry-After` still waits its second):
/// the shares are the same, the waiting is not (36 s of the smoke run).
pub async fn transient_mix(bench: bool) {
    let state = tempfile::tempdir().expect("tempdir");
    let servers = json!({"f": {"command": crate::testserver_bin::path(),
        "args": ["--name", "f", "--state-dir", state.path().display().to_string()]}});
    let retry = if bench {
        json!({})
    } else {
        let fast = json!({"delay": 10});
        let classes = [
            "TIMEOUT",
            "NETWORK",
            "SERVER_UNAVAILABLE",
            "RATE_LIMITED",
            "UPSTREAM_ERROR",
        ];
        let strategies: serde_json::Map<String, serde_json::Value> = classes
            .iter()
            .map(|c| (c.to_string(), fast.clone()))
            .collect();
        json!({"retry": {"strategies": strategies}})
    };
    let hub = Hub::start_bin(None, "step", 16, servers, json!({}), retry).await;
    let client = hub.connect().await;
    println!("\n## Auto-recovery over a fixed mix of transient failures\n");
    println!("| failure | fails first | recovered by the hub | attempts | errorType when not |");
    println!("|---|---:|---|---:|---|");
    let mut recovered = 0;
    for (i, (what, text, failures)) in MIX.iter().enumerate() {
        let r = client
            .request(json!({"type": "tool_call", "tool": "f__flaky",
                "params": {"key": format!("mix-{i}"), "failures": failures, "errorText": text}}))
            .await;
        let ok = r["success"] == true;
        recovered += usize::from(ok);
        println!(
            "| {what} | {failures} | {} | {} | {} |",
            if ok { "yes" } else { "no" },
            r["attempts"],
            if ok {
                String::new()
            } else {
                r["error"]["errorType"].to_string()
            }
        );
    }
    println!(
        "\nrecovered without the client: {recovered} of {} ({:.0} %; the plan aims at 60 % or more)",
        MIX.len(),
        recovered as f64 * 100.0 / MIX.len() as f64
    );
}
