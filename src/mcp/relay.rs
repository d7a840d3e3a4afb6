//! What an upstream server sends that is meant for the clients above the hub
//! rather than for the hub itself: progress, log messages, sampling and
//! elicitation requests, resource updates and list changes.
//!
//! Two routes, both seams the layers above fill in:
//!
//! - [`Inflight`]: the calls now running on one server, each with the
//!   [`CallLink`] of the client call that caused it (an MCP `tools/call` at
//!   `/mcp`). Progress is matched by the upstream progress token; a sampling
//!   or elicitation request goes to the one client that has calls in flight
//!   on that server (or, over Streamable HTTP, to the call whose stream it
//!   arrived on).
//! - [`Relay`]: server-wide notices (list changes, resource updates, logs),
//!   installed by the MCP endpoint into the hub's [`RelaySlot`].
//!
//! The mcp layer only routes; it never knows who listens.

#![allow(deprecated)] // sampling and logging are deprecated by SEP-2577 but still spoken

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    RequestId, ResourceUpdatedNotificationParam,
};
use rmcp::ErrorData;
use tokio::sync::{mpsc, oneshot};

use super::input::{Answer, Ask};
use super::ordered::Order;

/// What travels down a [`CallLink`] to the client call it belongs to.
#[derive(Debug)]
pub enum Forward {
    /// Progress of the upstream call (the token is the upstream one; the
    /// receiver puts its client's token in its place).
    Progress(ProgressNotificationParam),
    /// A log message of the server, for a client that asked for logs.
    Log(LoggingMessageNotificationParam),
    /// A request to answer; dropping `reply` tells the server it was refused.
    Ask {
        ask: Ask,
        reply: oneshot::Sender<Result<Answer, ErrorData>>,
    },
}

/// How many forwards may wait for one client call. A sender waits for
/// room (progress, an ask) or, where it cannot wait, drops the forward
/// (a log line, progress that came before its call was bound): a client
/// that reads slowly slows its server's notifications down instead of
/// growing the hub.
pub const LINK_QUEUE: usize = 128;

/// The way back to one client call: cheap to clone, dead once that call
/// has returned (sends then fail and are ignored).
#[derive(Debug, Clone)]
pub struct CallLink {
    /// The client session the call belongs to.
    pub session: Arc<str>,
    /// Whether that client can answer sampling, elicitation and
    /// `roots/list` requests.
    pub can_sample: bool,
    pub can_elicit: bool,
    pub can_list_roots: bool,
    /// A stateless client's call: an upstream's `InputRequiredResult` goes
    /// back to it ([`MrtrRelay`](super::input::MrtrRelay)); `None`: the hub
    /// asks the client itself.
    pub mrtr: Option<Arc<super::input::MrtrRelay>>,
    /// Whether the call's progress reaches its client (then its answer
    /// waits for the progress sent before it); `false` for a link that
    /// carries only the server's questions.
    pub hears_progress: bool,
    tx: mpsc::Sender<Forward>,
}

impl CallLink {
    pub fn new(
        session: Arc<str>,
        can_sample: bool,
        can_elicit: bool,
    ) -> (CallLink, mpsc::Receiver<Forward>) {
        let (tx, rx) = mpsc::channel(LINK_QUEUE);
        (
            CallLink {
                session,
                can_sample,
                can_elicit,
                can_list_roots: false,
                mrtr: None,
                hears_progress: true,
                tx,
            },
            rx,
        )
    }

    /// Whether the client can answer `ask`.
    pub fn can_answer(&self, ask: &Ask) -> bool {
        match ask {
            Ask::Sampling(_) => self.can_sample,
            Ask::Elicitation(_) => self.can_elicit,
            Ask::Roots => self.can_list_roots,
        }
    }

    /// Send to the call, waiting for room; false when it has already
    /// returned.
    pub async fn send(&self, f: Forward) -> bool {
        self.tx.send(f).await.is_ok()
    }

    /// Send without waiting; false when the call has returned or its
    /// queue is full (the forward is dropped).
    pub fn try_send(&self, f: Forward) -> bool {
        match self.tx.try_send(f) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::debug!(session = %self.session, "a client call's queue is full; a forward was dropped");
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

struct Entry {
    key: u64,
    /// `None` until the request has been sent ([`InflightGuard::bind`]).
    request: Option<RequestId>,
    token: Option<ProgressToken>,
    link: CallLink,
}

/// Progress notifications kept for a call not bound yet, at most: a server
/// that answers progress for tokens nobody holds cannot grow the hub.
const EARLY_MAX: usize = 64;

/// The calls, and progress that arrived for a token no call holds while a
/// call was still unbound (see [`Inflight::progress`]).
#[derive(Default)]
struct Calls {
    entries: Vec<Entry>,
    early: std::collections::VecDeque<ProgressNotificationParam>,
}

impl Calls {
    /// The call bound to progress `token`.
    fn holding(&self, token: &ProgressToken) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|x| x.token.as_ref() == Some(token))
    }
}

