//! Call keys: a `tool_call` or `tool_batch` sent again with the `callKey`
//! of an earlier one (from the same token) does not run again. The first
//! claims the key and runs; a repeat gets the first one's answer, or waits
//! for it while it runs. A repeat with other params is a conflict.
//!
//! Keys live in memory, bounded by count (`server.callKeyMax`, oldest out)
//! and age (`server.callKeyTtlMs`). A batch's key is also written into its
//! task journal by the engine, so that it outlives a restart.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

/// The longest key a client may choose.
pub const MAX_KEY_CHARS: usize = 200;

type Slot = watch::Receiver<Option<Arc<Value>>>;

struct Entry {
    /// What the key was first used with (the params' hash).
    hash: String,
    answer: Slot,
    at: Instant,
    /// Tells a guard from an older claim of the same key apart.
    claim: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<(Arc<str>, String), Entry>,
    /// Keys in claim order, for the count bound and the expiry.
    order: VecDeque<((Arc<str>, String), u64)>,
    claims: u64,
}

/// The hub's call keys (cheap to clone).
#[derive(Clone, Default)]
pub struct CallKeys {
    inner: Arc<Mutex<Inner>>,
}

/// What a key says about a request.
pub enum Claim {
    /// First use: run it, then [`KeyGuard::finish`] with the answer.
    New(KeyGuard),
    /// Seen before with the same params: this is its answer (waiting for
    /// it while the first runs).
    Repeat(Repeat),
    /// Seen before with other params.
    Conflict,
}

/// A repeat's answer, now or once the first request finishes.
pub struct Repeat(Slot);

impl Repeat {
    /// The first request's answer; `None` when it ended without one (it was
    /// cancelled, or its task failed to start): the caller may claim again.
    pub async fn answer(mut self) -> Option<Arc<Value>> {
        match self.0.wait_for(Option::is_some).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        }
    }
}

/// The claim of a key's first request. Dropped without an answer, it frees
/// the key (a repeat then runs again).
pub struct KeyGuard {
    keys: CallKeys,
    key: (Arc<str>, String),
    claim: u64,
    tx: Option<watch::Sender<Option<Arc<Value>>>>,
}

impl KeyGuard {
    /// The first request's answer, for every repeat from now on.
    pub fn finish(mut self, answer: Value) {
        if let Some(tx) = self.tx.take() {
            tx.send_replace(Some(Arc::new(answer)));
        }
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        if self.tx.is_some() {
            let mut inner = self.keys.lock();
            if inner
                .map
                .get(&self.key)
                .is_some_and(|e| e.claim == self.claim)
            {
                inner.map.remove(&self.key);
            }
        }
    }
}

