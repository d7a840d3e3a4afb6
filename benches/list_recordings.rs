//! `cargo bench --bench list_recordings`: list_recordings over 10,000
//! recordings. It reads one header line and an 8 KiB tail per recording,
//! never whole files, so it stays fast as recordings grow. Under
//! `cargo test` it runs on 100 recordings as a smoke check.

use std::io::Write;
use std::time::Instant;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { 10_000 } else { 100 };
    let dir = std::env::temp_dir().join(format!("toolhub-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let step = format!(
        "{{\"kind\":\"step\",\"seq\":0,\"source\":{{\"type\":\"tool_call\"}},\"tool\":\"echo\",\"params\":{{}},\"timestamp\":\"2026-01-01T00:00:00Z\",\"tOffsetMs\":0,\"durationMs\":1,\"success\":true,\"result\":\"{}\"}}\n",
        "x".repeat(2000)
    );
    for i in 0..n {
        let id = format!("rec-{i:06}");
        let d = dir.join(&id);
        if std::fs::create_dir_all(&d).is_err() {
            eprintln!("cannot create {}", d.display());
            return;
        }
        let Ok(mut f) = std::fs::File::create(d.join("recording.jsonl")) else {
            return;
        };
        let _ = writeln!(f, "{{\"kind\":\"header\",\"schemaVersion\":1,\"recordingId\":\"{id}\",\"name\":\"r{i}\",\"createdAt\":\"2026-01-01T00:00:00Z\",\"hubVersion\":\"0.1.0\"}}");
        for _ in 0..20 {
            let _ = f.write_all(step.as_bytes());
        }
        let _ = writeln!(f, "{{\"kind\":\"end\",\"stepCount\":20,\"totalDurationMs\":5,\"successRate\":1.0,\"stoppedAt\":\"2026-01-01T00:00:01Z\",\"reason\":\"stopped\"}}");
    }
    let runs = if full { 5 } else { 1 };
    for r in 0..runs {
        let t = Instant::now();
        let (list, problems) = toolhub::store::recordings::list(&dir);
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(list.len(), n);
        assert!(problems.is_empty());
        println!(
            "list_recordings: {n} recordings (40 KiB each) in {ms:.1} ms (run {})",
            r + 1
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
