//! Recording and replay: capture a connection's calls as a reusable,
//! verifiable asset (`recorder`), keep it on disk (`format`, `store`),
//! replay it live, dry or offline (`replay`, `diff`, `schema`), and export
//! it (`export`).

mod append;
pub mod export;
pub mod recorder;
pub mod replay;
pub mod schema;
mod underway;

pub use crate::store::recordings::format::Source;
pub use recorder::Recorder;

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::caller::Caller;
use crate::config::Config;
use crate::engine::Engine;
use crate::errors::{ErrorType, HubError};
use crate::protocol::recording::{ExportFormat, ExportReq, RecordingMsg, UpdateReq};
use crate::protocol::{self, MsgId};
use crate::session::Outbox;
use crate::session::Place;
use crate::store::recordings::format::Recording;
use crate::store::recordings::{self as store, format};

/// Handle a recording message from a connection. Everything but a replay
/// reads or writes the recordings store, so it runs on the blocking pool
/// (`Recorder::io`), in the order the connection sent it and after any
/// earlier job on the same recording; the reply goes out from the job,
/// after the write it reports. A replay waits for the jobs queued before it
/// (so it replays what an earlier `update_recording` wrote), then runs as a
/// task; it loads the recording off the runtime too (`replay::execute`).
pub fn handle(
    recorder: &Arc<Recorder>,
    engine: &Engine,
    out: Outbox,
    id: MsgId,
    msg: RecordingMsg,
    place: Option<Place>,
) {
    let session = out.session.clone();
    let target = match &msg {
        RecordingMsg::Get(r) => Some(r.recording_id.clone()),
        RecordingMsg::Delete(r) => Some(r.recording_id.clone()),
        RecordingMsg::Export(r) => Some(r.recording_id.clone()),
        RecordingMsg::Update(r) => Some(r.recording_id.clone()),
        RecordingMsg::Replay(r) => Some(r.recording_id.clone()),
        _ => None,
    };
    let mut keys = vec![session.as_str()];
    keys.extend(target.as_deref());
    if let RecordingMsg::Replay(r) = msg {
        let queued = recorder.io.run(&keys, || Ok(()));
        let engine = engine.clone();
        tokio::spawn(async move {
            let _ = queued.await;
            replay::run(engine, out, id, r, place).await;
        });
        return;
    }
    let recorder_ = recorder.clone();
    let cfg = engine.hub().config();
    // A call sent after start_recording waits for it before it is captured.
    let mark = matches!(msg, RecordingMsg::Start(_)).then(|| recorder.starting.mark(&session));
    let job = recorder.io.run(&keys, move || {
        answer(&recorder_, &cfg, &out, &id, msg, place);
        drop(mark);
        Ok(())
    });
    tokio::spawn(job);
}

