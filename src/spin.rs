//! Spin before parking: after call-path activity, one runtime worker keeps
//! polling for I/O for a short window instead of going to sleep in
//! `epoll_wait`.
//!
//! A relayed call crosses two more process hops than a direct one (client →
//! hub, hub → server, and back). Each hop that finds the hub asleep pays a
//! wake-up: on a virtual machine that is an interrupt to an idle vCPU, tens
//! of microseconds, more than all the hub's own work on the call (the relay
//! benchmark's floor row measures it). Tokio parks a worker as soon as it
//! has nothing to run; Go's scheduler, by contrast, spins a little first.
//! This does the same, bounded: every [`Spin::touch`] (a frame in or out,
//! an HTTP request in or out) opens a window of `server.spinMicros`; while it
//! is open a task yields in a loop, so the worker polls the I/O driver
//! without blocking and sees the answer the moment it lands. When the window
//! closes with nothing new, the worker parks as before: an idle hub uses no
//! CPU, and a call that takes longer than the window costs at most the
//! window in extra CPU.
//!
//! Under load the spinning costs nothing: a yielded task is polled again
//! only when the worker has nothing else to run. Each turn also calls
//! `sched_yield`, so a process waiting for this CPU (the client, the
//! server) gets it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The handle the call path touches; cheap to clone. Disabled (a window of
/// zero) it does nothing at all.
#[derive(Clone, Default)]
pub struct Spin {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    epoch: Instant,
    window_ns: u64,
    /// Nanoseconds after `epoch` when the window closes.
    until: AtomicU64,
    spinning: AtomicBool,
    wake: Notify,
    /// Windows opened from a parked state (what the tests look at).
    windows: AtomicU64,
}

impl Inner {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn open(&self) -> bool {
        self.now_ns() < self.until.load(Ordering::Relaxed)
    }
}

impl Spin {
    /// Start the spinner on the current runtime; `window` zero disables it.
    /// It ends with `stop`.
    pub fn start(window: Duration, stop: tokio_util::sync::CancellationToken) -> Spin {
        if window.is_zero() {
            return Spin::default();
        }
        let inner = Arc::new(Inner {
            epoch: Instant::now(),
            window_ns: window.as_nanos().min(u64::MAX as u128) as u64,
            until: AtomicU64::new(0),
            spinning: AtomicBool::new(false),
            wake: Notify::new(),
            windows: AtomicU64::new(0),
        });
        tokio::spawn(run(inner.clone(), stop));
        Spin { inner: Some(inner) }
    }

    /// Activity on the call path: keep polling for another window.
    #[inline]
    pub fn touch(&self) {
        let Some(i) = &self.inner else { return };
        i.until.store(i.now_ns() + i.window_ns, Ordering::Relaxed);
        if !i.spinning.load(Ordering::Acquire) {
            i.wake.notify_one();
        }
    }

    /// How many windows were opened from a parked state so far (for tests).
    pub fn windows(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |i| i.windows.load(Ordering::Relaxed))
    }

    /// Whether a window is open now (for tests).
    pub fn is_spinning(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.spinning.load(Ordering::Acquire))
    }
}

async fn run(inner: Arc<Inner>, stop: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            _ = inner.wake.notified() => {}
            _ = stop.cancelled() => return,
        }
        if !inner.open() {
            // A stale permit: the window it was for has already closed.
            continue;
        }
        inner.windows.fetch_add(1, Ordering::Relaxed);
        inner.spinning.store(true, Ordering::Release);
        loop {
            while inner.open() {
                if stop.is_cancelled() {
                    inner.spinning.store(false, Ordering::Release);
                    return;
                }
                // Let other threads that want this CPU run, then let the
                // runtime poll for I/O (a yielded task is polled again only
                // after the worker checked the driver without blocking).
                std::thread::yield_now();
                tokio::task::yield_now().await;
            }
            inner.spinning.store(false, Ordering::Release);
            // A touch that saw `spinning` just before it was cleared did not
            // notify: look once more before parking.
            if !inner.open() {
                break;
            }
            inner.spinning.store(true, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    async fn until(what: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !what() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the spinner never got there");
    }

    #[tokio::test]
    async fn a_touch_opens_a_window_that_closes_by_itself() {
        let stop = CancellationToken::new();
        let spin = Spin::start(Duration::from_millis(20), stop.clone());
        assert!(!spin.is_spinning());
        spin.touch();
        until(|| spin.is_spinning()).await;
        assert_eq!(spin.windows(), 1);
        until(|| !spin.is_spinning()).await;
        // Touches while it spins extend the window; they open no new one.
        spin.touch();
        until(|| spin.is_spinning()).await;
        spin.touch();
        spin.touch();
        until(|| !spin.is_spinning()).await;
        assert_eq!(spin.windows(), 2);
        stop.cancel();
    }

    #[tokio::test]
    async fn a_zero_window_is_off() {
        let spin = Spin::start(Duration::ZERO, CancellationToken::new());
        spin.touch();
        tokio::task::yield_now().await;
        assert!(!spin.is_spinning());
        assert_eq!(spin.windows(), 0);
    }
}
