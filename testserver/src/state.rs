//! What the testserver keeps outside a single call: the call log tests read
//! to prove which calls ran, and the `flaky`/`counter` counts.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::JsonObject;
use serde_json::json;

/// Append-only JSON-lines log of received `tools/call`s.
pub struct CallLog {
    path: PathBuf,
    // One writer at a time, so concurrent calls never interleave a line.
    file: Mutex<File>,
}

impl CallLog {
    pub fn open(path: &Path) -> Result<Self, String> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open --log file {}: {e}", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Appends one line and fsyncs it, so it survives a SIGKILL right after.
    pub fn record(&self, server: &str, tool: &str, arguments: &JsonObject) -> Result<(), String> {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let line = json!({
            "tool": tool,
            "arguments": arguments,
            "pid": std::process::id(),
            "ts": ts,
            "server": server,
        });
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        let mut file = self
            .file
            .lock()
            .map_err(|_| format!("call log {} lock poisoned", self.path.display()))?;
        // One write_all on an O_APPEND file: other processes sharing the log
        // (a restarted server) append whole lines too.
        file.write_all(&bytes)
            .and_then(|()| file.sync_data())
            .map_err(|e| format!("cannot write call log {}: {e}", self.path.display()))
    }
}

/// Named counters, on disk when a state dir is given (so they survive a
/// restart), otherwise in memory.
pub struct Counters {
    dir: Option<PathBuf>,
    // Memory store, and the lock that serialises read-modify-write on disk.
    memory: Mutex<HashMap<String, u64>>,
}

impl Counters {
    pub fn new(dir: Option<PathBuf>) -> Result<Self, String> {
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create --state-dir {}: {e}", dir.display()))?;
        }
        Ok(Self {
            dir,
            memory: Mutex::new(HashMap::new()),
        })
    }

    /// Adds one to `kind`/`key` and returns the new count (1 on first use).
    pub fn bump(&self, kind: &str, key: &str) -> Result<u64, String> {
        let mut memory = self
            .memory
            .lock()
            .map_err(|_| "counter lock poisoned".to_owned())?;
        let Some(dir) = &self.dir else {
            let count = memory.entry(format!("{kind}/{key}")).or_insert(0);
            *count += 1;
            return Ok(*count);
        };
        let path = dir.join(file_name(kind, key));
        let current = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<u64>()
                .map_err(|e| format!("counter file {} is not a number: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(format!("cannot read counter {}: {e}", path.display())),
        };
        let next = current + 1;
        write_durably(&path, next.to_string().as_bytes())
            .map_err(|e| format!("cannot write counter {}: {e}", path.display()))?;
        Ok(next)
    }
}

/// Hex-encodes the key so any string is a safe, distinct file name.
fn file_name(kind: &str, key: &str) -> String {
    let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{kind}-{hex}.count")
}

/// Write-temp, fsync, rename: a crash leaves the old or the new count, never
/// a torn one.
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("toolhub-testserver-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn disk_counters_survive_a_new_instance_and_keep_keys_apart() {
        let dir = scratch_dir("counters");
        let a = Counters::new(Some(dir.clone())).unwrap();
        assert_eq!(a.bump("flaky", "k/1").unwrap(), 1);
        assert_eq!(a.bump("flaky", "k/1").unwrap(), 2);
        assert_eq!(a.bump("counter", "k/1").unwrap(), 1);
        drop(a);
        let b = Counters::new(Some(dir.clone())).unwrap();
        assert_eq!(b.bump("flaky", "k/1").unwrap(), 3);
        assert_eq!(b.bump("flaky", "k/2").unwrap(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn memory_counters_count_per_kind_and_key() {
        let c = Counters::new(None).unwrap();
        assert_eq!(c.bump("flaky", "a").unwrap(), 1);
        assert_eq!(c.bump("flaky", "a").unwrap(), 2);
        assert_eq!(c.bump("counter", "a").unwrap(), 1);
    }

    #[test]
    fn call_log_appends_one_json_line_per_call() {
        let dir = scratch_dir("log");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("calls.jsonl");
        let log = CallLog::open(&path).unwrap();
        let args = json!({"message": "hi"}).as_object().cloned().unwrap();
        log.record("s1", "echo", &args).unwrap();
        log.record("s1", "hang", &JsonObject::new()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["tool"], "echo");
        assert_eq!(lines[0]["arguments"]["message"], "hi");
        assert_eq!(lines[0]["pid"], std::process::id());
        assert!(lines[0]["ts"].as_u64().unwrap() > 0);
        assert_eq!(lines[1]["tool"], "hang");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
