//! The task and step state machines: pure (no IO, no clock). Every change
//! goes through [`TaskState::next`] / [`StepState::next`], whose explicit
//! transition tables make illegal moves impossible.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Pending,
    Running,
    Retrying,
    NeedUser,
    Success,
    Failed,
    Recoverable,
    Cancelled,
}

/// What happened to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    Start,
    Retry,
    RetryDone,
    AskUser,
    UserAnswered,
    Succeed,
    Fail,
    Cancel,
    /// Found `running` at start-up: the hub stopped under it.
    HubStopped,
    Resume,
}

impl TaskState {
    pub const ALL: [TaskState; 8] = [
        TaskState::Pending,
        TaskState::Running,
        TaskState::Retrying,
        TaskState::NeedUser,
        TaskState::Success,
        TaskState::Failed,
        TaskState::Recoverable,
        TaskState::Cancelled,
    ];

    /// The transition table. `None` = illegal.
    pub fn next(self, ev: TaskEvent) -> Option<TaskState> {
        use TaskEvent as E;
        use TaskState as S;
        Some(match (self, ev) {
            (S::Pending, E::Start) => S::Running,
            (S::Running, E::Retry) => S::Retrying,
            (S::Retrying, E::RetryDone) => S::Running,
            (S::Running | S::Retrying, E::AskUser) => S::NeedUser,
            (S::NeedUser, E::UserAnswered) => S::Running,
            (S::Running | S::Retrying, E::Succeed) => S::Success,
            (S::Pending | S::Running | S::Retrying | S::NeedUser, E::Fail) => S::Failed,
            (S::Pending | S::Running | S::Retrying | S::NeedUser, E::Cancel) => S::Cancelled,
            (S::Pending | S::Running | S::Retrying | S::NeedUser, E::HubStopped) => S::Recoverable,
            (S::Failed | S::Recoverable | S::Cancelled, E::Resume) => S::Running,
            _ => return None,
        })
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Success | TaskState::Failed | TaskState::Cancelled
        )
    }

    pub fn is_active(self) -> bool {
        matches!(
            self,
            TaskState::Pending | TaskState::Running | TaskState::Retrying | TaskState::NeedUser
        )
    }

    /// Whether `resume_task` may continue the task, and if not, why.
    pub fn resumable(self) -> Result<(), &'static str> {
        match self {
            TaskState::Failed | TaskState::Recoverable | TaskState::Cancelled => Ok(()),
            TaskState::Success => Err("the task already finished successfully"),
            TaskState::Pending | TaskState::Running | TaskState::Retrying | TaskState::NeedUser => {
                Err("the task is still running")
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    Pending,
    Running,
    Success,
    Failed,
    Skipped,
    /// Started before the hub stopped, never finished: it may have run.
    Uncertain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepEvent {
    Start,
    Succeed,
    Fail,
    Skip,
    HubStopped,
    /// Resume: a failed or uncertain step is run again (or skipped by policy).
    Reset,
}

impl StepState {
    pub const ALL: [StepState; 6] = [
        StepState::Pending,
        StepState::Running,
        StepState::Success,
        StepState::Failed,
        StepState::Skipped,
        StepState::Uncertain,
    ];

    pub fn next(self, ev: StepEvent) -> Option<StepState> {
        use StepEvent as E;
        use StepState as S;
        Some(match (self, ev) {
            (S::Pending, E::Start) => S::Running,
            (S::Pending, E::Skip) => S::Skipped,
            (S::Running, E::Succeed) => S::Success,
            (S::Running, E::Fail) => S::Failed,
            (S::Running, E::Skip) => S::Skipped,
            (S::Running, E::HubStopped) => S::Uncertain,
            (S::Uncertain, E::Skip) => S::Skipped,
            (S::Failed | S::Uncertain | S::Running, E::Reset) => S::Pending,
            _ => return None,
        })
    }

    /// The state's wire name (`"pending"`, `"success"`…), as serde writes it.
    pub fn name(self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::Running => "running",
            StepState::Success => "success",
            StepState::Failed => "failed",
            StepState::Skipped => "skipped",
            StepState::Uncertain => "uncertain",
        }
    }

    /// A finished step never runs again.
    pub fn is_finished(self) -> bool {
        matches!(self, StepState::Success | StepState::Skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK_EVENTS: [TaskEvent; 10] = [
        TaskEvent::Start,
        TaskEvent::Retry,
        TaskEvent::RetryDone,
        TaskEvent::AskUser,
        TaskEvent::UserAnswered,
        TaskEvent::Succeed,
        TaskEvent::Fail,
        TaskEvent::Cancel,
        TaskEvent::HubStopped,
        TaskEvent::Resume,
    ];

    #[test]
    fn step_names_are_the_serde_names() {
        for s in StepState::ALL {
            assert_eq!(
                serde_json::to_value(s).ok(),
                Some(serde_json::json!(s.name()))
            );
        }
    }

    #[test]
    fn every_task_transition_is_as_tabled() {
        use TaskEvent as E;
        use TaskState as S;
        let legal: &[(S, E, S)] = &[
            (S::Pending, E::Start, S::Running),
            (S::Pending, E::Fail, S::Failed),
            (S::Pending, E::Cancel, S::Cancelled),
            (S::Pending, E::HubStopped, S::Recoverable),
            (S::Running, E::Retry, S::Retrying),
            (S::Running, E::AskUser, S::NeedUser),
            (S::Running, E::Succeed, S::Success),
            (S::Running, E::Fail, S::Failed),
            (S::Running, E::Cancel, S::Cancelled),
            (S::Running, E::HubStopped, S::Recoverable),
            (S::Retrying, E::RetryDone, S::Running),
            (S::Retrying, E::AskUser, S::NeedUser),
            (S::Retrying, E::Succeed, S::Success),
            (S::Retrying, E::Fail, S::Failed),
            (S::Retrying, E::Cancel, S::Cancelled),
            (S::Retrying, E::HubStopped, S::Recoverable),
            (S::NeedUser, E::UserAnswered, S::Running),
            (S::NeedUser, E::Fail, S::Failed),
            (S::NeedUser, E::Cancel, S::Cancelled),
            (S::NeedUser, E::HubStopped, S::Recoverable),
            (S::Failed, E::Resume, S::Running),
            (S::Recoverable, E::Resume, S::Running),
            (S::Cancelled, E::Resume, S::Running),
        ];
        for s in TaskState::ALL {
            for e in TASK_EVENTS {
                let expected = legal
                    .iter()
                    .find(|(a, b, _)| *a == s && *b == e)
                    .map(|t| t.2);
                assert_eq!(s.next(e), expected, "{s:?} --{e:?}-->");
            }
        }
    }

    #[test]
    fn success_is_final_and_not_resumable() {
        for e in TASK_EVENTS {
            assert_eq!(TaskState::Success.next(e), None);
        }
        assert!(TaskState::Success.resumable().is_err());
        assert!(TaskState::Running.resumable().is_err());
        assert!(TaskState::Recoverable.resumable().is_ok());
    }

    #[test]
    fn every_step_transition_is_as_tabled() {
        use StepEvent as E;
        use StepState as S;
        let events = [
            E::Start,
            E::Succeed,
            E::Fail,
            E::Skip,
            E::HubStopped,
            E::Reset,
        ];
        let legal: &[(S, E, S)] = &[
            (S::Pending, E::Start, S::Running),
            (S::Pending, E::Skip, S::Skipped),
            (S::Running, E::Succeed, S::Success),
            (S::Running, E::Fail, S::Failed),
            (S::Running, E::Skip, S::Skipped),
            (S::Running, E::HubStopped, S::Uncertain),
            (S::Running, E::Reset, S::Pending),
            (S::Uncertain, E::Skip, S::Skipped),
            (S::Uncertain, E::Reset, S::Pending),
            (S::Failed, E::Reset, S::Pending),
        ];
        for s in StepState::ALL {
            for e in events {
                let expected = legal
                    .iter()
                    .find(|(a, b, _)| *a == s && *b == e)
                    .map(|t| t.2);
                assert_eq!(s.next(e), expected, "{s:?} --{e:?}-->");
            }
        }
        assert!(StepState::Success.is_finished());
        assert!(!StepState::Uncertain.is_finished());
    }
}
