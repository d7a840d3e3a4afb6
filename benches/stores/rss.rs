//! The `recordings-rss` phase: what `n` stored recordings cost the hub in
//! memory. The recordings (a folder and a one-step `recording.jsonl` each)
//! and their index entries are written directly in the on-disk format, with
//! each entry's stamp matching its file, so the hub loads the index and
//! reads no recording. The hub's RSS once its index is ready and after a
//! page and a search is compared with a hub on an empty folder (medians of
//! interleaved starts); the difference is what the stored recordings hold.

use std::io::Write;
use std::path::Path;
use std::time::{Instant, UNIX_EPOCH};

use serde_json::json;

use super::Running;

/// Write `n` one-step recordings and the index that describes them.
fn write_store(storage: &Path, n: usize) {
    std::fs::create_dir_all(storage).expect("storage");
    let index = std::fs::File::create(storage.join(".index.jsonl")).expect("index");
    let mut index = std::io::BufWriter::new(index);
    for i in 0..n {
        let id = format!(
            "rec-{:032x}",
            (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
        );
        let name = format!("flow n-{i}");
        let created = format!(
            "2026-01-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            1 + i / 86_400 % 28,
            i / 3600 % 24,
            i / 60 % 60,
            i % 60,
            i % 1000
        );
        let end = json!({"stepCount": 1, "totalDurationMs": 3, "successRate": 1.0,
            "stoppedAt": created, "reason": "stopped"});
        let lines = [
            json!({"kind": "header", "schemaVersion": 2, "recordingId": id, "name": name,
                "createdAt": created, "hubVersion": "0.1.0", "servers": [{"name": "t"}],
                "toolsHash": "0".repeat(64)}),
            json!({"kind": "step", "seq": 0, "source": {"type": "tool_call"}, "tool": "echo",
                "qualifiedName": "t__echo", "server": "t", "params": {"message": "hello"},
                "result": {"content": [{"type": "text", "text": "hello"}]},
                "timestamp": created, "tOffsetMs": 1, "durationMs": 1, "success": true}),
            {
                let mut e = end.clone();
                e["kind"] = json!("end");
                e
            },
        ];
        let dir = storage.join(&id);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("recording.jsonl");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).expect("write");
        let m = std::fs::metadata(&path).expect("stat");
        let mtime_ns = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        let entry = json!({"id": id, "name": name, "createdAt": created, "updatedAt": created,
            "schemaVersion": 2, "stepCount": 1, "servers": ["t"], "tools": ["t__echo"],
            "end": end, "size": m.len(), "mtimeNs": mtime_ns});
        writeln!(index, "{}", json!({"op": "put", "entry": entry})).expect("index line");
    }
    index.flush().expect("index flush");
}

/// One hub on `root`: its RSS (KiB) once the index is ready and a page and
/// a search were answered, the time to the index ready, and the page and
/// search times.
async fn one(root: &Path, n: usize) -> (u64, f64, f64, f64) {
    let t = Instant::now();
    let hub = Running::start(root).await;
    let ready = hub.wait_log("recordings index ready").await;
    let ready_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(!ready.contains("rebuilt"), "{ready}");
    let mut c = hub.connect().await;
    let (page_ms, page) = c
        .time(&json!({"type": "list_recordings", "limit": 50}), 5)
        .await;
    assert_eq!(page["total"], json!(n), "{}", page["total"]);
    let search = json!({"type": "list_recordings", "query": "n-42", "tool": "echo", "limit": 50});
    let (search_ms, found) = c.time(&search, 5).await;
    assert!(
        n == 0 || found["total"].as_u64().unwrap_or(0) >= 1,
        "{found}"
    );
    let rss = hub.rss_kib();
    hub.kill().await;
    (rss, ready_ms, page_ms, search_ms)
}

pub async fn recordings(n: usize) {
    let empty = tempfile::tempdir().expect("tempdir");
    let full = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    write_store(&full.path().join("recordings"), n);
    eprintln!(
        "wrote {n} recordings and their index in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let reps = if std::env::args().any(|a| a == "--bench") {
        3
    } else {
        1
    };
    let mut e_rss = Vec::new();
    let mut f: Vec<(u64, f64, f64, f64)> = Vec::new();
    for _ in 0..reps {
        e_rss.push(one(empty.path(), 0).await.0);
        f.push(one(full.path(), n).await);
    }
    e_rss.sort_unstable();
    f.sort_by_key(|x| x.0);
    let (e, (rss, ready, page, search)) = (e_rss[reps / 2], f[reps / 2]);
    let per = (rss as f64 - e as f64) * 1024.0 / n.max(1) as f64;
    println!(
        "| hub RSS, empty folder / {n} stored recordings (index loaded, a page and a search; median of {reps}) | {:.1} / {:.1} MiB: {:+.1} MiB, {per:.0} B a recording |",
        e as f64 / 1024.0,
        rss as f64 / 1024.0,
        (rss as f64 - e as f64) / 1024.0
    );
    println!(
        "| with {n} recordings: hub start to index ready / page of 50 / search (median of 5) | {ready:.0} / {page:.1} / {search:.1} ms |"
    );
}
