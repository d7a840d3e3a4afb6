//! Runs: persistent topic workspaces. A run is one folder per topic
//! (`<runs.storagePath>/<run_id>/`) with its metadata, a structured
//! execution log, screenshots, scripts and outputs (`model`, `store`).
//!
//! Each connection has a current run (set by `set_run`), defaulting to the
//! hub-wide one in `<stateDir>/current_run` (`context`), which
//! `TOOLHUB_CURRENT_RUN` overrides. While a run is current, every finished
//! `tool_call`, batch step and replay step is logged into it ([`Runs`] is a
//! [`CallObserver`]; `infer` builds the entry). The same operations are
//! client messages (`handle`) and `hub__run_*` tools (`tools`).

pub mod context;
mod images;
pub mod index;
pub mod infer;
mod messages;
pub mod model;
pub mod owner;
pub mod store;
pub mod tools;

pub use messages::handle;
pub use owner::check_owner;

#[cfg(test)]
mod store_tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use serde_json::{json, Value};

use crate::builtin::sandbox::RunFolder;
use crate::caller::Caller;
use crate::errors::{ErrorType, HubError};
use crate::hub::observe::{CallObserver, Capture};
use crate::hub::Hub;
use crate::protocol;
use crate::protocol::runs::{CreateRunReq, GetRunReq, ListRunsReq, LogEntryReq};
use crate::store::offload::{blocking, Serial};
use images::{keep_images, slug_of};
use model::{LogEntry, RunStatus};

/// How often the runs index is checked against the run folders (a run
/// changed behind the hub's back is picked up within this).
pub const INDEX_CHECK_EVERY: Duration = Duration::from_secs(5);
/// Default and largest `tail` of `get_run`.
const DEFAULT_TAIL: usize = 20;
const MAX_TAIL: usize = 1000;

/// Which run a connection works in.
#[derive(Debug, Clone, PartialEq)]
pub enum Current {
    Set(String),
    Unset,
    /// The run it named is gone; the context was cleared.
    Cleared {
        run_id: String,
        reason: String,
    },
}

/// The runs service.
pub struct Runs {
    hub: Hub,
    /// session → the run it chose with `set_run`.
    sessions: DashMap<String, String>,
    /// `TOOLHUB_CURRENT_RUN`, read at start-up.
    env: Option<String>,
    /// The environment's run was found missing and a client was told; set
    /// again only when it exists again, so the notice is sent once.
    env_gone: AtomicBool,
    /// The hub-wide default: `<stateDir>/current_run`, read once at
    /// start-up and kept here (this hub is the file's only writer), so a
    /// call reads no file to learn it.
    default: Mutex<Option<String>>,
    /// One lock per run serialises appends to its log.
    locks: DashMap<String, Arc<Mutex<()>>>,
    /// What `list_runs` reads: one entry per run, kept in step with the
    /// run folders.
    index: index::RunIndex,
    /// The run messages' file work, in order per connection, off the
    /// runtime's threads (`handle`).
    io: Serial,
    /// Sessions with a `set_run` queued on `io`.
    setting: crate::store::offload::Marks,
}

impl Runs {
    pub fn new(hub: Hub) -> Runs {
        Runs::with_env(hub, context::from_env())
    }

    pub fn with_env(hub: Hub, env: Option<String>) -> Runs {
        let state_dir = hub.config().task_engine.state_dir.clone();
        let default = context::read(&state_dir).map(|c| c.run_id);
        Runs {
            default: Mutex::new(default),
            hub,
            sessions: DashMap::new(),
            env,
            env_gone: AtomicBool::new(false),
            locks: DashMap::new(),
            index: index::RunIndex::default(),
            io: Serial::default(),
            setting: Default::default(),
        }
    }

    fn storage(&self) -> PathBuf {
        self.hub.config().runs.storage_path.clone()
    }

    fn state_dir(&self) -> PathBuf {
        self.hub.config().task_engine.state_dir.clone()
    }

