//! The MCP sessions now open at `/mcp` and what reaches them unasked: list
//! changes (tools, resources, prompts), resource updates for the URIs a
//! session subscribed to, and servers' log messages at the level it set.
//! Implements the hub's [`Relay`] seam.
//!
//! Each session has one sender task that sends its notifications one after
//! the other, in the order the hub queued them, from a queue of at most
//! [`NOTE_QUEUE`]; a client that does not keep up loses the newest ones
//! (logged), it does not grow the hub.

#![allow(deprecated)] // logging: deprecated by SEP-2577, still spoken

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::{Peer, RoleServer};
use tokio::sync::{broadcast, mpsc};

use crate::hub::Hub;
use crate::mcp::relay::{level_rank, Forward, Notice, Relay};

/// Which list changed (also what `subscriptions/listen` streams carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// What the hub knows of one session; shared by every handler instance
/// rmcp makes for it.
pub struct SessionState {
    /// The hub's name for the session (history, recordings): `mcp-<8 hex>`.
    pub key: Arc<str>,
    /// Its `Mcp-Session-Id` (HTTP sessions, once initialized).
    http_id: std::sync::OnceLock<Arc<str>>,
    level: Mutex<Option<LoggingLevel>>,
    subscribed: Mutex<BTreeSet<String>>,
    /// Its `tools/call`s in flight, under `server.maxInFlightPerSession`.
    pub in_flight: crate::session::InFlight,
}

impl SessionState {
    pub fn new() -> Arc<SessionState> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Arc::new(SessionState {
            key: format!("mcp-{}", &id[..8]).into(),
            http_id: std::sync::OnceLock::new(),
            level: Mutex::new(None),
            subscribed: Mutex::new(BTreeSet::new()),
            in_flight: Default::default(),
        })
    }

    pub fn set_http_id(&self, id: Arc<str>) {
        let _ = self.http_id.set(id);
    }

    pub fn http_id(&self) -> Option<&Arc<str>> {
        self.http_id.get()
    }

    pub fn set_level(&self, level: LoggingLevel) {
        if let Ok(mut l) = self.level.lock() {
            *l = Some(level);
        }
    }

    pub fn level(&self) -> Option<LoggingLevel> {
        self.level.lock().ok().and_then(|l| *l)
    }

    pub fn subscribe(&self, uri: &str, on: bool) {
        if let Ok(mut s) = self.subscribed.lock() {
            if on {
                s.insert(uri.to_string());
            } else {
                s.remove(uri);
            }
        }
    }

    fn is_subscribed(&self, uri: &str) -> bool {
        self.subscribed.lock().is_ok_and(|s| s.contains(uri))
    }
}

/// How many notifications may wait for one session.
pub const NOTE_QUEUE: usize = 256;

/// A notification for one session, sent by its sender task.
#[derive(Debug)]
enum Note {
    ListChanged(ListKind),
    ResourceUpdated(ResourceUpdatedNotificationParam),
    Log(LoggingMessageNotificationParam),
}

#[derive(Clone)]
struct Open {
    state: Arc<SessionState>,
    peer: Peer<RoleServer>,
    notes: mpsc::Sender<Note>,
}

impl Open {
    /// Queue `note` for the session's sender task (dropped when full).
    fn send(&self, note: Note) {
        if let Err(mpsc::error::TrySendError::Full(n)) = self.notes.try_send(note) {
            tracing::warn!(session = %self.state.key, note = ?n, "an MCP client is not reading its notifications; one was dropped");
        }
    }
}

/// The session's sender task: its notifications, one at a time, in order;
/// ends when the session is forgotten (every `Open` dropped) or closed.
fn spawn_sender(key: Arc<str>, peer: Peer<RoleServer>, mut rx: mpsc::Receiver<Note>) {
    tokio::spawn(async move {
        while let Some(note) = rx.recv().await {
            let sent = match note {
                Note::ListChanged(ListKind::Tools) => peer.notify_tool_list_changed().await,
                Note::ListChanged(ListKind::Resources) => peer.notify_resource_list_changed().await,
                Note::ListChanged(ListKind::Prompts) => peer.notify_prompt_list_changed().await,
                Note::ResourceUpdated(p) => peer.notify_resource_updated(p).await,
                Note::Log(m) => peer.notify_logging_message(m).await,
            };
            if let Err(e) = sent {
                tracing::debug!(session = %key, error = %e, "a notification was not delivered");
                if peer.is_transport_closed() {
                    return;
                }
            }
        }
    });
}

/// Every open session, and the broadcast of list changes for
/// `subscriptions/listen` streams (2026-07-28 clients, which have no
/// session).
pub struct McpSessions {
    hub: Hub,
    open: Mutex<Vec<Open>>,
    pub changes: broadcast::Sender<ListKind>,
}