impl CallKeys {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Look `key` up for a request from `scope` (the token it came with)
    /// with params hashed to `hash`; a first use claims it.
    pub fn claim(
        &self,
        scope: &Arc<str>,
        key: &str,
        hash: &str,
        ttl: Duration,
        max: usize,
    ) -> Claim {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.expire(now, ttl, max.max(1));
        let k = (scope.clone(), key.to_string());
        if let Some(e) = inner.map.get(&k) {
            return if e.hash == hash {
                Claim::Repeat(Repeat(e.answer.clone()))
            } else {
                Claim::Conflict
            };
        }
        inner.claims += 1;
        let claim = inner.claims;
        let (tx, rx) = watch::channel(None);
        inner.map.insert(
            k.clone(),
            Entry {
                hash: hash.to_string(),
                answer: rx,
                at: now,
                claim,
            },
        );
        inner.order.push_back((k.clone(), claim));
        Claim::New(KeyGuard {
            keys: self.clone(),
            key: k,
            claim,
            tx: Some(tx),
        })
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// Drop keys older than `ttl`, and the oldest while more than `max - 1`
    /// are held (room for one more).
    fn expire(&mut self, now: Instant, ttl: Duration, max: usize) {
        while let Some((k, claim)) = self.order.front() {
            let (k, claim) = (k.clone(), *claim);
            match self.map.get(&k) {
                Some(e) if e.claim == claim => {
                    if now.duration_since(e.at) < ttl && self.map.len() < max {
                        break;
                    }
                    self.map.remove(&k);
                }
                // Freed or claimed again since: a stale place in the order.
                _ => {}
            }
            self.order.pop_front();
        }
    }
}

/// A `callKey` as the client sent it, checked: 1 to 200 characters.
pub fn check_key(key: &str) -> Result<(), String> {
    let n = key.chars().count();
    if n == 0 || n > MAX_KEY_CHARS {
        return Err(format!(
            "callKey has {n} characters; expected 1 to {MAX_KEY_CHARS}"
        ));
    }
    Ok(())
}

/// The hash a key's request is compared by: its params as JSON (object
/// keys are sorted in serde_json's map, so equal params hash equal).
pub fn hash_of(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(v.to_string().as_bytes())[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Arc<str> {
        Arc::from("t")
    }

    const TTL: Duration = Duration::from_secs(600);

    #[tokio::test]
    async fn a_repeat_gets_the_first_answer_and_other_params_conflict() {
        let keys = CallKeys::default();
        let Claim::New(g) = keys.claim(&scope(), "k", "h1", TTL, 10) else {
            panic!("first use claims")
        };
        let Claim::Repeat(waiting) = keys.claim(&scope(), "k", "h1", TTL, 10) else {
            panic!("a repeat")
        };
        assert!(matches!(
            keys.claim(&scope(), "k", "h2", TTL, 10),
            Claim::Conflict
        ));
        // Another token's key of the same name is its own.
        assert!(matches!(
            keys.claim(&Arc::from("other"), "k", "h2", TTL, 10),
            Claim::New(_)
        ));
        let answer = tokio::spawn(waiting.answer());
        g.finish(serde_json::json!({"n": 1}));
        let got = answer.await.unwrap().unwrap();
        assert_eq!(*got, serde_json::json!({"n": 1}));
        let Claim::Repeat(done) = keys.claim(&scope(), "k", "h1", TTL, 10) else {
            panic!("still a repeat")
        };
        assert_eq!(*done.answer().await.unwrap(), serde_json::json!({"n": 1}));
    }

    #[tokio::test]
    async fn a_claim_dropped_without_answer_frees_the_key() {
        let keys = CallKeys::default();
        let Claim::New(g) = keys.claim(&scope(), "k", "h", TTL, 10) else {
            panic!()
        };
        let Claim::Repeat(waiting) = keys.claim(&scope(), "k", "h", TTL, 10) else {
            panic!()
        };
        drop(g);
        assert!(waiting.answer().await.is_none());
        assert!(matches!(
            keys.claim(&scope(), "k", "h", TTL, 10),
            Claim::New(_)
        ));
    }

    #[test]
    fn keys_are_bounded_by_count_and_age() {
        let keys = CallKeys::default();
        for i in 0..5 {
            if let Claim::New(g) = keys.claim(&scope(), &format!("k{i}"), "h", TTL, 3) {
                g.finish(Value::Null);
            } else {
                panic!()
            }
        }
        assert_eq!(keys.len(), 3);
        // The oldest went out: k0 runs again.
        assert!(matches!(
            keys.claim(&scope(), "k0", "h", TTL, 3),
            Claim::New(_)
        ));
        let Claim::New(g) = keys.claim(&scope(), "old", "h", Duration::ZERO, 100) else {
            panic!()
        };
        g.finish(Value::Null);
        assert!(matches!(
            keys.claim(&scope(), "old", "h", Duration::ZERO, 100),
            Claim::New(_)
        ));
    }

    #[test]
    fn a_key_is_1_to_200_characters() {
        assert!(check_key("").is_err());
        assert!(check_key(&"é".repeat(200)).is_ok());
        assert!(check_key(&"a".repeat(201)).is_err());
    }
}