    /// Load the runs index off the call path, then check it against the
    /// run folders every [`INDEX_CHECK_EVERY`] until shutdown.
    pub fn spawn_index_checks(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            let r = me.clone();
            let _ = tokio::task::spawn_blocking(move || r.index.open(&r.storage())).await;
            loop {
                tokio::select! {
                    _ = me.hub.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(INDEX_CHECK_EVERY) => {}
                }
                let r = me.clone();
                let _ = tokio::task::spawn_blocking(move || r.index.verify(&r.storage())).await;
            }
        });
    }

    /// The current run of `session`: its own choice, else (for the main
    /// token's sessions) the environment, else the hub-wide file. A client
    /// token's session has only its own choice: the environment's and the
    /// hub-wide run are the person's. A choice whose run is gone is cleared.
    pub fn current(&self, session: &str) -> Current {
        self.current_for(session, None)
    }

    /// [`current`](Self::current) for a call made by `client` (`None`: as
    /// far as the call knows, the main token; a live client session still
    /// counts as the client's).
    pub fn current_for(&self, session: &str, client: Option<&str>) -> Current {
        let client = client.is_some() || self.is_client(session);
        let storage = self.storage();
        let gone = |id: &str, whence: &str| Current::Cleared {
            run_id: id.to_string(),
            reason: format!("run {id:?} ({whence}) no longer exists; the current run was cleared"),
        };
        if let Some(id) = self.sessions.get(session).map(|r| r.clone()) {
            if store::exists(&storage, &id) {
                return Current::Set(id);
            }
            self.sessions.remove(session);
            self.clear_default(&id);
            return gone(&id, "set on this connection");
        }
        if client {
            return Current::Unset;
        }
        if let Some(id) = &self.env {
            if store::exists(&storage, id) {
                self.env_gone.store(false, Ordering::Relaxed);
                return Current::Set(id.clone());
            }
            if !self.env_gone.swap(true, Ordering::Relaxed) {
                return gone(id, context::ENV);
            }
            return Current::Unset;
        }
        let default = self.default.lock().ok().and_then(|d| d.clone());
        if let Some(id) = default {
            if store::exists(&storage, &id) {
                return Current::Set(id);
            }
            self.clear_default(&id);
            return gone(&id, "the hub-wide current_run");
        }
        Current::Unset
    }

    /// The current run's id for a call of `client` on `session`, or an
    /// error saying how to set one.
    pub fn current_id(&self, session: &str, client: Option<&str>) -> Result<String, HubError> {
        match self.current_for(session, client) {
            Current::Set(id) => Ok(id),
            Current::Unset => Err(no_current_run()),
            Current::Cleared { reason, .. } => Err(no_current_run().with_suggestion(format!(
                "{reason}; send set_run {{\"runId\": …}} or create_run first"
            ))),
        }
    }

    /// The current run of `session` as [`current_for`](Self::current_for)
    /// finds it, without clearing anything: `None` when there is none or it
    /// is gone.
    fn peek(&self, session: &str, client: Option<&str>) -> Option<String> {
        let storage = self.storage();
        let exists = |id: &String| store::exists(&storage, id);
        if let Some(id) = self.sessions.get(session).map(|r| r.clone()) {
            return exists(&id).then_some(id);
        }
        if client.is_some() || self.is_client(session) {
            return None;
        }
        if let Some(id) = &self.env {
            return exists(id).then(|| id.clone());
        }
        let default = self.default.lock().ok().and_then(|d| d.clone())?;
        exists(&default).then_some(default)
    }

    /// Whether `session` is a client token's (a live session of a client
    /// of `clients`).
    fn is_client(&self, session: &str) -> bool {
        self.hub.connected.client_of(session).is_some()
    }

    /// Forget the hub-wide default (memory and file) when it is `run_id`.
    fn clear_default(&self, run_id: &str) {
        if let Ok(mut d) = self.default.lock() {
            if d.as_deref() == Some(run_id) {
                *d = None;
            }
        }
        context::clear_if(&self.state_dir(), run_id);
    }

    /// A connection ended: forget its own choice.
    pub fn connection_closed(&self, session: &str) {
        self.sessions.remove(session);
    }

    /// Create a run, `caller`'s.
    pub fn create(&self, caller: &Caller, req: &CreateRunReq) -> Result<Value, HubError> {
        let storage = self.storage();
        let mut ix = self.index.hold(&storage);
        let (id, client) = (req.run_id.as_deref(), caller.client_name());
        let meta = store::create(&storage, &req.theme, id, client)?;
        ix.refresh(&meta.run_id);
        Ok(json!({"run": store::meta_json(&meta)}))
    }

    /// Make `run_id` (one `caller` may see) the current run of its session
    /// and, for the main token, the hub-wide default; an archived run
    /// becomes active again.
    pub fn set(&self, caller: &Caller, run_id: &str) -> Result<Value, HubError> {
        let (storage, session) = (self.storage(), caller.session.as_str());
        check_owner(&storage, run_id, caller)?;
        let mut ix = self.index.hold(&storage);
        let meta = store::touch(&storage, run_id, RunStatus::Active)?;
        ix.refresh(&meta.run_id);
        drop(ix);
        if !session.is_empty() {
            self.sessions
                .insert(session.to_string(), meta.run_id.clone());
        }
        if !caller.is_main() {
            return Ok(json!({"run": store::meta_json(&meta)}));
        }
        context::write(&self.state_dir(), &meta);
        if let Ok(mut d) = self.default.lock() {
            *d = Some(meta.run_id.clone());
        }
        Ok(json!({"run": store::meta_json(&meta)}))
    }

    /// A page of the runs `caller` may see, from the index (no run's file
    /// is read): every run for the main token, its own for a client (and
    /// no `problems`: a run without metadata names no owner).
    pub fn list(&self, caller: &Caller, req: &ListRunsReq) -> Value {
        let want = req.status.map(|s| match s {
            protocol::runs::StatusFilter::Active => RunStatus::Active,
            protocol::runs::StatusFilter::Archived => RunStatus::Archived,
        });
        let page = req.page();
        let found = self
            .index
            .list(&self.storage(), (want, caller), page.offset, page.limit());
        let shown: Vec<Value> = found.runs.iter().map(store::meta_json).collect();
        json!({"runs": shown, "problems": found.problems, "total": found.total, "offset": page.offset, "limit": page.limit()})
    }

    pub fn get(&self, caller: &Caller, req: &GetRunReq) -> Result<Value, HubError> {
        let storage = self.storage();
        check_owner(&storage, &req.run_id, caller)?;
        let (meta, rebuilt) = {
            let mut ix = self.index.hold(&storage);
            let (meta, rebuilt) = store::read_meta(&storage, &req.run_id)?;
            if rebuilt.is_some() {
                // Written back from the log: the index follows.
                ix.refresh(&req.run_id);
            }
            (meta, rebuilt)
        };
        let n = req.tail.unwrap_or(DEFAULT_TAIL).min(MAX_TAIL);
        let tail = store::tail(&storage, &req.run_id, n)?;
        let mut warnings: Vec<String> = rebuilt.into_iter().collect();
        if tail.skipped > 0 {
            warnings.push(format!(
                "{} corrupt log line(s) skipped in {}",
                tail.skipped,
                store::LOG
            ));
        }
        Ok(json!({
            "run": store::meta_json(&meta),
            "entries": tail.entries,
            "skippedLines": tail.skipped,
            "warnings": warnings,
        }))
    }

    /// The agent's own entry, into the given run (one `caller` may see) or
    /// its session's current one.
    pub fn log(&self, caller: &Caller, req: LogEntryReq) -> Result<Value, HubError> {
        let run_id = match req.run_id.clone() {
            Some(id) => {
                check_owner(&self.storage(), &id, caller)?;
                id
            }
            None => self.current_id(&caller.session, caller.client_name())?,
        };
        let entry = LogEntry {
            timestamp: crate::util::now_rfc3339(),
            step: req.step,
            status: enum_field("status", &req.status)?,
            action_type: enum_field("action_type", &req.action_type)?,
            execution_method: enum_field("execution_method", &req.execution_method)?,
            data: match crate::history::redact(
                &Value::Object(req.data),
                &self.hub.config().security,
            ) {
                Value::Object(m) => m,
                _ => serde_json::Map::new(),
            },
            schema_version: model::ENTRY_SCHEMA.into(),
        };
        self.append(&run_id, &entry)?;
        Ok(json!({"runId": run_id, "entry": entry}))
    }

    /// Append under the run's lock, so concurrent writers never interleave.
    pub fn append(&self, run_id: &str, entry: &LogEntry) -> Result<(), HubError> {
        append_locked(&*self.lock_of(run_id)?, &self.storage(), run_id, entry)
    }

    /// The lock that serialises appends to `run_id`'s log (the id checked
    /// first, so no hostile id becomes a key).
    fn lock_of(&self, run_id: &str) -> Result<Arc<Mutex<()>>, HubError> {
        model::check_id(run_id)?;
        Ok(self
            .locks
            .entry(run_id.to_string())
            .or_insert_with(|| Arc::new(Mutex::new(())))
            .clone())
    }

    pub fn archive(&self, caller: &Caller, run_id: &str) -> Result<Value, HubError> {
        let storage = self.storage();
        check_owner(&storage, run_id, caller)?;
        let mut ix = self.index.hold(&storage);
        let meta = store::touch(&storage, run_id, RunStatus::Archived)?;
        ix.refresh(&meta.run_id);
        drop(ix);
        Ok(json!({"run": store::meta_json(&meta)}))
    }

    /// Delete a run (one `caller` may see); every context naming it is
    /// cleared.
    pub fn delete(&self, caller: &Caller, run_id: &str) -> Result<Value, HubError> {
        let storage = self.storage();
        check_owner(&storage, run_id, caller)?;
        let mut ix = self.index.hold(&storage);
        store::delete(&storage, run_id)?;
        ix.remove(run_id);
        drop(ix);
        self.sessions.retain(|_, r| r != run_id);
        self.clear_default(run_id);
        self.locks.remove(run_id);
        Ok(json!({"runId": run_id, "deleted": true}))
    }

    /// Log a finished call into the session's current run; the returned
    /// event tells the client its context was cleared.
    async fn observe(&self, session: &str, capture: Capture<'_>) -> Option<Value> {
        let tool = capture
            .outcome
            .qualified_name
            .as_deref()
            .unwrap_or(&capture.outcome.tool);
        if tools::is_run_tool(tool) {
            return None;
        }
        // A set_run sent before this call may still be queued: it comes first.
        if self.setting.is_marked(session) {
            self.io.barrier(session).await;
        }
        let run_id = match self.current_for(session, capture.client) {
            Current::Set(id) => id,
            Current::Unset => return None,
            Current::Cleared { run_id, reason } => return Some(cleared_event(&run_id, &reason)),
        };
        let config = self.hub.config();
        let mut entry = infer::entry(&capture, &config.security);
        // The server's configured screenshot tool takes screenshots, whatever its name.
        let shot_tool = capture
            .outcome
            .server
            .as_ref()
            .and_then(|s| config.mcp_servers.get(s))
            .and_then(|s| s.screenshot_tool.as_deref());
        if shot_tool == Some(infer::bare(tool)) {
            entry.action_type = model::ActionType::Screenshot;
        }
        // A call that asks (`saveImages`) keeps every image it returned; a
        // screenshot call keeps its first.
        let shots = match capture.save_images.and_then(|s| s.wanted()) {
            Some(named) => Some((named, usize::MAX, true)),
            None if entry.action_type == model::ActionType::Screenshot => Some((None, 1, false)),
            None => None,
        }
        .map(|(named, max, mark)| {
            let data: Vec<String> = infer::images(capture.outcome.raw.as_ref())
                .into_iter()
                .take(max)
                .map(String::from)
                .collect();
            (slug_of(&capture, named), data, mark)
        });
        // The images' writes and `fsync`s and the log line: on the
        // blocking pool; the call's reply waits for them.
        let storage = self.storage();
        let (id, lock) = (run_id.clone(), self.lock_of(&run_id));
        let written = blocking(move || {
            if let Some((slug, data, mark)) = shots {
                let kept = keep_images(&storage, &id, &slug, &data);
                if mark && !kept.is_empty() {
                    entry.action_type = model::ActionType::Screenshot;
                }
                if let Some(first) = kept.first() {
                    entry.data.insert("screenshot".into(), json!(first));
                }
                if kept.len() > 1 {
                    entry.data.insert("screenshots".into(), json!(kept));
                }
            }
            append_locked(&*lock?, &storage, &id, &entry)
        })
        .await;
        if let Err(e) = written {
            tracing::warn!(run = %run_id, error = %e.message, "cannot log a call into the run");
            if e.error_type == ErrorType::NotFound {
                return Some(cleared_event(&run_id, &e.message));
            }
        }
        None
    }
}

