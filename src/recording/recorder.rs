//! Capture: one active recording per connection. Every call the connection
//! runs (single calls and batch steps, resumed and failed ones included) is
//! appended as one line and flushed when it completes, so a SIGKILL loses at
//! most the step in flight. Secrets are redacted before anything is written.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use serde_json::{json, Value};

use crate::errors::{ErrorType, HubError};
use crate::hub::observe::{CallObserver, Capture};
use crate::hub::{Approval, Hub};
use crate::protocol::recording::{ListReq, StartReq};
use crate::store::offload::{blocking, Serial};
use crate::store::recordings as store;
use crate::store::recordings::format::{End, Header, Line, SCHEMA_VERSION};

use super::append::{to_line, Active, Appended, Pending};
use crate::store::recordings::index::{Index, Repairs};

/// How often the recordings index is checked against the files.
pub const INDEX_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The active recordings, by session.
type ActiveMap = DashMap<String, Arc<Mutex<Active>>>;

/// The recording service: one active recording per recording connection,
/// and the index every listing reads (kept in step with each change the
/// hub makes to a recording).
pub struct Recorder {
    hub: Hub,
    active: Arc<ActiveMap>,
    index: Arc<Index>,
    /// The recording messages' file work, in order per connection and per
    /// recording, off the runtime's threads (`recording::handle`).
    pub io: Serial,
    /// Sessions with a `start_recording` queued on `io`.
    pub starting: crate::store::offload::Marks,
}

impl CallObserver for Recorder {
    fn watches(&self, session: &str) -> bool {
        self.active.contains_key(session) || self.starting.is_marked(session)
    }

    fn finished<'a>(
        &'a self,
        session: &'a str,
        capture: Capture<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Value>> + Send + 'a>> {
        Box::pin(self.capture(session, capture))
    }
}

impl Recorder {
    pub fn new(hub: Hub) -> Recorder {
        Recorder {
            hub,
            active: Arc::default(),
            index: Arc::new(Index::new()),
            io: Serial::default(),
            starting: Default::default(),
        }
    }

    fn storage(&self) -> PathBuf {
        self.hub.config().recording.storage_path.clone()
    }

    /// Load the index (rebuilt when missing) and repair it from the files.
    pub fn open_index(&self) -> Repairs {
        self.index.open(&self.storage())
    }

    /// Check the index against the files (recordings being written are
    /// left alone; they are indexed when they stop).
    pub fn verify_index(&self) -> Repairs {
        // Clone the handles first: an `Active` is locked only after the
        // map's shard is let go (`stop` holds one while it removes).
        let handles: Vec<Arc<Mutex<Active>>> =
            self.active.iter().map(|a| a.value().clone()).collect();
        let writing: HashSet<String> = handles
            .iter()
            .filter_map(|a| a.lock().ok().map(|a| a.id.clone()))
            .collect();
        self.index.verify(&self.storage(), &writing)
    }

