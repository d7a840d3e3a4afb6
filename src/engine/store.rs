//! Where and how tasks are journaled (`<stateDir>/tasks/`), and the journal
//! problems found at start-up.

use std::path::PathBuf;
use std::sync::Mutex;

use crate::config::{Config, Durability};
use crate::store::journal::SyncPolicy;

/// Where and how tasks are journaled.
pub struct Store {
    pub dir: PathBuf,
    pub(crate) durability: SyncPolicy,
    /// Journals that could not be read (shown by list_tasks and health).
    pub problems: Mutex<Vec<String>>,
    /// The tasks that succeeded, known without replaying their journals.
    pub finished: super::finished::FinishedIndex,
}

impl Store {
    pub fn new(cfg: &Config) -> Store {
        Store {
            dir: cfg.task_engine.state_dir.join("tasks"),
            finished: super::finished::FinishedIndex::new(&cfg.task_engine.state_dir),
            durability: match cfg.task_engine.durability {
                Durability::Step => SyncPolicy::Step,
                Durability::Batch => SyncPolicy::Batch,
            },
            problems: Mutex::new(Vec::new()),
        }
    }

    pub fn problems(&self) -> Vec<String> {
        self.problems.lock().map(|p| p.clone()).unwrap_or_default()
    }

    pub(crate) fn problem(&self, p: String) {
        tracing::error!("{p}");
        if let Ok(mut v) = self.problems.lock() {
            v.push(p);
        }
    }
}