impl McpSessions {
    pub fn new(hub: Hub) -> Arc<McpSessions> {
        let (changes, _) = broadcast::channel(64);
        Arc::new(McpSessions {
            hub,
            open: Mutex::new(Vec::new()),
            changes,
        })
    }

    /// A session finished its handshake.
    pub fn add(&self, state: Arc<SessionState>, peer: Peer<RoleServer>) {
        if let Ok(mut o) = self.open.lock() {
            o.retain(|s| !s.peer.is_transport_closed() && !Arc::ptr_eq(&s.state, &state));
            tracing::info!(session = %state.key, open = o.len() + 1, "MCP session opened");
            let (notes, rx) = mpsc::channel(NOTE_QUEUE);
            spawn_sender(state.key.clone(), peer.clone(), rx);
            o.push(Open { state, peer, notes });
        }
    }

    /// The protocol version a live session negotiated, by its
    /// `Mcp-Session-Id`.
    pub fn negotiated(&self, http_id: &str) -> Option<rmcp::model::ProtocolVersion> {
        self.live()
            .into_iter()
            .find(|o| o.state.http_id().is_some_and(|id| &**id == http_id))
            .and_then(|o| o.peer.peer_info().map(|i| i.protocol_version.clone()))
    }

    /// A session ended (its handler was dropped).
    pub fn remove(&self, key: &str) {
        if let Ok(mut o) = self.open.lock() {
            let before = o.len();
            o.retain(|s| &*s.state.key != key && !s.peer.is_transport_closed());
            if o.len() < before {
                tracing::info!(session = key, open = o.len(), "MCP session closed");
            }
        }
    }

    /// Each live session's key and `Mcp-Session-Id`.
    pub fn ids(&self) -> Vec<(Arc<str>, Option<Arc<str>>)> {
        self.live()
            .into_iter()
            .map(|o| (o.state.key.clone(), o.state.http_id().cloned()))
            .collect()
    }

    /// Live sessions (closed ones are dropped on the way).
    fn live(&self) -> Vec<Open> {
        let Ok(mut o) = self.open.lock() else {
            return Vec::new();
        };
        o.retain(|s| !s.peer.is_transport_closed());
        o.clone()
    }

    /// Tell every session (and every listen stream) that a list changed.
    pub fn list_changed(&self, kind: ListKind) {
        let _ = self.changes.send(kind);
        for open in self.live() {
            open.send(Note::ListChanged(kind));
        }
    }

    /// The most verbose level any session asked for.
    fn min_level(&self) -> Option<LoggingLevel> {
        self.live()
            .iter()
            .filter_map(|o| o.state.level())
            .min_by_key(|l| level_rank(*l))
    }

    /// A session set its level: the servers follow the most verbose one.
    pub async fn apply_levels(&self) {
        if let Some(level) = self.min_level() {
            self.hub.set_log_level(level).await;
        }
    }

    fn log(&self, server: &str, mut m: LoggingMessageNotificationParam) {
        if m.logger.is_none() {
            m.logger = Some(server.to_string());
        }
        let rank = level_rank(m.level);
        let inflight = self.hub.server(server).map(|h| h.inflight.sessions());
        for open in self.live() {
            let wanted = open.state.level().is_some_and(|l| level_rank(l) <= rank);
            if !wanted {
                continue;
            }
            // During a call, on that call's own stream; otherwise on the
            // session's standalone stream.
            let link = inflight
                .iter()
                .flatten()
                .find(|l| l.session == open.state.key)
                .cloned();
            if let Some(link) = link {
                if link.try_send(Forward::Log(m.clone())) {
                    continue;
                }
            }
            open.send(Note::Log(m.clone()));
        }
    }
}

impl Relay for McpSessions {
    fn notice(&self, server: &str, notice: Notice) {
        match notice {
            Notice::ResourcesChanged => {
                self.hub.resources_changed();
                self.list_changed(ListKind::Resources);
            }
            Notice::PromptsChanged => self.list_changed(ListKind::Prompts),
            Notice::ResourceUpdated(p) => {
                for open in self.live() {
                    if open.state.is_subscribed(&p.uri) {
                        open.send(Note::ResourceUpdated(p.clone()));
                    }
                }
            }
            Notice::Log(m) => self.log(server, m),
        }
    }

    fn log_level(&self) -> Option<LoggingLevel> {
        self.min_level()
    }
}

/// Forward every change of the hub's tool list to the sessions, until the
/// hub shuts down.
pub fn spawn_tool_watch(hub: Hub, sessions: Arc<McpSessions>) {
    let mut rx = hub.watch_tools();
    let shutdown = hub.shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                r = rx.changed() => {
                    if r.is_err() {
                        return;
                    }
                    sessions.list_changed(ListKind::Tools);
                }
                _ = shutdown.cancelled() => return,
            }
        }
    });
}
