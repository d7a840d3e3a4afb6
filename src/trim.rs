//! Giving memory back after a burst of frees: connections closing
//! (`server::conn`), finished tasks pruned by retention (`engine`).
//!
//! glibc keeps freed heap memory for reuse; after a thousand connections
//! close, or thousands of tasks are pruned, the hub would keep their
//! worth of RSS for good. Once the frees have been quiet for half a second,
//! `malloc_trim(0)` returns the free pages to the system (a few
//! milliseconds, on the blocking pool, off any request path).
//!
//! And [`limit_arenas`]: glibc gives threads that allocate at the same
//! moment arenas of their own, up to 8 per core, and never gives an arena
//! back. A hub's runtime threads come and go (the blocking pool), so under
//! a long load it kept opening arenas, each holding a few MiB of
//! fragments: RSS crept up for half an hour (issue 33's soak). The hub
//! caps them at one per runtime worker.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;

/// How long closes must be quiet before trimming.
const QUIET: Duration = Duration::from_millis(500);

static WAKE: OnceLock<Arc<Notify>> = OnceLock::new();

/// Cap glibc's malloc arenas at `workers` (at least 2), unless
/// `MALLOC_ARENA_MAX` (or `GLIBC_TUNABLES`) says otherwise. Called once,
/// before the runtime's threads start.
pub fn limit_arenas(workers: usize) {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var_os("GLIBC_TUNABLES").is_some()
    {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator; no memory is
    // touched.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, workers.clamp(2, 64) as libc::c_int);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = workers;
}

/// Memory was freed in bulk (a connection ended, tasks were pruned): trim
/// once the frees settle.
pub fn soon() {
    let wake = WAKE.get_or_init(|| {
        let n = Arc::new(Notify::new());
        tokio::spawn(trimmer(n.clone()));
        n
    });
    wake.notify_one();
}

async fn trimmer(wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        // Debounce: a burst of closes is one trim.
        while tokio::time::timeout(QUIET, wake.notified()).await.is_ok() {}
        // On the blocking pool: after a large burst of frees the trim
        // walks (and unmaps) hundreds of megabytes.
        let took = tokio::task::spawn_blocking(|| {
            let started = std::time::Instant::now();
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only walks the allocator's own free lists.
            unsafe {
                libc::malloc_trim(0);
            }
            started.elapsed()
        })
        .await;
        tracing::debug!(
            took_us = took.map_or(0, |d| d.as_micros() as u64),
            "returned free heap memory to the system"
        );
    }
}
