//! Call keys: a `tool_call` or `tool_batch` sent again with the `callKey`
//! of an earlier one (from the same token) does not run again. The first
//! claims the key and runs; a repeat gets the first one's answer, or waits
//! for it while it runs. A repeat with other params is a conflict.
//!
//! Keys live in memory, bounded by count (`server.callKeyMax`, oldest out)
//! and age (`server.callKeyTtlMs`); their answers by bytes, per client
//! (`server.callKeyClientMaxBytes`, the token's keys) and for the whole hub
//! (`server.callKeyMaxBytes`): past either, the oldest answers move to disk
//! ([`spill`], 0600 files, redacted as history is; at most
//! [`DISK_TIMES`] × `callKeyMaxBytes` there) and a repeat reads them back
//! (past that, without a folder, or when the
//! file cannot be written, the answer gives up its `result` and `raw`: the
//! key still holds, a repeat runs nothing and is told `resultDropped`).
//! Each answer is held once, shared by every repeat. A batch's key is also written into its task journal by the
//! engine, so that it outlives a restart.

mod spill;

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

pub use spill::Redact;
use spill::Spill;

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
    /// What its answer weighs on disk ([`spill`]; 0: not moved there).
    disk: usize,
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
    /// The same, per client (scope).
    client_bytes: HashMap<Arc<str>, usize>,
    /// The sum of the entries' `disk`.
    disk: usize,
}

/// Answers on disk weigh at most this many times `callKeyMaxBytes`; past
/// it an answer let go gives up its result instead.
pub const DISK_TIMES: usize = 8;

/// What bounds the keys: age, count, and the bytes of their answers.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub ttl: Duration,
    pub max: usize,
    /// Of answers, for the whole hub.
    pub max_bytes: usize,
    /// Of answers, for one client (one token's keys).
    pub max_client_bytes: usize,
}

/// The hub's call keys (cheap to clone).
#[derive(Clone, Default)]
pub struct CallKeys {
    inner: Arc<Mutex<Inner>>,
    /// Where answers past the byte bounds go.
    spill: Option<Arc<Spill>>,
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
pub struct Repeat(AnswerWatch, Option<Arc<Spill>>);

/// Marks a kept answer whose whole is on disk: `{claim, bytes}`.
const SPILLED: &str = "_spilled";

impl Repeat {
    /// The first request's answer; `None` when it ended without one (it was
    /// cancelled, or its task failed to start): the caller may claim again.
    /// An answer kept on disk is read back.
    pub async fn answer(mut self) -> Option<Arc<Value>> {
        let kept = match self.0.wait_for(Option::is_some).await {
            Ok(v) => v.clone()?,
            Err(_) => return None,
        };
        let Some(mark) = kept.get(SPILLED) else {
            return Some(kept);
        };
        let claim = mark["claim"].as_u64().unwrap_or_default();
        if let Some(whole) = match &self.1 {
            Some(spill) => spill.get(claim).await,
            None => None,
        } {
            return Some(whole);
        }
        let mut dropped = kept.as_ref().clone();
        dropped["resultDropped"] = mark["bytes"].clone();
        if let Value::Object(o) = &mut dropped {
            o.remove(SPILLED);
        }
        Some(Arc::new(dropped))
    }
}

/// The claim of a key's first request. Dropped without an answer, it frees
/// the key (a repeat then runs again).
pub struct KeyGuard {
    keys: CallKeys,
    key: (Arc<str>, String),
    claim: u64,
    bounds: Bounds,
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
        *inner.client_bytes.entry(self.key.0.clone()).or_default() += bytes;
        inner.shed(&self.key.0, self.bounds, self.keys.spill.as_ref());
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
                inner.remove(&self.key, self.keys.spill.as_ref());
            }
        }
    }
}

