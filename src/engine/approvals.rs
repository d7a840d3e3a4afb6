//! need_user approvals: a pending confirmation is bound to one task, one
//! step index and the hash of that step's params; it is single-use and
//! expires. Only a client's `confirm` message decides one: no built-in
//! `hub__` tool can, so an agent never approves its own dangerous call.
//!
//! A confirmation belongs to the principal whose call or task asked it
//! ([`Owner`]): only that principal's sessions and the main token (the
//! person) may answer it. To anyone else it does not exist: the answer is
//! the same `NOT_FOUND` as for a name nobody registered, and nothing is
//! decided.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use crate::caller::{Caller, Owner};
use crate::errors::{ErrorType, HubError};

/// Why a wait for a decision ended without approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Denied,
    Expired,
}

/// A client's decision: approved or not, and what it filled in (the
/// `content` of a `confirm` answering a server's form).
type Verdict = (bool, Option<Value>);

struct Pending {
    /// Whose call or task asked (`None`: the main token's).
    owner: Owner,
    step_index: usize,
    params_hash: String,
    decide: oneshot::Sender<Verdict>,
    /// Which registration this is, so a replaced one never removes its
    /// successor.
    ticket: u64,
}

#[derive(Default)]
pub struct Approvals {
    pending: DashMap<String, Pending>,
    tickets: AtomicU64,
}

/// A registered confirmation, to wait on. Dropped (its call cancelled, its
/// session ended), it withdraws itself, and only itself.
pub struct Waiting<'a> {
    approvals: &'a Approvals,
    key: String,
    ticket: u64,
    decided: oneshot::Receiver<Verdict>,
}

impl Waiting<'_> {
    /// Wait for the decision, at most `limit`.
    pub async fn wait(self, limit: Duration) -> Result<(), Refused> {
        self.wait_content(limit).await.map(|_| ())
    }

    /// [`Waiting::wait`], with what the client filled in when it approved.
    pub async fn wait_content(mut self, limit: Duration) -> Result<Option<Value>, Refused> {
        match tokio::time::timeout(limit, &mut self.decided).await {
            Ok(Ok((true, content))) => Ok(content),
            Ok(Ok((false, _))) | Ok(Err(_)) => Err(Refused::Denied),
            Err(_) => Err(Refused::Expired),
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let ticket = self.ticket;
        self.approvals
            .pending
            .remove_if(&self.key, |_, p| p.ticket == ticket);
    }
}

/// The answer to a `confirm` naming no confirmation this caller may answer
/// (never asked, answered, expired, withdrawn, or another client's).
fn unknown(task_id: &str) -> HubError {
    HubError::new(
        ErrorType::NotFound,
        format!(
            "no pending confirmation {:?}: it was answered, expired or withdrawn, or never asked",
            crate::util::truncate(task_id, 80)
        ),
    )
    .with_suggestion("answer only a need_user this connection received, before its expiresAt")
}

/// A stable hash of a step's params (hex, 16 chars).
pub fn params_hash(params: &Value) -> String {
    let mut h = Sha256::new();
    h.update(params.to_string().as_bytes());
    hex::encode(&h.finalize()[..8])
}