/// Append under the run's lock (blocking file IO).
fn append_locked(
    lock: &Mutex<()>,
    storage: &std::path::Path,
    run_id: &str,
    entry: &LogEntry,
) -> Result<(), HubError> {
    let _held = lock.lock().unwrap_or_else(|p| p.into_inner());
    store::append(storage, run_id, entry)
}

/// `run_command`'s sandbox leaves the current run's folder writable;
/// `run:` paths of the workspace tools name it.
impl RunFolder for Runs {
    fn folder(&self, session: &str, client: Option<&str>) -> Option<PathBuf> {
        let id = self.peek(session, client)?;
        store::dir_of(&self.storage(), &id).ok()
    }

    fn current(
        &self,
        session: &str,
        client: Option<&str>,
    ) -> Result<crate::builtin::run_path::CurrentRun, HubError> {
        let run_id = self.current_id(session, client)?;
        let dir = store::dir_of(&self.storage(), &run_id)?;
        Ok(crate::builtin::run_path::CurrentRun { run_id, dir })
    }
}

impl CallObserver for Runs {
    /// A run set on the connection, the environment's, or the hub-wide
    /// default: whether it still exists (or must be reported gone) is
    /// [`Runs::current`]'s to say.
    fn watches(&self, session: &str) -> bool {
        self.sessions.contains_key(session)
            || self.setting.is_marked(session)
            || self.env.is_some()
            || self.default.lock().map_or(true, |d| d.is_some())
    }

