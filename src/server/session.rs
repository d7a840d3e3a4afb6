//! `/ws` sessions that outlive their socket.
//!
//! [`Session`] is the one owner of what a session is doing: its
//! [`SessionId`], its [`Outbox`] (numbered frames, kept for a resume, and
//! the session's cap on work in flight that every piece of work it starts
//! takes a place under), a secret resume token, and a cancellation token
//! for the single calls it started. The services that keep per-session
//! state (the per-context instances, the recorder, the current run) key it
//! by the `SessionId` and are told when the session ends, from
//! [`lifetime`]. A socket serves one session at a time. When the socket drops,
//! the session stays for `server.sessionGraceMs`: its calls and batches go
//! on and their frames queue, until a new socket resumes it
//! (`resume_session`) or the grace runs out. Then the session ends: its
//! single calls are cancelled, its recording and current run are closed,
//! and it is forgotten.

use std::sync::Arc;

use dashmap::DashMap;
use serde_json::Value;
use subtle::ConstantTimeEq;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::errors::{ErrorType, HubError};
use crate::protocol::{self, ResumeSessionReq};
use crate::session::{Admission, Outbox, OutboxLimits, OutboxReceiver, ResumeRefusal, SessionId};

/// One session.
pub struct Session {
    pub id: SessionId,
    /// 128 random bits, hex; compared in constant time, never logged.
    resume_token: String,
    pub outbox: Outbox,
    /// Cancelled when the session ends: its single calls stop with it.
    pub cancel: CancellationToken,
    /// When the session was opened (the oldest detached session goes first
    /// when there are too many).
    opened: tokio::time::Instant,
}

/// Every live session (cheap to clone).
#[derive(Clone, Default)]
pub struct Sessions {
    map: Arc<DashMap<SessionId, Arc<Session>>>,
}

/// Why a session ended, for its log line.
#[derive(Debug, Clone, Copy)]
enum Why {
    SocketClosed,
    GraceOver,
    Replaced,
    TooMany,
}

impl Sessions {
    /// A new session for a socket the gate let in as `admitted`; its
    /// `hello` is the first frame queued.
    pub fn open(
        &self,
        app: &App,
        admitted: Admission,
        evict: CancellationToken,
    ) -> (Arc<Session>, OutboxReceiver) {
        let hub = &app.hub;
        let cfg = hub.config();
        let id = SessionId::new();
        let limits = OutboxLimits {
            queue: cfg.server.send_queue.max(8),
            bytes: cfg.server.resume_buffer_bytes,
            resumable: !cfg.server.session_grace.is_zero(),
        };
        let (mut outbox, rx) = Outbox::new(id.clone(), limits, evict);
        outbox.scope = admitted.scope;
        outbox.view = admitted.view;
        outbox.client = admitted.client;
        let session = Arc::new(Session {
            resume_token: hex::encode(rand::random::<[u8; 16]>()),
            id: id.clone(),
            outbox,
            cancel: hub.shutdown.child_token(),
            opened: tokio::time::Instant::now(),
        });
        hub.connected.enter(
            id.clone(),
            crate::hub::connected::Presence {
                surface: "ws",
                client: session.outbox.client.clone(),
                view: session.outbox.view.clone(),
            },
        );
        self.make_room(cfg.server.max_connections);
        self.map.insert(id.clone(), session.clone());
        session.outbox.send(protocol::hello(
            &id,
            &session.resume_token,
            hub.server_summaries(session.outbox.view.as_deref()),
            hub.listing(session.outbox.view.as_deref())["tools"]
                .as_array()
                .map_or(0, Vec::len),
        ));
        let span = tracing::info_span!("session", session = %id);
        tokio::spawn(tracing::Instrument::instrument(
            lifetime(app.clone(), self.clone(), session.clone()),
            span,
        ));
        (session, rx)
    }

    /// The session `req` names, if its token matches and it still lives.
    pub fn find(&self, req: &ResumeSessionReq) -> Result<Arc<Session>, HubError> {
        let gone = || gone(&req.session_id);
        let s = self
            .map
            .get(req.session_id.as_str())
            .map(|s| s.clone())
            .ok_or_else(gone)?;
        let matches: bool = s
            .resume_token
            .as_bytes()
            .ct_eq(req.resume_token.as_bytes())
            .into();
        if !matches {
            return Err(HubError::new(
                ErrorType::Unauthorized,
                format!("wrong resumeToken for session {}", req.session_id),
            )
            .with_suggestion("send the resumeToken from the hello of the session's first socket"));
        }
        if s.outbox.is_closed() {
            return Err(gone());
        }
        Ok(s)
    }

