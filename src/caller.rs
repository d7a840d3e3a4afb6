//! Who is calling: the one value every handler of a client request
//! receives (each `/ws` message, each `/mcp` method, the hub's own tools
//! when a client calls them), and the one place the ownership rules of
//! docs/security.md ("Who may see and do what") are written as code.
//!
//! A [`Caller`] names the principal (the main token, or a client of
//! `clients`), the view the request came in (`/ws/<view>`, `/mcp/<view>`;
//! `None`: the aggregate) and the session. Shared state (questions,
//! recordings, runs, tasks, history, kept results) records the principal
//! that made it as an [`Owner`]; a service reads or changes it only after
//! [`Caller::may_see`] says so, and what is the person's alone (approving
//! changed tools, other sessions' instances, health details naming other
//! clients) passes [`Caller::main_only`] first. The layers below the
//! services keep taking plain data.

use std::sync::Arc;

use crate::errors::{ErrorType, HubError};
use crate::session::SessionId;

/// Who made a request (cheap to clone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The client of `clients` whose token made the request; `None`: the
    /// main token (the person: their dashboard, popup and scripts).
    pub client: Option<Arc<str>>,
    /// The view the request came in; `None`: the whole aggregate.
    pub view: Option<Arc<str>>,
    /// The session it came on (a `/ws` session or an MCP one).
    pub session: SessionId,
}

/// The principal a piece of shared state belongs to, as stored beside it
/// (`"client": "<name>"` on the wire and on disk; absent: the main token).
pub type Owner = Option<Arc<str>>;

impl Caller {
    /// The main token's caller on `session`, in the aggregate: the hub's
    /// own work and tests.
    pub fn main(session: SessionId) -> Caller {
        Caller {
            client: None,
            view: None,
            session,
        }
    }

    /// Whether the main token made the request.
    pub fn is_main(&self) -> bool {
        self.client.is_none()
    }

    /// The client's name (`None`: the main token).
    pub fn client_name(&self) -> Option<&str> {
        self.client.as_deref()
    }

    /// The owner that what this caller makes is recorded under.
    pub fn owner(&self) -> Owner {
        self.client.clone()
    }

    /// Whether this caller may see (list, read, answer, change, delete)
    /// something `owner` made: the main token sees everything; a client
    /// only what a session of the same client made.
    pub fn may_see(&self, owner: Option<&str>) -> bool {
        match &self.client {
            None => true,
            Some(me) => owner == Some(me.as_ref()),
        }
    }

    /// `Ok` for the main token; else a `PERMISSION` error saying that
    /// `what` is the person's alone and what a client may do instead.
    pub fn main_only(&self, what: &str) -> Result<(), HubError> {
        match &self.client {
            None => Ok(()),
            Some(name) => Err(HubError::new(
                ErrorType::Permission,
                format!("{what} is for the hub's main token only; client \"{name}\" may not"),
            )
            .with_suggestion(
                "ask the person to do it from the dashboard or the extension's popup (they hold the main token)",
            )),
        }
    }
}

/// The error for something a caller may not see: the same as for
/// something that does not exist, so a client learns nothing of another's
/// work (not even that it exists).
pub fn not_found(what: &str, id: &str) -> HubError {
    HubError::new(ErrorType::NotFound, format!("no {what} {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str) -> Caller {
        Caller {
            client: Some(name.into()),
            view: Some("chat".into()),
            session: SessionId::from("s1"),
        }
    }

    #[test]
    fn the_main_token_sees_everything_a_client_only_its_own() {
        let main = Caller::main(SessionId::from("s0"));
        assert!(main.may_see(None));
        assert!(main.may_see(Some("ext")));
        let ext = client("ext");
        assert!(ext.may_see(Some("ext")));
        assert!(!ext.may_see(None));
        assert!(!ext.may_see(Some("agent")));
    }

    #[test]
    fn main_only_refuses_a_client_with_the_reason() {
        assert!(Caller::main(SessionId::from("s0")).main_only("x").is_ok());
        let e = client("ext")
            .main_only("approving changed tools")
            .unwrap_err();
        assert_eq!(e.error_type, ErrorType::Permission);
        assert!(e.message.contains("ext"), "{}", e.message);
    }
}
