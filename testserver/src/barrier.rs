//! Barriers: a test orders calls by events, not sleeps. `barrier {name}`
//! (and `barrier_read`, the same marked read-only and idempotent, for a
//! call the hub may run again) waits until `release {name}` (or its
//! cancellation); `await_waiting
//! {name, count}` answers once at least `count` calls wait at `name`, with
//! how many wait; `release` answers with how many it let go. One process's
//! memory: a restarted server knows no barrier.

use std::collections::{BTreeMap, BTreeSet};

use rmcp::model::CallToolResult;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::reply::text;

#[derive(Default)]
struct State {
    waiting: BTreeMap<String, u64>,
    released: BTreeSet<String>,
}

/// Every barrier of this process.
pub struct Barriers(watch::Sender<State>);

impl Default for Barriers {
    fn default() -> Self {
        Barriers(watch::Sender::new(State::default()))
    }
}

/// One call waiting at a barrier; it stops counting when dropped (the
/// call was answered or cancelled).
struct Waiter<'a>(&'a Barriers, String);

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0 .0.send_modify(|s| {
            if let Some(n) = s.waiting.get_mut(&self.1) {
                *n = n.saturating_sub(1);
            }
        });
    }
}

impl Barriers {
    /// Wait at `name` until it is released; `None` when `ct` fired first.
    pub async fn wait(&self, name: &str, ct: &CancellationToken) -> Option<CallToolResult> {
        let mut rx = self.0.subscribe();
        self.0
            .send_modify(|s| *s.waiting.entry(name.to_string()).or_default() += 1);
        let _waiter = Waiter(self, name.to_string());
        tokio::select! {
            r = rx.wait_for(|s| s.released.contains(name)) => r.ok().map(|_| text("released")),
            _ = ct.cancelled() => None,
        }
    }

    /// Once at least `count` calls wait at `name`: how many.
    pub async fn await_waiting(&self, name: &str, count: u64) -> CallToolResult {
        let mut rx = self.0.subscribe();
        let n = match rx
            .wait_for(|s| s.waiting.get(name).copied().unwrap_or(0) >= count)
            .await
        {
            Ok(s) => s.waiting.get(name).copied().unwrap_or(0),
            Err(_) => 0,
        };
        counted(n)
    }

    /// Let every call at `name` (and any that comes later) go: how many
    /// were waiting.
    pub fn release(&self, name: &str) -> CallToolResult {
        let mut n = 0;
        self.0.send_modify(|s| {
            s.released.insert(name.to_string());
            n = s.waiting.get(name).copied().unwrap_or(0);
        });
        counted(n)
    }
}

fn counted(n: u64) -> CallToolResult {
    let mut r = text(n.to_string());
    r.structured_content = Some(json!({ "waiting": n }));
    r
}
