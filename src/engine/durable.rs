//! Durability glue between the runner and `store::journal`: one
//! append-only journal per task under `<stateDir>/tasks/`, recovery of every
//! task at start-up, and retention (`retention`).
//!
//! Writes are synchronous on purpose: a step's start must be on disk before
//! its call goes out, and a step's result before its `batch_step_result` is
//! sent. With durability `step` one `fdatasync` covers both: step *i*'s
//! result is only written, the task holds its messages ([`Task::emit`]), and
//! step *i+1*'s start (or the end, or a [`Engine::flush`] before anything
//! that may wait) syncs the file and releases them. On the multi-threaded
//! runtime a write that syncs runs under `block_in_place`, so other tasks
//! keep running; a write that does not (no `fdatasync`: the page cache)
//! runs inline.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use super::finished::Finished;
use super::journal_mask::mask_record;
use super::service::Engine;
use super::state::{StepState, TaskEvent, TaskState};
use super::task::Task;
use crate::protocol::BatchReq;
use crate::store::index_file::{Repairs, Stamp};
use crate::store::journal::{self, JournalWriter, Record};

mod retention;
pub use retention::spawn_retention;
use retention::Prune;

fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

fn ts() -> u64 {
    crate::util::now_ms()
}

impl Engine {
    /// Create the task's journal with its header (the batch as sent).
    pub(crate) fn create_journal(
        &self,
        task: &Task,
        req: &BatchReq,
        security: &crate::config::SecurityConfig,
    ) {
        let header = Record::Header {
            schema_version: journal::SCHEMA_VERSION,
            task_id: task.id.clone(),
            batch_id: task.batch_id.clone(),
            // A secret written literally into step params is redacted too; on
            // recovery it becomes `{{vars.<name>}}`, supplied again on resume.
            steps: crate::history::redact(
                &serde_json::to_value(&req.steps).unwrap_or(Value::Null),
                security,
            ),
            // Secret variables never reach the disk; resume_task takes them again.
            options: {
                let mut o = crate::history::redact(
                    &serde_json::to_value(&req.options).unwrap_or(Value::Null),
                    security,
                );
                // `options.secrets` names are secret like redactKeys ones.
                if let Some(Value::Object(vars)) = o.get_mut("variables") {
                    for name in &req.options.secrets {
                        if let Some(v) = vars.get_mut(name) {
                            *v = serde_json::json!({ "$redacted": name });
                        }
                    }
                }
                o
            },
            created_ms: task.with(|d| d.created_ms),
            hub_version: env!("CARGO_PKG_VERSION").to_string(),
            call_key: task.call_key.get().cloned(),
            context: task.set_context_of(),
            view: task.view.get().map(|v| v.to_string()),
            unattended: task.unattended.get().map(|k| k.as_str().to_string()),
            client: task.client(),
        };
        let r = blocking(|| JournalWriter::create(&self.store.dir, &header, self.store.durability));
        match r {
            Ok(w) => task.set_journal(Some(w)),
            Err(e) => self.journal_failed(task, &e.to_string()),
        }
    }

    fn append(&self, task: &Task, rec: Record) {
        // Every record (states with their errors, need_user reasons, step
        // outcomes) has each known secret value masked before it is written.
        let rec = mask_record(rec, &self.hub().config().security.secrets);
        // Only an append that syncs may block for long; a plain write goes
        // to the page cache inline (handing the worker over for it cost more
        // than the write).
        let r = task.with_journal(|w| {
            w.map(|w| {
                if w.syncs_on(&rec) {
                    blocking(|| w.append(&rec))
                } else {
                    w.append(&rec)
                }
            })
        });
        if let Some(Err(e)) = r {
            self.journal_failed(task, &e.to_string());
        }
        // A barrier synced everything written so far.
        task.release();
    }

    /// Sync whatever the task's journal has written and not yet synced, and
    /// send the messages held for it. Called before anything that may take
    /// time (a delay, a wait for a server or a person, the end of a run), so
    /// no message waits on an idle task.
    pub(crate) fn flush(&self, task: &Task) {
        let r = task.with_journal(|w| w.filter(|w| w.unsynced()).map(|w| blocking(|| w.flush())));
        if let Some(Err(e)) = r {
            self.journal_failed(task, &e.to_string());
        }
        task.release();
    }

