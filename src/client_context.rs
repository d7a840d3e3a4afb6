//! A client context: whose instance of a `scope: "context"` server a call
//! runs in (one browser per chat tab).
//!
//! A context has an owner, the client that holds it (a `/ws` session, an
//! `/mcp` session (`mcp-…`), or the hub itself), and an optional label the client
//! chose (the extension sends its tab id). When the owner ends, its
//! instances are stopped. On the wire and in journals a context is one
//! string, `owner` or `owner/label`; owners never contain `/`.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest label a client may choose.
pub const MAX_LABEL_CHARS: usize = 128;

/// The owner of calls the hub makes by itself (no client behind them).
pub const HUB_OWNER: &str = "hub";

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientContext {
    owner: Arc<str>,
    label: Option<Arc<str>>,
}

impl ClientContext {
    /// The context of a `/ws` session, refined by the client's `context`.
    pub fn session(session: &str, label: Option<&str>) -> ClientContext {
        ClientContext {
            owner: Arc::from(session.replace('/', "_")),
            label: label.map(Arc::from),
        }
    }

    /// The hub's own context (calls with no client behind them).
    pub fn hub() -> ClientContext {
        ClientContext::session(HUB_OWNER, None)
    }

    /// The same owner with another label (a replay's own context).
    pub fn with_label(&self, label: &str) -> ClientContext {
        ClientContext {
            owner: self.owner.clone(),
            label: Some(Arc::from(label)),
        }
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// Parse the `owner` or `owner/label` form.
    pub fn parse(s: &str) -> ClientContext {
        match s.split_once('/') {
            Some((owner, label)) => ClientContext::session(owner, Some(label)),
            None => ClientContext::session(s, None),
        }
    }
}

/// Check a client's `context` label: what is wrong with it, if anything.
pub fn check_label(label: &str) -> Result<(), String> {
    if label.is_empty() {
        return Err("\"context\" is empty; expected a short name such as a tab id".into());
    }
    if label.chars().count() > MAX_LABEL_CHARS {
        return Err(format!(
            "\"context\" is longer than {MAX_LABEL_CHARS} characters; expected a short name such as a tab id"
        ));
    }
    if label.chars().any(char::is_control) {
        return Err(
            "\"context\" contains control characters; expected a short name such as a tab id"
                .into(),
        );
    }
    Ok(())
}

impl fmt::Display for ClientContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.label {
            Some(l) => write!(f, "{}/{l}", self.owner),
            None => f.write_str(&self.owner),
        }
    }
}

impl fmt::Debug for ClientContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClientContext({self})")
    }
}

impl Serialize for ClientContext {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ClientContext {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(ClientContext::parse(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_round_trips_through_its_string() {
        for c in [
            ClientContext::session("s1", None),
            ClientContext::session("s1", Some("tab/7")),
            ClientContext::session("mcp-1a2b3c4d", None),
            ClientContext::hub().with_label("replay-1"),
        ] {
            let text = serde_json::to_string(&c).unwrap_or_default();
            let back: ClientContext =
                serde_json::from_str(&text).unwrap_or_else(|_| ClientContext::hub());
            assert_eq!(back, c, "{text}");
        }
        assert_eq!(ClientContext::session("a/b", None).owner(), "a_b");
    }

    #[test]
    fn labels_are_checked() {
        assert!(check_label("tab-12").is_ok());
        assert!(check_label("").is_err());
        assert!(check_label(&"x".repeat(129)).is_err());
        assert!(check_label("a\nb").is_err());
    }
}