/// Answer one recording message (blocking file IO: on the blocking pool);
/// `place` is let go right before the reply.
fn answer(
    recorder: &Recorder,
    cfg: &Config,
    out: &Outbox,
    id: &MsgId,
    msg: RecordingMsg,
    place: Option<Place>,
) {
    let storage = &cfg.recording.storage_path;
    let caller = out.caller();
    let place = std::cell::Cell::new(place);
    let reply = |ty: &str, r: Result<Value, HubError>| {
        drop(place.take());
        match r {
            Ok(v) => out.send(protocol::reply(ty, id, v)),
            Err(e) => out.send(protocol::error_msg(id, &e)),
        }
    };
    match msg {
        RecordingMsg::Start(r) => {
            let started = recorder.start_for(&caller, r, Some(out.clone()));
            reply("recording_started", started);
        }
        RecordingMsg::Stop(r) => {
            let stopped = recorder.stop(&out.session, r.context.as_deref(), r.save, "stopped");
            reply("recording_stopped", stopped);
        }
        RecordingMsg::List(r) => {
            reply("recordings", Ok(recorder.list(&caller, &r)));
        }
        RecordingMsg::Get(r) => {
            let rec = load_for(storage, &r.recording_id, &caller);
            reply(
                "recording",
                rec.map(|rec| json!({"recording": export::json_page(&rec, r.page())})),
            );
        }
        RecordingMsg::Delete(r) => {
            let done = recorder.delete(&caller, &r.recording_id);
            reply(
                "recording_deleted",
                done.map(|()| json!({"recordingId": r.recording_id})),
            );
        }
        RecordingMsg::Export(r) => {
            reply("recording_export", export_one(storage, &r, &caller));
        }
        RecordingMsg::Update(r) => {
            let id = r.recording_id.clone();
            let mine = check_owner(storage, &id, &caller);
            // Rewriting a file that is being appended to would lose the
            // appends (and renumber the steps under the recorder).
            let done = if let Err(e) = mine {
                Err(e)
            } else if recorder.is_being_recorded(&id) {
                Err(HubError::new(
                    ErrorType::InvalidMessage,
                    format!("recording {id} is being recorded right now; update_recording would lose the steps still being appended"),
                )
                .with_suggestion("send stop_recording on the connection that records it, then update_recording"))
            } else {
                update(storage, r, &cfg.security)
            };
            if done.is_ok() {
                recorder.rewritten(&id);
            }
            reply("recording_updated", done);
        }
        // Handled by `handle` (a task, not a blocking job).
        RecordingMsg::Replay(_) => {}
    }
}

/// Whether `caller` may see recording `id`: the main token always (nothing
/// is read); a client token only its own (the header's `client`), and any
/// other answers exactly as an unknown id does, so a client learns nothing
/// of another's recordings, not even that they exist. A malformed id is
/// refused as such (that says nothing about the store).
pub fn check_owner(storage: &Path, id: &str, caller: &Caller) -> Result<(), HubError> {
    let Some(me) = caller.client_name() else {
        return Ok(());
    };
    if !store::valid_id(id) {
        return store::dir_of(storage, id).map(drop);
    }
    match store::client_of(storage, id) {
        Ok(Some(c)) if c == me => Ok(()),
        _ => Err(store::not_found(id)),
    }
}

/// Load recording `id` if `caller` may see it ([`check_owner`]).
pub fn load_for(storage: &Path, id: &str, caller: &Caller) -> Result<Recording, HubError> {
    check_owner(storage, id, caller)?;
    store::load(storage, id)
}

fn export_one(storage: &Path, r: &ExportReq, caller: &Caller) -> Result<Value, HubError> {
    let rec = load_for(storage, &r.recording_id, caller)?;
    let last = store::read_attachment(storage, &r.recording_id, "last-replay.json")
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
    let content = match r.format {
        ExportFormat::Json => export::json(&rec),
        ExportFormat::Markdown => Value::String(export::markdown(&rec, last.as_ref())),
        ExportFormat::Html => {
            let id = r.recording_id.clone();
            let read = move |name: &str| store::read_attachment(storage, &id, name);
            Value::String(export::html(&rec, last.as_ref(), &read))
        }
        ExportFormat::Flowchart => export::flowchart(&rec),
        ExportFormat::Batch => {
            let (batch, secrets) = export::batch(&rec);
            return Ok(json!({"format": "batch", "content": batch, "requiredVariables": secrets}));
        }
    };
    let format = serde_json::to_value(r.format).ok();
    Ok(json!({"format": format, "content": content}))
}

fn field<T: serde::de::DeserializeOwned>(v: &Value, key: &str) -> Result<Option<T>, HubError> {
    match v.get(key) {
        None => Ok(None),
        Some(x) => serde_json::from_value(x.clone()).map(Some).map_err(|e| {
            HubError::new(
                ErrorType::InvalidMessage,
                format!("update_recording: field \"{key}\": {e}"),
            )
        }),
    }
}

