//! Retry budgets, in the spirit of linkerd's: the retries of one server,
//! and of one session, are bounded by a share of the calls made to it in a
//! window, plus a floor, so a failing server is not hammered by every
//! call's retries at once. A server's budget is kept per principal (the
//! main token, or each client of `clients`): one client's storm of
//! failures spends its own budget, never another client's or the person's.
//! A failing server may so see one budget's retries per principal, and the
//! principals are the few the config names. A first attempt counts as a
//! call; a retry asks the budget of its server for its principal and the
//! budget of its session, and goes ahead only when both allow it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

/// Whose budget: a server's for one principal (`None`: the main token),
/// or a session's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Server(Arc<str>, Option<Arc<str>>),
    Session(Arc<str>),
}

/// The calls and retries a budget is asked about: to `server`, by the
/// client `client` (`None`: the main token), on `session`.
#[derive(Debug, Clone, Copy)]
pub struct Spender<'a> {
    pub server: &'a str,
    pub client: Option<&'a str>,
    pub session: &'a str,
}

impl Spender<'_> {
    fn keys(&self) -> [Key; 2] {
        [
            Key::Server(self.server.into(), self.client.map(Arc::from)),
            Key::Session(self.session.into()),
        ]
    }

    /// How a spent budget is named in the error.
    fn name(&self, key: &Key) -> String {
        match (key, self.client) {
            (Key::Server(..), None) => format!("server {}", self.server),
            (Key::Server(..), Some(c)) => format!("server {} for client {c}", self.server),
            (Key::Session(_), _) => "this session".to_string(),
        }
    }
}

/// The budgets by key.
#[derive(Default)]
pub struct RetryBudget {
    windows: Mutex<HashMap<Key, Window>>,
}

impl RetryBudget {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<Key, Window>, Instant) -> R) -> R {
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

    /// A first attempt of a call by `who`.
    pub fn call(&self, who: Spender<'_>) {
        self.with(|w, now| {
            for k in who.keys() {
                let x = w.entry(k).or_insert_with(|| Window::fresh(now));
                if now.duration_since(x.start) >= WINDOW {
                    *x = Window::fresh(now);
                }
                x.calls = x.calls.saturating_add(1);
            }
        })
    }

    /// May a call by `who` be retried now? Takes the retry from both
    /// budgets, or says which one is spent.
    pub fn retry(&self, who: Spender<'_>) -> Result<(), String> {
        self.with(|w, now| {
            let ks = who.keys();
            for k in &ks {
                let x = w.entry(k.clone()).or_insert_with(|| Window::fresh(now));
                if now.duration_since(x.start) >= WINDOW {
                    *x = Window::fresh(now);
                }
                if x.retries >= x.allowed() {
                    return Err(format!(
                        "the retry budget of {} is spent ({} retries for {} calls in the last {} s; at most {} % of the calls plus {FLOOR})",
                        who.name(k),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A call to `server` by the main token on `session`.
    fn main<'a>(server: &'a str, session: &'a str) -> Spender<'a> {
        Spender {
            server,
            client: None,
            session,
        }
    }

    #[test]
    fn a_floor_then_a_share_of_the_calls() {
        let b = RetryBudget::default();
        for _ in 0..50 {
            b.call(main("s", "a"));
        }
        // 10 + 20 % of 50 = 20 retries, then spent.
        for i in 0..20 {
            assert!(b.retry(main("s", "a")).is_ok(), "retry {i}");
        }
        let e = b.retry(main("s", "a")).expect_err("spent");
        assert!(
            e.contains("server s") && e.contains("20 retries for 50 calls"),
            "{e}"
        );
        // Another server has its own budget; the session's is spent too.
        b.call(main("t", "b"));
        assert!(b.retry(main("t", "b")).is_ok());
    }

    #[test]
    fn one_session_cannot_spend_another_s() {
        let b = RetryBudget::default();
        for _ in 0..10 {
            b.call(main("s", "greedy"));
        }
        for _ in 0..10 {
            b.call(main("s2", "greedy"));
        }
        // The session made 20 calls: 10 + 4 retries in all. Server s (10
        // calls) allows 12 of them, server s2 the other 2.
        for i in 0..12 {
            assert!(b.retry(main("s", "greedy")).is_ok(), "retry {i} on s");
        }
        assert!(b.retry(main("s", "greedy")).is_err(), "server s is spent");
        for i in 0..2 {
            assert!(b.retry(main("s2", "greedy")).is_ok(), "retry {i} on s2");
        }
        let e = b
            .retry(main("s2", "greedy"))
            .expect_err("the session's budget");
        assert!(e.contains("this session"), "{e}");
        b.call(main("s2", "calm"));
        assert!(b.retry(main("s2", "calm")).is_ok());
    }

    #[test]
    fn one_principal_exhausting_a_servers_budget_leaves_anothers_retries() {
        let b = RetryBudget::default();
        let ext = |session: &'static str| Spender {
            server: "s",
            client: Some("ext"),
            session,
        };
        // Client ext fails over and over on its sessions: its budget for
        // server s (10 calls: 10 + 2 retries) is spent.
        for i in 0..10 {
            b.call(ext(if i % 2 == 0 { "e1" } else { "e2" }));
        }
        let mut ok = 0;
        for i in 0..20 {
            if b.retry(ext(if i % 2 == 0 { "e1" } else { "e2" })).is_ok() {
                ok += 1;
            }
        }
        assert_eq!(ok, 12);
        let e = b.retry(ext("e3")).expect_err("ext's budget is spent");
        assert!(e.contains("server s for client ext"), "{e}");
        // The main token's calls to the same server still retry, up to
        // their own floor, and so does another client's.
        b.call(main("s", "m1"));
        for i in 0..FLOOR {
            assert!(b.retry(main("s", "m1")).is_ok(), "main's retry {i}");
        }
        let agent = Spender {
            server: "s",
            client: Some("agent"),
            session: "a1",
        };
        b.call(agent);
        assert!(b.retry(agent).is_ok(), "another client's retry");
    }
}
