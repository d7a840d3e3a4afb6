//! Per-context instances of `scope: "context"` servers: one process per
//! client context (a chat tab's browser), started on that context's first
//! call, capped by `maxInstances`, stopped after `instanceIdleMs` unused,
//! when their owner ends, or on a reload that changes the entry.
//!
//! The server's own handle in [`super::HubState::servers`] is the template:
//! it lists the tools (every instance offers the same ones, so the
//! aggregate does not change as instances come and go) and is what health
//! probes. Calls never go to it; they go to the instance of their context.
//!
//! Each instance is an ordinary supervised server ([`ServerHandle`]): a
//! crash restarts that instance alone, and stopping one kills its whole
//! process group. Its supervisor's events come here, not to the hub's
//! event task, so an instance never rebuilds the tool list.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch, Notify};

mod acquire;
mod background;

pub(in crate::hub) use background::{run_events, run_reaper};

use crate::client_context::ClientContext;
use crate::mcp::supervisor::{ServerEvent, ServerHandle, ServerState};

/// The longest the reaper sleeps between two looks.
const REAP_MAX_WAIT: Duration = Duration::from_secs(30);

/// How many ended owners the pool remembers (the oldest are forgotten).
const MAX_ENDED_OWNERS: usize = 4096;

/// One running (or starting) instance.
pub struct InstanceSlot {
    pub server: String,
    pub context: ClientContext,
    pub handle: ServerHandle,
    started: Instant,
    started_at: SystemTime,
    last_use: Mutex<Instant>,
    calls: AtomicU64,
    /// Calls running on it right now.
    active: AtomicUsize,
    /// Its owner ended while it was in use: stop it once it is not.
    orphan: AtomicBool,
    state: watch::Sender<ServerState>,
}

impl InstanceSlot {
    fn touch(&self) {
        if let Ok(mut t) = self.last_use.lock() {
            *t = Instant::now();
        }
    }

    fn last_use(&self) -> Instant {
        self.last_use.lock().map(|t| *t).unwrap_or(self.started)
    }
}

#[derive(Default)]
struct Pool {
    slots: BTreeMap<(String, ClientContext), Arc<InstanceSlot>>,
    /// Supervisor generation -> instance, for routing its events.
    by_gen: HashMap<u64, Arc<InstanceSlot>>,
    /// Contexts a running task holds (its instance outlives its owner
    /// and idleness until the task is done).
    holds: HashMap<ClientContext, usize>,
    /// Owners known to have ended (sessions that closed, and the sessions
    /// of tasks recovered after a restart), oldest first, at most
    /// [`MAX_ENDED_OWNERS`]: an instance started later for one of their
    /// contexts (a task still running there) is an orphan from birth and
    /// stops when its last call or task lets it go, not at idleness.
    ended: HashSet<Arc<str>>,
    ended_order: VecDeque<Arc<str>>,
}

impl Pool {
    fn note_ended(&mut self, owner: &str) {
        if self.ended.contains(owner) {
            return;
        }
        let owner: Arc<str> = owner.into();
        self.ended.insert(owner.clone());
        self.ended_order.push_back(owner);
        while self.ended_order.len() > MAX_ENDED_OWNERS {
            if let Some(old) = self.ended_order.pop_front() {
                self.ended.remove(&old);
            }
        }
    }
}

/// The hub's per-context instances (one per hub, behind an `Arc`).
pub struct Instances {
    pool: Mutex<Pool>,
    next_gen: AtomicU64,
    events: mpsc::UnboundedSender<ServerEvent>,
    /// Wakes the idle reaper when something it times may have changed.
    wake: Notify,
    /// The hub's event bus: every client hears of an instance's start,
    /// state changes and stop (`instance_status`).
    bus: broadcast::Sender<Arc<Value>>,
}

/// What `health_status`, `/health` and the dashboard show of an instance.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceView {
    pub server: String,
    pub context: String,
    pub state: ServerState,
    pub pid: Option<i32>,
    pub started_at: String,
    pub uptime_ms: u64,
    pub calls: u64,
    pub active: usize,
    pub last_use: String,
    pub idle_ms: u64,
    pub restarts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A call's use of an instance: while it lives the instance is busy; its
/// drop marks the last use (and stops an orphan).
pub struct InstanceUse {
    pub slot: Arc<InstanceSlot>,
    pool: Arc<Instances>,
}

impl Drop for InstanceUse {
    fn drop(&mut self) {
        self.slot.touch();
        if self.slot.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.pool.settle(&self.slot.context);
        }
    }
}

/// A task's hold on its context: see [`Instances::hold`].
pub struct ContextHold {
    context: ClientContext,
    pool: Arc<Instances>,
}

impl Drop for ContextHold {
    fn drop(&mut self) {
        let left = {
            let mut p = self.pool.lock();
            let n = p.holds.get(&self.context).copied().unwrap_or(1) - 1;
            if n == 0 {
                p.holds.remove(&self.context);
            } else {
                p.holds.insert(self.context.clone(), n);
            }
            n
        };
        if left == 0 {
            self.pool.settle(&self.context);
        }
    }
}

