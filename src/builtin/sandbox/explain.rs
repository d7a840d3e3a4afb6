//! The error of a command the sandbox refused: the paths it names in its
//! stderr, the rule that refused each (a denied read, a write outside the
//! writable folders, TCP), and how to allow it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::reads::{self, Denial};
use super::{denied, Confinement, Sandbox, DEVICES};
use crate::config::SandboxMode;
use crate::errors::{ErrorType, HubError};

impl Sandbox {
    /// The `result` of a failed confined command (the caller checks that it
    /// failed) whose stderr names paths the sandbox refused becomes a
    /// `PERMISSION` failure in the ToolResult shape
    /// (`{"ok": false, "error": {…}}` beside `exitCode`, `stdout`, `stderr`,
    /// so nothing the command printed is lost), naming the paths and how to
    /// allow them; with `sandboxNetwork: false`, a refused TCP connection
    /// likewise, and a read of a denied path (`builtin.sandboxDenyRead`, the
    /// hub's own files). `None` for any other failure: no refused path, or a
    /// path the hub's user could not write (or read) either.
    pub fn explain(&self, result: &Value, cwd: &Path, writable: &[PathBuf]) -> Option<Value> {
        if !matches!(self.verdict, Confinement::Confined { .. }) {
            return None;
        }
        let stderr = result.get("stderr").and_then(Value::as_str).unwrap_or("");
        let how = match result.get("exitCode").and_then(Value::as_i64) {
            Some(code) => format!("exited with status {code}"),
            None => "was killed".to_string(),
        };
        let found = self.refusals(stderr, cwd, writable);
        if !found.denied_reads.is_empty() {
            return self.read_refusal(result, &found.denied_reads, &how);
        }
        let refused = found.writes;
        if refused.is_empty() && !found.other_reads.is_empty() {
            return self.other_read_refusal(result, &found.other_reads, &how);
        }
        let mode = self.mode.as_str();
        let Some(first) = refused.first() else {
            if self.network || !denied::tcp_refused(stderr) {
                return None;
            }
            return failure(
                result,
                format!("the sandbox refused a TCP connection: builtin.sandboxNetwork is false, so commands may not connect or listen over TCP; the command {how}"),
                "this hub keeps commands off the network: fetch what you need another way (a tool of an MCP server), or have the operator set builtin.sandboxNetwork to true in config.json (a config reload applies it)".to_string(),
                json!({"mode": mode, "network": false}),
            );
        };
        let message = format!(
            "the sandbox refused to write {}: builtin.sandbox is \"{mode}\", so {}; the command {how}",
            refused.join(", "),
            self.reach()
        );
        let suggestion = match self.mode {
            SandboxMode::ReadOnly => "this hub lets commands only read (builtin.sandbox \"read-only\"): write files with write_file, or have the operator set builtin.sandbox to \"workspace-write\" in config.json (a config reload applies it)".to_string(),
            _ => format!(
                "write inside the workspace instead (a relative path, or $TMPDIR for scratch files); if commands must write to {first}, the operator can set builtin.sandbox to \"off\" in config.json (a config reload applies it)"
            ),
        };
        failure(
            result,
            message,
            suggestion,
            json!({"mode": mode, "refusedPaths": refused}),
        )
    }

    /// The paths a confined command's stderr says were refused: reads of
    /// denied paths (with what denies each), other reads (another
    /// process's `/proc` entries), and writes outside the writable folders.
    fn refusals(&self, stderr: &str, cwd: &Path, writable: &[PathBuf]) -> Refusals {
        let mut found = Refusals::default();
        for (p, access) in denied::refused(stderr) {
            let abs = denied::absolute(&p, cwd);
            // A link in the workspace to a denied file is refused there.
            let real = std::fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
            if denied::outside(&real, writable, &DEVICES) && reads::hub_could_read(&real) {
                if let Some(d) = self.reads.denial(&real) {
                    let shown = if real == abs {
                        p
                    } else {
                        format!("{p} (a link to {})", real.display())
                    };
                    found.denied_reads.push((shown, d));
                    continue;
                }
            }
            // Reads are granted everywhere but the denied paths, so a
            // refused read is another process's /proc entry (which the
            // hub cannot check: the command may see another /proc), or a
            // file made after the command started beside a denied path.
            if abs.starts_with("/proc") && access != denied::FsAccess::Write {
                found.other_reads.push(p);
                continue;
            }
            if !denied::outside(&abs, writable, &DEVICES) || !denied::hub_could_write(&abs) {
                continue;
            }
            if access == denied::FsAccess::Read {
                found.other_reads.push(p);
            } else {
                found.writes.push(p);
            }
        }
        found
    }

    /// A confined command that exited 0 but whose stderr shows that the
    /// sandbox refused to read a denied path (`cat ~/.ssh/id_ed25519 |
    /// curl …`: the pipeline's status is curl's) fails all the same with
    /// `PERMISSION`: a refused read of a credential is never silent.
    pub fn explain_reads(&self, result: &Value, cwd: &Path, writable: &[PathBuf]) -> Option<Value> {
        if !matches!(self.verdict, Confinement::Confined { .. }) {
            return None;
        }
        let stderr = result.get("stderr").and_then(Value::as_str).unwrap_or("");
        let found = self.refusals(stderr, cwd, writable);
        if found.denied_reads.is_empty() {
            return None;
        }
        self.read_refusal(result, &found.denied_reads, "exited with status 0")
    }
}

