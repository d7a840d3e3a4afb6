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

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::config::SecurityConfig;
use crate::hub::outcome::CallOutcome;

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
    tx: mpsc::UnboundedSender<Arc<Value>>,
}

/// The entries in memory, and whether the file's tail is among them yet.
#[derive(Default)]
struct Recent {
    entries: VecDeque<Arc<Value>>,
    tail_in: bool,
}

/// Longest `latest` waits for the file's tail at start-up.
const LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl History {
    pub fn open(state_dir: &Path) -> std::io::Result<History> {
        std::fs::create_dir_all(state_dir)?;
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
    /// now), before anything leaves.
    pub fn record(
        &self,
        session: &str,
        params: &Value,
        out: &CallOutcome,
        security: &SecurityConfig,
    ) {
        let entry = json!({
            "ts": crate::util::now_rfc3339(),
            "session": session,
            "tool": out.qualified_name.clone().unwrap_or_else(|| out.tool.clone()),
            "params": redact(params, security),
            "success": out.success,
            "errorType": out.error.as_ref().map(|e| e.error_type),
            "attempts": out.attempts,
            "retries": out.retries,
            "durationMs": out.duration_ms,
        });
        let entry = Arc::new(entry);
        if let Ok(mut r) = self.recent.lock() {
            if r.entries.len() >= KEEP {
                r.entries.pop_front();
            }
            r.entries.push_back(entry.clone());
        }
        let _ = self.tx.send(entry);
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
                    .map(|e| Value::clone(e))
                    .collect()
            }
            Err(_) => Vec::new(),
        }
    }
}

/// The one function every writer (history, task journals, recordings and
/// their edits, `need_user`) puts a value through: every key that looks
/// secret has its value replaced with `{"$redacted": key}`, then every
/// known secret value left anywhere is masked (`crate::secrets`).
pub fn redact(v: &Value, security: &SecurityConfig) -> Value {
    let mut out = redact_keys(v, security);
    security.secrets.mask_in_place(&mut out);
    out
}

/// `s` with every known secret value masked (error messages, log text).
pub fn mask_text<'a>(s: &'a str, security: &SecurityConfig) -> std::borrow::Cow<'a, str> {
    security.secrets.mask_str(s)
}

/// Free text (an error message) under the same rules as [`redact`]: the
/// value of every secret key written in it as JSON (`"token": "…"`, as an
/// assertion message quoting a result does) or as `key=value` (a URL's
/// query) becomes `"[redacted]"`, then every known secret value is masked.
pub fn redact_text(s: &str, security: &SecurityConfig) -> String {
    if security.redact_keys.is_empty() {
        return mask_text(s, security).into_owned();
    }
    let keyed = redact_keyed_text(s, security);
    mask_text(&keyed, security).into_owned()
}

fn redact_keyed_text(s: &str, security: &SecurityConfig) -> String {
    // Every delimiter looked at is ASCII, so each index cut at is a char
    // boundary.
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let (mut copied, mut k) = (0, 0);
    while k < b.len() {
        if b[k] == b'"' {
            let Some(end) = string_end(b, k) else { break };
            let mut j = skip_spaces(b, end + 1);
            if b.get(j) == Some(&b':') && security.is_secret_key(&s[k + 1..end]) {
                j = skip_spaces(b, j + 1);
                out.push_str(&s[copied..j]);
                out.push_str("\"[redacted]\"");
                k = value_end(b, j);
                copied = k;
                continue;
            }
            // Not a secret key: look inside (a value may hold `key=value`).
            k += 1;
            continue;
        }
        if b[k] == b'=' {
            let start = s[..k]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
                .map_or(0, |p| p + 1);
            let end = s[k + 1..]
                .find(|c: char| c.is_whitespace() || "&,;\"')]}".contains(c))
                .map_or(s.len(), |p| k + 1 + p);
            if start < k && end > k + 1 && security.is_secret_key(&s[start..k]) {
                out.push_str(&s[copied..=k]);
                out.push_str("[redacted]");
                k = end;
                copied = end;
                continue;
            }
        }
        k += 1;
    }
    out.push_str(&s[copied..]);
    out
}

/// The index of the quote closing the JSON string opened at `open`.
fn string_end(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// Where the JSON value starting at `i` ends: after a string, after a
/// balanced object or array, or at the delimiter after a scalar; the end of
/// the text when it was cut off.
fn value_end(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => string_end(b, i).map_or(b.len(), |e| e + 1),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => match string_end(b, j) {
                        Some(e) => j = e,
                        None => return b.len(),
                    },
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            b.len()
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace()
            {
                j += 1;
            }
            j
        }
    }
}

fn redact_keys(v: &Value, security: &SecurityConfig) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, val) in m {
                if security.is_secret_key(k) {
                    out.insert(k.clone(), json!({ "$redacted": k }));
                } else {
                    out.insert(k.clone(), redact_keys(val, security));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| redact_keys(x, security)).collect()),
        other => other.clone(),
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
fn load_tail(path: &Path, end: u64) -> VecDeque<Arc<Value>> {
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
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            if q.len() >= KEEP {
                q.pop_front();
            }
            q.push_back(Arc::new(v));
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

fn open_append(p: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
}

fn writer(path: PathBuf, mut file: std::fs::File, mut rx: mpsc::UnboundedReceiver<Arc<Value>>) {
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
            if serde_json::to_writer(&mut buf, entry.as_ref()).is_ok() {
                buf.push(b'\n');
            }
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

    fn security() -> SecurityConfig {
        match crate::config::parse("{}", Path::new("/tmp/x/config.json")) {
            Ok(l) => l.config.security,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn redact_text_hides_values_of_secret_keys_in_json_and_query_text() {
        let s = security();
        let msg = r#"expected result to contain "x"; actual result: {"apiKey": "sk-1", "user":"bob","token":{"a":[1,"}"]},"password":12} see https://h/p?user=bob&token=t0k&x=1 "#;
        let out = redact_text(msg, &s);
        assert_eq!(
            out,
            r#"expected result to contain "x"; actual result: {"apiKey": "[redacted]", "user":"bob","token":"[redacted]","password":"[redacted]"} see https://h/p?user=bob&token=[redacted]&x=1 "#
        );
        // A message cut off inside the value, keys without values, plain text.
        assert_eq!(
            redact_text(r#"found {"secret":"abc…"#, &s),
            r#"found {"secret":"[redacted]""#
        );
        for plain in [
            r#"{"token"}"#,
            "token= x",
            "password: must be 8 chars",
            "ü\"é\":\"ö",
        ] {
            assert_eq!(redact_text(plain, &s), plain);
        }
    }

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
        let q = load_tail(&path, u64::MAX);
        assert_eq!(q.len(), KEEP);
        assert_eq!(q[0]["n"], 5000 - KEEP as u64);
        assert_eq!(q[KEEP - 1]["n"], 4999);
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
        assert_eq!(q[KEEP - 1]["n"], 4999);
    }
}
