//! Call history: every call appended to `<stateDir>/history.jsonl`, secrets
//! redacted before anything is written. A writer task owns the file so the
//! call path never waits on disk; the latest entries are also kept in memory
//! for `history {limit}`. The entries already in the file when the hub
//! started are read (backwards from where the file ended then) only when a
//! `history` request first asks for them, so start-up does no work for
//! them at all.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::caller::Caller;
use crate::config::SecurityConfig;
use crate::errors::ErrorType;
use crate::outcome::CallOutcome;
use crate::retry::RetryRecord;

mod redact;

pub use redact::{mask_text, redact, redact_text, Redacted};

/// Entries kept in memory for `history`.
const KEEP: usize = 1000;
/// The file is rotated to `history.1.jsonl` beyond this size.
const ROTATE_BYTES: u64 = 64 * 1024 * 1024;
/// Longest an entry waits in memory before it is appended to the file.
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

#[derive(Clone)]
pub struct History {
    recent: Arc<Mutex<Recent>>,
    /// The file and its length at start-up: the tail to read is what was
    /// there then (the writer appends after it meanwhile).
    path: Arc<PathBuf>,
    start_len: u64,
    /// Set once the tail has been read (by the first `latest`).
    tail: Arc<tokio::sync::OnceCell<()>>,
    tx: mpsc::UnboundedSender<Line>,
}

/// One entry as its line in the file (without the newline): serialised
/// once on the call path, shared by the file writer and `latest`.
type Line = Arc<str>;

/// The entries in memory, and whether the file's tail is among them yet.
#[derive(Default)]
struct Recent {
    entries: VecDeque<Line>,
    tail_in: bool,
}

/// An entry of `history.jsonl`, in the file's field order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry<'a> {
    ts: String,
    session: &'a str,
    /// The client of `clients` that made the call (absent: the main
    /// token, or the hub itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<&'a str>,
    tool: &'a str,
    params: Redacted<'a>,
    success: bool,
    error_type: Option<ErrorType>,
    attempts: u32,
    retries: &'a [RetryRecord],
    duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    call_key: Option<&'a str>,
    /// Which client context (and so which per-context instance) ran it.
    #[serde(skip_serializing_if = "Option::is_none")]
    context: Option<&'a crate::client_context::ClientContext>,
    /// The view the call was made in; `tool` is then the view's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    view: Option<&'a str>,
    /// The real tool, when the view renames it.
    #[serde(skip_serializing_if = "Option::is_none")]
    real_tool: Option<&'a str>,
}

