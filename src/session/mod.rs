//! A client's session, as the layers below the server see it: its id
//! ([`SessionId`]), its numbered send queue ([`Outbox`], kept for a
//! resume), and its cap on work in flight ([`InFlight`]).
//!
//! The server's `Session` (`server::session`) is the one owner of a `/ws`
//! session: it holds these with the resume token and the cancel token of
//! the session's single calls, and when the session ends it tells the
//! services that keep per-session state (instances, the recorder, the
//! current run) through `App::connection_closed`. Call keys belong to the
//! client's token, not the session, so that a key outlives a reconnect
//! (`callkeys`).

pub mod inflight;
mod outbox;

use std::fmt;
use std::sync::Arc;

pub use inflight::{InFlight, Place};
pub use outbox::{Dropped, Limits as OutboxLimits, Outbox, OutboxReceiver, ResumeRefusal};

/// What the gate let a client in with: whose call keys its requests use
/// (a fingerprint of its token, and its view), the view it opened
/// (`None`: the aggregate) and the client of `clients` it is (`None`: the
/// main token).
#[derive(Clone, Debug)]
pub struct Admission {
    pub scope: Arc<str>,
    pub view: Option<Arc<str>>,
    pub client: Option<Arc<str>>,
}

/// A session's id: a UUID for a `/ws` session, `mcp-…` for an MCP one
/// (cheap to clone).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(Arc<str>);

impl SessionId {
    /// A new random id.
    pub fn new() -> SessionId {
        SessionId(Arc::from(uuid::Uuid::new_v4().to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for SessionId {
    fn default() -> Self {
        SessionId::new()
    }
}

impl From<&str> for SessionId {
    fn from(s: &str) -> Self {
        SessionId(Arc::from(s))
    }
}

impl From<String> for SessionId {
    fn from(s: String) -> Self {
        SessionId(Arc::from(s))
    }
}

impl std::ops::Deref for SessionId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SessionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for SessionId {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SessionId {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl serde::Serialize for SessionId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}