impl CallKeys {
    /// Keys whose answers past the byte bounds go to files in `dir`
    /// (emptied now: no key of an earlier run is left), put through
    /// `redact` first.
    pub fn with_spill(dir: &Path, redact: Redact) -> CallKeys {
        CallKeys {
            inner: Arc::default(),
            spill: Spill::open(dir, redact),
        }
    }

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
        inner.expire(now, bounds.ttl, bounds.max.max(1), self.spill.as_ref());
        let k = (scope.clone(), key.to_string());
        if let Some(e) = inner.map.get(&k) {
            return if e.hash == hash {
                Claim::Repeat(Repeat(e.answer.subscribe(), self.spill.clone()))
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
                disk: 0,
                at: now,
                claim,
            },
        );
        inner.order.push_back((k.clone(), claim));
        Claim::New(KeyGuard {
            keys: self.clone(),
            key: k,
            claim,
            bounds,
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
    fn expire(&mut self, now: Instant, ttl: Duration, max: usize, spill: Option<&Arc<Spill>>) {
        while let Some((k, claim)) = self.order.front() {
            let (k, claim) = (k.clone(), *claim);
            match self.map.get(&k) {
                Some(e) if e.claim == claim => {
                    if now.duration_since(e.at) < ttl && self.map.len() < max {
                        break;
                    }
                    self.remove(&k, spill);
                }
                // Freed or claimed again since: a stale place in the order.
                _ => {}
            }
            self.order.pop_front();
        }
    }
}

impl Inner {
    fn remove(&mut self, k: &(Arc<str>, String), spill: Option<&Arc<Spill>>) {
        if let Some(e) = self.map.remove(k) {
            self.take_bytes(&k.0, e.bytes);
            if e.disk > 0 {
                self.disk -= e.disk;
                if let Some(spill) = spill {
                    spill.remove(e.claim);
                }
            }
        }
    }

    fn take_bytes(&mut self, scope: &Arc<str>, bytes: usize) {
        self.bytes -= bytes;
        if let Some(n) = self.client_bytes.get_mut(scope) {
            *n -= bytes;
            if *n == 0 {
                self.client_bytes.remove(scope);
            }
        }
    }

    /// While `scope`'s answers weigh more than its share, its oldest let
    /// go; then, while all answers weigh more than the hub's bound, the
    /// oldest of any client. An answer let go moves to disk when there is
    /// a folder, else gives up its `result` and `raw`; the key and the rest
    /// of the answer stay.
    fn shed(&mut self, scope: &Arc<str>, bounds: Bounds, spill: Option<&Arc<Spill>>) {
        let over_client = |inner: &Inner| {
            inner.client_bytes.get(scope).copied().unwrap_or(0) > bounds.max_client_bytes
        };
        let disk_max = bounds.max_bytes.saturating_mul(DISK_TIMES);
        self.shed_while(over_client, Some(scope), spill, disk_max);
        self.shed_while(
            |inner| inner.bytes > bounds.max_bytes,
            None,
            spill,
            disk_max,
        );
    }

    fn shed_while(
        &mut self,
        over: impl Fn(&Inner) -> bool,
        only: Option<&Arc<str>>,
        spill: Option<&Arc<Spill>>,
        disk_max: usize,
    ) {
        let mut i = 0;
        while over(self) && i < self.order.len() {
            let (k, claim) = self.order[i].clone();
            i += 1;
            if only.is_some_and(|s| *s != k.0) {
                continue;
            }
            let disk = self.disk;
            let Some(e) = self
                .map
                .get_mut(&k)
                .filter(|e| e.claim == claim && e.bytes > 0)
            else {
                continue;
            };
            let Some(answer) = e.answer.borrow().clone() else {
                continue;
            };
            let bytes = std::mem::take(&mut e.bytes);
            let mut kept = without_result(&answer);
            // To disk while the folder has room, else the result goes.
            match spill.filter(|_| disk.saturating_add(bytes) <= disk_max) {
                Some(spill) => {
                    kept[SPILLED] = serde_json::json!({"claim": claim, "bytes": bytes});
                    spill.put(claim, answer);
                    e.disk = bytes;
                }
                None => kept["resultDropped"] = Value::from(bytes),
            }
            e.answer.send_replace(Some(Arc::new(kept)));
            self.disk += e.disk;
            self.take_bytes(&k.0, bytes);
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
mod tests;
