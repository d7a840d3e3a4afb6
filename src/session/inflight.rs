//! The work one session has in flight, held to a cap
//! (`server.maxInFlightPerSession`).
//!
//! Every piece of work a client's session starts (a `/ws` `tool_call`,
//! `tool_batch`, replay, resume, a control message that spawns a task, an
//! `/mcp` `tools/call`) takes a [`Place`] from the session's [`InFlight`]
//! before anything runs, and gives it back by dropping it right before its
//! reply is queued, so a client that has its answer can always send the
//! next request. At the cap the work is refused with `LIMIT_EXCEEDED`
//! naming the key; nothing waits in a queue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::errors::{ErrorType, HubError};

/// The in-flight count of one session (cheap to clone: clones share it).
#[derive(Clone, Default, Debug)]
pub struct InFlight(Arc<AtomicUsize>);

/// A place under a session's cap; the work it stands for ends when it is
/// dropped.
#[must_use = "dropping a Place ends the work it counts"]
#[derive(Debug)]
pub struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InFlight {
    /// A place for `what` (named in the refusal: "tool_batch", "the call",
    /// …) unless `cap` pieces of work are in flight already. The check and
    /// the count are one atomic step: two requests racing for the last
    /// place never both get it.
    pub fn take(&self, cap: usize, what: &str) -> Result<Place, HubError> {
        let taken = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Place(self.0.clone())),
            Err(_) => Err(refusal(cap, what)),
        }
    }

    /// Pieces of work in flight now.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// The `LIMIT_EXCEEDED` of a session at its cap.
pub fn refusal(cap: usize, what: &str) -> HubError {
    HubError::new(
        ErrorType::LimitExceeded,
        format!("this session already has {cap} requests in flight (server.maxInFlightPerSession); the {what} was not started"),
    )
    .with_suggestion("wait for a running call or batch to answer, send many steps as one tool_batch, or raise server.maxInFlightPerSession in config.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_refuses_and_a_dropped_place_frees() {
        let work = InFlight::default();
        let a = work.take(2, "call");
        let b = work.take(2, "call");
        assert!(a.is_ok() && b.is_ok());
        let e = work.take(2, "tool_batch").err().map(|e| e.message);
        assert!(
            e.as_deref().is_some_and(
                |m| m.contains("server.maxInFlightPerSession") && m.contains("tool_batch")
            ),
            "{e:?}"
        );
        assert_eq!(work.count(), 2);
        drop(a);
        assert_eq!(work.count(), 1);
        assert!(work.take(2, "call").is_ok());
        drop(b);
        assert_eq!(work.count(), 0);
    }
}
