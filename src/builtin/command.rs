//! `run_command`: a shell command line run in the workspace folder.
//!
//! This tool is a shell by design (`/bin/sh -c`); what it may run is decided
//! by the safety rules before it gets here. What this module guarantees:
//! - the command runs in its own process group with stdin empty, in the
//!   workspace or a folder inside it, from a cleared environment: of the
//!   hub's variables only the allowlist passes ([`EnvPolicy`]: `PATH`,
//!   `HOME`, `LANG`, `LC_*`, … and `builtin.commandEnv`), then the run's
//!   and the call's own;
//! - stdout and stderr are read concurrently, each kept up to
//!   `max_output_bytes` and drained (not stored) beyond that;
//! - on timeout or cancel the whole group gets SIGTERM, then SIGKILL after
//!   [`child::KILL_GRACE`]; background jobs left behind by a command that
//!   exited are stopped the same way (use `setsid` to detach on purpose);
//! - if the call's future is dropped, the group is killed.
//!
//! Timeouts: the `timeout` parameter (ms) replaces the configured default and
//! is capped at ten times it, so a caller can ask for a longer run but not an
//! unbounded one.
//!
//! A command that exits, even with a non-zero status, is `Ok` with its
//! `exitCode`; callers that want non-zero to count as a failure use
//! [`exit_failed`] / [`exit_error`].

mod child;
mod env;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::builtin::fs::{params, resolve_under};
use crate::builtin::sandbox::{self, RunFolder, Sandbox};
use crate::errors::{ErrorType, HubError};
use child::{GroupGuard, Running, Stop, Until};
pub use env::EnvPolicy;

/// How much longer than the configured timeout a call may ask for.
const TIMEOUT_CAP_FACTOR: u32 = 10;
/// Characters of stderr quoted in [`exit_error`].
const EXIT_TAIL_CHARS: usize = 1000;

#[derive(Clone)]
pub struct CommandRunner {
    workspace_root: PathBuf,
    timeout: Duration,
    max_output_bytes: usize,
    /// `None`: unconfined (unit tests); the hub always has one.
    sandbox: Option<Arc<Sandbox>>,
    /// The calling connection's current run folder, writable under
    /// `workspace-write`.
    runs: Option<Arc<dyn RunFolder>>,
    /// Which of the hub's variables a command inherits.
    env: EnvPolicy,
}

/// What the hub adds to a command's own params (see [`CommandRunner::run_placed`]).
#[derive(Debug, Default)]
pub struct Placement {
    /// The working folder, already resolved and confined (overrides `cwd`).
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
}

struct Request {
    command: String,
    cwd: PathBuf,
    timeout: Duration,
    env: BTreeMap<String, String>,
}

impl CommandRunner {
    /// `workspace_root` should be the canonical root (`Workspace::root`); it is
    /// canonicalised again here in case it is not.
    pub fn new(workspace_root: PathBuf, timeout: Duration, max_output_bytes: usize) -> Self {
        let workspace_root = std::fs::canonicalize(&workspace_root).unwrap_or(workspace_root);
        CommandRunner {
            workspace_root,
            timeout,
            max_output_bytes,
            sandbox: None,
            runs: None,
            env: EnvPolicy::default(),
        }
    }

    /// Pass the hub's variables named in `extra` (`builtin.commandEnv`)
    /// besides the default ones; every other variable is cleared.
    pub fn with_env(mut self, extra: &[String]) -> Self {
        self.env = EnvPolicy::with_extra(extra);
        self
    }

    /// Confine every command with `sandbox`; `runs` names the calling
    /// connection's current run folder, which stays writable.
    pub fn with_sandbox(mut self, sandbox: Arc<Sandbox>, runs: Option<Arc<dyn RunFolder>>) -> Self {
        self.sandbox = Some(sandbox);
        self.runs = runs;
        self
    }

    /// The longest timeout a call may ask for.
    pub fn max_timeout(&self) -> Duration {
        self.timeout.saturating_mul(TIMEOUT_CAP_FACTOR)
    }

    /// `{command, cwd?, timeout?, env?}` → `{"exitCode", "signal"?, "stdout",
    /// "stderr", "truncated", "durationMs"}`, or TIMEOUT / CANCELLED with the
    /// end of the output in the message.
    pub async fn run(&self, params: &Value, cancel: CancellationToken) -> Result<Value, HubError> {
        self.run_for(params, cancel, "").await
    }

    /// [`run`](Self::run) for a main-token connection's `session`, whose
    /// current run folder the sandbox leaves writable. A command the sandbox refused a
    /// write answers a `PERMISSION` failure in the ToolResult shape
    /// ([`Sandbox::explain`]).
    pub async fn run_for(
        &self,
        params: &Value,
        cancel: CancellationToken,
        session: &str,
    ) -> Result<Value, HubError> {
        self.run_placed(params, Placement::default(), cancel, (session, None))
            .await
    }

