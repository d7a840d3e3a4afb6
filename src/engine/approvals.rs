//! need_user approvals: a pending confirmation is bound to one task, one
//! step index and the hash of that step's params; it is single-use and
//! expires. Only a client's `confirm` message decides one: no built-in
//! `hub__` tool can, so an agent never approves its own dangerous call.

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

struct Pending {
    step_index: usize,
    params_hash: String,
    decide: oneshot::Sender<bool>,
}

#[derive(Default)]
pub struct Approvals {
    pending: DashMap<String, Pending>,
}

/// A stable hash of a step's params (hex, 16 chars).
pub fn params_hash(params: &Value) -> String {
    let mut h = Sha256::new();
    h.update(params.to_string().as_bytes());
    hex::encode(&h.finalize()[..8])
}

impl Approvals {
    /// Register a pending confirmation; returns the receiver to wait on.
    /// A newer request for the same task replaces (and denies) an older one.
    pub fn register(
        &self,
        task_id: &str,
        step_index: usize,
        params_hash: String,
    ) -> oneshot::Receiver<bool> {
        let (tx, rx) = oneshot::channel();
        if let Some(old) = self.pending.insert(
            task_id.to_string(),
            Pending {
                step_index,
                params_hash,
                decide: tx,
            },
        ) {
            let _ = old.decide.send(false);
        }
        rx
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
            .send(approve)
            .map_err(|_| format!("the confirmation for task {task_id} has already expired"))
    }

    /// Wait for the decision; expiry removes the pending entry.
    pub async fn wait(
        &self,
        task_id: &str,
        rx: oneshot::Receiver<bool>,
        limit: Duration,
    ) -> Result<(), Refused> {
        let r = tokio::time::timeout(limit, rx).await;
        self.pending.remove(task_id);
        match r {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) | Ok(Err(_)) => Err(Refused::Denied),
            Err(_) => Err(Refused::Expired),
        }
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
        let rx = a.register("t1", 3, h.clone());
        assert!(a.decide("t1", true, Some(2), None).is_err(), "wrong step");
        assert!(
            a.decide("t1", true, Some(3), Some("deadbeef")).is_err(),
            "wrong hash"
        );
        assert!(a.decide("t1", true, Some(3), Some(&h)).is_ok());
        assert!(a.decide("t1", true, None, None).is_err(), "single use");
        assert_eq!(a.wait("t1", rx, Duration::from_secs(1)).await, Ok(()));
    }

    #[tokio::test]
    async fn deny_refuses() {
        let a = Approvals::default();
        let rx = a.register("t", 0, "h".into());
        assert!(a.decide("t", false, None, None).is_ok());
        assert_eq!(
            a.wait("t", rx, Duration::from_secs(1)).await,
            Err(Refused::Denied)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_confirmation_expires() {
        let a = Approvals::default();
        let rx = a.register("t", 0, "h".into());
        let r = a.wait("t", rx, Duration::from_secs(300)).await;
        assert_eq!(r, Err(Refused::Expired));
        assert!(
            a.decide("t", true, None, None).is_err(),
            "expired confirmations cannot be used"
        );
    }

    #[test]
    fn hash_depends_on_params() {
        assert_ne!(params_hash(&json!({"a": 1})), params_hash(&json!({"a": 2})));
        assert_eq!(params_hash(&json!({"a": 1})), params_hash(&json!({"a": 1})));
    }
}
