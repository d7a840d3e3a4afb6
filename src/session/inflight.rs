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
//!
//! The same count serves other caps (a token's stateless `/mcp` requests,
//! the hub's unattended tasks): work under more than one cap holds one
//! [`Place`] that stands for all of them ([`Place::and`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::errors::{ErrorType, HubError};

/// The in-flight count of one session (cheap to clone: clones share it).
#[derive(Clone, Default, Debug)]
pub struct InFlight(Arc<AtomicUsize>);

/// A place under a session's cap (and any other it was joined with); the
/// work it stands for ends when it is dropped.
#[must_use = "dropping a Place ends the work it counts"]
#[derive(Debug)]
pub struct Place {
    count: Arc<AtomicUsize>,
    /// Places under other caps, held and given back with this one.
    also: Option<Box<Place>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Place {
    fn of(count: Arc<AtomicUsize>) -> Place {
        Place { count, also: None }
    }

    /// One place that holds both this and `other` until it is dropped.
    pub fn and(mut self, mut other: Place) -> Place {
        other.also = self.also.take();
        self.also = Some(Box::new(other));
        self
    }
}

impl InFlight {
    /// A place for `what` (named in the refusal: "tool_batch", "the call",
    /// …) unless `cap` pieces of work are in flight already. The check and
    /// the count are one atomic step: two requests racing for the last
    /// place never both get it.
    pub fn take(&self, cap: usize, what: &str) -> Result<Place, HubError> {
        self.try_take(cap).ok_or_else(|| refusal(cap, what))
    }

    /// A place unless `cap` are taken (one atomic step); the caller says
    /// why not.
    pub fn try_take(&self, cap: usize) -> Option<Place> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .ok()
            .map(|_| Place::of(self.0.clone()))
    }

    /// A place whatever the count: work already accepted (a task the hub
    /// resumes at start) counts, and newer work finds the cap taken.
    pub fn enter(&self) -> Place {
        self.0.fetch_add(1, Ordering::AcqRel);
        Place::of(self.0.clone())
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

    #[test]
    fn a_joined_place_holds_every_cap_until_it_is_dropped() {
        let (session, hub) = (InFlight::default(), InFlight::default());
        let p = session.take(4, "call").ok().map(|p| p.and(hub.enter()));
        let q = hub.try_take(1);
        assert!(q.is_none(), "the hub-wide place is held");
        let p = p.map(|p| p.and(InFlight::default().enter()));
        assert_eq!((session.count(), hub.count()), (1, 1));
        drop(p);
        assert_eq!((session.count(), hub.count()), (0, 0));
        assert!(hub.try_take(1).is_some());
    }
}