impl Instances {
    /// The pool and the receiver of its instances' supervisor events
    /// (for [`run_events`]).
    pub fn new(
        bus: broadcast::Sender<Arc<Value>>,
    ) -> (Arc<Instances>, mpsc::UnboundedReceiver<ServerEvent>) {
        let (events, rx) = mpsc::unbounded_channel();
        let pool = Instances {
            pool: Mutex::new(Pool::default()),
            next_gen: AtomicU64::new(1),
            events,
            wake: Notify::new(),
            bus,
        };
        (Arc::new(pool), rx)
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        match self.pool.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Keep `context`'s instances alive (past idleness and their owner's
    /// end) until the returned hold is dropped: a task holds its context
    /// while it runs, so its browser survives between steps.
    pub fn hold(self: &Arc<Self>, context: &ClientContext) -> ContextHold {
        *self.lock().holds.entry(context.clone()).or_default() += 1;
        ContextHold {
            context: context.clone(),
            pool: self.clone(),
        }
    }

    /// Every instance now, by server then context.
    pub fn list(&self) -> Vec<InstanceView> {
        let slots: Vec<Arc<InstanceSlot>> = self.lock().slots.values().cloned().collect();
        let now = Instant::now();
        slots
            .iter()
            .map(|s| {
                let st = s.handle.status();
                let last = s.last_use();
                let last_at = SystemTime::now()
                    .checked_sub(now.saturating_duration_since(last))
                    .unwrap_or(s.started_at);
                InstanceView {
                    server: s.server.clone(),
                    context: s.context.to_string(),
                    state: *s.state.borrow(),
                    pid: st.as_ref().and_then(|st| st.pid),
                    started_at: crate::util::rfc3339(s.started_at),
                    uptime_ms: s.started.elapsed().as_millis() as u64,
                    calls: s.calls.load(Ordering::Relaxed),
                    active: s.active.load(Ordering::Relaxed),
                    last_use: crate::util::rfc3339(last_at),
                    idle_ms: now.saturating_duration_since(last).as_millis() as u64,
                    restarts: st.as_ref().map(|st| st.restarts).unwrap_or(0),
                    last_error: st.and_then(|st| st.last_error),
                }
            })
            .collect()
    }

    /// Restart the instance of `server` in `context` (a retry's
    /// `rebuild_context`); false when there is none.
    pub fn restart(&self, server: &str, context: &ClientContext, reason: &str) -> bool {
        let slot = self
            .lock()
            .slots
            .get(&(server.to_string(), context.clone()))
            .cloned();
        match slot {
            Some(s) => {
                s.handle.restart(reason);
                true
            }
            None => false,
        }
    }

    /// Every instance's handle, keyed `server/context` (the prober pings
    /// each like a server of its own).
    pub fn handles(&self) -> Vec<(String, ServerHandle)> {
        self.lock()
            .slots
            .values()
            .map(|s| (format!("{}/{}", s.server, s.context), s.handle.clone()))
            .collect()
    }

    /// How many instances run now (all servers).
    pub fn count(&self) -> usize {
        self.lock().slots.len()
    }

    /// Stop the instance of `server` in `context`; false when there is none.
    pub fn stop(&self, server: &str, context: &ClientContext, reason: &str) -> bool {
        let slot = self
            .lock()
            .slots
            .remove(&(server.to_string(), context.clone()));
        match slot {
            Some(s) => {
                self.retire(s, reason.to_string());
                true
            }
            None => false,
        }
    }

    /// The owner (a session) ended: stop its instances now, or once the
    /// calls and tasks still using them are done.
    pub fn end_owner(&self, owner: &str) {
        self.lock().note_ended(owner);
        self.end_where(|c| c.owner() == owner, "its session ended");
    }

    /// `owner` is gone though nothing said so in this hub run: a task
    /// recovered from its journal after a restart names a session of the
    /// run before. Its instances stop once the task lets them go.
    pub fn owner_gone(&self, owner: &str) {
        if owner != crate::client_context::HUB_OWNER {
            self.lock().note_ended(owner);
        }
    }

    /// Stop the instances of every context `which` picks, now or once the
    /// calls and tasks still using them are done.
    pub fn end_where(&self, which: impl Fn(&ClientContext) -> bool, reason: &str) {
        let mut stopped = Vec::new();
        {
            let mut p = self.lock();
            let mine: Vec<(String, ClientContext)> =
                p.slots.keys().filter(|(_, c)| which(c)).cloned().collect();
            for key in mine {
                let busy = p.holds.contains_key(&key.1)
                    || p.slots
                        .get(&key)
                        .is_some_and(|s| s.active.load(Ordering::Acquire) > 0);
                if busy {
                    if let Some(s) = p.slots.get(&key) {
                        s.orphan.store(true, Ordering::Release);
                    }
                } else if let Some(s) = p.slots.remove(&key) {
                    stopped.push(s);
                }
            }
        }
        for s in stopped {
            self.retire(s, reason.to_string());
        }
    }

    /// Stop every instance of `server` (removed, disabled, or no longer
    /// per-context); the contexts they served.
    fn drain(&self, server: &str) -> Vec<Arc<InstanceSlot>> {
        let mut p = self.lock();
        let keys: Vec<_> = p
            .slots
            .keys()
            .filter(|(s, _)| s == server)
            .cloned()
            .collect();
        keys.iter().filter_map(|k| p.slots.remove(k)).collect()
    }

    /// A context's last call or hold is gone: stop its orphaned instances,
    /// and let the reaper time the idle ones.
    fn settle(&self, context: &ClientContext) {
        let mut stopped = Vec::new();
        {
            let mut p = self.lock();
            if !p.holds.contains_key(context) {
                let keys: Vec<_> = p
                    .slots
                    .iter()
                    .filter(|((_, c), s)| {
                        c == context
                            && s.orphan.load(Ordering::Acquire)
                            && s.active.load(Ordering::Acquire) == 0
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                stopped.extend(keys.iter().filter_map(|k| p.slots.remove(k)));
            }
        }
        for s in stopped {
            self.retire(s, "its session ended".to_string());
        }
        self.wake.notify_one();
    }

    /// Instances unused past their server's `instanceIdleMs`, removed; and
    /// when the next one falls due.
    fn idle_sweep(
        &self,
        now: Instant,
        idle_of: impl Fn(&str) -> Duration,
    ) -> (Vec<Arc<InstanceSlot>>, Option<Instant>) {
        let mut p = self.lock();
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        for (key, s) in &p.slots {
            if s.active.load(Ordering::Acquire) > 0 || p.holds.contains_key(&key.1) {
                continue;
            }
            let at = s.last_use() + idle_of(&key.0);
            if at <= now {
                due.push(key.clone());
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        let removed = due.iter().filter_map(|k| p.slots.remove(k)).collect();
        (removed, next)
    }
}

impl Instances {
    /// Tell every client what became of an instance (`instance_status`):
    /// sent once the pool already shows it, so a `health_check` after it
    /// agrees.
    fn announce(&self, slot: &InstanceSlot, state: ServerState, reason: Option<&str>) {
        let pid = slot.handle.status().and_then(|s| s.pid);
        let _ = self.bus.send(Arc::new(serde_json::json!({
            "type": "instance_status",
            "server": slot.server,
            "context": slot.context.to_string(),
            "state": state,
            "pid": pid,
            "reason": reason,
        })));
    }

    /// Is this very instance still in the pool?
    fn holds_slot(&self, slot: &Arc<InstanceSlot>) -> bool {
        self.lock()
            .slots
            .get(&(slot.server.clone(), slot.context.clone()))
            .is_some_and(|s| Arc::ptr_eq(s, slot))
    }

    /// Stop an instance already taken out of the pool, in the background
    /// (its process group is killed), and say so.
    fn retire(&self, slot: Arc<InstanceSlot>, reason: String) {
        self.announce(&slot, ServerState::Stopped, Some(&reason));
        stop_slot(slot, reason);
    }
}

/// Stop an instance in the background (its process group is killed).
fn stop_slot(slot: Arc<InstanceSlot>, reason: String) {
    // Without a runtime (an /mcp session dropped as the hub ends), the
    // shutdown that is under way stops every instance.
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    rt.spawn(async move {
        tracing::info!(server = %slot.server, context = %slot.context, %reason,
            calls = slot.calls.load(Ordering::Relaxed), "stopping server instance");
        slot.handle.stop().await;
    });
}

impl super::Hub {
    /// Whether `caller` may see and stop the instances of `context`: the
    /// main token every context; a client only those of its own live
    /// sessions (a context's owner is a session id).
    pub fn owns_context(&self, caller: &crate::caller::Caller, context: &ClientContext) -> bool {
        caller.is_main()
            || self
                .connected
                .presence(context.owner())
                .is_some_and(|p| caller.may_see(p.client.as_deref()))
    }

    /// `stop_instance` for `caller`: stop `server`'s instance in `context`.
    /// Another session's context, for a client, is refused exactly as one
    /// with no instance (`NOT_FOUND`).
    pub fn stop_instance(
        &self,
        caller: &crate::caller::Caller,
        server: &str,
        context: &ClientContext,
    ) -> Result<(), crate::errors::HubError> {
        let reason = format!("stop_instance from session {}", caller.session);
        if self.owns_context(caller, context) && self.instances.stop(server, context, &reason) {
            return Ok(());
        }
        Err(crate::errors::HubError::new(
            crate::errors::ErrorType::NotFound,
            format!("server {server} has no instance for context {context}"),
        )
        .with_suggestion("health_status lists each server's instances with their contexts"))
    }
}
