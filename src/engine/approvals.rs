//! need_user approvals: a pending confirmation is bound to one task, one
//! step index and the hash of that step's params; it is single-use and
//! expires. Only a client's `confirm` message decides one: no built-in
//! `hub__` tool can, so an agent never approves its own dangerous call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

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
    pub fn register(&self, key: &str, step_index: usize, params_hash: String) -> Waiting<'_> {
        let (tx, rx) = oneshot::channel();
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let pending = Pending {
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

    /// Apply a client's decision. When the client names a step or a params
    /// hash they must match the pending one exactly. Single use.
    pub fn decide(
        &self,
        task_id: &str,
        approve: bool,
        step_index: Option<usize>,
        params_hash: Option<&str>,
        content: Option<Value>,
    ) -> Result<(), String> {
        let Some((_, pending)) = self.pending.remove_if(task_id, |_, p| {
            step_index.is_none_or(|i| i == p.step_index)
                && params_hash.is_none_or(|h| h == p.params_hash)
        }) else {
            return Err(match self.waiting(task_id) {
                Some((i, h)) => format!(
                    "task {task_id} is waiting on step {i} (paramsHash {h}); this confirm names a different step or params"
                ),
                None => format!("task {task_id} is not waiting for a confirmation (it may have expired or been answered)"),
            });
        };
        pending
            .decide
            .send((approve, content))
            .map_err(|_| format!("the confirmation for task {task_id} has already expired"))
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

    #[tokio::test]
    async fn approve_is_bound_to_step_and_hash_and_single_use() {
        let a = Approvals::default();
        let h = params_hash(&json!({"command": "rm -rf /"}));
        let w = a.register("t1", 3, h.clone());
        assert!(
            a.decide("t1", true, Some(2), None, None).is_err(),
            "wrong step"
        );
        assert!(
            a.decide("t1", true, Some(3), Some("deadbeef"), None)
                .is_err(),
            "wrong hash"
        );
        assert!(a.decide("t1", true, Some(3), Some(&h), None).is_ok());
        assert!(
            a.decide("t1", true, None, None, None).is_err(),
            "single use"
        );
        assert_eq!(w.wait(Duration::from_secs(1)).await, Ok(()));
    }

    #[tokio::test]
    async fn deny_refuses() {
        let a = Approvals::default();
        let w = a.register("t", 0, "h".into());
        assert!(a.decide("t", false, None, None, None).is_ok());
        assert_eq!(w.wait(Duration::from_secs(1)).await, Err(Refused::Denied));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_confirmation_expires() {
        let a = Approvals::default();
        let w = a.register("t", 0, "h".into());
        let r = w.wait(Duration::from_secs(300)).await;
        assert_eq!(r, Err(Refused::Expired));
        assert!(
            a.decide("t", true, None, None, None).is_err(),
            "expired confirmations cannot be used"
        );
    }

    /// A confirmation whose waiter is gone (its call cancelled) is
    /// withdrawn; a replaced one leaves its successor alone.
    #[test]
    fn a_dropped_wait_withdraws_only_its_own_confirmation() {
        let a = Approvals::default();
        let first = a.register("t", 0, "h".into());
        let second = a.register("t", 1, "h".into());
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
