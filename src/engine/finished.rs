//! The index of finished tasks: `<stateDir>/tasks.index.jsonl` (a
//! [`store::index_file`](crate::store::index_file)), one entry per task
//! that succeeded: what `list_tasks` shows of it, what it filters on, and
//! the [`Stamp`] of its journal. A succeeded task is final (nothing is
//! appended to its journal again and nothing resumes it), so at start-up
//! its journal is not replayed when its entry's stamp still matches: only
//! unfinished, failed, cancelled and recoverable tasks are loaded into
//! memory, exactly as before. A task known only from the index is replayed
//! from its journal when it is asked for by id (`task_status`, …).
//!
//! Kept in step with the journals: the entry is put right after the task's
//! `end` record is written; a journal without an entry (a crash between
//! the two), one whose stamp differs (changed behind the hub's back) and
//! every journal when the index is missing are replayed at start, and
//! entries whose journal is gone are dropped; what was repaired is logged.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::task::Task;
use crate::store::index_file::{Indexed, Loaded, MapIndex, Stamp};

/// The index file, in the state folder beside `tasks/` (the journal
/// folder holds journals only).
pub const FILE: &str = "tasks.index.jsonl";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    pub id: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// The tool of each step as written (for `list_tasks {tool}`).
    pub tools: Vec<String>,
    /// The task as `list_tasks` shows it, kept as its JSON text (a few
    /// hundred bytes, where a parsed object costs several times that).
    pub summary: String,
    /// Of the journal when the entry was made.
    pub stamp: Stamp,
    /// The `callKey` the batch came with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_key: Option<crate::store::journal::CallKeyMark>,
    /// The client whose token made the task (absent: the main token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

impl Indexed for Finished {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Finished {
    /// The entry of a succeeded task whose journal is `journal`; `None`
    /// when the journal cannot be `stat`ed (a task that lost its journal is
    /// kept in memory only, as before).
    pub fn of(task: &Task, journal: &Path) -> Option<Finished> {
        let stamp = Stamp::of(journal).ok()?;
        let summary = task.to_json(false).to_string();
        let (created_ms, updated_ms) = task.with(|d| (d.created_ms, d.updated_ms));
        Some(Finished {
            id: task.id.clone(),
            created_ms,
            updated_ms,
            tools: task
                .plan
                .steps
                .iter()
                .map(|p| p.step.tool.clone())
                .collect(),
            summary,
            stamp,
            call_key: task.call_key.get().cloned(),
            client: task.client_name().map(String::from),
        })
    }

    pub fn uses_tool(&self, want: &str) -> bool {
        self.tools.iter().any(|t| crate::util::names_tool(t, want))
    }
}

/// The finished-task index of one task store.
pub struct FinishedIndex {
    path: PathBuf,
    ix: Mutex<MapIndex<Finished>>,
}

impl FinishedIndex {
    /// An empty index for the task store in `state_dir`;
    /// [`load`](Self::load) reads the file (start-up, in `recover`).
    pub fn new(state_dir: &Path) -> FinishedIndex {
        let path = state_dir.join(FILE);
        FinishedIndex {
            ix: Mutex::new(MapIndex::empty(&path)),
            path,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, MapIndex<Finished>> {
        // A panic while holding it leaves a usable map: entries are whole.
        self.ix.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Read the file afresh (start-up), saying whether it was missing (or
    /// unreadable: every journal is replayed then).
    pub fn load(&self) -> (MutexGuard<'_, MapIndex<Finished>>, bool) {
        let mut g = self.lock();
        let (ix, loaded) = MapIndex::load(&self.path);
        let missing = match loaded {
            Loaded::Read { .. } => false,
            Loaded::Missing => true,
            Loaded::Unreadable(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot read the tasks index; every journal is replayed");
                true
            }
        };
        *g = ix;
        (g, missing)
    }

    /// Put the entry of a task that just succeeded.
    pub fn put(&self, task: &Task, journal: &Path) {
        if let Some(e) = Finished::of(task, journal) {
            self.lock().put(e);
        }
    }
}
