//! Capture: the recordings under way on each connection (one per client
//! context, and one without a context; see `underway`). Every call a recording
//! takes (single calls and batch steps, resumed and failed ones included) is
//! appended as one line and flushed when it completes, so a SIGKILL loses at
//! most the step in flight. Secrets are redacted before anything is written.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::caller::Caller;
use crate::errors::{ErrorType, HubError};
use crate::hub::observe::{CallObserver, Capture};
use crate::hub::{Approval, Hub};
use crate::protocol::recording::{ListReq, StartReq};
use crate::session::Outbox;
use crate::store::offload::{blocking, Serial};
use crate::store::recordings as store;
use crate::store::recordings::format::{Header, Line, SCHEMA_VERSION};

use super::append::{to_line, Appended, OpenRecording, Pending};
use super::underway::{self, stop_in, ActiveMap, RecordingSlot};
use crate::store::recordings::index::{RecordingIndex, Repairs};

/// How often the recordings index is checked against the files.
pub const INDEX_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The recording service: the recordings under way on each connection,
/// and the index every listing reads (kept in step with each change the
/// hub makes to a recording).
pub struct Recorder {
    hub: Hub,
    active: Arc<ActiveMap>,
    index: Arc<RecordingIndex>,
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
            index: Arc::new(RecordingIndex::new()),
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
        // Clone the handles first: an `OpenRecording` is locked only after the
        // map's shard is let go (`stop` holds one while it removes).
        let handles: Vec<RecordingSlot> =
            self.active.iter().flat_map(|a| a.value().clone()).collect();
        let writing: HashSet<String> = handles
            .iter()
            .filter_map(|a| a.rec.lock().ok().map(|a| a.id.clone()))
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

    /// `list_recordings`: a page of the index, with the total that matched:
    /// every recording for the main token, a client token's own for it
    /// (and no `problems`: an unreadable recording names no owner).
    pub fn list(&self, caller: &Caller, req: &ListReq) -> Value {
        let page = self.index.list(&self.storage(), req, caller.client_name());
        json!({
            "recordings": page.items,
            "problems": page.problems,
            "total": page.total,
            "offset": req.page.offset,
            "limit": req.page.limit(),
        })
    }

    /// Delete a recording and its index entry (one `caller` may see).
    pub fn delete(&self, caller: &Caller, id: &str) -> Result<(), HubError> {
        let storage = self.storage();
        super::check_owner(&storage, id, caller)?;
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
        let handles: Vec<RecordingSlot> =
            self.active.iter().flat_map(|a| a.value().clone()).collect();
        handles.iter().any(|a| {
            a.rec
                .lock()
                .is_ok_and(|a| a.id == id && a.stopped.is_none())
        })
    }

    /// Start recording for `caller`'s session (a `hub__record_start`: no
    /// client to tell of a second stop); the header is written and synced.
    pub fn start(&self, caller: &Caller, req: StartReq) -> Result<Value, HubError> {
        self.start_for(caller, req, None)
    }

