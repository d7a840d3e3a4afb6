//! The engine service handle.

use std::sync::Arc;

use dashmap::DashMap;

use super::approvals::Approvals;
use super::store::Store;
use super::task::Task;
use super::template::Templates;
use crate::hub::observe::CallObserver;
use crate::hub::Hub;
use crate::store::journal::CallKeyMark;

/// The task engine: live and finished tasks of this hub run. A cheap handle;
/// it reaches the call layer through its [`Hub`] and tells the observer
/// (the recorder) of each finished step.
#[derive(Clone)]
pub struct Engine(Arc<EngineState>);

pub struct EngineState {
    hub: Hub,
    observer: Arc<dyn CallObserver>,
    pub(crate) tasks: DashMap<String, Arc<Task>>,
    pub(crate) templates: Templates,
    pub approvals: Approvals,
    pub store: Store,
    /// `callKey`s of batches and single calls: a repeat does not run again.
    pub call_keys: crate::callkeys::CallKeys,
    /// Unattended tasks running now, under `server.maxUnattendedTasks`
    /// (`unattended::place`).
    pub unattended: crate::session::InFlight,
}

impl std::ops::Deref for Engine {
    type Target = EngineState;
    fn deref(&self) -> &EngineState {
        &self.0
    }
}

impl Engine {
    pub fn new(hub: Hub, observer: Arc<dyn CallObserver>) -> Engine {
        let cfg = hub.config();
        let store = Store::new(&cfg);
        // A spilled answer is redacted as history is, with the config in
        // force when it is written.
        let h = hub.clone();
        let redact: crate::callkeys::Redact =
            Arc::new(move |v| crate::history::redact(v, &h.config().security));
        let call_keys = crate::callkeys::CallKeys::with_spill(
            &cfg.task_engine.state_dir.join("callkeys"),
            redact,
        );
        Engine(Arc::new(EngineState {
            hub,
            observer,
            tasks: DashMap::new(),
            templates: Templates::new(),
            approvals: Approvals::default(),
            store,
            call_keys,
            unattended: Default::default(),
        }))
    }

    /// The call layer this engine runs steps through.
    pub fn hub(&self) -> &Hub {
        &self.0.hub
    }

    /// Who is told of each finished step (the recorder).
    pub fn observer(&self) -> &dyn CallObserver {
        self.0.observer.as_ref()
    }

    pub fn templates(&self) -> &Templates {
        &self.templates
    }

    /// A task by id: from memory, else (a task that succeeded before this
    /// start) replayed from its journal once and kept.
    pub fn get(&self, id: &str) -> Option<Arc<Task>> {
        if let Some(t) = self.tasks.get(id) {
            return Some(t.clone());
        }
        // Known as finished? Otherwise no such task.
        self.store.finished.lock().get(id)?;
        let path = self.store.dir.join(format!("{id}.jsonl"));
        match self.recover_one(&path) {
            Ok(task) => {
                task.compact();
                Some(self.tasks.entry(id.to_string()).or_insert(task).clone())
            }
            Err(e) => {
                self.store.problem(format!(
                    "task journal {} was not loaded: {e}",
                    path.display()
                ));
                None
            }
        }
    }

    /// The id and key mark of the task a batch with `callKey` `key`
    /// started, in memory or in the finished-task index (after a restart
    /// the in-memory keys are gone, the journals keep them). Reads no
    /// file: [`load`](Self::load) the task by its id. Keys are the
    /// token's own: only a task `client` made is found (`None`: the main
    /// token's).
    pub fn by_call_key(&self, key: &str, client: Option<&str>) -> Option<(String, CallKeyMark)> {
        let live = self.tasks.iter().find_map(|t| {
            t.call_key
                .get()
                .filter(|k| k.key == key && t.client_name() == client)
                .map(|k| (t.id.clone(), k.clone()))
        });
        if live.is_some() {
            return live;
        }
        let ix = self.store.finished.lock();
        let found = ix.entries().find_map(|e| {
            e.call_key
                .as_ref()
                .filter(|k| k.key == key && e.client.as_deref() == client)
                .map(|k| (e.id.clone(), k.clone()))
        });
        found
    }

    /// [`get`](Self::get), with a finished task's journal read back on the
    /// blocking pool (a 1,000-step journal is megabytes: not on the
    /// runtime's thread, where it would stall every other client).
    pub async fn load(&self, id: &str) -> Option<Arc<Task>> {
        let on_disk = !self.tasks.contains_key(id) && self.store.finished.lock().get(id).is_some();
        if on_disk {
            let (me, id) = (self.clone(), id.to_string());
            let _ = crate::store::offload::blocking(move || Ok(me.get(&id))).await;
        }
        self.get(id)
    }

    /// How many tasks this hub knows: in memory and only in the
    /// finished-task index.
    pub fn known(&self) -> usize {
        let ix = self.store.finished.lock();
        ix.len()
            + self
                .tasks
                .iter()
                .filter(|t| ix.get(&t.id).is_none())
                .count()
    }

    pub fn list(&self) -> Vec<Arc<Task>> {
        let mut v: Vec<_> = self.tasks.iter().map(|t| t.clone()).collect();
        // One lock per task, not one per comparison.
        v.sort_by_cached_key(|t| t.with(|d| d.created_ms));
        v
    }
}
