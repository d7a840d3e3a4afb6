//! A task: one batch's plan, its live state and its owner connection.
//! The runner task is the only writer of a task's state; status queries
//! read a snapshot under a short lock (never held across `.await`).

use crate::client_context::ClientContext;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::state::{StepState, TaskEvent, TaskState};
use super::validate::Plan;
use crate::caller::Owner;
use crate::errors::HubError;
use crate::session::{Outbox, SessionId};

#[derive(Debug, Clone)]
pub struct StepData {
    pub state: StepState,
    /// The last `batch_step_result` body of this step (without type/batchId).
    pub outcome: Option<Value>,
}

#[derive(Debug, Clone)]
pub struct TaskData {
    pub state: TaskState,
    pub steps: Vec<StepData>,
    /// Template context: `{"vars": {...}, "<saveAs>": {"result","success","error"}}`.
    pub ctx: Map<String, Value>,
    /// Did the last step that ran succeed? (`when: "success"`).
    pub last_success: Option<bool>,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub error: Option<HubError>,
    pub resumed: bool,
    /// The step index a `need_user` is waiting on.
    pub waiting_step: Option<usize>,
    /// Why that step waits (the rule's reason, or an uncertain step's).
    pub waiting_reason: Option<String>,
}

pub struct Task {
    pub id: String,
    pub batch_id: Value,
    pub plan: Arc<Plan>,
    pub data: Mutex<TaskData>,
    /// Replaced on resume; cancelling it stops the current run.
    pub cancel: Mutex<CancellationToken>,
    /// The connection that started (or resumed) the task, if still there.
    pub owner: Mutex<Option<Outbox>>,
    /// The session that started the task through a `hub__` control tool
    /// (no owner connection): its steps are called and logged as that
    /// session's work.
    caller: Mutex<Option<SessionId>>,
    /// Held while a runner drives the task: one resume wins, others are refused.
    pub driving: Arc<tokio::sync::Mutex<()>>,
    /// Bumped each time a run of the task ends (for `task_status` `wait`).
    pub finished: tokio::sync::watch::Sender<u64>,
    /// The task's journal writer (`None` when not durable).
    journal: Mutex<Option<crate::store::journal::JournalWriter>>,
    /// Called with each step's `batch_step_result` (replays diff against it).
    observer: Mutex<Option<StepObserver>>,
    /// Waits before each step (replay pacing); empty = none.
    delays: Mutex<Vec<std::time::Duration>>,
    /// Events for the owner that wait for the journal's next sync, in order
    /// (see [`Task::emit`]), already written as their frames.
    held: Mutex<Vec<String>>,
    /// The `callKey` the batch came with (journaled in its header).
    pub call_key: std::sync::OnceLock<crate::store::journal::CallKeyMark>,
    /// The view the task was started in (`/ws/<view>`, a helper called
    /// there): each step is called within it (journaled in its header).
    pub view: std::sync::OnceLock<Arc<str>>,
    /// The principal that made the task (the client of `clients` whose
    /// token started it; unset: the main token). Its steps are that
    /// client's calls, its questions that client's, and only that client
    /// and the main token see it (journaled in its header).
    principal: std::sync::OnceLock<Arc<str>>,
    /// Set for a task no client drives (an MCP task): the hub resumes it
    /// after a restart (journaled in its header).
    pub unattended: std::sync::OnceLock<Unattended>,
    /// An unattended task's open questions to its client (servers'
    /// elicitation or sampling mid-step); in memory only.
    pub questions: std::sync::OnceLock<Arc<super::questions::TaskQuestions>>,
    /// The client context its steps run in, when set (journaled in its
    /// header); else the session's own.
    context: Mutex<Option<ClientContext>>,
}

/// Called with each step's body (its `batch_step_result` without the task's
/// ids and `raw`: index, id, tool, success, result, error, skipped…); a
/// message it returns goes to the owner right before that result, in the
/// task's order.
pub type StepObserver = Arc<dyn Fn(usize, &Value) -> Option<Value> + Send + Sync>;