/// Longest `latest` waits for the file's tail at start-up.
const LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl History {
    pub fn open(state_dir: &Path) -> std::io::Result<History> {
        crate::store::private::dir(state_dir)?;
        let path = state_dir.join("history.jsonl");
        // Opened here, not in the writer thread: the file exists (or the
        // error is reported) by the time the hub is up.
        let mut file = open_append(&path)?;
        mend_torn_end(&path, &mut file);
        let start_len = file.metadata()?.len();
        let (tx, rx) = mpsc::unbounded_channel();
        let writer_path = path.clone();
        std::thread::Builder::new()
            .name("toolhub-history".into())
            .spawn(move || writer(writer_path, file, rx))?;
        Ok(History {
            recent: Arc::default(),
            path: Arc::new(path),
            start_len,
            tail: Arc::default(),
            tx,
        })
    }

    /// Read the file's tail into memory the first time it is needed
    /// (off the runtime's threads), waiting at most [`LOAD_WAIT`]; after
    /// that the entries recorded since start-up are answered alone, and
    /// the log says why.
    async fn wait_loaded(&self) {
        let (path, end, recent) = (self.path.clone(), self.start_len, self.recent.clone());
        let load = self.tail.get_or_init(|| async move {
            let read = tokio::task::spawn_blocking(move || fill_tail(&path, end, &recent));
            let _ = read.await;
        });
        if tokio::time::timeout(LOAD_WAIT, load).await.is_err() {
            tracing::warn!("the history file's tail is still being read; answering with the calls made since start-up");
        }
    }

    /// Append one call. Params are redacted here (with the config in force
    /// now), before anything leaves, while the entry is serialised: the
    /// line is built once, with no copy of the params.
    pub fn record(
        &self,
        (session, client): (&str, Option<&str>),
        params: &Value,
        out: &CallOutcome,
        security: &SecurityConfig,
    ) {
        let entry = Entry {
            ts: crate::util::now_rfc3339(),
            session,
            client,
            tool: out.qualified_name.as_deref().unwrap_or(&out.tool),
            params: Redacted {
                value: params,
                security,
            },
            success: out.success,
            error_type: out.error.as_ref().map(|e| e.error_type),
            attempts: out.attempts,
            retries: &out.retries,
            duration_ms: out.duration_ms,
            call_key: out.call_key.as_deref(),
            context: out.context.as_ref(),
            view: out.view.as_deref(),
            real_tool: out.real_tool.as_deref(),
        };
        let line: Line = match serde_json::to_string(&entry) {
            Ok(text) => text.into(),
            Err(e) => {
                // Params are JSON values: this cannot happen, but a call is
                // never lost without a word.
                tracing::error!(session, tool = entry.tool, error = %e, "history entry not written");
                return;
            }
        };
        if let Ok(mut r) = self.recent.lock() {
            if r.entries.len() >= KEEP {
                r.entries.pop_front();
            }
            r.entries.push_back(line.clone());
        }
        let _ = self.tx.send(line);
    }

    /// The latest `limit` calls `caller` may see, oldest first: those
    /// made in its view (`None`: every view, the aggregate's history), and
    /// for a client token only those its own sessions made (the entry's
    /// `client`); the main token sees every principal's. Right after
    /// start-up this waits for the file's tail.
    pub async fn latest_for(&self, limit: usize, caller: &Caller) -> Vec<Value> {
        let (view, client) = (caller.view.as_deref(), caller.client_name());
        if view.is_none() && client.is_none() {
            return self.latest(limit).await;
        }
        self.wait_loaded().await;
        let Ok(r) = self.recent.lock() else {
            return Vec::new();
        };
        let field = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(String::from);
        let mut out: Vec<Value> = r
            .entries
            .iter()
            .rev()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|e| view.is_none_or(|v| field(e, "view").as_deref() == Some(v)))
            .filter(|e| caller.may_see(field(e, "client").as_deref()))
            .take(limit)
            .collect();
        out.reverse();
        out
    }

    /// The latest `limit` entries, oldest first (the file's tail included:
    /// right after start-up this waits for it).
    pub async fn latest(&self, limit: usize) -> Vec<Value> {
        self.wait_loaded().await;
        match self.recent.lock() {
            Ok(r) => {
                let skip = r.entries.len().saturating_sub(limit);
                r.entries
                    .iter()
                    .skip(skip)
                    .filter_map(|line| serde_json::from_str(line).ok())
                    .collect()
            }
            Err(_) => Vec::new(),
        }
    }
}

/// Put the file's last entries (of its first `end` bytes: what it held at
/// start-up) before those recorded since, once: a second call (after a
/// `latest` that gave up waiting) changes nothing.
fn fill_tail(path: &Path, end: u64, recent: &Mutex<Recent>) {
    let full = |r: &Recent| r.tail_in || r.entries.len() >= KEEP;
    if recent.lock().map_or(true, |r| full(&r)) {
        return;
    }
    let mut tail = load_tail(path, end);
    if let Ok(mut r) = recent.lock() {
        if r.tail_in {
            return;
        }
        tail.extend(r.entries.drain(..));
        while tail.len() > KEEP {
            tail.pop_front();
        }
        r.entries = tail;
        r.tail_in = true;
    }
}

/// The last `KEEP` entries of the file's first `end` bytes, read
/// backwards: the cost does not grow with the history file.
fn load_tail(path: &Path, end: u64) -> VecDeque<Line> {
    let mut q = VecDeque::new();
    let text = match crate::util::read_last_lines_before(path, KEEP, end) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return q,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the history tail");
            return q;
        }
    };
    for line in text.lines() {
        // A torn last line from a crash is skipped, not fatal.
        if serde_json::from_str::<serde::de::IgnoredAny>(line).is_ok() {
            if q.len() >= KEEP {
                q.pop_front();
            }
            q.push_back(line.into());
        }
    }
    q
}

/// A file that ends in a torn line (the hub was killed mid-write) gets a
/// newline first, so the next entry starts a line of its own instead of
/// being glued onto the fragment and lost with it. The fragment stays where
/// it is; every reader skips a line that does not parse.
fn mend_torn_end(path: &Path, file: &mut std::fs::File) {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return;
    };
    if len == 0 {
        return;
    }
    let mut last = [0u8; 1];
    let read = std::fs::File::open(path).and_then(|f| f.read_exact_at(&mut last, len - 1));
    if read.is_err() || last[0] == b'\n' {
        return;
    }
    match file.write_all(b"\n") {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            "history ended in a torn line (the hub stopped mid-write); it is kept and skipped, and new entries start on the next line"
        ),
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "cannot end the history's torn last line")
        }
    }
}