impl Approvals {
    /// Register a pending confirmation under `key` (a task id, or the name
    /// a single call's confirmation was given); wait on what it returns.
    /// A newer request for the same key replaces (and denies) an older one.
    /// `owner`: the principal whose call or task asks.
    pub fn register(
        &self,
        key: &str,
        step_index: usize,
        params_hash: String,
        owner: Owner,
    ) -> Waiting<'_> {
        let (tx, rx) = oneshot::channel();
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let pending = Pending {
            owner,
            step_index,
            params_hash,
            decide: tx,
            ticket,
        };
        if let Some(old) = self.pending.insert(key.to_string(), pending) {
            let _ = old.decide.send((false, None));
        }
        Waiting {
            approvals: self,
            key: key.to_string(),
            ticket,
            decided: rx,
        }
    }

    /// The step and hash a task is waiting on, if any.
    pub fn waiting(&self, task_id: &str) -> Option<(usize, String)> {
        self.pending
            .get(task_id)
            .map(|p| (p.step_index, p.params_hash.clone()))
    }

    /// Apply `caller`'s decision. When the caller names a step or a params
    /// hash they must match the pending one exactly. Single use. A
    /// confirmation the caller may not answer (another client's) is
    /// refused exactly as one that does not exist.
    pub fn decide(
        &self,
        caller: &Caller,
        task_id: &str,
        approve: bool,
        step_index: Option<usize>,
        params_hash: Option<&str>,
        content: Option<Value>,
    ) -> Result<(), HubError> {
        let mine = |p: &Pending| caller.may_see(p.owner.as_deref());
        let Some((_, pending)) = self.pending.remove_if(task_id, |_, p| {
            mine(p)
                && step_index.is_none_or(|i| i == p.step_index)
                && params_hash.is_none_or(|h| h == p.params_hash)
        }) else {
            let named = self
                .pending
                .get(task_id)
                .filter(|p| mine(p))
                .map(|p| (p.step_index, p.params_hash.clone()));
            return Err(match named {
                Some((i, h)) => HubError::new(
                    ErrorType::InvalidMessage,
                    format!(
                        "task {task_id} is waiting on step {i} (paramsHash {h}); this confirm names a different step or params"
                    ),
                )
                .with_suggestion("answer with the stepIndex and paramsHash of the latest need_user for this taskId"),
                None => unknown(task_id),
            });
        };
        pending
            .decide
            .send((approve, content))
            .map_err(|_| unknown(task_id))
    }

    /// Drop a pending confirmation (task cancelled).
    pub fn forget(&self, task_id: &str) {
        self.pending.remove(task_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn main() -> Caller {
        Caller::main("s0".into())
    }

    fn client(name: &str) -> Caller {
        Caller {
            client: Some(name.into()),
            view: Some("chat".into()),
            session: "s1".into(),
        }
    }

    /// Another client's confirmation answers exactly like one that does
    /// not exist, and stays pending for its owner and the main token.
    #[tokio::test]
    async fn only_the_owner_or_the_main_token_may_answer() {
        let a = Approvals::default();
        let w = a.register("q", 0, "h".into(), None);
        let other = a
            .decide(&client("ext"), "q", true, Some(0), Some("h"), None)
            .unwrap_err();
        let none = a
            .decide(&client("ext"), "nothing", true, None, None, None)
            .unwrap_err();
        assert_eq!(other.error_type, ErrorType::NotFound);
        assert_eq!(
            other.message.replace("\"q\"", ""),
            none.message.replace("\"nothing\"", "")
        );
        assert_eq!(a.waiting("q"), Some((0, "h".to_string())));
        assert!(a.decide(&main(), "q", true, None, None, None).is_ok());
        assert_eq!(w.wait(Duration::from_secs(1)).await, Ok(()));

        let w = a.register("e", 0, "h".into(), Some("ext".into()));
        assert!(a
            .decide(&client("agent"), "e", true, None, None, None)
            .is_err());
        assert!(a
            .decide(&client("ext"), "e", true, None, None, None)
            .is_ok());
        assert_eq!(w.wait(Duration::from_secs(1)).await, Ok(()));
    }

    #[tokio::test]
    async fn approve_is_bound_to_step_and_hash_and_single_use() {
        let a = Approvals::default();
        let h = params_hash(&json!({"command": "rm -rf /"}));
        let w = a.register("t1", 3, h.clone(), None);
        assert!(
            a.decide(&main(), "t1", true, Some(2), None, None).is_err(),
            "wrong step"
        );
        assert!(
            a.decide(&main(), "t1", true, Some(3), Some("deadbeef"), None)
                .is_err(),
            "wrong hash"
        );
        assert!(a
            .decide(&main(), "t1", true, Some(3), Some(&h), None)
            .is_ok());
        assert!(
            a.decide(&main(), "t1", true, None, None, None).is_err(),
            "single use"
        );
        assert_eq!(w.wait(Duration::from_secs(1)).await, Ok(()));
    }

    #[tokio::test]
    async fn deny_refuses() {
        let a = Approvals::default();
        let w = a.register("t", 0, "h".into(), None);
        assert!(a.decide(&main(), "t", false, None, None, None).is_ok());
        assert_eq!(w.wait(Duration::from_secs(1)).await, Err(Refused::Denied));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_confirmation_expires() {
        let a = Approvals::default();
        let w = a.register("t", 0, "h".into(), None);
        let r = w.wait(Duration::from_secs(300)).await;
        assert_eq!(r, Err(Refused::Expired));
        assert!(
            a.decide(&main(), "t", true, None, None, None).is_err(),
            "expired confirmations cannot be used"
        );
    }

    /// A confirmation whose waiter is gone (its call cancelled) is
    /// withdrawn; a replaced one leaves its successor alone.
    #[test]
    fn a_dropped_wait_withdraws_only_its_own_confirmation() {
        let a = Approvals::default();
        let first = a.register("t", 0, "h".into(), None);
        let second = a.register("t", 1, "h".into(), None);
        drop(first);
        assert_eq!(a.waiting("t"), Some((1, "h".to_string())));
        drop(second);
        assert_eq!(a.waiting("t"), None);
    }

    #[test]
    fn hash_depends_on_params() {
        assert_ne!(params_hash(&json!({"a": 1})), params_hash(&json!({"a": 2})));
        assert_eq!(params_hash(&json!({"a": 1})), params_hash(&json!({"a": 1})));
    }
}