    fn finished<'a>(
        &'a self,
        session: &'a str,
        capture: Capture<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Value>> + Send + 'a>> {
        Box::pin(self.observe(session, capture))
    }
}

fn no_current_run() -> HubError {
    HubError::new(
        ErrorType::InvalidParams,
        "no current run on this connection",
    )
    .with_suggestion(
        "send set_run {\"runId\": …} (or call hub__run_set), create_run for a new topic, or start the hub with TOOLHUB_CURRENT_RUN",
    )
}

fn cleared_event(run_id: &str, reason: &str) -> Value {
    json!({
        "type": "run_context_cleared",
        "runId": run_id,
        "reason": reason,
        "suggestion": "send set_run {\"runId\": …} or create_run to log into a run again",
    })
}

/// A wire string → one of the model's enums, with the allowed values named.
fn enum_field<T: serde::de::DeserializeOwned + serde::Serialize>(
    field: &str,
    value: &str,
) -> Result<T, HubError> {
    serde_json::from_value(Value::String(value.to_string())).map_err(|_| {
        let allowed = match field {
            "status" => "success, error, warning",
            "action_type" => "navigation, extraction, interaction, screenshot, recipe_execution, data_processing, analysis, user_interaction, other",
            _ => "command, recipe, file, manual, analysis, tool",
        };
        HubError::new(
            ErrorType::InvalidParams,
            format!("{field} {value:?} is not one of: {allowed}"),
        )
        .with_suggestion(format!("use one of: {allowed}"))
    })
}