    /// Open the index in the background, then check it against the files
    /// every [`INDEX_CHECK_EVERY`] until shutdown, so a recording changed
    /// outside the hub is listed as it is within that time.
    pub fn spawn_index_checks(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            let r = me.clone();
            let _ = tokio::task::spawn_blocking(move || r.open_index()).await;
            loop {
                tokio::select! {
                    _ = me.hub.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(INDEX_CHECK_EVERY) => {}
                }
                let r = me.clone();
                let _ = tokio::task::spawn_blocking(move || r.verify_index()).await;
            }
        });
    }

    /// `list_recordings`: a page of the index, with the total that matched.
    pub fn list(&self, req: &ListReq) -> Value {
        let page = self.index.list(&self.storage(), req);
        json!({
            "recordings": page.items,
            "problems": page.problems,
            "total": page.total,
            "offset": req.page.offset,
            "limit": req.page.limit(),
        })
    }

    /// Delete a recording and its index entry.
    pub fn delete(&self, id: &str) -> Result<(), HubError> {
        let storage = self.storage();
        store::delete(&storage, id)?;
        self.index.remove(&storage, id);
        Ok(())
    }

    /// A recording was rewritten (`update_recording`): index it again.
    pub fn rewritten(&self, id: &str) {
        self.index.refresh(&self.storage(), id);
    }

    pub fn is_recording(&self, session: &str) -> bool {
        self.active.contains_key(session)
    }

    /// Whether some connection is recording into `id` right now.
    pub fn is_being_recorded(&self, id: &str) -> bool {
        self.active.iter().any(|a| {
            a.value()
                .lock()
                .is_ok_and(|a| a.id == id && a.stopped.is_none())
        })
    }

    /// Start recording for `session`; the header is written and synced.
    pub fn start(&self, session: &str, req: StartReq) -> Result<Value, HubError> {
        let StartReq {
            name,
            description,
            tags,
        } = req;
        let hub = &self.hub;
        let cfg = hub.config();
        if !cfg.recording.enabled {
            return Err(HubError::new(
                ErrorType::InvalidMessage,
                "recording is off (recording.enabled is false in config.json)",
            ));
        }
        if let Some(a) = self.active.get(session) {
            let id = a.lock().map(|a| a.id.clone()).unwrap_or_default();
            return Err(HubError::new(
                ErrorType::InvalidMessage,
                format!("this connection is already recording ({id})"),
            )
            .with_suggestion("send stop_recording first"));
        }
        let id = store::new_id();
        let storage = &cfg.recording.storage_path;
        let io = |e: std::io::Error| {
            HubError::new(
                ErrorType::Permission,
                format!("cannot create a recording in {}: {e}", storage.display()),
            )
        };
        fs::create_dir_all(storage).map_err(io)?;
        let dir = storage.join(&id);
        fs::create_dir(&dir).map_err(io)?;
        let tools = hub.tools();
        let header = Header {
            schema_version: SCHEMA_VERSION,
            recording_id: id.clone(),
            name: name.unwrap_or_else(|| id.clone()),
            description,
            tags,
            created_at: crate::util::now_rfc3339(),
            hub_version: env!("CARGO_PKG_VERSION").into(),
            servers: hub
                .server_summaries()
                .as_array()
                .cloned()
                .unwrap_or_default(),
            tools: tools
                .tools()
                .iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect(),
            tools_hash: None,
        };
        // The tool list goes to its snapshot, stored once per distinct list.
        let header = store::header_for_disk(storage, &header).map_err(io)?;
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(dir.join(store::FILE))
            .map_err(io)?;
        let line = to_line(&Line::Header(header.clone()));
        file.write_all(line.as_bytes())
            .and_then(|_| file.sync_data())
            .map_err(io)?;
        let active = Active {
            id: id.clone(),
            dir: dir.clone(),
            file,
            started: std::time::Instant::now(),
            seq: 0,
            ok: 0,
            bytes: line.len() as u64,
            max_bytes: cfg.recording.max_bytes,
            stopped: None,
            batches: Default::default(),
        };
        self.active
            .insert(session.to_string(), Arc::new(Mutex::new(active)));
        self.index.refresh(storage, &id);
        tracing::info!(session, recording = %id, "recording started");
        Ok(json!({"recordingId": id, "name": header.name, "path": dir.display().to_string()}))
    }

    /// Stop: write the `end` line; `save: false` deletes the recording.
    pub fn stop(&self, session: &str, save: bool, reason: &str) -> Result<Value, HubError> {
        stop_in(
            &self.active,
            &self.index,
            &self.storage(),
            session,
            save,
            reason,
        )
    }

    /// Append one call if `session` is recording. Returns a `recording_stopped`
    /// event when the size limit was hit (the caller sends it). The write
    /// and its `fdatasync` run on the blocking pool; the caller sends its
    /// reply after this returns, so after the line is on disk.
    pub async fn capture(&self, session: &str, c: Capture<'_>) -> Option<Value> {
        let hub = &self.hub;
        // The recording controls themselves are not part of the flow, nor
        // the steps a control tool ran (its own call is recorded).
        if c.nested {
            return None;
        }
        if c.outcome
            .qualified_name
            .as_deref()
            .is_some_and(|q| q.starts_with("hub__record_"))
        {
            return None;
        }
        // A start_recording sent before this call may still be queued: it
        // comes first.
        if !self.active.contains_key(session) && self.starting.is_marked(session) {
            self.io.barrier(session).await;
        }
        let active = self.active.get(session)?.clone();
        let cfg = hub.config();
        // With screenshotOnStep, the server's screenshot tool is called
        // after the step (before the line is written, which references it).
        let shot = match (&c.outcome.server, cfg.recording.screenshot_on_step) {
            (Some(server), true) => screenshot(hub, server, c.outcome.context.as_ref()).await,
            _ => None,
        };
        let pending = Pending::new(c, shot, &cfg.security);
        let (map, index, storage) = (self.active.clone(), self.index.clone(), self.storage());
        let session = session.to_string();
        let write = move || {
            let stop = |reason: &str| stop_in(&map, &index, &storage, &session, true, reason);
            Ok(match pending.append(&active, &cfg.security) {
                Appended::Written | Appended::Stopped => None,
                Appended::Full(id) => {
                    let mut ev = stop("size_limit").ok();
                    tracing::warn!(recording = %id, limit = cfg.recording.max_bytes, "recording stopped at recording.maxBytes");
                    if let Some(ev) = ev.as_mut() {
                        ev["type"] = json!("recording_stopped");
                    }
                    ev
                }
                Appended::Failed(id, e) => {
                    tracing::error!(recording = %id, error = %e, "recording write failed; recording stopped");
                    let mut ev = stop("write_error").ok();
                    if let Some(ev) = ev.as_mut() {
                        ev["type"] = json!("recording_stopped");
                        ev["error"] = json!(HubError::classified(format!(
                            "cannot write recording {id}: {e}"
                        )));
                    }
                    ev
                }
            })
        };
        blocking(write).await.ok().flatten()
    }

    /// The connection went away: close its recording (reason `closed`).
    pub fn connection_closed(&self, session: &str) {
        if self.active.contains_key(session) {
            let _ = self.stop(session, true, "closed");
        }
    }
}

