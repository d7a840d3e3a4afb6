//! The engine service handle.

use std::sync::Arc;

use dashmap::DashMap;

use super::approvals::Approvals;
use super::store::Store;
use super::task::Task;
use super::template::Templates;
use crate::hub::observe::CallObserver;
use crate::hub::Hub;

/// The task engine: live and finished tasks of this hub run. A cheap handle;
/// it reaches the call layer through its [`Hub`] and tells the observer
/// (the recorder) of each finished step.
#[derive(Clone)]
pub struct Engine(Arc<Inner>);

pub struct Inner {
    hub: Hub,
    observer: Arc<dyn CallObserver>,
    pub(crate) tasks: DashMap<String, Arc<Task>>,
    pub(crate) templates: Templates,
    pub approvals: Approvals,
    pub store: Store,
}

impl std::ops::Deref for Engine {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl Engine {
    pub fn new(hub: Hub, observer: Arc<dyn CallObserver>) -> Engine {
        let store = Store::new(&hub.config());
        Engine(Arc::new(Inner {
            hub,
            observer,
            tasks: DashMap::new(),
            templates: Templates::new(),
            approvals: Approvals::default(),
            store,
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