    /// Start recording for `caller`'s session, whose client is `out`
    /// (`/ws`): every call of the connection, or with `req.context` only
    /// the calls made in that context. The recording is `caller`'s (its
    /// header names the client). The header is written and synced.
    pub fn start_for(
        &self,
        caller: &Caller,
        req: StartReq,
        out: Option<Outbox>,
    ) -> Result<Value, HubError> {
        let session = caller.session.as_str();
        let StartReq {
            name,
            description,
            tags,
            context,
        } = req;
        let hub = &self.hub;
        let cfg = hub.config();
        if !cfg.recording.enabled {
            return Err(HubError::new(
                ErrorType::InvalidMessage,
                "recording is off (recording.enabled is false in config.json)",
            ));
        }
        if let Some(a) = underway::find(&self.active, session, context.as_deref()) {
            let id = a.rec.lock().map(|a| a.id.clone()).unwrap_or_default();
            return Err(underway::already(context.as_deref(), &id));
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
        let view = caller.view.as_deref().map(|v| hub.view(v));
        let header = Header {
            schema_version: SCHEMA_VERSION,
            recording_id: id.clone(),
            name: name.unwrap_or_else(|| id.clone()),
            description,
            tags,
            created_at: crate::util::now_rfc3339(),
            hub_version: env!("CARGO_PKG_VERSION").into(),
            // A recording made in a view names only what the view shows:
            // its maker can read it, and sees no more than it could list.
            servers: hub
                .server_summaries(caller.view.as_deref())
                .as_array()
                .cloned()
                .unwrap_or_default(),
            tools: tools
                .tools()
                .iter()
                .filter(|t| match &view {
                    None => true,
                    Some(Ok(v)) => v.shown(&t.qualified_name).is_some(),
                    Some(Err(_)) => false,
                })
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect(),
            tools_hash: None,
            context: context.clone(),
            client: caller.client_name().map(String::from),
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
        let active = OpenRecording {
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
        let slot = RecordingSlot::new(session, context.clone(), active, out);
        self.active
            .entry(session.to_string())
            .or_default()
            .push(slot);
        self.index.refresh(storage, &id);
        tracing::info!(session, recording = %id, context, "recording started");
        Ok(json!({
            "recordingId": id,
            "name": header.name,
            "path": dir.display().to_string(),
            "context": context,
        }))
    }

    /// Stop the recording of `context` (`None`: the one without a
    /// context): write the `end` line; `save: false` deletes the recording.
    pub fn stop(
        &self,
        session: &str,
        context: Option<&str>,
        save: bool,
        reason: &str,
    ) -> Result<Value, HubError> {
        stop_in(
            &self.active,
            &self.index,
            &self.storage(),
            session,
            context,
            save,
            reason,
        )
    }

    /// Append one call to each recording of `session` that takes it (its
    /// context's, and the one without a context). Returns a
    /// `recording_stopped` event when a recording hit its size limit or
    /// could not be written (the caller sends it; a second one, for another
    /// recording of the same call, goes straight to the connection). The
    /// writes and their `fdatasync` run on the blocking pool; the caller
    /// sends its reply after this returns, so after the lines are on disk.
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
        if self.starting.is_marked(session) {
            self.io.barrier(session).await;
        }
        let takers: Vec<RecordingSlot> = underway::all(&self.active, session)
            .into_iter()
            .filter(|s| s.takes(c.context()))
            .collect();
        if takers.is_empty() {
            return None;
        }
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
            let mut events = Vec::new();
            for slot in takers {
                let label = slot.label.as_deref();
                let stop =
                    |reason: &str| stop_in(&map, &index, &storage, &session, label, true, reason);
                let ev = match pending.clone().append(&slot.rec, &cfg.security) {
                    Appended::Written | Appended::Stopped => None,
                    Appended::Full(id) => {
                        tracing::warn!(recording = %id, limit = cfg.recording.max_bytes, "recording stopped at recording.maxBytes");
                        stop("size_limit").ok()
                    }
                    Appended::Failed(id, e) => {
                        tracing::error!(recording = %id, error = %e, "recording write failed; recording stopped");
                        stop("write_error").ok().map(|mut ev| {
                            ev["error"] = json!(HubError::classified(format!(
                                "cannot write recording {id}: {e}"
                            )));
                            ev
                        })
                    }
                };
                if let Some(mut ev) = ev {
                    ev["type"] = json!("recording_stopped");
                    events.push((ev, slot.out));
                }
            }
            // The first goes out through the caller, before the call's
            // reply; another (two recordings full at once) straight away.
            let mut events = events.into_iter();
            let first = events.next().map(|(ev, _)| ev);
            for (ev, out) in events {
                match out {
                    Some(out) => {
                        out.send(ev);
                    }
                    None => {
                        tracing::info!(%session, event = %ev, "a second recording_stopped with no client to send it to")
                    }
                }
            }
            Ok(first)
        };
        blocking(write).await.ok().flatten()
    }

    /// The connection went away: close its recordings (reason `closed`).
    pub fn connection_closed(&self, session: &str) {
        for slot in underway::all(&self.active, session) {
            let _ = self.stop(session, slot.label.as_deref(), true, "closed");
        }
    }
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
