//! An unattended task's questions (MCP Tasks with MRTR, SEP-2663 and
//! SEP-2322): a server that asks for elicitation or sampling in the middle
//! of one of the task's calls has its request kept here, under a key of
//! its own (`input-<n>`), until the client answers it by `tasks/update`.
//! Meanwhile the task reads `input_required` with those requests; each
//! answer goes to its server at once (several may be open, and a client may
//! answer them one at a time). A server that stops waiting takes its
//! question away.
//!
//! Questions live in memory: after a restart the call that asked is gone,
//! and the resumed step asks again (or, with no client's capabilities
//! known, fails saying nobody can answer).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{InputRequests, InputResponses};
use rmcp::ErrorData;
use tokio::sync::oneshot;

use crate::mcp::input::{self, Answer, Ask};
use crate::mcp::relay::{CallLink, Forward};

/// What the client that started the task can answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Answerable {
    pub sampling: bool,
    pub elicitation: bool,
}

struct Open {
    ask: Ask,
    reply: oneshot::Sender<Result<Answer, ErrorData>>,
}

/// The open questions of one task.
pub struct TaskQuestions {
    can: Answerable,
    open: Mutex<BTreeMap<String, Open>>,
    next: AtomicU64,
}

impl TaskQuestions {
    pub fn new(can: Answerable) -> Arc<TaskQuestions> {
        Arc::new(TaskQuestions {
            can,
            open: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
        })
    }

    /// A link for one call of the task: its server's requests become
    /// questions here; its progress and logs have nobody to go to.
    pub fn link(self: &Arc<Self>, session: &str) -> CallLink {
        let (mut link, mut forwards) =
            CallLink::new(session.into(), self.can.sampling, self.can.elicitation);
        link.hears_progress = false;
        let me = self.clone();
        tokio::spawn(async move {
            while let Some(f) = forwards.recv().await {
                if let Forward::Ask { ask, reply } = f {
                    me.ask(ask, reply);
                }
            }
        });
        link
    }

    fn ask(&self, ask: Ask, reply: oneshot::Sender<Result<Answer, ErrorData>>) {
        let key = format!("input-{}", self.next.fetch_add(1, Ordering::Relaxed));
        // Tests wait on this line.
        tracing::info!(%key, "a task's server asks its client: {key} (tasks/get shows it)");
        if let Ok(mut open) = self.open.lock() {
            open.insert(key, Open { ask, reply });
        }
    }

    /// The questions still waiting (a server that gave up took its own
    /// away); `None` when there are none.
    pub fn pending(&self) -> Option<InputRequests> {
        let mut open = self.open.lock().ok()?;
        open.retain(|_, o| !o.reply.is_closed());
        if open.is_empty() {
            return None;
        }
        let mut out = InputRequests::new();
        for (key, o) in open.iter() {
            if let Ok(r) = input::request_of(&o.ask) {
                out.insert(key.clone(), r);
            }
        }
        Some(out)
    }

    /// Give each answer to the question of its key; a key that is no open
    /// question is ignored, an answer of the wrong shape is refused (the
    /// question stays open). The refusals, by key.
    pub fn answer(&self, responses: &InputResponses) -> Vec<(String, String)> {
        let Ok(mut open) = self.open.lock() else {
            return Vec::new();
        };
        let mut refused = Vec::new();
        for (key, given) in responses {
            let Some(o) = open.get(key) else { continue };
            match input::read_answer(&o.ask, given, key) {
                Ok(a) => {
                    if let Some(o) = open.remove(key) {
                        let _ = o.reply.send(Ok(a));
                    }
                }
                Err(e) => refused.push((key.clone(), e.message.to_string())),
            }
        }
        refused
    }
}
