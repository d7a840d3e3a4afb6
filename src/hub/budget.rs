//! Retry budgets, in the spirit of linkerd's: the retries of one server,
//! and of one session, are bounded by a share of the calls made to it in a
//! window, plus a floor, so a failing server is not hammered by every
//! call's retries at once and one client's storm of failures cannot spend
//! another's. A first attempt counts as a call; a retry asks the budget of
//! its server and of its session, and goes ahead only when both allow it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The window budgets are counted in (tumbling: counts start again after it).
pub const WINDOW: Duration = Duration::from_secs(10);
/// Retries allowed per window: this share of the window's calls…
pub const RATIO: f64 = 0.2;
/// …plus this many, so a quiet server's occasional failure is retried.
pub const FLOOR: u32 = 10;
/// Budgets kept at most (old windows are dropped first).
const MAX_KEYS: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    calls: u32,
    retries: u32,
}

impl Window {
    fn fresh(now: Instant) -> Window {
        Window {
            start: now,
            calls: 0,
            retries: 0,
        }
    }

    fn allowed(&self) -> u32 {
        FLOOR + (f64::from(self.calls) * RATIO) as u32
    }
}

/// The budgets by key (`server:NAME`, `session:ID`).
#[derive(Default)]
pub struct RetryBudget {
    windows: Mutex<HashMap<String, Window>>,
}

impl RetryBudget {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Window>, Instant) -> R) -> R {
        let now = Instant::now();
        let mut w = self
            .windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.len() > MAX_KEYS {
            w.retain(|_, x| now.duration_since(x.start) < WINDOW);
        }
        f(&mut w, now)
    }

    /// A first attempt of a call to `server` from `session`.
    pub fn call(&self, server: &str, session: &str) {
        self.with(|w, now| {
            for k in keys(server, session) {
                let x = w.entry(k).or_insert_with(|| Window::fresh(now));
                if now.duration_since(x.start) >= WINDOW {
                    *x = Window::fresh(now);
                }
                x.calls = x.calls.saturating_add(1);
            }
        })
    }

    /// May a call to `server` from `session` be retried now? Takes the
    /// retry from both budgets, or says which one is spent.
    pub fn retry(&self, server: &str, session: &str) -> Result<(), String> {
        self.with(|w, now| {
            let ks = keys(server, session);
            for (k, what) in ks.iter().zip([format!("server {server}"), "this session".to_string()]) {
                let x = w.entry(k.clone()).or_insert_with(|| Window::fresh(now));
                if now.duration_since(x.start) >= WINDOW {
                    *x = Window::fresh(now);
                }
                if x.retries >= x.allowed() {
                    return Err(format!(
                        "the retry budget of {what} is spent ({} retries for {} calls in the last {} s; at most {} % of the calls plus {FLOOR})",
                        x.retries,
                        x.calls,
                        WINDOW.as_secs(),
                        (RATIO * 100.0) as u32
                    ));
                }
            }
            for k in ks {
                if let Some(x) = w.get_mut(&k) {
                    x.retries += 1;
                }
            }
            Ok(())
        })
    }
}

fn keys(server: &str, session: &str) -> [String; 2] {
    [format!("server:{server}"), format!("session:{session}")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_then_a_share_of_the_calls() {
        let b = RetryBudget::default();
        for _ in 0..50 {
            b.call("s", "a");
        }
        // 10 + 20 % of 50 = 20 retries, then spent.
        for i in 0..20 {
            assert!(b.retry("s", "a").is_ok(), "retry {i}");
        }
        let e = b.retry("s", "a").expect_err("spent");
        assert!(
            e.contains("server s") && e.contains("20 retries for 50 calls"),
            "{e}"
        );
        // Another server has its own budget; the session's is spent too.
        b.call("t", "b");
        assert!(b.retry("t", "b").is_ok());
    }

    #[test]
    fn one_session_cannot_spend_another_s() {
        let b = RetryBudget::default();
        for _ in 0..10 {
            b.call("s", "greedy");
        }
        for _ in 0..10 {
            b.call("s2", "greedy");
        }
        // The session made 20 calls: 10 + 4 retries in all. Server s (10
        // calls) allows 12 of them, server s2 the other 2.
        for i in 0..12 {
            assert!(b.retry("s", "greedy").is_ok(), "retry {i} on s");
        }
        assert!(b.retry("s", "greedy").is_err(), "server s is spent");
        for i in 0..2 {
            assert!(b.retry("s2", "greedy").is_ok(), "retry {i} on s2");
        }
        let e = b.retry("s2", "greedy").expect_err("the session's budget");
        assert!(e.contains("this session"), "{e}");
        b.call("s2", "calm");
        assert!(b.retry("s2", "calm").is_ok());
    }
}