impl Task {
    pub fn new(
        id: String,
        batch_id: Value,
        plan: Plan,
        owner: Option<Outbox>,
        cancel: CancellationToken,
    ) -> Task {
        let now = crate::util::now_ms();
        let mut ctx = Map::new();
        ctx.insert(
            super::validate::VARS.into(),
            Value::Object(plan.options.variables.clone().unwrap_or_default()),
        );
        let steps = vec![
            StepData {
                state: StepState::Pending,
                outcome: None
            };
            plan.steps.len()
        ];
        Task {
            id,
            batch_id,
            plan: Arc::new(plan),
            data: Mutex::new(TaskData {
                state: TaskState::Pending,
                steps,
                ctx,
                last_success: None,
                created_ms: now,
                updated_ms: now,
                error: None,
                resumed: false,
                waiting_step: None,
                waiting_reason: None,
            }),
            cancel: Mutex::new(cancel),
            owner: Mutex::new(owner),
            caller: Mutex::new(None),
            driving: Arc::new(tokio::sync::Mutex::new(())),
            finished: tokio::sync::watch::channel(0).0,
            journal: Mutex::new(None),
            observer: Mutex::new(None),
            delays: Mutex::new(Vec::new()),
            held: Mutex::new(Vec::new()),
            call_key: std::sync::OnceLock::new(),
            view: std::sync::OnceLock::new(),
            principal: std::sync::OnceLock::new(),
            unattended: std::sync::OnceLock::new(),
            questions: std::sync::OnceLock::new(),
            context: Mutex::new(None),
        }
    }

