//! The recordings under way, by connection. A connection holds at most one
//! recording per client context (`start_recording` `context`, a tab id)
//! and at most one without a context. A finished call goes to every
//! recording that takes it: the recording of its own context, and the
//! connection's context-less one, which takes every call, whatever other
//! recordings exist (so what a recording holds depends on its own filter
//! alone, never on which other recordings happen to run beside it).

use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use serde_json::{json, Value};

use super::append::{to_line, OpenRecording};
use crate::client_context::ClientContext;
use crate::errors::{ErrorType, HubError};
use crate::session::Outbox;
use crate::store::recordings::format::{End, Line};
use crate::store::recordings::index::RecordingIndex;

/// One recording under way on a connection.
#[derive(Clone)]
pub(super) struct RecordingSlot {
    /// The client's label (`tab-17`); `None` records every call.
    pub label: Option<String>,
    /// The full context a call must run in to be recorded here
    /// (`<session>/<label>`, as `Capture::source.context` names it).
    context: Option<String>,
    pub rec: Arc<Mutex<OpenRecording>>,
    /// The connection's client (not for a `hub__record_start`): where a
    /// second `recording_stopped` of one call goes (see `Recorder::capture`).
    pub out: Option<Outbox>,
}

impl RecordingSlot {
    pub fn new(
        session: &str,
        label: Option<String>,
        rec: OpenRecording,
        out: Option<Outbox>,
    ) -> RecordingSlot {
        let context = label
            .as_deref()
            .map(|l| ClientContext::session(session, Some(l)).to_string());
        RecordingSlot {
            label,
            context,
            rec: Arc::new(Mutex::new(rec)),
            out,
        }
    }

    /// Whether a call made in `call_context` is recorded here.
    pub fn takes(&self, call_context: Option<&str>) -> bool {
        match &self.context {
            None => true,
            Some(c) => call_context == Some(c.as_str()),
        }
    }
}

/// The recordings under way, by session.
pub(super) type ActiveMap = DashMap<String, Vec<RecordingSlot>>;

/// `session`'s recording for `label`, if it has one.
pub(super) fn find(map: &ActiveMap, session: &str, label: Option<&str>) -> Option<RecordingSlot> {
    map.get(session)?
        .iter()
        .find(|s| s.label.as_deref() == label)
        .cloned()
}

/// Every recording of `session`.
pub(super) fn all(map: &ActiveMap, session: &str) -> Vec<RecordingSlot> {
    map.get(session).map(|s| s.clone()).unwrap_or_default()
}

/// How an error names a recording: `context "tab-17"` or `no context`.
fn named(label: Option<&str>) -> String {
    match label {
        Some(l) => format!("context {l:?}"),
        None => "no context".into(),
    }
}

/// The `stop_recording` that would stop a recording of `label`.
pub(super) fn stop_msg(label: Option<&str>) -> String {
    match label {
        Some(l) => format!(r#"{{"type":"stop_recording","context":{}}}"#, json!(l)),
        None => r#"{"type":"stop_recording"}"#.to_string(),
    }
}

/// `start_recording` for `label` while it records already.
pub(super) fn already(label: Option<&str>, id: &str) -> HubError {
    let what = match label {
        Some(l) => format!("context {l:?} of this connection is already recording ({id})"),
        None => format!("this connection is already recording without a context ({id})"),
    };
    HubError::new(ErrorType::InvalidMessage, what).with_suggestion(format!(
        "send {} first, or record another context",
        stop_msg(label)
    ))
}

/// `stop_recording` for `label` while it does not record; names what does.
fn not_recording(label: Option<&str>, others: &[Option<String>]) -> HubError {
    let mut msg = match label {
        Some(l) => format!("context {l:?} of this connection is not recording"),
        None if others.is_empty() => "this connection is not recording".to_string(),
        None => "this connection has no recording without a context".to_string(),
    };
    let Some(first) = others.first() else {
        return HubError::new(ErrorType::InvalidMessage, msg)
            .with_suggestion("send start_recording first");
    };
    let list: Vec<String> = others.iter().map(|o| named(o.as_deref())).collect();
    msg.push_str(&format!("; recording now: {}", list.join(", ")));
    HubError::new(ErrorType::InvalidMessage, msg).with_suggestion(format!(
        "name the recording to stop, e.g. {}",
        stop_msg(first.as_deref())
    ))
}

/// Stop `session`'s recording of `label`: write the `end` line; `save:
/// false` deletes the recording (blocking file IO).
pub(super) fn stop_in(
    map: &ActiveMap,
    index: &RecordingIndex,
    storage: &Path,
    session: &str,
    label: Option<&str>,
    save: bool,
    reason: &str,
) -> Result<Value, HubError> {
    // Taken out of `active` only once its end and index entry are
    // written, so an index check never sees it half-stopped.
    let Some(slot) = find(map, session, label) else {
        let others: Vec<Option<String>> = all(map, session).into_iter().map(|s| s.label).collect();
        return Err(not_recording(label, &others));
    };
    let mut a = slot
        .rec
        .lock()
        .map_err(|_| HubError::new(ErrorType::Unknown, "recording state poisoned"))?;
    if a.stopped.is_some() {
        // Another stop (the connection closing) got there first.
        return Err(not_recording(label, &[]));
    }
    let meta = finish(&mut a, reason);
    if save {
        index.refresh(storage, &a.id);
    } else {
        let _ = fs::remove_dir_all(&a.dir);
        index.remove(storage, &a.id);
    }
    tracing::info!(session, recording = %a.id, context = label, steps = a.seq, reason, "recording stopped");
    let reply = json!({
        "recordingId": a.id,
        "context": label,
        "stepCount": a.seq,
        "path": if save { Value::String(a.dir.display().to_string()) } else { Value::Null },
        "saved": save,
        "reason": a.stopped.clone().unwrap_or_else(|| reason.to_string()),
        "metadata": meta,
    });
    // The map is never locked while an `OpenRecording` is (see `verify_index`).
    drop(a);
    if let Some(mut slots) = map.get_mut(session) {
        slots.retain(|s| !Arc::ptr_eq(&s.rec, &slot.rec));
    }
    map.remove_if(session, |_, slots| slots.is_empty());
    Ok(reply)
}

fn finish(a: &mut OpenRecording, reason: &str) -> Value {
    let total = a.started.elapsed().as_millis() as u64;
    let rate = if a.seq == 0 {
        1.0
    } else {
        a.ok as f64 / a.seq as f64
    };
    let end = End {
        step_count: a.seq,
        total_duration_ms: total,
        success_rate: rate,
        stopped_at: crate::util::now_rfc3339(),
        reason: reason.to_string(),
    };
    let line = to_line(&Line::End(end));
    if let Err(e) =
        crate::util::append_whole(&mut a.file, line.as_bytes()).and_then(|_| a.file.sync_data())
    {
        tracing::error!(recording = %a.id, error = %e, "cannot write the end of the recording; it stays incomplete");
    }
    if a.stopped.is_none() {
        a.stopped = Some(reason.to_string());
    }
    json!({"totalDuration": total, "successRate": rate})
}