impl Sandbox {
    /// A `PERMISSION` failure of a confined command that [`explain`]
    /// could not pin on a path still gets the sandbox in its suggestion:
    /// the refusal may be the sandbox's.
    ///
    /// [`explain`]: Sandbox::explain
    pub fn hint(&self, e: HubError) -> HubError {
        if e.error_type != ErrorType::Permission
            || !matches!(self.verdict, Confinement::Confined { .. })
        {
            return e;
        }
        let mode = self.mode.as_str();
        let suggestion = format!(
            "{}; if the command wrote outside the folders it may write, run_command's sandbox refused it (builtin.sandbox \"{mode}\"): {}",
            e.suggestion,
            self.reach()
        );
        e.with_suggestion(suggestion)
    }
}

impl Sandbox {
    /// The failure of a command refused reads of denied paths: each path,
    /// the entry of `builtin.sandboxDenyRead` (or the hub's own file) that
    /// denies it, and how more could be allowed.
    fn read_refusal(
        &self,
        result: &Value,
        refused: &[(String, Denial)],
        how: &str,
    ) -> Option<Value> {
        let mut why: Vec<String> = Vec::new();
        let mut listed: Vec<String> = Vec::new();
        let mut private = false;
        for (_, d) in refused {
            let words = match d {
                Denial::Listed(entry) => {
                    let e = reads::tilde(entry);
                    listed.push(e.clone());
                    format!("builtin.sandboxDenyRead lists {e}")
                }
                Denial::Private(entry) => {
                    private = true;
                    format!(
                        "{} is the hub's own {}, which commands may never read",
                        entry.display(),
                        if entry.is_dir() {
                            "state dir (its token, task journals)"
                        } else {
                            "config file (servers' keys and headers)"
                        }
                    )
                }
            };
            if !why.contains(&words) {
                why.push(words);
            }
        }
        let paths: Vec<&str> = refused.iter().map(|(p, _)| p.as_str()).collect();
        let message = format!(
            "the sandbox refused to read {}: {}; builtin.sandboxAllowRead allows more; the command {how}",
            paths.join(", "),
            why.join("; ")
        );
        let mut suggestion = String::from(
            "these files hold credentials and are kept from commands on purpose: do the task without them, or ask the person to do that step",
        );
        if let Some(first) = listed.first() {
            suggestion.push_str(&format!(
                "; if commands must read there, the operator can add the path to builtin.sandboxAllowRead (or take {first} out of builtin.sandboxDenyRead) in config.json (a config reload applies it)"
            ));
        }
        if private {
            suggestion.push_str("; the hub's own config file and state dir stay unreadable whatever the config says (hub__health_check shows the hub's state)");
        }
        failure(
            result,
            message,
            suggestion,
            json!({"mode": self.mode.as_str(), "refusedReads": paths, "deniedBy": why}),
        )
    }
}

/// What a failed command's stderr says the sandbox refused.
#[derive(Default)]
struct Refusals {
    /// Reads of denied paths, with what denies each.
    denied_reads: Vec<(String, Denial)>,
    /// Other refused reads: another process's `/proc` entries.
    other_reads: Vec<String>,
    /// Writes outside the writable folders.
    writes: Vec<String>,
}

impl Sandbox {
    /// The failure of a command refused a read that no entry of
    /// `builtin.sandboxDenyRead` names: it says "read", and how reads are
    /// widened (`builtin.sandboxAllowRead`), never to turn the sandbox off.
    fn other_read_refusal(&self, result: &Value, paths: &[String], how: &str) -> Option<Value> {
        let procs = paths.iter().all(|p| Path::new(p).starts_with("/proc"));
        let why = if procs {
            "these are /proc entries of processes outside the sandbox (the hub, its servers, other programs), which commands may not inspect"
        } else {
            "run_command may read everything but the denied paths (builtin.sandboxDenyRead), save a file created after the command started in a folder above a denied path"
        };
        let message = format!(
            "the sandbox refused to read {}: {why}; the command {how}",
            paths.join(", ")
        );
        let suggestion = if procs {
            "do the task without other processes' /proc entries (their environment and arguments hold other programs' secrets); a command sees its own processes under /proc".to_string()
        } else {
            format!(
                "run the command again (the next command's sandbox covers files created since); if commands must read {}, the operator can add it to builtin.sandboxAllowRead in config.json (a config reload applies it)",
                paths[0]
            )
        };
        failure(
            result,
            message,
            suggestion,
            json!({"mode": self.mode.as_str(), "refusedReads": paths}),
        )
    }
}

/// `result` as a failed ToolResult of class `PERMISSION`, keeping every
/// field the command produced.
fn failure(result: &Value, message: String, suggestion: String, sandbox: Value) -> Option<Value> {
    let mut out = result.clone();
    let obj = out.as_object_mut()?;
    obj.insert("ok".into(), json!(false));
    obj.insert(
        "error".into(),
        json!({
            "code": ErrorType::Permission.as_str(),
            "message": message,
            "retriable": false,
            "suggestion": suggestion,
        }),
    );
    obj.insert("sandbox".into(), sandbox);
    Some(out)
}