/// Stop `session`'s recording: write the `end` line; `save: false` deletes
/// the recording (blocking file IO).
fn stop_in(
    map: &ActiveMap,
    index: &Index,
    storage: &Path,
    session: &str,
    save: bool,
    reason: &str,
) -> Result<Value, HubError> {
    // Taken out of `active` only once its end and index entry are
    // written, so an index check never sees it half-stopped.
    let Some(active) = map.get(session).map(|a| a.value().clone()) else {
        return Err(HubError::new(
            ErrorType::InvalidMessage,
            "this connection is not recording",
        )
        .with_suggestion("send start_recording first"));
    };
    let mut a = active
        .lock()
        .map_err(|_| HubError::new(ErrorType::Unknown, "recording state poisoned"))?;
    if a.stopped.is_some() {
        // Another stop (the connection closing) got there first.
        return Err(HubError::new(
            ErrorType::InvalidMessage,
            "this connection is not recording",
        )
        .with_suggestion("send start_recording first"));
    }
    let meta = finish(&mut a, reason);
    if save {
        index.refresh(storage, &a.id);
    } else {
        let _ = fs::remove_dir_all(&a.dir);
        index.remove(storage, &a.id);
    }
    tracing::info!(session, recording = %a.id, steps = a.seq, reason, "recording stopped");
    let reply = json!({
        "recordingId": a.id,
        "stepCount": a.seq,
        "path": if save { Value::String(a.dir.display().to_string()) } else { Value::Null },
        "saved": save,
        "reason": a.stopped.clone().unwrap_or_else(|| reason.to_string()),
        "metadata": meta,
    });
    // The map is never locked while an `Active` is (see `verify_index`).
    drop(a);
    map.remove(session);
    Ok(reply)
}

fn finish(a: &mut Active, reason: &str) -> Value {
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

/// Call the server's configured screenshot tool (the hub's own call,
/// through the call pipeline); the first image item.
async fn screenshot(
    hub: &Hub,
    server: &str,
    context: Option<&crate::client_context::ClientContext>,
) -> Option<Vec<u8>> {
    let tool = hub
        .config()
        .mcp_servers
        .get(server)?
        .screenshot_tool
        .clone()?;
    let info = hub.helper_tool(server, &tool)?;
    let mut req = Hub::helper_request(&info, tokio_util::sync::CancellationToken::new());
    // The step's own instance: a per-context browser shows its page.
    if let Some(c) = context {
        req.context = c.clone();
    }
    // The same gate as any call; no one can confirm in the middle of a
    // recording, so a rule that would ask refuses it (logged).
    let a = Box::pin(hub.call_resolved(&info, &req, Approval::Helper, |r| r)).await;
    match &a.error {
        Some(e) if e.error_type == ErrorType::SafetyBlocked => {
            tracing::warn!(server, tool, reason = %e.message, "screenshot for the recording not taken: refused by the safety gate");
            return None;
        }
        Some(e) => tracing::warn!(server, tool, error = %e, "screenshot for the recording failed"),
        None => {}
    }
    let content = a.raw?.get("content")?.as_array()?.clone();
    let data = content
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("image"))?
        .get("data")?
        .as_str()?
        .to_string();
    crate::b64::decode(&data).ok()
}