    /// Take `session` over for a new socket whose client saw every frame
    /// up to `last_seq`: the receiver and the count of frames replayed.
    pub fn take_over(
        &self,
        session: &Session,
        last_seq: u64,
        evict: CancellationToken,
    ) -> Result<(OutboxReceiver, u64), HubError> {
        session
            .outbox
            .attach(last_seq, evict)
            .map_err(|r| match r {
                ResumeRefusal::Ended => HubError::new(
                    ErrorType::NotFound,
                    format!("session {} has ended", session.id),
                )
                .with_suggestion(LOST),
                ResumeRefusal::Beyond { last_seq, sent } => HubError::new(
                    ErrorType::InvalidMessage,
                    format!(
                        "lastSeq {last_seq} is beyond the last frame session {} sent ({sent})",
                        session.id
                    ),
                )
                .with_suggestion(
                    "send the seq of the last frame your client processed (0 if none)",
                ),
                ResumeRefusal::TooOld { last_seq, oldest } => HubError::new(
                    ErrorType::LimitExceeded,
                    format!(
                        "frames after lastSeq {last_seq} are no longer kept: the oldest kept is {oldest} (server.resumeBufferBytes, or acknowledged with ack)"
                    ),
                )
                .with_suggestion(LOST),
            })
    }

    /// The socket reading `rx` is gone: the session waits for a resume for
    /// `server.sessionGraceMs` (it ends now with no grace or at shutdown).
    pub fn socket_closed(&self, app: &App, session: &Arc<Session>, rx: OutboxReceiver) {
        if rx.taken_over() {
            return;
        }
        rx.detach();
        let grace = app.hub.config().server.session_grace;
        if grace.is_zero() || app.hub.shutdown.is_cancelled() {
            end(session, Why::SocketClosed);
            return;
        }
        tracing::info!(session = %session.id, grace_ms = grace.as_millis() as u64, in_flight = session.outbox.in_flight().count(),
            "socket closed; the session waits for a resume_session (server.sessionGraceMs)");
        let session = session.clone();
        let attached_before = session.outbox.attachments();
        tokio::spawn(async move {
            let ended = session.outbox.ended();
            tokio::select! {
                _ = tokio::time::sleep(grace) => {}
                _ = ended.cancelled() => return,
            }
            // Resumed meanwhile (even if dropped again since: that drop
            // started its own grace).
            if session.outbox.is_attached() || session.outbox.attachments() != attached_before {
                return;
            }
            end(&session, Why::GraceOver);
        });
    }

    /// A socket's own new session, given up for the one it resumed.
    pub fn discard(&self, session: &Arc<Session>, rx: OutboxReceiver) {
        drop(rx);
        end(session, Why::Replaced);
    }

    /// Sessions waiting for a resume hold no connection slot, so they are
    /// bounded apart: at most `max_connections` of them (a client that
    /// reconnects in a loop without resuming must not pile up sessions).
    /// The oldest detached one ends first.
    fn make_room(&self, max_connections: usize) {
        loop {
            let detached: Vec<Arc<Session>> = self
                .map
                .iter()
                .filter(|s| !s.outbox.is_attached())
                .map(|s| s.clone())
                .collect();
            if detached.len() < max_connections.max(1) {
                return;
            }
            let Some(oldest) = detached.iter().min_by_key(|s| s.opened) else {
                return;
            };
            tracing::info!(session = %oldest.id, detached = detached.len(),
                "too many sessions waiting for a resume (server.maxConnections); ending the oldest");
            end(oldest, Why::TooMany);
            self.map.remove(&oldest.id);
        }
    }

