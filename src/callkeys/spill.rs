//! Answers the call keys let go of in memory, kept on disk: a key's
//! answer past `server.callKeyMaxBytes` (or its client's
//! `server.callKeyClientMaxBytes`) is written to
//! `<stateDir>/callkeys/<claim>.json`, and a repeat reads it back, so it
//! still gets the same answer. The file goes when its key does (age,
//! count). Keys live in memory, so files left by an earlier run of the hub
//! belong to no key: the folder is emptied when the hub starts.
//!
//! The write runs on the blocking pool; until it is done the answer stays
//! in `pending`, where a repeat finds it. Whichever comes last of the write
//! and the key's removal deletes the file, so none is left behind.
//!
//! A file holds call data: it is created 0600 in a 0700 folder
//! (`store::private`) and holds the answer redacted as history is
//! (`history::redact`, given as [`Redact`]: this layer knows no history),
//! marked `"redacted": true` when that changed anything. A repeat gets
//! what the file holds, also while it is being written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

/// What an answer goes through before it reaches a file.
pub type Redact = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

/// The folder of one hub's spilled answers.
pub struct Spill {
    dir: PathBuf,
    redact: Redact,
    /// Answers whose file is being written, by claim.
    pending: Mutex<HashMap<u64, Arc<Value>>>,
    /// File jobs done so far (a test waits on it).
    jobs: tokio::sync::watch::Sender<u64>,
}

impl Spill {
    /// The folder `dir`, emptied (files of an earlier run are no key's).
    /// `None` when it cannot be made: answers past the budget then give
    /// up their results, as without a folder.
    pub fn open(dir: &Path, redact: Redact) -> Option<Arc<Spill>> {
        if dir.exists() {
            if let Err(e) = std::fs::remove_dir_all(dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot empty the call keys' folder; answers past server.callKeyMaxBytes will give up their results");
                return None;
            }
        }
        if let Err(e) = crate::store::private::dir(dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot make the call keys' folder; answers past server.callKeyMaxBytes will give up their results");
            return None;
        }
        Some(Arc::new(Spill {
            dir: dir.to_path_buf(),
            redact,
            pending: Mutex::new(HashMap::new()),
            jobs: tokio::sync::watch::Sender::new(0),
        }))
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<u64, Arc<Value>>> {
        match self.pending.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn file(&self, claim: u64) -> PathBuf {
        self.dir.join(format!("{claim}.json"))
    }

    /// Keep `answer` of `claim` on disk (written off the caller's thread).
    pub fn put(self: &Arc<Self>, claim: u64, answer: Arc<Value>) {
        self.pending().insert(claim, answer.clone());
        let spill = self.clone();
        off_thread(move || {
            let file = spill.file(claim);
            let written = serde_json::to_vec(&shown(&spill.redact, &answer))
                .map_err(std::io::Error::other)
                .and_then(|bytes| crate::store::private::write(&file, &bytes));
            if let Err(e) = &written {
                tracing::warn!(file = %file.display(), error = %e, "cannot keep a call key's answer on disk; a repeat gets it without its result");
            }
            // The key went while the file was written: nobody reads it.
            if spill.pending().remove(&claim).is_none() || written.is_err() {
                let _ = std::fs::remove_file(&file);
            }
            spill.jobs.send_modify(|n| *n += 1);
        });
    }

    /// The answer kept for `claim`; `None` when it could not be kept or
    /// read back.
    pub async fn get(self: &Arc<Self>, claim: u64) -> Option<Arc<Value>> {
        let pending = self.pending().get(&claim).cloned();
        let (file, redact) = (self.file(claim), self.redact.clone());
        let read = tokio::task::spawn_blocking(move || match pending {
            // What the file will hold.
            Some(answer) => Some(shown(&redact, &answer)),
            None => {
                let bytes = std::fs::read(&file).ok()?;
                serde_json::from_slice::<Value>(&bytes).ok()
            }
        });
        read.await.ok().flatten().map(Arc::new)
    }

    /// The key of `claim` is gone: so is its file.
    pub fn remove(self: &Arc<Self>, claim: u64) {
        // Still being written: the write deletes it when done.
        if self.pending().remove(&claim).is_some() {
            return;
        }
        let file = self.file(claim);
        let spill = self.clone();
        off_thread(move || {
            let _ = std::fs::remove_file(file);
            spill.jobs.send_modify(|n| *n += 1);
        });
    }

    /// Once `n` file jobs (writes, removals) are done.
    #[cfg(test)]
    pub async fn jobs_done(&self, n: u64) {
        let mut rx = self.jobs.subscribe();
        let _ = rx.wait_for(|done| *done >= n).await;
    }
}

/// `answer` as a file keeps it: redacted, and marked when that changed it.
fn shown(redact: &Redact, answer: &Value) -> Value {
    let mut out = redact(answer);
    if out != *answer {
        if let Value::Object(o) = &mut out {
            o.insert("redacted".into(), Value::Bool(true));
        }
    }
    out
}

/// On the blocking pool when there is a runtime, else here.
fn off_thread(f: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn_blocking(f);
        }
        Err(_) => f(),
    }
}