/// The history file, created 0600 (`store::private`).
fn open_append(p: &Path) -> std::io::Result<std::fs::File> {
    crate::store::private::open_append(p)
}

fn writer(path: PathBuf, mut file: std::fs::File, mut rx: mpsc::UnboundedReceiver<Line>) {
    // Bytes in the file, counted as written: no stat per entry.
    let mut size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = Vec::with_capacity(64 * 1024);
    while let Some(first) = rx.blocking_recv() {
        // Let a burst gather: while this thread sleeps, senders never have
        // to wake it (a futex wake per call was a measurable share of the
        // call path). At most FLUSH_EVERY later, everything goes out in one
        // write.
        std::thread::sleep(FLUSH_EVERY);
        buf.clear();
        let mut next = Some(first);
        while let Some(entry) = next {
            buf.extend_from_slice(entry.as_bytes());
            buf.push(b'\n');
            next = if buf.len() < 1024 * 1024 {
                rx.try_recv().ok()
            } else {
                None
            };
        }
        if let Err(e) = crate::util::append_whole_from(&mut file, size, &buf) {
            tracing::error!(path = %path.display(), error = %e, "history write failed");
            continue;
        }
        size += buf.len() as u64;
        if size > ROTATE_BYTES {
            let _ = std::fs::rename(&path, path.with_extension("1.jsonl"));
            match open_append(&path) {
                Ok(f) => {
                    file = f;
                    size = 0;
                }
                Err(e) => {
                    tracing::error!(error = %e, "history rotate failed");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use super::redact::tests::security;

    use std::io::Write;

    #[test]
    fn a_torn_last_line_is_ended_so_the_next_entry_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        std::fs::write(&path, "{\"n\":1}\n{\"n\": 2, \"pad\": \"to").unwrap();
        let mut f = open_append(&path).unwrap();
        mend_torn_end(&path, &mut f);
        writeln!(f, "{}", json!({"n": 3})).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let whole: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        assert_eq!(whole, vec![json!({"n": 1}), json!({"n": 3})], "{text}");
        // A whole file is left as it is.
        let before = std::fs::read(&path).unwrap();
        mend_torn_end(&path, &mut f);
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn start_up_keeps_the_last_entries_in_order_and_skips_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        // Long lines so the tail spans several 64 KiB blocks.
        let pad = "x".repeat(300);
        for i in 0..5000 {
            writeln!(f, "{}", json!({"n": i, "pad": pad})).unwrap();
        }
        write!(f, "{{\"n\": 5000, \"pad\": \"torn").unwrap();
        drop(f);
        let n = |line: &Line| serde_json::from_str::<Value>(line).unwrap()["n"].clone();
        let q = load_tail(&path, u64::MAX);
        assert_eq!(q.len(), KEEP);
        assert_eq!(n(&q[0]), 5000 - KEEP as u64);
        assert_eq!(n(&q[KEEP - 1]), 4999);
        assert!(load_tail(&dir.path().join("missing.jsonl"), u64::MAX).is_empty());
        // Only what the file held at start-up: a line appended since is not
        // part of the tail (it is in memory already).
        let start_len = std::fs::metadata(&path).unwrap().len();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f).unwrap();
        writeln!(f, "{}", json!({"n": "new"})).unwrap();
        let q = load_tail(&path, start_len);
        assert_eq!(n(&q[KEEP - 1]), 4999);
    }

    #[tokio::test]
    async fn a_recorded_call_is_one_redacted_line() {
        let dir = tempfile::tempdir().unwrap();
        let h = History::open(dir.path()).unwrap();
        let out = CallOutcome::failed(
            "echo",
            crate::errors::HubError::new(ErrorType::Timeout, "slow"),
            std::time::Duration::from_millis(7),
        );
        let params = json!({"text": "hi", "token": "t0k3n"});
        h.record(("s1", None), &params, &out, &security());
        let latest = h.latest(10).await;
        assert_eq!(latest.len(), 1, "{latest:?}");
        let e = &latest[0];
        assert_eq!(e["session"], "s1");
        assert_eq!(e["tool"], "echo");
        assert_eq!(
            e["params"],
            json!({"text": "hi", "token": {"$redacted": "token"}})
        );
        assert_eq!(
            (&e["success"], &e["errorType"], &e["durationMs"]),
            (&json!(false), &json!("TIMEOUT"), &json!(7))
        );
        assert!(e["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{e}");
        // The file gets the same line: tests/it (protocol, secrets) read it.
        assert!(!e.to_string().contains("t0k3n"));
    }
}
