//! `n` runs on disk, as a topic workspace holds them (metadata and a
//! 20-entry execution log each), for the relay and stores benchmarks.

use std::path::Path;

use serde_json::json;

/// Write runs `run-00000`… into `runs` (the hub's runs folder).
pub fn make_runs(runs: &Path, n: usize) {
    let entry = json!({"timestamp": "2026-01-01T00:00:00Z", "step": "tool_call t__echo",
        "status": "success", "action_type": "other", "execution_method": "tool",
        "data": {"tool": "t__echo", "result": "x".repeat(500)}, "schema_version": "1.0"})
    .to_string();
    let log = format!("{entry}\n").repeat(20);
    for i in 0..n {
        let id = format!("run-{i:05}");
        let dir = runs.join(&id);
        std::fs::create_dir_all(dir.join("logs")).expect("run dir");
        let meta = json!({"run_id": id, "theme_description": format!("topic {i}"),
            "created_at": "2026-01-01T00:00:00Z",
            "last_accessed": format!("2026-01-01T00:{:02}:{:02}Z", i / 60 % 60, i % 60),
            "status": "active", "schema_version": "1.0"});
        std::fs::write(dir.join(".metadata.json"), meta.to_string()).expect("meta");
        std::fs::write(dir.join("logs/execution.jsonl"), &log).expect("log");
    }
}