    /// [`run_for`](Self::run_for) with what the hub adds: a folder it
    /// resolved (a `run:` cwd) and variables (the current run's folders).
    pub async fn run_placed(
        &self,
        params: &Value,
        placement: Placement,
        cancel: CancellationToken,
        (session, client): (&str, Option<&str>),
    ) -> Result<Value, HubError> {
        let req = self.parse(params, placement)?;
        if let Some(e) = self.sandbox.as_ref().and_then(|s| s.refusal()) {
            return Err(e);
        }
        if cancel.is_cancelled() {
            return Err(HubError::new(
                ErrorType::Cancelled,
                "command was cancelled before it started",
            ));
        }
        let writable = match &self.sandbox {
            Some(s) => s.writable(self.runs.as_ref().and_then(|r| r.folder(session, client))),
            None => Vec::new(),
        };
        // Building the ruleset lists a few folders: off the async workers.
        let prepared = match &self.sandbox {
            Some(s) => {
                let (s, w) = (s.clone(), writable.clone());
                tokio::task::spawn_blocking(move || s.prepare(&w))
                    .await
                    .map_err(|e| {
                        HubError::new(
                            ErrorType::Unknown,
                            format!("run_command's sandbox could not be built: {e}"),
                        )
                    })??
            }
            None => None,
        };
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(&req.command).current_dir(&req.cwd);
        // A cleared environment: the hub's own variables reach the command
        // only by name (the allowlist), never its secrets.
        cmd.env_clear()
            .envs(self.env.inherited(std::env::vars_os()));
        if let (Some(s), Some(_)) = (&self.sandbox, &prepared) {
            // Before the caller's env, so a TMPDIR the call passes wins.
            cmd.env("TMPDIR", s.tmp());
        }
        cmd.envs(&req.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // The command dies with the hub, even when the hub is SIGKILLed.
        crate::process::set_parent_death_signal(&mut cmd);
        if let Some(p) = prepared {
            sandbox::confine(&mut cmd, p);
        }
        let started = Instant::now();
        // Forked on the process-long spawner thread, so the parent-death
        // signal follows the hub, not the tokio thread that happens to run.
        // The group guard is made on that thread too: a call dropped while
        // the spawn is in flight still kills the whole group.
        let (child, mut guard) = crate::process::on_spawner(move || {
            let child = cmd.spawn()?;
            let pgid = child
                .id()
                .and_then(|id| libc::pid_t::try_from(id).ok())
                .filter(|&id| id > 1);
            Ok::<_, std::io::Error>((child, GroupGuard { pgid }))
        })
        .await
        .and_then(|r| r)
        .map_err(|e| {
            HubError::classified(format!("could not start /bin/sh for the command: {e}"))
        })?;
        let pgid = guard
            .pgid
            .ok_or_else(|| HubError::new(ErrorType::Unknown, "the command's shell has no pid"))?;
        let mut running = Running::new(child, pgid, self.max_output_bytes);

        let stop = running
            .pump(started + req.timeout, Some(&cancel), Until::Exit)
            .await;
        running.wind_down(stop != Stop::Done).await;
        guard.pgid = None;
        let duration_ms = started.elapsed().as_millis() as u64;

        match stop {
            Stop::Done => {
                let v = result_value(&running, duration_ms);
                let refused = self.sandbox.as_ref().and_then(|s| {
                    if exit_failed(&v) {
                        s.explain(&v, &req.cwd, &writable)
                    } else {
                        s.explain_reads(&v, &req.cwd, &writable)
                    }
                });
                Ok(refused.unwrap_or(v))
            }
            Stop::Deadline => Err(HubError::new(
                ErrorType::Timeout,
                format!(
                    "command timed out after {} ms and was killed{}",
                    req.timeout.as_millis(),
                    output_tails(&running)
                ),
            )
            .with_suggestion(format!(
                "pass a larger \"timeout\" (at most {} ms) or make the command finish sooner",
                self.max_timeout().as_millis()
            ))),
            Stop::Cancelled => Err(HubError::new(
                ErrorType::Cancelled,
                format!("command was cancelled and killed{}", output_tails(&running)),
            )),
        }
    }

    fn parse(&self, params: &Value, placement: Placement) -> Result<Request, HubError> {
        let map = params::object(params)?;
        let command = params::req_str(map, "command")?;
        if command.trim().is_empty() {
            return Err(HubError::new(
                ErrorType::InvalidParams,
                "parameter 'command' is empty, expected a shell command line",
            )
            .with_suggestion("pass the command to run, e.g. \"ls -la\""));
        }
        if command.contains('\0') {
            return Err(HubError::new(
                ErrorType::InvalidParams,
                "parameter 'command' contains a NUL byte",
            )
            .with_suggestion("remove the NUL character from the command"));
        }
        let cwd = match (placement.cwd, params::opt_str(map, "cwd")?) {
            (Some(placed), _) => placed,
            (None, None) => self.workspace_root.clone(),
            (None, Some(user)) => {
                let cwd = resolve_under(&self.workspace_root, user, "cwd")?;
                if !cwd.is_dir() {
                    return Err(HubError::new(
                        ErrorType::NotFound,
                        format!(
                            "cwd '{user}' is not a folder in the workspace {}",
                            self.workspace_root.display()
                        ),
                    )
                    .with_suggestion("create the folder first, or leave cwd out"));
                }
                cwd
            }
        };
        let timeout = params::opt_positive_u64(map, "timeout")?
            .map(|ms| Duration::from_millis(ms).min(self.max_timeout()))
            .unwrap_or(self.timeout);
        // The hub's variables first, so the caller's own may override them.
        let mut env: BTreeMap<String, String> = placement.env.into_iter().collect();
        match map.get("env") {
            None | Some(Value::Null) => {}
            Some(Value::Object(vars)) => {
                for (k, v) in vars {
                    let (k, v) = env_var(k, v)?;
                    env.insert(k, v);
                }
            }
            Some(other) => return Err(params::wrong_type("env", "an object of strings", other)),
        }
        Ok(Request {
            command: command.to_string(),
            cwd,
            timeout,
            env,
        })
    }
}

fn env_var(key: &str, value: &Value) -> Result<(String, String), HubError> {
    if key.is_empty() || key.contains('=') || key.contains('\0') {
        return Err(HubError::new(
            ErrorType::InvalidParams,
            format!("env name '{key}' is not valid: it must be non-empty without '=' or NUL"),
        )
        .with_suggestion("use names like \"MY_VAR\""));
    }
    match value {
        Value::String(s) if !s.contains('\0') => Ok((key.to_string(), s.clone())),
        Value::String(_) => Err(HubError::new(
            ErrorType::InvalidParams,
            format!("env value of '{key}' contains a NUL byte"),
        )),
        other => Err(params::wrong_type(&format!("env.{key}"), "a string", other)),
    }
}

fn result_value(running: &Running, duration_ms: u64) -> Value {
    use std::os::unix::process::ExitStatusExt;
    let (code, signal) = match &running.status {
        Some(Ok(status)) => (status.code(), status.signal()),
        _ => (None, None),
    };
    let mut v = json!({
        "exitCode": code,
        "stdout": running.out.text(),
        "stderr": running.err.text(),
        "truncated": running.out.truncated() || running.err.truncated(),
        "durationMs": duration_ms,
    });
    if let (Some(sig), Some(obj)) = (signal, v.as_object_mut()) {
        obj.insert("signal".to_string(), json!(sig));
    }
    v
}

fn output_tails(running: &Running) -> String {
    let mut s = String::new();
    for (name, cap) in [("stdout", &running.out), ("stderr", &running.err)] {
        let tail = cap.tail_text();
        if !tail.is_empty() {
            s.push_str(&format!("\n--- end of {name} ---\n{tail}"));
        }
    }
    s
}

/// True when a `run_command` result is a failure: a non-zero exit status or
/// death by a signal (`exitCode` null).
pub fn exit_failed(result: &Value) -> bool {
    result.get("exitCode").and_then(Value::as_i64) != Some(0)
}

/// The error a failed `run_command` result stands for, classified from its
/// stderr (stdout when stderr is empty): "command exited with status N: …".
/// `None` when the command succeeded.
pub fn exit_error(result: &Value) -> Option<HubError> {
    if !exit_failed(result) {
        return None;
    }
    let text = |k: &str| result.get(k).and_then(Value::as_str).unwrap_or("").trim();
    let output = if text("stderr").is_empty() {
        text("stdout")
    } else {
        text("stderr")
    };
    let tail = last_chars(output, EXIT_TAIL_CHARS);
    let how = match (
        result.get("exitCode").and_then(Value::as_i64),
        result.get("signal"),
    ) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "ended without an exit status".to_string(),
    };
    Some(if tail.is_empty() {
        HubError::classified(format!("command {how} (no output)"))
    } else {
        HubError::classified(format!("command {how}: {tail}"))
    })
}

fn last_chars(s: &str, n: usize) -> &str {
    match s.char_indices().rev().nth(n.saturating_sub(1)) {
        Some((i, _)) if n > 0 => &s[i..],
        _ => s,
    }
}

#[cfg(test)]
mod tests;
