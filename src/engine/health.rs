//! The engine's part of `health_status`: tasks that can be resumed or wait
//! for a person, and task journals that could not be read.

use serde_json::{json, Value};

use super::service::Engine;
use super::state::TaskState;
use crate::hub::health::Check;

/// What the engine adds to the health report.
pub struct TaskHealth {
    /// `{"recoverable": [ids], "needUser": [ids], "journalSyncs": n}`.
    pub summary: Value,
    pub checks: Vec<Check>,
}

impl Engine {
    pub fn health(&self) -> TaskHealth {
        let tasks = self.list();
        let ids_in = |st: TaskState| -> Vec<String> {
            tasks
                .iter()
                .filter(|t| t.state() == st)
                .map(|t| t.id.clone())
                .collect()
        };
        let recoverable = ids_in(TaskState::Recoverable);
        let need_user = ids_in(TaskState::NeedUser);
        let problems = self.store.problems();
        let check = Check {
            name: "tasks".into(),
            ok: problems.is_empty(),
            message: if problems.is_empty() {
                format!(
                    "{} tasks known; {} recoverable, {} waiting for a confirmation",
                    self.known(),
                    recoverable.len(),
                    need_user.len()
                )
            } else {
                format!("task journals with problems: {}", problems.join("; "))
            },
            fix: if !problems.is_empty() {
                Some("inspect or move away the named journal files under <stateDir>/tasks; other tasks are unaffected".into())
            } else {
                recoverable.first().map(|id| {
                    format!("resume with {{\"type\":\"resume_task\",\"taskId\":\"{id}\"}} (task_status shows what is left)")
                })
            },
        };
        TaskHealth {
            summary: json!({
                "recoverable": recoverable,
                "needUser": need_user,
                "journalSyncs": crate::store::journal::syncs_total(),
            }),
            checks: vec![check],
        }
    }
}
