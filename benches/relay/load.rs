//! The steady phase to profile (`--load-only`, `--seq-only`) and the file
//! limit the idle-connections figure needs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::procfs::{cpu_seconds, sleeps};
use super::{throughput, Hub};

/// Only the hub, `inflight` calls at a time for about 20 s: a steady phase
/// to profile (`perf record -p`, `perf stat -p`) with nothing else mixed in.
pub async fn load_only(inflight: u64) {
    let hub = Hub::start("step", 2048).await;
    let pid = hub.pid();
    let client = Arc::new(hub.connect().await);
    client.wait_running().await;
    throughput(&client, inflight, 2_000).await; // warm-up
    let (c0, s0) = (cpu_seconds(pid), sleeps(pid));
    let started = Instant::now();
    let mut calls = 0u64;
    while started.elapsed() < Duration::from_secs(20) {
        throughput(&client, inflight, 16_000).await;
        calls += 16_000;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{inflight} in flight: {:.0} calls/s, hub CPU {:.1} µs per call, {:.2} sleeps per call ({} calls, hub pid {pid})",
        calls as f64 / secs,
        (cpu_seconds(pid) - c0) * 1e6 / calls as f64,
        (sleeps(pid) - s0) as f64 / calls as f64,
        calls
    );
}

pub fn raise_fd_limit() {
    // SAFETY: plain getrlimit/setrlimit on this process (children inherit).
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            r.rlim_cur = r.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}