    /// Run `fut`; if it does not finish at its first poll (it waits for
    /// something), flush first, so the held messages do not wait with it.
    pub(crate) async fn flushed_if_waiting<F: std::future::Future>(
        &self,
        task: &Task,
        fut: F,
    ) -> F::Output {
        crate::util::on_pending(fut, || self.flush(task)).await
    }

    /// A journal that cannot be written: the task goes on (its results are
    /// still sent), but it is no longer durable. Say so, loudly.
    fn journal_failed(&self, task: &Task, err: &str) {
        let msg = format!(
            "task {}: cannot write its journal in {} ({err}); the task continues but cannot be resumed after a crash",
            task.id,
            self.store.dir.display()
        );
        self.store.problem(msg.clone());
        task.set_journal(None);
        task.emit(json!({"type": "warning", "taskId": task.id, "message": msg}));
    }

    pub(crate) fn persist_state(&self, task: &Task) {
        // A journaled task's error is masked in memory as in its journal:
        // the same before a restart as after.
        let secrets = self.hub().config().security.secrets.clone();
        let journaled = task.with_journal(|w| w.is_some());
        let (state, error) = task.with(|d| {
            if let Some(e) = d.error.as_mut().filter(|_| journaled) {
                secrets.mask_string(&mut e.message);
                secrets.mask_string(&mut e.suggestion);
            }
            (d.state, d.error.clone())
        });
        self.append(
            task,
            Record::State {
                state: state_name(state),
                error: error.map(|e| json!(e)),
                ts: ts(),
            },
        );
    }

    pub(crate) fn persist_step_started(&self, task: &Task, i: usize, params: &Value) {
        let params = crate::history::redact(params, &self.hub().config().security);
        self.append(
            task,
            Record::StepStarted {
                index: i,
                params,
                ts: ts(),
            },
        );
    }

    pub(crate) fn persist_step_finished(
        &self,
        task: &Task,
        i: usize,
        security: &crate::config::SecurityConfig,
    ) {
        // Redacted straight from the task's copy (one copy, not two). A
        // journaled task keeps the redacted outcome in memory too, marked
        // `"redacted": true` when that changed it, so its status and result
        // read the same before a restart as after (secrets never reach the
        // journal, so the real one cannot come back from it).
        let journaled = task.with_journal(|w| w.is_some());
        let (state, outcome, var) = task.with(|d| {
            let name = task.plan.steps[i].step.save_as.as_ref();
            let var = name.and_then(|n| d.ctx.get(n).map(|v| json!({"name": n, "value": v})));
            let outcome = match &mut d.steps[i].outcome {
                Some(o) => {
                    let mut r = crate::history::redact(o, security);
                    if r != *o {
                        r["redacted"] = json!(true);
                        if journaled {
                            *o = r.clone();
                        }
                    }
                    r
                }
                None => Value::Null,
            };
            (d.steps[i].state, outcome, var)
        });
        self.append(
            task,
            Record::StepFinished {
                index: i,
                state: step_name(state),
                outcome,
                var: var.map(|v| crate::history::redact(&v, security)),
                ts: ts(),
            },
        );
    }

    pub(crate) fn persist_resume(&self, task: &Task, from: usize) {
        if task.with_journal(|w| w.is_none()) {
            // Recovered tasks reopen their journal for appending.
            let path = self.store.dir.join(format!("{}.jsonl", task.id));
            match blocking(|| JournalWriter::open_append(&path, self.store.durability)) {
                Ok(w) => task.set_journal(Some(w)),
                Err(e) => self.journal_failed(task, &e.to_string()),
            }
        }
        self.append(task, Record::Resume { from, ts: ts() });
    }

    pub(crate) fn persist_need_user(&self, task: &Task, i: usize, reason: &str, hash: &str) {
        self.append(
            task,
            Record::NeedUser {
                index: i,
                reason: reason.to_string(),
                params_hash: hash.to_string(),
                ts: ts(),
            },
        );
    }

