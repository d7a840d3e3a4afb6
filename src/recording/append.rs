//! One captured call written into its recording: what the recorder takes
//! from a finished call on the runtime (owned copies, [`Pending`]), and the
//! blocking part it runs on the blocking pool ([`Pending::append`]): the
//! recording's lock ([`OpenRecording`]), the step's number, large results and
//! images to files, redaction ([`scrub`], shared with `update_recording`),
//! the line appended and `fdatasync`ed. Two calls of one
//! connection finishing together take the lock in turn; each gets the next
//! number, and the file holds them in that order.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use crate::config::SecurityConfig;
use crate::hub::observe::Capture;
use crate::store::recordings::format::{Line, Step};

/// Results bigger than this go to a file beside the JSONL.
const INLINE_LIMIT: usize = 64 * 1024;

/// A recording being written: its file and counters, behind its lock.
pub struct OpenRecording {
    pub id: String,
    pub dir: PathBuf,
    pub(super) file: File,
    pub(super) started: std::time::Instant,
    pub(super) seq: usize,
    pub(super) ok: usize,
    pub(super) bytes: u64,
    pub(super) max_bytes: u64,
    /// Set when the file can no longer be written (size limit, disk error).
    pub stopped: Option<String>,
    /// Tasks whose variables are already recorded (on their first step).
    pub(super) batches: std::collections::HashSet<String>,
}

/// A finished call, owned, ready to be numbered and written (a clone per
/// recording that takes it).
#[derive(Clone)]
pub struct Pending {
    /// The step without its number, result, images and screenshot.
    step: Step,
    result: Value,
    /// The image items of the call's raw result.
    images: Vec<Value>,
    shot: Option<Vec<u8>>,
    /// A batch step's task and its replay defaults (kept with the task's
    /// first recorded step).
    task_vars: Option<(String, Option<Map<String, Value>>)>,
    started_at: std::time::SystemTime,
}

/// What [`Pending::append`] did.
pub enum Appended {
    Written,
    /// The recording was stopped meanwhile: nothing written.
    Stopped,
    /// The line would pass `recording.maxBytes`: nothing written.
    Full(String),
    /// The write failed (the recording's id and the error).
    Failed(String, std::io::Error),
}