/// The linked calls in flight on one server. Held briefly, never across
/// `.await`.
#[derive(Clone, Default)]
pub struct Inflight {
    calls: Arc<Mutex<Calls>>,
    next: Arc<AtomicU64>,
    /// Keeps a linked call's notifications ahead of its answer.
    pub order: Order,
}

/// Removes its call from [`Inflight`] when dropped.
pub struct InflightGuard {
    inflight: Inflight,
    key: u64,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if let Ok(mut c) = self.inflight.calls.lock() {
            c.entries.retain(|x| x.key != self.key);
            if c.entries.iter().all(|x| x.token.is_some()) {
                // Nobody left to claim what came early.
                c.early.clear();
            }
        }
    }
}

impl InflightGuard {
    /// The call has been sent as `request` with progress `token`. Progress
    /// the server sent for that token before this (it may answer as soon
    /// as it reads the request) is passed on now, in its order.
    pub fn bind(&self, request: RequestId, token: ProgressToken) {
        if let Ok(mut c) = self.inflight.calls.lock() {
            let Calls { entries, early } = &mut *c;
            if let Some(x) = entries.iter_mut().find(|x| x.key == self.key) {
                if early.iter().any(|p| p.progress_token == token) {
                    let kept = std::mem::take(early);
                    for p in kept {
                        if p.progress_token == token {
                            // At most EARLY_MAX < LINK_QUEUE, into a fresh link.
                            x.link.try_send(Forward::Progress(p));
                        } else {
                            early.push_back(p);
                        }
                    }
                }
                x.request = Some(request);
                x.token = Some(token);
            }
        }
    }
}

impl Inflight {
    /// Count a call in before it is sent: a server may ask for sampling or
    /// elicitation as soon as it reads the request, before the sender
    /// learns its request id ([`InflightGuard::bind`] adds that).
    pub fn reserve(&self, link: CallLink) -> InflightGuard {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut c) = self.calls.lock() {
            c.entries.push(Entry {
                key,
                request: None,
                token: None,
                link,
            });
        }
        InflightGuard {
            inflight: self.clone(),
            key,
        }
    }

    /// The call an upstream progress token belongs to (what
    /// [`Inflight::progress`] routes by).
    #[cfg(test)]
    fn by_token(&self, token: &ProgressToken) -> Option<CallLink> {
        let c = self.calls.lock().ok()?;
        c.holding(token).map(|x| x.link.clone())
    }

    /// Route a progress notification to the call holding its token. While
    /// a call is counted in but not bound yet (its request is on its way
    /// and the server may already be reporting), progress for a token
    /// nobody holds is kept for [`InflightGuard::bind`], at most
    /// [`EARLY_MAX`]; otherwise it is dropped, as the spec asks (a `/ws`
    /// call's, or one that already returned). Waits while the call's queue
    /// is full, except for a stateless client's call, whose progress is
    /// dropped then.
    pub async fn progress(&self, p: ProgressNotificationParam) {
        let link = {
            let Ok(mut c) = self.calls.lock() else {
                return;
            };
            match c.holding(&p.progress_token) {
                Some(x) => x.link.clone(),
                None => {
                    if c.entries.iter().any(|x| x.token.is_none()) {
                        if c.early.len() >= EARLY_MAX {
                            c.early.pop_front();
                        }
                        c.early.push_back(p);
                    }
                    return;
                }
            }
        };
        if !link.hears_progress {
            return;
        }
        if link.mrtr.is_some() {
            // A stateless client's call may be held for minutes, unread,
            // waiting for its retry: its server never waits on it (the spec
            // lets progress be dropped).
            link.try_send(Forward::Progress(p));
            return;
        }
        link.send(Forward::Progress(p)).await;
    }

    /// The call sent upstream as `request`.
    pub fn by_request(&self, request: &RequestId) -> Option<CallLink> {
        let c = self.calls.lock().ok()?;
        c.entries
            .iter()
            .find(|x| x.request.as_ref() == Some(request))
            .map(|x| x.link.clone())
    }

    /// One live link per client session with calls in flight here.
    pub fn sessions(&self) -> Vec<CallLink> {
        let Ok(c) = self.calls.lock() else {
            return Vec::new();
        };
        let mut out: Vec<CallLink> = Vec::new();
        for x in c.entries.iter().rev() {
            if !x.link.is_closed() && !out.iter().any(|l| l.session == x.link.session) {
                out.push(x.link.clone());
            }
        }
        out
    }
}

