//! File work off the runtime's threads. The hub runs its tasks on one worker
//! thread by default, so a `read` of a 40 MB recording or a
//! `remove_dir_all` of a run with a thousand screenshots on that thread
//! stalls every other client for as long. [`blocking`] runs such work on
//! tokio's blocking pool; [`Serial`] does the same for a client's messages
//! while keeping them in the order they came in, so a client that sends
//! `update_recording` and then `get_recording` reads its own update.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::errors::{ErrorType, HubError};

/// Run `f` on the blocking pool; a panic in it becomes an error.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, HubError> + Send + 'static,
) -> Result<T, HubError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(HubError::new(
            ErrorType::Unknown,
            format!("the file operation failed unexpectedly: {e}"),
        ))
    })
}

/// Blocking jobs in queue order per key, on the blocking pool: a job starts
/// once every earlier job queued under any of its keys has finished. Keys
/// are a connection (its messages stay in order) and, where two clients
/// could race on one file, the file's owner (a recording id). The order is
/// fixed when [`Serial::run`] is called, not when its future is polled.
/// A job waits only on jobs queued before it, so no two jobs wait on each
/// other.
#[derive(Default)]
pub struct Serial {
    tails: Arc<Mutex<HashMap<String, Tail>>>,
    next: AtomicU64,
}

/// The last job queued under a key: its ticket and its completion.
struct Tail {
    ticket: u64,
    done: oneshot::Receiver<()>,
}

impl Serial {
    /// Queue `job` behind the jobs already queued under `keys`; the future
    /// resolves with its result (or an error if it panicked).
    pub fn run<T: Send + 'static>(
        &self,
        keys: &[&str],
        job: impl FnOnce() -> Result<T, HubError> + Send + 'static,
    ) -> impl Future<Output = Result<T, HubError>> + Send + 'static {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        let mut before = Vec::new();
        let mut mine = Vec::new();
        {
            let mut tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
            for key in keys {
                let (tx, rx) = oneshot::channel();
                let tail = Tail { ticket, done: rx };
                if let Some(prev) = tails.insert(key.to_string(), tail) {
                    before.push(prev.done);
                }
                mine.push((key.to_string(), tx));
            }
        }
        let tails = self.tails.clone();
        async move {
            // A dropped sender (its job's future was dropped) releases too.
            for prev in before {
                let _ = prev.await;
            }
            let out = blocking(job).await;
            let mut map = tails.lock().unwrap_or_else(|p| p.into_inner());
            for (key, tx) in mine {
                // Nobody queued behind it: the key is free again.
                if map.get(&key).is_some_and(|t| t.ticket == ticket) {
                    map.remove(&key);
                }
                let _ = tx.send(());
            }
            out
        }
    }

    /// Keys with a job queued or running (for tests).
    pub fn busy_keys(&self) -> usize {
        self.tails.lock().map(|t| t.len()).unwrap_or(0)
    }

    /// Resolves once every job queued under `key` so far has run.
    pub fn barrier(&self, key: &str) -> impl Future<Output = ()> + Send + 'static {
        let done = self.run(&[key], || Ok(()));
        async move {
            let _ = done.await;
        }
    }
}

/// Keys (sessions) with a job queued that changes what a call's observer
/// does (`start_recording`, `set_run`). A call that finishes meanwhile
/// waits for that job ([`Serial::barrier`]) before its observer decides,
/// so a call sent right after `start_recording` is recorded: it never
/// overtakes the job on its way to the blocking pool.
#[derive(Default)]
pub struct Marks(Arc<Mutex<HashMap<String, usize>>>);

/// One queued job's mark; dropping it (when the job has run) clears it.
pub struct Mark {
    marks: Arc<Mutex<HashMap<String, usize>>>,
    key: String,
}

impl Marks {
    pub fn mark(&self, key: &str) -> Mark {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(key.to_string()).or_default() += 1;
        Mark {
            marks: self.0.clone(),
            key: key.to_string(),
        }
    }

    pub fn is_marked(&self, key: &str) -> bool {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.contains_key(key)
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        let mut m = self.marks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_of_one_key_run_in_queue_order_and_the_key_is_freed() {
        let serial = Serial::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut handles = Vec::new();
        for i in 0..50u32 {
            let seen = seen.clone();
            // Early jobs are the slow ones: only the queue keeps the order.
            let slow = i < 5;
            let job = serial.run(&["conn-1"], move || {
                if slow {
                    std::thread::yield_now();
                }
                seen.lock()
                    .map_err(|_| HubError::new(ErrorType::Unknown, "poisoned"))?
                    .push(i);
                Ok(i)
            });
            handles.push(tokio::spawn(job));
        }
        for (i, h) in handles.into_iter().enumerate() {
            let got = tokio::time::timeout(Duration::from_secs(10), h).await;
            assert!(matches!(got, Ok(Ok(Ok(n))) if n as usize == i));
        }
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
        assert_eq!(serial.busy_keys(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_waits_for_every_key_it_names_and_other_keys_do_not_wait() {
        let serial = Serial::default();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        // The first job holds "rec-a" until released.
        let first = tokio::spawn(serial.run(&["conn-1", "rec-a"], move || {
            let _ = hold.recv_timeout(Duration::from_secs(10));
            Ok("first")
        }));
        let second = tokio::spawn(serial.run(&["conn-2", "rec-a"], || Ok("second")));
        // Another connection on another recording is not held up.
        let other = serial.run(&["conn-3", "rec-b"], || Ok("other"));
        let got = tokio::time::timeout(Duration::from_secs(10), other).await;
        assert!(matches!(got, Ok(Ok("other"))));
        assert!(!second.is_finished());
        let _ = release.send(());
        let done = tokio::time::timeout(Duration::from_secs(10), second).await;
        assert!(matches!(done, Ok(Ok(Ok("second")))));
        let first = tokio::time::timeout(Duration::from_secs(10), first).await;
        assert!(matches!(first, Ok(Ok(Ok("first")))));
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_releases_the_next() {
        let serial = Serial::default();
        let bad = serial.run(&["k"], || -> Result<(), HubError> { panic!("boom") });
        let next = serial.run(&["k"], || Ok(7));
        assert!(bad.await.is_err());
        assert!(matches!(next.await, Ok(7)));
    }
}