    pub(crate) fn task_finished(&self, task: &Task) {
        let state = task.state();
        if state.is_terminal() || state == TaskState::Recoverable {
            self.append(
                task,
                Record::End {
                    state: state_name(state),
                    ts: ts(),
                },
            );
        }
        if state == TaskState::Success {
            // Final: nothing is appended again, and nothing resumes it.
            let journaled = task.with_journal(|w| w.is_some());
            task.compact();
            if journaled {
                let path = self.store.dir.join(format!("{}.jsonl", task.id));
                self.store.finished.put(task, &path);
            }
            // Retention as tasks finish, not only hourly: a busy hour must
            // not carry more than `maxTasks` tasks (and journals).
            let cfg = self.hub().config();
            if self.known() > cfg.task_engine.retention.max_tasks {
                self.prune_by(&cfg, Prune::Count);
            }
        } else if retention::resumable(state) {
            let cfg = self.hub().config();
            self.prune_resumable(&cfg, Prune::Count);
        }
    }

    /// Load the journals: running tasks become `recoverable`, started but
    /// unfinished steps `uncertain`. A task the finished-task index knows
    /// with its journal unchanged is not replayed (see `finished`). A bad
    /// journal is reported, never fatal.
    pub fn recover(&self) {
        let paths = match journal::list(&self.store.dir) {
            Ok(p) => p,
            // No journals: every index entry is dropped below.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                self.store
                    .problem(format!("cannot list {}: {e}", self.store.dir.display()));
                return;
            }
        };
        let (mut ix, missing) = self.store.finished.load();
        let mut r = Repairs::default();
        let (mut recovered, mut indexed) = (0usize, 0usize);
        let mut present = std::collections::HashSet::new();
        for path in paths {
            let Some(id) = path.file_stem().and_then(|s| s.to_str()).map(String::from) else {
                continue;
            };
            let known = ix.get(&id).map(|e| e.stamp);
            present.insert(id.clone());
            if known.is_some() && known == Stamp::of(&path).ok() {
                indexed += 1;
                continue;
            }
            match self.recover_one(&path) {
                Ok(task) if task.state() == TaskState::Success => {
                    // Final: into the index, not into memory.
                    task.compact();
                    match Finished::of(&task, &path) {
                        Some(e) => {
                            match (missing, known) {
                                (true, _) => {}
                                (false, None) => r.added += 1,
                                (false, Some(_)) => r.changed += 1,
                            }
                            ix.put_quiet(e);
                            indexed += 1;
                        }
                        None => {
                            self.tasks.insert(task.id.clone(), task);
                        }
                    }
                }
                Ok(task) => {
                    if known.is_some() {
                        // Indexed as finished, but its journal says otherwise now.
                        r.changed += 1;
                        ix.remove(&id);
                    }
                    // Sessions do not outlive the hub: the one the task ran
                    // for is gone, so a resume's instances stop with the task.
                    if let Some(c) = task.set_context_of() {
                        self.hub().instances().owner_gone(c.owner());
                    }
                    recovered += 1;
                    self.tasks.insert(task.id.clone(), task);
                }
                Err(_) if journal::never_committed(&path).unwrap_or(false) => {
                    // Its header never reached the disk whole: nobody was told
                    // of the task (its messages wait for the first sync).
                    tracing::warn!(path = %path.display(), "removing a task journal whose header was never synced (the hub stopped as the task began; no message about it was sent)");
                    if let Err(e) = journal::remove(&path) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot remove the unsynced journal");
                    }
                    present.remove(&id);
                }
                Err(e) => {
                    if known.is_some() {
                        r.removed += 1;
                        ix.remove(&id);
                    }
                    self.store.problem(format!(
                        "task journal {} was not loaded: {e}",
                        path.display()
                    ))
                }
            }
        }
        let gone: Vec<String> = ix
            .entries()
            .filter(|e| !present.contains(&e.id))
            .map(|e| e.id.clone())
            .collect();
        r.removed += gone.len();
        for id in gone {
            ix.remove(&id);
        }
        if missing && indexed > 0 {
            tracing::info!(dir = %self.store.dir.display(), rebuilt = indexed, "tasks index was missing; rebuilt from the journals");
        }
        if (missing && indexed > 0) || r.any() {
            // One rewrite for everything put quietly above.
            ix.compact();
        }
        r.log("tasks", "journals", &self.store.dir);
        tracing::info!(dir = %self.store.dir.display(), finished = indexed, loaded = recovered, "tasks index ready");
        if recovered > 0 {
            tracing::info!(count = recovered, dir = %self.store.dir.display(), "tasks recovered from their journals");
        }
    }

    pub(crate) fn recover_one(&self, path: &Path) -> Result<Arc<Task>, String> {
        let replayed = journal::read(path).map_err(|e| e.to_string())?;
        if let Some(torn) = &replayed.torn {
            tracing::warn!(path = %path.display(), %torn, "a torn last record (crash mid-write) was truncated");
        }
        let mut records = replayed.records.into_iter();
        let Some(Record::Header {
            task_id,
            batch_id,
            steps,
            options,
            created_ms,
            call_key,
            context,
            view,
            unattended,
            client,
            ..
        }) = records.next()
        else {
            return Err("the first record is not a header".into());
        };
        let req: BatchReq = serde_json::from_value(json!({"steps": steps, "options": options}))
            .map_err(|e| format!("the batch in the header does not parse: {e}"))?;
        let mut req = req;
        let mut needed = std::collections::BTreeSet::new();
        for step in req.steps.iter_mut() {
            step.params = super::redacted::templated(&step.params, false, &mut needed);
        }
        let plan = super::validate::validate_structure(&req.steps, &req.options, &self.templates)
            .map_err(|p| {
            format!(
                "the batch in the header is invalid: {}",
                p.iter()
                    .map(|x| x.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        })?;
        let task = Task::new(
            task_id,
            batch_id,
            plan,
            None,
            tokio_util::sync::CancellationToken::new(),
        );
        if let Some(k) = call_key {
            let _ = task.call_key.set(k);
        }
        if let Some(c) = context {
            task.set_context(c);
        }
        if let Some(v) = view {
            let _ = task.view.set(v.into());
        }
        task.set_client(client);
        if let Some(k) = unattended
            .as_deref()
            .and_then(super::task::Unattended::parse)
        {
            let _ = task.unattended.set(k);
        }
        task.with(|d| {
            d.created_ms = created_ms;
            for rec in records {
                match rec {
                    Record::StepStarted { index, ts, .. } if index < d.steps.len() => {
                        d.steps[index].state = StepState::Running;
                        d.updated_ms = ts;
                    }
                    Record::StepFinished {
                        index,
                        state,
                        outcome,
                        var,
                        ts,
                    } if index < d.steps.len() => {
                        let st = parse_step(&state).unwrap_or(StepState::Failed);
                        d.steps[index].state = st;
                        d.last_success = Some(
                            outcome
                                .get("success")
                                .and_then(Value::as_bool)
                                .unwrap_or(false)
                                || st == StepState::Success,
                        );
                        d.steps[index].outcome = Some(outcome);
                        if let Some(v) = var {
                            if let (Some(n), Some(val)) =
                                (v.get("name").and_then(Value::as_str), v.get("value"))
                            {
                                d.ctx.insert(n.to_string(), val.clone());
                            }
                        }
                        d.updated_ms = ts;
                    }
                    Record::State { state, error, ts } => {
                        if let Some(s) = parse_state(&state) {
                            d.state = s;
                        }
                        d.error = error.and_then(|e| serde_json::from_value(e).ok());
                        d.updated_ms = ts;
                    }
                    Record::End { state, ts } => {
                        if let Some(s) = parse_state(&state) {
                            d.state = s;
                        }
                        d.updated_ms = ts;
                    }
                    Record::Resume { .. } => d.resumed = true,
                    _ => {}
                }
            }
        });
        // The hub stopped under a running task: it may be resumed.
        if task.state().is_active() {
            task.transition(TaskEvent::HubStopped);
            task.with(|d| {
                for s in d.steps.iter_mut() {
                    if s.state == StepState::Running {
                        s.state = StepState::Uncertain;
                    }
                }
            });
            tracing::warn!(task = %task.id, "task was running when the hub stopped; it is now recoverable (resume_task)");
        }
        Ok(Arc::new(task))
    }
}

fn state_name(s: TaskState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn step_name(s: StepState) -> String {
    s.name().to_string()
}

/// A state by its wire name (`need_user`, …).
pub(crate) fn parse_state(s: &str) -> Option<TaskState> {
    serde_json::from_value(json!(s)).ok()
}

fn parse_step(s: &str) -> Option<StepState> {
    serde_json::from_value(json!(s)).ok()
}