impl Pending {
    pub fn new(c: Capture<'_>, shot: Option<Vec<u8>>, security: &SecurityConfig) -> Pending {
        let out = c.outcome;
        let images = out
            .raw
            .as_ref()
            .and_then(|r| r.get("content"))
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|i| match i.get("type").and_then(Value::as_str) {
                        Some("image") => i.clone(),
                        _ => Value::Null,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let task_vars = match (&c.source.task_id, c.variables) {
            (Some(task), Some((vars, secret))) => {
                Some((task.clone(), defaults(vars, secret, security)))
            }
            _ => None,
        };
        Pending {
            step: Step {
                seq: 0,
                source: c.source,
                tool: out.tool.clone(),
                qualified_name: out.qualified_name.clone(),
                server: out.server.clone(),
                params: c.params.clone(),
                params_template: c.params_template.cloned(),
                save_as: c.save_as.map(String::from),
                when: c.when.cloned(),
                expect: c.expect.cloned(),
                variables: None,
                timestamp: crate::util::rfc3339(c.started_at),
                t_offset_ms: 0,
                duration_ms: out.duration_ms,
                success: out.success,
                attempts: out.attempts,
                result: Value::Null,
                error: out.error.clone(),
                images: Vec::new(),
                screenshot: None,
            },
            result: out.result.clone(),
            images,
            shot,
            task_vars,
            started_at: c.started_at,
        }
    }

    /// Number the step and append it (blocking file IO).
    pub fn append(self, active: &Mutex<OpenRecording>, security: &SecurityConfig) -> Appended {
        let Ok(mut a) = active.lock() else {
            return Appended::Stopped;
        };
        if a.stopped.is_some() {
            return Appended::Stopped;
        }
        let Pending {
            mut step,
            result,
            images,
            shot,
            task_vars,
            started_at,
        } = self;
        let seq = a.seq;
        step.seq = seq;
        step.t_offset_ms = started_at
            .duration_since(std::time::SystemTime::now() - a.started.elapsed())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let (result, images) = externalize(&a.dir, seq, result, &images);
        step.result = result;
        step.images = images;
        if let Some((task, vars)) = task_vars {
            if a.batches.insert(task) {
                step.variables = vars;
            }
        }
        step.screenshot = shot.and_then(|png| {
            let name = format!("step-{seq}.png");
            fs::write(a.dir.join(&name), png).ok().map(|()| name)
        });
        let success = step.success;
        scrub(&mut step, security);
        let line = to_line(&Line::Step(step));
        if a.bytes + line.len() as u64 > a.max_bytes {
            return Appended::Full(a.id.clone());
        }
        match crate::util::append_whole(&mut a.file, line.as_bytes())
            .and_then(|_| a.file.sync_data())
        {
            Ok(()) => {
                a.bytes += line.len() as u64;
                a.seq += 1;
                if success {
                    a.ok += 1;
                }
                Appended::Written
            }
            Err(e) => Appended::Failed(a.id.clone(), e),
        }
    }
}

/// The variables a replay may use as defaults: those whose names are not
/// secret by `security.redactKeys` nor listed in `options.secrets` (their
/// values still masked if they hold a known secret); `None` when none is left.
fn defaults(
    vars: &Map<String, Value>,
    secret: &[String],
    security: &SecurityConfig,
) -> Option<Map<String, Value>> {
    let kept: Map<String, Value> = vars
        .iter()
        .filter(|(k, _)| !security.is_secret_key(k) && !secret.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    match crate::history::redact(&Value::Object(kept), security) {
        Value::Object(m) if !m.is_empty() => Some(m),
        _ => None,
    }
}

/// Large results and MCP image items go to files beside the JSONL.
/// `images` holds the raw result's content items (`Null` for those that
/// are not images), so a file is named after the item's position.
fn externalize(dir: &Path, seq: usize, result: Value, images: &[Value]) -> (Value, Vec<String>) {
    let mut names = Vec::new();
    for (k, item) in images.iter().enumerate() {
        let Some(data) = item.get("data").and_then(Value::as_str) else {
            continue;
        };
        let ext = match item.get("mimeType").and_then(Value::as_str) {
            Some("image/jpeg") => "jpg",
            Some("image/gif") => "gif",
            Some("image/webp") => "webp",
            _ => "png",
        };
        if let Ok(bytes) = crate::b64::decode(data) {
            let name = format!("step-{seq}-img-{k}.{ext}");
            if fs::write(dir.join(&name), bytes).is_ok() {
                names.push(name);
            }
        }
    }
    let text = result.to_string();
    if text.len() > INLINE_LIMIT {
        let name = format!("step-{seq}-result.json");
        if fs::write(dir.join(&name), text.as_bytes()).is_ok() {
            return (
                json!({"$file": name, "bytes": text.len(), "mediaType": "application/json"}),
                names,
            );
        }
    }
    (result, names)
}

/// Every step that reaches a recording file passes here, captured or
/// edited (`update_recording`), and params, templates, results, `when`,
/// `expect` and the error all get the same rules: values of secret keys
/// (`security.redactKeys`) redacted (a tool that returns {"token": …} must
/// not leave it in a recording; in an error's text, `"token": …` and
/// `token=…`), and every known secret value masked.
pub(crate) fn scrub(step: &mut Step, security: &crate::config::SecurityConfig) {
    use crate::history::{redact, redact_text};
    step.params = redact(&step.params, security);
    if let Some(t) = &step.params_template {
        step.params_template = Some(redact(t, security));
    }
    step.result = redact(&step.result, security);
    for v in [&mut step.when, &mut step.expect].into_iter().flatten() {
        *v = redact(v, security);
    }
    if let Some(vars) = step.variables.take() {
        if let Value::Object(m) = redact(&Value::Object(vars), security) {
            step.variables = Some(m);
        }
    }
    if let Some(e) = &mut step.error {
        e.message = redact_text(&e.message, security);
        e.suggestion = redact_text(&e.suggestion, security);
    }
}

pub(super) fn to_line(l: &Line) -> String {
    let mut s = serde_json::to_string(l).unwrap_or_default();
    s.push('\n');
    s
}