/// Server-wide notices, for every client that listens.
#[derive(Debug)]
pub enum Notice {
    ResourcesChanged,
    PromptsChanged,
    ResourceUpdated(ResourceUpdatedNotificationParam),
    Log(LoggingMessageNotificationParam),
}

/// Receives [`Notice`]s from every server (implemented by the MCP endpoint).
pub trait Relay: Send + Sync {
    fn notice(&self, server: &str, notice: Notice);
    /// The log level servers should be set to (the most verbose any client
    /// asked for), or `None` when no client asked.
    fn log_level(&self) -> Option<LoggingLevel>;
}

/// Where the hub keeps its [`Relay`]: shared with every server's handler.
#[derive(Clone, Default)]
pub struct RelaySlot(Arc<RwLock<Option<Arc<dyn Relay>>>>);

impl RelaySlot {
    pub fn set(&self, relay: Arc<dyn Relay>) {
        match self.0.write() {
            Ok(mut g) => *g = Some(relay),
            Err(poisoned) => *poisoned.into_inner() = Some(relay),
        }
    }

    pub fn get(&self) -> Option<Arc<dyn Relay>> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// Severity rank of a level (debug = 0 … emergency = 7).
pub fn level_rank(l: LoggingLevel) -> u8 {
    match l {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    #[test]
    fn inflight_routes_by_token_and_forgets_on_drop() {
        let inflight = Inflight::default();
        let (a, _ra) = CallLink::new("s1".into(), true, false);
        let (b, _rb) = CallLink::new("s2".into(), false, true);
        let ga = sent(&inflight, 1, token(10), a);
        let gb = sent(&inflight, 2, token(11), b);
        assert_eq!(
            &*inflight.by_token(&token(11)).map(|l| l.session).unwrap(),
            "s2"
        );
        assert_eq!(
            &*inflight
                .by_request(&NumberOrString::Number(1))
                .unwrap()
                .session,
            "s1"
        );
        assert_eq!(inflight.sessions().len(), 2);
        drop(gb);
        assert!(inflight.by_token(&token(11)).is_none());
        assert_eq!(inflight.sessions().len(), 1);
        drop(ga);
        assert!(inflight.sessions().is_empty());
    }

    #[test]
    fn one_link_per_session_and_closed_links_skipped() {
        let inflight = Inflight::default();
        let (a1, _r1) = CallLink::new("s".into(), true, true);
        let (a2, r2) = CallLink::new("s".into(), true, true);
        let _g1 = sent(&inflight, 1, token(1), a1);
        let _g2 = sent(&inflight, 2, token(2), a2);
        assert_eq!(inflight.sessions().len(), 1);
        drop(r2);
        // The newest link is closed; the older one of the same session answers.
        assert_eq!(inflight.sessions().len(), 1);
    }

    /// A call counted in and sent as request `id` (what `mcp::send` does).
    fn sent(inflight: &Inflight, id: i64, token: ProgressToken, link: CallLink) -> InflightGuard {
        let guard = inflight.reserve(link);
        guard.bind(NumberOrString::Number(id), token);
        guard
    }

    #[test]
    fn a_reserved_call_is_counted_before_its_request_id_is_known() {
        let inflight = Inflight::default();
        let (a, _ra) = CallLink::new("s".into(), true, true);
        let g = inflight.reserve(a);
        // A request from the server can already find its client...
        assert_eq!(inflight.sessions().len(), 1);
        assert!(inflight.by_request(&NumberOrString::Number(7)).is_none());
        // ...and once sent, so can its id and progress token.
        g.bind(NumberOrString::Number(7), token(70));
        assert!(inflight.by_request(&NumberOrString::Number(7)).is_some());
        assert!(inflight.by_token(&token(70)).is_some());
        drop(g);
        assert!(inflight.sessions().is_empty());
    }

    fn progress(t: i64, n: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(token(t), n)
    }

    fn progress_seen(rx: &mut mpsc::Receiver<Forward>) -> Vec<(ProgressToken, f64)> {
        let mut seen = Vec::new();
        while let Ok(f) = rx.try_recv() {
            if let Forward::Progress(p) = f {
                seen.push((p.progress_token, p.progress));
            }
        }
        seen
    }

    #[tokio::test]
    async fn progress_that_beats_the_bind_reaches_its_call_in_order() {
        let inflight = Inflight::default();
        // Nobody unbound: progress for a token nobody holds is dropped.
        inflight.progress(progress(5, 0.1)).await;
        // Two calls on their way at once; the server reports on both
        // before either sender has learnt its token.
        let (a, mut ra) = CallLink::new("s".into(), true, true);
        let (b, mut rb) = CallLink::new("s2".into(), true, true);
        let ga = inflight.reserve(a);
        let gb = inflight.reserve(b);
        inflight.progress(progress(5, 1.0)).await;
        inflight.progress(progress(6, 9.0)).await;
        inflight.progress(progress(5, 2.0)).await;
        assert!(progress_seen(&mut ra).is_empty(), "held until bound");
        ga.bind(NumberOrString::Number(1), token(5));
        assert_eq!(
            progress_seen(&mut ra),
            [(token(5), 1.0), (token(5), 2.0)],
            "its own, in order; not the one from before it was counted in, nor the other call's"
        );
        // Bound: later progress goes straight through.
        inflight.progress(progress(5, 3.0)).await;
        assert_eq!(progress_seen(&mut ra), [(token(5), 3.0)]);
        gb.bind(NumberOrString::Number(2), token(6));
        assert_eq!(progress_seen(&mut rb), [(token(6), 9.0)]);
        drop((ga, gb));
        // With every call bound or gone, nothing is kept.
        inflight.progress(progress(7, 1.0)).await;
        let (c, mut rc) = CallLink::new("s3".into(), true, true);
        let gc = inflight.reserve(c);
        gc.bind(NumberOrString::Number(3), token(7));
        assert!(progress_seen(&mut rc).is_empty());
    }

    #[tokio::test]
    async fn early_progress_is_bounded() {
        let inflight = Inflight::default();
        let (a, mut ra) = CallLink::new("s".into(), true, true);
        let g = inflight.reserve(a);
        for n in 0..(EARLY_MAX + 10) {
            inflight.progress(progress(1, n as f64)).await;
        }
        g.bind(NumberOrString::Number(1), token(1));
        let seen = progress_seen(&mut ra);
        assert_eq!(seen.len(), EARLY_MAX, "the oldest are let go");
        assert_eq!(seen[0].1, 10.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_call_queue_holds_its_sender_until_the_call_reads() {
        let inflight = Inflight::default();
        let (a, mut ra) = CallLink::new("s".into(), true, true);
        let _g = sent(&inflight, 1, token(1), a);
        for n in 0..LINK_QUEUE {
            inflight.progress(progress(1, n as f64)).await;
        }
        // The queue is full: the next progress waits, it is not dropped.
        let next = inflight.progress(progress(1, -1.0));
        tokio::pin!(next);
        let waited = tokio::time::timeout(std::time::Duration::from_secs(1), &mut next).await;
        assert!(waited.is_err(), "a full queue makes the sender wait");
        assert!(ra.recv().await.is_some());
        next.await;
        let seen = progress_seen(&mut ra);
        assert_eq!(seen.len(), LINK_QUEUE);
        assert_eq!(
            seen.last().map(|s| s.1),
            Some(-1.0),
            "nothing lost, in order"
        );
    }

    #[test]
    fn levels_rank_in_spec_order() {
        assert!(level_rank(LoggingLevel::Debug) < level_rank(LoggingLevel::Info));
        assert!(level_rank(LoggingLevel::Alert) < level_rank(LoggingLevel::Emergency));
    }

    /// A stateless client's call may sit unread while it is held for its
    /// retry: its progress never makes the server wait (dropped when the
    /// queue is full), while a session's call still slows its server down.
    #[tokio::test]
    async fn a_held_calls_full_queue_never_makes_its_server_wait() {
        let inflight = Inflight::default();
        let (mut held, _unread) = CallLink::new("stateless".into(), true, true);
        held.mrtr = Some(Arc::new(crate::mcp::input::MrtrRelay::default()));
        let g = inflight.reserve(held);
        g.bind(NumberOrString::Number(1), token(5));
        let all = async {
            for i in 0..(LINK_QUEUE + 10) {
                inflight.progress(progress(5, i as f64)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), all)
            .await
            .expect("progress never waits on a held call");

        let (session, _unread2) = CallLink::new("session".into(), true, true);
        let g2 = inflight.reserve(session);
        g2.bind(NumberOrString::Number(2), token(6));
        let fill = async {
            for i in 0..(LINK_QUEUE + 1) {
                inflight.progress(progress(6, i as f64)).await;
            }
        };
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(200), fill)
                .await
                .is_err(),
            "a session's call still holds its server back when it reads slowly"
        );
    }
}