fn update(
    storage: &std::path::Path,
    r: UpdateReq,
    security: &crate::config::SecurityConfig,
) -> Result<Value, HubError> {
    let mut rec = store::load(storage, &r.recording_id)?;
    if let Some(n) = r.name {
        rec.header.name = n;
    }
    if r.description.is_some() {
        rec.header.description = r.description;
    }
    if let Some(tags) = r.tags {
        rec.header.tags = tags;
    }
    let n = rec.steps.len();
    let bad =
        |m: String| HubError::new(ErrorType::InvalidMessage, format!("update_recording: {m}"));
    let mut del = r.delete_steps.clone();
    del.sort_unstable();
    del.dedup();
    if let Some(i) = del.iter().find(|i| **i >= n) {
        return Err(bad(format!(
            "deleteSteps: step {i} does not exist (the recording has {n} steps)"
        )));
    }
    for i in del.iter().rev() {
        rec.steps.remove(*i);
    }
    for m in &r.modify_steps {
        let i: usize = field(m, "index")?
            .ok_or_else(|| bad("modifySteps: each entry needs \"index\"".into()))?;
        let changes = m
            .get("changes")
            .cloned()
            .unwrap_or(Value::Object(Map::new()));
        let step = rec
            .steps
            .get_mut(i)
            .ok_or_else(|| bad(format!("modifySteps: step {i} does not exist")))?;
        if let Some(p) = field::<Value>(&changes, "params")? {
            step.params_template = Some(p.clone());
            step.params = p;
        }
        if let Some(t) = field::<String>(&changes, "tool")? {
            step.tool = t.clone();
            step.qualified_name = Some(t);
        }
        if let Some(s) = field::<String>(&changes, "saveAs")? {
            step.save_as = Some(s);
        }
        if let Some(w) = field::<Value>(&changes, "when")? {
            step.when = Some(w);
        }
        if let Some(x) = field::<Value>(&changes, "expect")? {
            step.expect = Some(x);
        }
    }
    let mut inserts: Vec<(usize, Value)> = Vec::new();
    for ins in &r.insert_steps {
        let i: usize = field(ins, "index")?
            .ok_or_else(|| bad("insertSteps: each entry needs \"index\"".into()))?;
        let s = ins
            .get("step")
            .cloned()
            .ok_or_else(|| bad("insertSteps: each entry needs \"step\"".into()))?;
        inserts.push((i, s));
    }
    inserts.sort_by_key(|b| std::cmp::Reverse(b.0));
    for (i, s) in inserts {
        if i > rec.steps.len() {
            return Err(bad(format!(
                "insertSteps: index {i} is past the end ({} steps)",
                rec.steps.len()
            )));
        }
        let tool: String =
            field(&s, "tool")?.ok_or_else(|| bad("insertSteps: step needs \"tool\"".into()))?;
        let params: Value = field(&s, "params")?.unwrap_or(Value::Object(Map::new()));
        rec.steps.insert(
            i,
            format::Step {
                seq: i,
                source: Source {
                    kind: "batch_step".into(),
                    batch_id: None,
                    task_id: None,
                    step_id: field(&s, "id")?,
                    call_key: None,
                    context: None,
                },
                tool: tool.clone(),
                qualified_name: Some(tool),
                server: None,
                params: params.clone(),
                params_template: Some(params),
                save_as: field(&s, "saveAs")?,
                when: field(&s, "when")?,
                expect: field(&s, "expect")?,
                variables: None,
                timestamp: crate::util::now_rfc3339(),
                t_offset_ms: 0,
                duration_ms: 0,
                success: true,
                attempts: 0,
                result: Value::Null,
                error: None,
                images: Vec::new(),
                screenshot: None,
            },
        );
    }
    for (k, s) in rec.steps.iter_mut().enumerate() {
        s.seq = k;
        // Edited steps go through the same redaction as captured ones.
        append::scrub(s, security);
    }
    if let Some(e) = rec.end.as_mut() {
        e.step_count = rec.steps.len();
    }
    store::rewrite(storage, &rec)?;
    Ok(rec.summary())
}