    /// Sessions alive now (with or without a socket).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What a refused resume's suggestion says.
const LOST: &str = "the session is gone: connect as a new session. Batches live on as tasks: list_tasks finds them and task_status shows their steps; the results of single tool_calls of the old session are lost (send them again with the same callKey to get a kept answer without running them twice)";

fn end(session: &Session, why: Why) {
    let dropped = session.outbox.end();
    match why {
        Why::Replaced => {}
        Why::SocketClosed if dropped.frames == 0 => {}
        _ => tracing::info!(session = %session.id, reason = ?why, dropped_frames = dropped.frames,
            dropped_bytes = dropped.bytes, "session ended; frames not yet delivered were dropped"),
    }
}

/// A session from its start to its end: hub events go to its outbox while
/// it lives; when it ends (by [`end`], or by its outbox going over its
/// bound with no socket), its calls are cancelled and the services that
/// keep per-session state are told.
async fn lifetime(app: App, sessions: Sessions, session: Arc<Session>) {
    let ended = session.outbox.ended();
    tokio::select! {
        _ = forward_events(app.hub.subscribe(), session.outbox.clone(), app.hub.clone()) => {}
        _ = ended.cancelled() => {}
    }
    ended.cancelled().await;
    session.cancel.cancel();
    sessions.map.remove(&session.id);
    app.connection_closed(&session.id);
    tracing::debug!(session = %session.id, "session ended");
    crate::trim::soon();
}

/// Hub-wide events (tools_updated, server_status, …) to this session.
async fn forward_events(
    mut rx: broadcast::Receiver<Arc<Value>>,
    outbox: Outbox,
    hub: crate::hub::Hub,
) {
    // A view's session hears of its own tool list only (`hub::views`).
    let mut view_hash = match &outbox.view {
        Some(v) => hub.listing(Some(v))["hash"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        None => String::new(),
    };
    loop {
        match rx.recv().await {
            Ok(ev) if ev.get("type").and_then(Value::as_str) == Some("tools_updated") => {
                let update = match &outbox.view {
                    None if ev.get("_viewsOnly").is_some() => continue,
                    None => strip_private(&ev),
                    Some(v) => match hub.view_update(v, &ev["reason"], &mut view_hash) {
                        Some(u) => u,
                        None => continue,
                    },
                };
                if !outbox.send(update) && outbox.is_closed() {
                    return;
                }
            }
            Ok(ev) => {
                if let Some(owner) = ev.get("_session").and_then(Value::as_str) {
                    if outbox.session != owner {
                        continue;
                    }
                }
                if ev.get("_except").and_then(Value::as_str) == Some(&outbox.session) {
                    continue;
                }
                if !in_sight(&hub, &outbox, &ev) {
                    continue;
                }
                // A question: the main token's sessions and its own
                // principal's only, in any view (`engine::confirm`).
                if let Some(p) = ev.get(crate::engine::confirm::PRINCIPAL) {
                    if outbox.client.is_some() && p.as_str() != outbox.client.as_deref() {
                        continue;
                    }
                }
                if !outbox.send(strip_private(&ev)) && outbox.is_closed() {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                outbox.send(serde_json::json!({
                    "type": "warning",
                    "message": format!("{n} hub events were dropped because this connection fell behind; send list_tools and health_check to resynchronise"),
                }));
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Whether a server's or an instance's news is for this session: a view's
/// session hears only of the servers that have a tool in its view, and a
/// client's only of the instances of its own sessions (docs/security.md,
/// "Who may see and do what").
fn in_sight(hub: &crate::hub::Hub, outbox: &Outbox, ev: &Value) -> bool {
    let server = ev
        .get("name")
        .or_else(|| ev.get("server"))
        .and_then(Value::as_str);
    match ev.get("type").and_then(Value::as_str) {
        Some("server_status") => match (&outbox.view, server) {
            (Some(v), Some(s)) => hub.view_has_server(v, s),
            _ => true,
        },
        Some("instance_status") => {
            let in_view = match (&outbox.view, server) {
                (Some(v), Some(s)) => hub.view_has_server(v, s),
                _ => true,
            };
            let context = ev
                .get("context")
                .and_then(Value::as_str)
                .unwrap_or_default();
            in_view
                && hub.owns_context(
                    &outbox.caller(),
                    &crate::client_context::ClientContext::parse(context),
                )
        }
        _ => true,
    }
}

/// Fields starting with `_` route an event inside the hub; never sent.
fn strip_private(ev: &Value) -> Value {
    match ev {
        Value::Object(m) if m.keys().any(|k| k.starts_with('_')) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('_'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The answer for a session that cannot be resumed: it ended, never
/// existed, or is not the presenting token's to resume.
pub fn gone(session_id: &str) -> HubError {
    HubError::new(
        ErrorType::NotFound,
        format!(
            "no session {session_id} to resume: it ended (its socket was gone for longer than server.sessionGraceMs, or the hub restarted) or never existed"
        ),
    )
    .with_suggestion(LOST)
}