    /// Read or change the task's data under its lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut TaskData) -> R) -> R {
        match self.data.lock() {
            Ok(mut d) => f(&mut d),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    pub fn set_observer(&self, o: StepObserver) {
        if let Ok(mut slot) = self.observer.lock() {
            *slot = Some(o);
        }
    }

    pub fn observer(&self) -> Option<StepObserver> {
        self.observer.lock().ok().and_then(|o| o.clone())
    }

    pub fn set_delays(&self, d: Vec<std::time::Duration>) {
        if let Ok(mut slot) = self.delays.lock() {
            *slot = d;
        }
    }

    pub fn delay_before(&self, i: usize) -> std::time::Duration {
        self.delays
            .lock()
            .ok()
            .and_then(|d| d.get(i).copied())
            .unwrap_or_default()
    }

    pub fn set_journal(&self, w: Option<crate::store::journal::JournalWriter>) {
        match self.journal.lock() {
            Ok(mut j) => *j = w,
            Err(p) => *p.into_inner() = w,
        }
    }

    /// Use the journal writer under its lock (one runner per task, so the
    /// lock is never contended on the hot path).
    pub fn with_journal<R>(
        &self,
        f: impl FnOnce(Option<&mut crate::store::journal::JournalWriter>) -> R,
    ) -> R {
        match self.journal.lock() {
            Ok(mut j) => f(j.as_mut()),
            Err(p) => f(p.into_inner().as_mut()),
        }
    }

    /// A task that succeeded keeps only what `task_status` shows: its
    /// journal file is closed (one open file per finished task would run
    /// into the descriptor limit), and the replay hooks and the saved step
    /// results of the template context (each step's outcome stays) go.
    pub fn compact(&self) {
        self.set_journal(None);
        if let Ok(mut o) = self.observer.lock() {
            *o = None;
        }
        if let Ok(mut d) = self.delays.lock() {
            *d = Vec::new();
        }
        self.with(|d| {
            d.ctx.retain(|k, _| k == super::validate::VARS);
        });
    }

    pub fn state(&self) -> TaskState {
        self.with(|d| d.state)
    }

    /// Apply a task event; an illegal one is refused and logged.
    pub fn transition(&self, ev: TaskEvent) -> Option<TaskState> {
        let next = self.with(|d| {
            let next = d.state.next(ev)?;
            d.state = next;
            d.updated_ms = crate::util::now_ms();
            Some(next)
        });
        if next.is_none() {
            tracing::warn!(task = %self.id, event = ?ev, state = ?self.state(), "illegal task transition refused");
        }
        next
    }

    /// Wait until the task is no longer active (or `limit` passes).
    pub async fn wait_inactive(&self, limit: std::time::Duration) {
        let mut rx = self.finished.subscribe();
        let _ = tokio::time::timeout(limit, async {
            while self.state().is_active() {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    pub fn cancel_token(&self) -> CancellationToken {
        match self.cancel.lock() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub fn set_cancel_token(&self, t: CancellationToken) {
        if let Ok(mut c) = self.cancel.lock() {
            *c = t;
        }
    }

    pub fn owner(&self) -> Option<Outbox> {
        self.owner.lock().ok().and_then(|o| o.clone())
    }

    pub fn set_owner(&self, o: Option<Outbox>) {
        if let Ok(mut slot) = self.owner.lock() {
            *slot = o;
        }
    }

    /// The principal that made the task (`None`: the main token).
    pub fn client(&self) -> Owner {
        self.principal.get().cloned()
    }

    /// The client's name (`None`: the main token).
    pub fn client_name(&self) -> Option<&str> {
        self.principal.get().map(|c| &**c)
    }

    /// Record who made the task (once, before it is journaled).
    pub fn set_client(&self, client: Owner) {
        if let Some(c) = client {
            let _ = self.principal.set(c);
        }
    }

    pub fn caller(&self) -> Option<SessionId> {
        self.caller.lock().ok().and_then(|c| c.clone())
    }

    /// Mark the task as run for `session` by a control tool (`""` = none).
    pub fn set_caller(&self, session: &str) {
        if let Ok(mut slot) = self.caller.lock() {
            *slot = (!session.is_empty()).then(|| SessionId::from(session));
        }
    }

    /// Run the task's steps in `context` from now on.
    pub fn set_context(&self, context: ClientContext) {
        if let Ok(mut slot) = self.context.lock() {
            *slot = Some(context);
        }
    }

    /// The context set for the task, if any (what its journal records).
    pub fn set_context_of(&self) -> Option<ClientContext> {
        self.context.lock().ok().and_then(|c| c.clone())
    }

    /// The client context the task's steps run in: the one set for it,
    /// else its session's, else one of the task's own.
    pub fn context(&self) -> ClientContext {
        self.set_context_of()
            .unwrap_or_else(|| match self.session() {
                Some(s) => ClientContext::session(&s, None),
                None => ClientContext::session(&format!("task:{}", self.id), None),
            })
    }

    /// The session a step's calls belong to: the owner connection's, else
    /// the calling session's, else none.
    pub fn session(&self) -> Option<SessionId> {
        self.owner()
            .map(|o| o.session.clone())
            .or_else(|| self.caller())
    }

    /// Send an event to the owner, if it is still connected. While the
    /// journal holds records that step durability has not synced yet, the
    /// event is held instead, behind any held before it, and goes out when
    /// the sync is made ([`Task::release`]): nothing reaches the client ahead
    /// of the record it reports, and the order never changes.
    ///
    /// The event is written as its frame here, once, from whatever typed
    /// form it has (a step's result and a state change are structs, not
    /// trees built for the occasion).
    pub fn emit(&self, msg: impl serde::Serialize) {
        if let Some(frame) = self.frame(&msg) {
            self.emit_text(frame);
        }
    }

    /// An event for the task's client, written as its frame (to be sent
    /// later with [`Task::emit_text`]). Every event is JSON made here, so
    /// this cannot fail; if it ever did, the event is not dropped without a
    /// word.
    pub fn frame(&self, msg: &impl serde::Serialize) -> Option<String> {
        match serde_json::to_string(msg) {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::error!(task = %self.id, error = %e, "an event for the task's client could not be written");
                None
            }
        }
    }

    /// [`Task::emit`] for an event already written as its frame.
    pub fn emit_text(&self, frame: String) {
        let mut held = match self.held.lock() {
            Ok(h) => h,
            Err(p) => p.into_inner(),
        };
        held.push(frame);
        if !self.unsynced() {
            self.send_held(&mut held);
        }
    }

    /// Send the held events, if the journal has no unsynced records now
    /// (the engine calls it after each sync).
    pub fn release(&self) {
        // The journal is asked under the held lock, as in `emit` (always
        // held, then journal): a record written meanwhile keeps its message.
        let mut held = match self.held.lock() {
            Ok(h) => h,
            Err(p) => p.into_inner(),
        };
        if !self.unsynced() {
            self.send_held(&mut held);
        }
    }

    /// How many events wait for the journal's next sync.
    pub fn held(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }

    fn unsynced(&self) -> bool {
        self.with_journal(|w| w.is_some_and(|w| w.unsynced()))
    }

    fn send_held(&self, held: &mut Vec<String>) {
        if held.is_empty() {
            return;
        }
        let owner = self.owner().filter(|o| !o.is_closed());
        for frame in held.drain(..) {
            if let Some(o) = &owner {
                o.send_text(frame);
            }
        }
    }

    pub fn steps_completed(&self) -> usize {
        self.with(|d| {
            d.steps
                .iter()
                .filter(|s| s.state.is_finished() || s.state == StepState::Failed)
                .count()
        })
    }

    /// The `task` object of `list_tasks` (`detail` false) or with every
    /// step and the variables (`hub__tool_batch`'s summary).
    pub fn to_json(&self, detail: bool) -> Value {
        let all = detail.then(|| 0..self.plan.steps.len());
        self.json(all)
    }

    /// The `task` object of `task_status`: the summary (`totalSteps`,
    /// `stepsCompleted`, `stepCounts` by state), the variables, one page of
    /// steps and `stepsPage` saying where the next page starts.
    pub fn status_json(&self, page: crate::protocol::StepPage) -> Value {
        let (range, info) = page.window(self.plan.steps.len());
        let mut v = self.json(Some(range));
        let counts = self.with(|d| {
            let mut m = Map::new();
            for s in &d.steps {
                let n = m.get(s.state.name()).and_then(Value::as_u64).unwrap_or(0);
                m.insert(s.state.name().to_string(), json!(n + 1));
            }
            m
        });
        v["stepCounts"] = Value::Object(counts);
        v["stepsPage"] = info;
        v
    }

    fn json(&self, steps: Option<std::ops::Range<usize>>) -> Value {
        self.with(|d| {
            let uncertain = d.steps.iter().position(|s| s.state == StepState::Uncertain);
            let completed = d
                .steps
                .iter()
                .filter(|s| s.state.is_finished() || s.state == StepState::Failed)
                .count();
            let resumable = d.state.resumable();
            let mut v = json!({
                "taskId": self.id,
                "batchId": self.batch_id,
                "state": d.state,
                "totalSteps": d.steps.len(),
                "stepsCompleted": completed,
                "createdAt": crate::util::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_millis(d.created_ms)),
                "updatedAt": crate::util::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_millis(d.updated_ms)),
                "resumable": resumable.is_ok(),
                "uncertainStep": uncertain,
            });
            if let Some(k) = self.call_key.get() {
                v["callKey"] = json!(k.key);
            }
            if let Some(c) = self.principal.get() {
                v["client"] = json!(c);
            }
            if let Err(why) = resumable {
                v["notResumableReason"] = json!(why);
            }
            if let Some(e) = &d.error {
                v["error"] = json!(e);
            }
            if let Some(w) = d.waiting_step {
                v["waitingStep"] = json!(w);
            }
            if let Some(range) = steps {
                v["steps"] = Value::Array(
                    d.steps
                        .iter()
                        .enumerate()
                        .skip(range.start)
                        .take(range.len())
                        .map(|(i, s)| {
                            let planned = &self.plan.steps[i].step;
                            let mut o = json!({
                                "stepIndex": i,
                                "stepId": planned.id,
                                "tool": planned.tool,
                                "state": s.state,
                            });
                            if let (Some(Value::Object(out)), Some(obj)) = (&s.outcome, o.as_object_mut()) {
                                for (k, val) in out {
                                    obj.entry(k.clone()).or_insert(val.clone());
                                }
                            }
                            o
                        })
                        .collect(),
                );
                v["variables"] = json!(d.ctx.get(super::validate::VARS));
            }
            v
        })
    }
}

#[cfg(test)]
mod tests;

/// How an unattended task's result is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unattended {
    /// One tool call run as a one-step batch: the result is step 0's
    /// outcome, as the call's own result.
    Call,
    /// A batch (`hub__tool_batch`, a resumed task): the result is the
    /// batch's summary.
    Batch,
}

impl Unattended {
    pub fn as_str(self) -> &'static str {
        match self {
            Unattended::Call => "call",
            Unattended::Batch => "batch",
        }
    }

    pub fn parse(s: &str) -> Option<Unattended> {
        match s {
            "call" => Some(Unattended::Call),
            "batch" => Some(Unattended::Batch),
            _ => None,
        }
    }
}
