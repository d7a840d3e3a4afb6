//! Call keys: a `tool_call` or `tool_batch` sent again with the `callKey`
//! of an earlier one (from the same token) does not run again. The first
//! claims the key and runs; a repeat gets the first one's answer, or waits
//! for it while it runs. A repeat with other params is a conflict.
//!
//! Keys live in memory, bounded by count (`server.callKeyMax`, oldest out)
//! and age (`server.callKeyTtlMs`); their answers by bytes for the whole
//! hub (`server.callKeyMaxBytes`): past it the oldest answers give up their
//! `result` and `raw` (the key still holds; a repeat runs nothing and is
//! told `resultDropped`). Each answer is held once, shared by every
//! repeat. A batch's key is also written into its task journal by the
//! engine, so that it outlives a restart.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

/// The longest key a client may choose.
pub const MAX_KEY_CHARS: usize = 200;

type AnswerWatch = watch::Receiver<Option<Arc<Value>>>;
/// Shared by the entry and its guard: repeats waiting for a first request
/// whose key was pushed out (count, age) still get its answer.
type Answer = Arc<watch::Sender<Option<Arc<Value>>>>;

struct Entry {
    /// What the key was first used with (the params' hash).
    hash: String,
    /// The answer, once there is one; dropped without one, it tells the
    /// waiting repeats that the key is free.
    answer: Answer,
    /// What the answer weighs against `callKeyMaxBytes` (0: none yet, or
    /// its result was let go).
    bytes: usize,
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
    /// The sum of the entries' `bytes`.
    bytes: usize,
}

/// What bounds the keys: age, count, and the bytes of their answers.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub ttl: Duration,
    pub max: usize,
    pub max_bytes: usize,
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
pub struct Repeat(AnswerWatch);

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
    max_bytes: usize,
    answer: Answer,
    done: bool,
}

impl KeyGuard {
    /// The first request's answer, for every repeat from now on; the
    /// oldest answers let go of their results while the keys hold more
    /// than `callKeyMaxBytes`.
    pub fn finish(mut self, answer: Value) {
        self.done = true;
        let bytes = weight(&answer);
        let mut inner = self.keys.lock();
        self.answer.send_replace(Some(Arc::new(answer)));
        let Some(e) = inner
            .map
            .get_mut(&self.key)
            .filter(|e| e.claim == self.claim)
        else {
            return;
        };
        e.bytes = bytes;
        inner.bytes += bytes;
        inner.shed(self.max_bytes);
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        if !self.done {
            let mut inner = self.keys.lock();
            if inner
                .map
                .get(&self.key)
                .is_some_and(|e| e.claim == self.claim)
            {
                inner.remove(&self.key);
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
    pub fn claim(&self, scope: &Arc<str>, key: &str, hash: &str, bounds: Bounds) -> Claim {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.expire(now, bounds.ttl, bounds.max.max(1));
        let k = (scope.clone(), key.to_string());
        if let Some(e) = inner.map.get(&k) {
            return if e.hash == hash {
                Claim::Repeat(Repeat(e.answer.subscribe()))
            } else {
                Claim::Conflict
            };
        }
        inner.claims += 1;
        let claim = inner.claims;
        let answer: Answer = Arc::new(watch::channel(None).0);
        inner.map.insert(
            k.clone(),
            Entry {
                hash: hash.to_string(),
                answer: answer.clone(),
                bytes: 0,
                at: now,
                claim,
            },
        );
        inner.order.push_back((k.clone(), claim));
        Claim::New(KeyGuard {
            keys: self.clone(),
            key: k,
            claim,
            max_bytes: bounds.max_bytes,
            answer,
            done: false,
        })
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Bytes of answers held now (as weighed against `callKeyMaxBytes`).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
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
                    self.remove(&k);
                }
                // Freed or claimed again since: a stale place in the order.
                _ => {}
            }
            self.order.pop_front();
        }
    }
}

impl Inner {
    fn remove(&mut self, k: &(Arc<str>, String)) {
        if let Some(e) = self.map.remove(k) {
            self.bytes -= e.bytes;
        }
    }

    /// While the answers weigh more than `max_bytes`, the oldest let go of
    /// their `result` and `raw`; the key and the rest of the answer stay.
    fn shed(&mut self, max_bytes: usize) {
        let mut i = 0;
        while self.bytes > max_bytes && i < self.order.len() {
            let (k, claim) = &self.order[i];
            i += 1;
            let Some(e) = self
                .map
                .get_mut(k)
                .filter(|e| e.claim == *claim && e.bytes > 0)
            else {
                continue;
            };
            let Some(answer) = e.answer.borrow().clone() else {
                continue;
            };
            let mut kept = without_result(&answer);
            kept["resultDropped"] = Value::from(e.bytes);
            e.answer.send_replace(Some(Arc::new(kept)));
            self.bytes -= e.bytes;
            e.bytes = 0;
        }
    }
}

