//! Small helpers shared across modules.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current UTC time as RFC 3339 with milliseconds, e.g. `2026-11-22T03:49:36.123Z`.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// `t` as RFC 3339 in UTC with milliseconds, chrono's writer. It replaced
/// a hand-written one (d2b50e7, written for speed: every history entry is
/// stamped) because it is no slower: 64–102 ns a call against 72–117 ns for
/// the hand-written one, 2,000,000 instants in alternating release-build
/// runs on the 2-core dev box. Times before 1970 are written as such; a
/// time beyond chrono's range (±262,000 years: a corrupt journal's
/// `createdMs`) is clamped to its end, where chrono's `From<SystemTime>`
/// would panic.
pub fn rfc3339(t: SystemTime) -> String {
    use chrono::{DateTime, SecondsFormat, Utc};
    let (secs, nanos, past) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs(), d.subsec_nanos(), false),
        Err(e) => (e.duration().as_secs(), e.duration().subsec_nanos(), true),
    };
    let at = i64::try_from(secs).ok().and_then(|s| match (past, nanos) {
        (false, n) => DateTime::<Utc>::from_timestamp(s, n),
        (true, 0) => DateTime::<Utc>::from_timestamp(-s, 0),
        (true, n) => DateTime::<Utc>::from_timestamp(-s - 1, 1_000_000_000 - n),
    });
    let at = at.unwrap_or(if past {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    });
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Await `fut`; when it does not finish at its first poll, `waiting` runs
/// first (a task then releases what it holds rather than keep it through
/// a wait).
pub async fn on_pending<F: std::future::Future>(fut: F, waiting: impl FnOnce()) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(fut.as_mut().poll(cx))).await;
    match first {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => {
            waiting();
            fut.await
        }
    }
}

/// A name for a single `tool_call`'s pending confirmation, `call-<32 hex>`:
/// 128 random bits, so nobody can guess a question's name from another
/// (the `hello`'s `bootId` is public; a counter would be too).
pub fn call_id() -> String {
    format!("call-{}", hex::encode(rand::random::<[u8; 16]>()))
}

/// This hub run's id: 12 random hex digits drawn once per process. The
/// `hello`'s `bootId`, so a client knows when the hub it talks to has
/// restarted (and its call keys and sessions with it).
pub fn run_id() -> &'static str {
    static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RUN.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_string())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Cut a string to at most `max` characters, marking the cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push_str("…(truncated)");
    out
}

/// Append `line` to a file opened for appending as a whole line or not at
/// all: when the write fails part-way (disk full, `RLIMIT_FSIZE`), the file is
/// cut back to its length before the write, so no torn line is left for a
/// reader. (A crash mid-write can still tear the last line; readers handle
/// that case.)
pub fn append_whole(file: &mut std::fs::File, line: &[u8]) -> std::io::Result<()> {
    let before = file.metadata()?.len();
    append_whole_from(file, before, line)
}

/// [`append_whole`] for a writer that keeps count of the file's length
/// (`before`), so no `stat` is needed per append.
pub fn append_whole_from(
    file: &mut std::fs::File,
    before: u64,
    line: &[u8],
) -> std::io::Result<()> {
    use std::io::Write;
    let written = file.write_all(line);
    if written.is_err() {
        if let Err(e) = file.set_len(before) {
            tracing::warn!(error = %e, "cannot cut a partly written line back");
        }
    }
    written
}

/// Does a tool name as recorded (`server__tool` or bare) answer to
/// `wanted`, given bare or qualified? Used by the listings' `tool` filter.
pub fn names_tool(name: &str, wanted: &str) -> bool {
    name == wanted
        || name
            .split_once("__")
            .is_some_and(|(_, bare)| bare == wanted)
}

/// Write `bytes` to `path` through a temp file (fsynced) and a rename, so a
/// reader sees the old file or the new one, never half of either.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, 0o666)
}

/// [`write_atomic`] with the file created with `mode` (less the umask);
/// `store::private::write_atomic` passes 0600.
pub fn write_atomic_mode(path: &std::path::Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
    let tmp = std::path::PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The text of the last `n` lines of a file (plus possibly a few more),
/// read backwards in 64 KiB blocks so a long file is never read whole: the
/// cost depends on `n`, not on the file's size.
pub fn read_last_lines(path: &std::path::Path, n: usize) -> std::io::Result<String> {
    read_last_lines_before(path, n, u64::MAX)
}

/// [`read_last_lines`] of the file's first `end` bytes (what it held
/// before a writer appended more).
pub fn read_last_lines_before(
    path: &std::path::Path,
    n: usize,
    end: u64,
) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    const BLOCK: u64 = 64 * 1024;
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len().min(end);
    let mut start = len;
    let mut buf: Vec<u8> = Vec::new();
    let mut newlines = 0;
    while start > 0 {
        let from = start.saturating_sub(BLOCK);
        let mut chunk = vec![0; (start - from) as usize];
        f.seek(SeekFrom::Start(from))?;
        f.read_exact(&mut chunk)?;
        newlines += chunk.iter().filter(|b| **b == b'\n').count();
        chunk.extend_from_slice(&buf);
        buf = chunk;
        start = from;
        // n lines need n + 1 newlines before them (the last line ends in one).
        if newlines > n {
            break;
        }
    }
    if start > 0 {
        // Drop the partial first line.
        if let Some(i) = buf.iter().position(|b| *b == b'\n') {
            buf.drain(..=i);
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Above this many bytes, tree work on one value (building, walking or
/// serialising a tool result) leaves the async worker ([`heavy`]).
pub const HEAVY_BYTES: usize = 1 << 20;

/// Run `f`, CPU work on about `bytes` of data: off the async worker when it
/// is [`HEAVY_BYTES`] or more (`block_in_place`: the worker's other tasks,
/// other clients' frames, move to another thread meanwhile), inline when
/// small or outside a multi-thread runtime.
pub fn heavy<T>(bytes: usize, f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if bytes >= HEAVY_BYTES && multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// About how many bytes `v` holds: its strings' lengths plus one per node.
/// A walk over the nodes, not the bytes (a result that is one long text
/// costs one step).
pub fn json_bytes(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::String(s) => s.len() + 1,
        Value::Array(a) => a.iter().map(json_bytes).sum::<usize>() + 1,
        Value::Object(m) => {
            m.iter()
                .map(|(k, v)| k.len() + json_bytes(v))
                .sum::<usize>()
                + 1
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_000_000_123);
        assert_eq!(rfc3339(t), "2026-11-18T11:06:40.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(&rfc3339(leap)[..10], "2000-02-29");
        let late = UNIX_EPOCH + Duration::from_millis(253_402_300_799_999); // the last ms of 9999
        assert_eq!(rfc3339(late), "9999-12-31T23:59:59.999Z");
        let before = UNIX_EPOCH - Duration::from_millis(1);
        assert_eq!(rfc3339(before), "1969-12-31T23:59:59.999Z");
        let far = UNIX_EPOCH + Duration::from_millis(u64::MAX);
        assert!(rfc3339(far).starts_with('+'), "clamped, not a panic");
        // Sub-millisecond digits are cut, not rounded: stamps never run ahead.
        let cut = UNIX_EPOCH + Duration::from_nanos(999_999);
        assert_eq!(rfc3339(cut), "1970-01-01T00:00:00.000Z");
    }
}
