//! Retention of finished tasks, in memory and on disk (their journals).
//!
//! - Successful tasks: older than `taskEngine.retention.maxAgeHours`, or the
//!   oldest beyond `maxTasks` (all tasks counted).
//! - Resumable tasks (failed, cancelled, recoverable: `resume_task` may
//!   still take them up): older than `resumableMaxAgeHours` (their last
//!   change), or the oldest beyond `resumableMaxTasks`.
//!
//! Age and count at start-up and hourly; the count also each time a task
//! ends. A task running, retrying or waiting for a person is never pruned.

use std::time::Duration;

use super::super::service::Engine;
use super::super::state::TaskState;
use crate::config::Config;
use crate::store::journal;

/// What a prune looks at: the hourly tick (and start-up) checks age and
/// count; a finishing task only the count.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prune {
    AgeAndCount,
    Count,
}

/// A task `resume_task` may still take up, kept under its own bounds.
pub(crate) fn resumable(s: TaskState) -> bool {
    matches!(
        s,
        TaskState::Failed | TaskState::Cancelled | TaskState::Recoverable
    )
}

impl Engine {
    /// Retention (see the module docs); how many tasks were pruned.
    pub fn prune(&self, cfg: &Config) -> usize {
        self.prune_by(cfg, Prune::AgeAndCount) + self.prune_resumable(cfg, Prune::AgeAndCount)
    }

    pub(crate) fn prune_by(&self, cfg: &Config, by: Prune) -> usize {
        let now = crate::util::now_ms();
        let max_age = cfg.task_engine.retention.max_age.as_millis() as u64;
        let mut done: Vec<(u64, String)> = self
            .tasks
            .iter()
            .filter(|t| t.state() == TaskState::Success)
            .map(|t| (t.with(|d| d.updated_ms), t.id.clone()))
            .collect();
        // And those known only from the finished-task index.
        done.extend(
            self.store
                .finished
                .lock()
                .entries()
                .filter(|e| !self.tasks.contains_key(&e.id))
                .map(|e| (e.updated_ms, e.id.clone())),
        );
        done.sort();
        let over = self
            .known()
            .saturating_sub(cfg.task_engine.retention.max_tasks);
        let victims = done.iter().enumerate().filter(|(i, (updated, _))| {
            (by == Prune::AgeAndCount && now.saturating_sub(*updated) > max_age) || *i < over
        });
        let pruned = self.drop_tasks(victims.map(|(_, (_, id))| id));
        self.pruned(pruned, by, "finished");
        pruned
    }

    /// Failed, cancelled and recoverable tasks beyond their bounds.
    pub(crate) fn prune_resumable(&self, cfg: &Config, by: Prune) -> usize {
        let r = &cfg.task_engine.retention;
        let now = crate::util::now_ms();
        let max_age = r.resumable_max_age.as_millis() as u64;
        let mut kept: Vec<(u64, String)> = self
            .tasks
            .iter()
            .filter(|t| resumable(t.state()))
            .map(|t| (t.with(|d| d.updated_ms), t.id.clone()))
            .collect();
        kept.sort();
        let over = kept.len().saturating_sub(r.resumable_max_tasks);
        let victims = kept.iter().enumerate().filter(|(i, (updated, _))| {
            (by == Prune::AgeAndCount && now.saturating_sub(*updated) > max_age) || *i < over
        });
        let pruned = self.drop_tasks(victims.map(|(_, (_, id))| id));
        self.pruned(pruned, by, "resumable");
        pruned
    }

    /// Remove each task's journal, then the task; a journal that cannot be
    /// removed keeps its task.
    fn drop_tasks<'a>(&self, ids: impl Iterator<Item = &'a String>) -> usize {
        let mut pruned = 0usize;
        for id in ids {
            let path = self.store.dir.join(format!("{id}.jsonl"));
            if let Err(e) = journal::remove(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove a pruned task journal");
                    continue;
                }
            }
            self.tasks.remove(id);
            self.store.finished.lock().remove(id);
            pruned += 1;
        }
        pruned
    }

    fn pruned(&self, pruned: usize, by: Prune, what: &str) {
        if pruned == 0 {
            return;
        }
        // Each task past a count prunes one: not worth an info line.
        if by == Prune::AgeAndCount {
            tracing::info!(pruned, what, "tasks pruned (taskEngine.retention)");
        } else {
            tracing::debug!(pruned, what, "tasks pruned (taskEngine.retention)");
        }
        crate::trim::soon();
    }
}

/// Prune at start-up, then every hour until shutdown (age and count); the
/// counts are also enforced each time a task ends.
pub fn spawn_retention(engine: Engine) {
    tokio::spawn(async move {
        let hub = engine.hub().clone();
        loop {
            engine.prune(&hub.config());
            tokio::select! {
                _ = hub.shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
            }
        }
    });
}