/// An answer without its `result` and `raw` (the parts that weigh).
fn without_result(answer: &Value) -> Value {
    match answer {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| *k != "result" && *k != "raw")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// About the bytes a JSON value holds in memory: its strings and keys,
/// plus a few bytes per node (no serialisation: this is on the call path).
pub fn weight(v: &Value) -> usize {
    const NODE: usize = 16;
    match v {
        Value::String(s) => NODE + s.len(),
        Value::Array(a) => NODE + a.iter().map(weight).sum::<usize>(),
        Value::Object(o) => NODE + o.iter().map(|(k, v)| k.len() + weight(v)).sum::<usize>(),
        _ => NODE,
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

    fn b(ttl: Duration, max: usize) -> Bounds {
        Bounds {
            ttl,
            max,
            max_bytes: usize::MAX,
        }
    }

    #[tokio::test]
    async fn a_repeat_gets_the_first_answer_and_other_params_conflict() {
        let keys = CallKeys::default();
        let Claim::New(g) = keys.claim(&scope(), "k", "h1", b(TTL, 10)) else {
            panic!("first use claims")
        };
        let Claim::Repeat(waiting) = keys.claim(&scope(), "k", "h1", b(TTL, 10)) else {
            panic!("a repeat")
        };
        assert!(matches!(
            keys.claim(&scope(), "k", "h2", b(TTL, 10)),
            Claim::Conflict
        ));
        // Another token's key of the same name is its own.
        assert!(matches!(
            keys.claim(&Arc::from("other"), "k", "h2", b(TTL, 10)),
            Claim::New(_)
        ));
        let answer = tokio::spawn(waiting.answer());
        g.finish(serde_json::json!({"n": 1}));
        let got = answer.await.unwrap().unwrap();
        assert_eq!(*got, serde_json::json!({"n": 1}));
        let Claim::Repeat(done) = keys.claim(&scope(), "k", "h1", b(TTL, 10)) else {
            panic!("still a repeat")
        };
        assert_eq!(*done.answer().await.unwrap(), serde_json::json!({"n": 1}));
    }

    #[tokio::test]
    async fn a_claim_dropped_without_answer_frees_the_key() {
        let keys = CallKeys::default();
        let Claim::New(g) = keys.claim(&scope(), "k", "h", b(TTL, 10)) else {
            panic!()
        };
        let Claim::Repeat(waiting) = keys.claim(&scope(), "k", "h", b(TTL, 10)) else {
            panic!()
        };
        drop(g);
        assert!(waiting.answer().await.is_none());
        assert!(matches!(
            keys.claim(&scope(), "k", "h", b(TTL, 10)),
            Claim::New(_)
        ));
    }

    #[test]
    fn keys_are_bounded_by_count_and_age() {
        let keys = CallKeys::default();
        for i in 0..5 {
            if let Claim::New(g) = keys.claim(&scope(), &format!("k{i}"), "h", b(TTL, 3)) {
                g.finish(Value::Null);
            } else {
                panic!()
            }
        }
        assert_eq!(keys.len(), 3);
        // The oldest went out: k0 runs again.
        assert!(matches!(
            keys.claim(&scope(), "k0", "h", b(TTL, 3)),
            Claim::New(_)
        ));
        let Claim::New(g) = keys.claim(&scope(), "old", "h", b(Duration::ZERO, 100)) else {
            panic!()
        };
        g.finish(Value::Null);
        assert!(matches!(
            keys.claim(&scope(), "old", "h", b(Duration::ZERO, 100)),
            Claim::New(_)
        ));
    }

    #[tokio::test]
    async fn answers_are_bounded_by_bytes_and_their_keys_still_hold() {
        let keys = CallKeys::default();
        let bounds = Bounds {
            ttl: TTL,
            max: 100,
            max_bytes: 3000,
        };
        let big = |i: usize| serde_json::json!({"n": i, "result": "x".repeat(1000), "raw": "y"});
        let mut waiting = Vec::new();
        for i in 0..5 {
            let Claim::New(g) = keys.claim(&scope(), &format!("k{i}"), "h", bounds) else {
                panic!()
            };
            if i == 0 {
                let Claim::Repeat(r) = keys.claim(&scope(), "k0", "h", bounds) else {
                    panic!()
                };
                waiting.push(r);
            }
            g.finish(big(i));
            assert!(keys.bytes() <= 3000, "{}", keys.bytes());
        }
        assert_eq!(keys.len(), 5);
        // A waiter and a repeat get the first answer without its result
        // now, and run nothing.
        let first = waiting.pop().unwrap().answer().await.unwrap();
        assert_eq!(first["n"], 0);
        let Claim::Repeat(r) = keys.claim(&scope(), "k0", "h", bounds) else {
            panic!("the key still holds")
        };
        let later = r.answer().await.unwrap();
        assert!(later.get("result").is_none(), "{later}");
        assert_eq!(later["n"], 0);
        assert!(
            later["resultDropped"].as_u64().unwrap_or(0) > 1000,
            "{later}"
        );
        // The newest answers are whole.
        let Claim::Repeat(r) = keys.claim(&scope(), "k4", "h", bounds) else {
            panic!()
        };
        assert_eq!(
            r.answer().await.unwrap()["result"].as_str().map(str::len),
            Some(1000)
        );
    }

    #[tokio::test]
    async fn a_waiter_gets_the_answer_of_a_key_pushed_out_while_it_ran() {
        let keys = CallKeys::default();
        let Claim::New(g) = keys.claim(&scope(), "k", "h", b(TTL, 1)) else {
            panic!()
        };
        let Claim::Repeat(r) = keys.claim(&scope(), "k", "h", b(TTL, 100)) else {
            panic!()
        };
        // A claim under a bound of one pushes "k" out while it runs.
        assert!(matches!(
            keys.claim(&scope(), "other", "h", b(TTL, 1)),
            Claim::New(_)
        ));
        g.finish(serde_json::json!(7));
        assert_eq!(*r.answer().await.unwrap(), serde_json::json!(7));
    }

    #[test]
    fn a_key_is_1_to_200_characters() {
        assert!(check_key("").is_err());
        assert!(check_key(&"é".repeat(200)).is_ok());
        assert!(check_key(&"a".repeat(201)).is_err());
    }
}
