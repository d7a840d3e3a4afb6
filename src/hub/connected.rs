//! Who is connected now: each live client session (`/ws` or `/mcp`) with
//! the client of `clients` it belongs to and the view it opened. The edges
//! enter a session when the gate lets it in and take it out when it ends;
//! history names the client of a call's session from here, and health and
//! the dashboard show which clients are connected to which view.

use std::sync::Arc;

use dashmap::DashMap;
use serde_json::{json, Value};

use crate::session::SessionId;

/// One live session.
#[derive(Clone, Debug)]
pub struct Presence {
    /// `"ws"` or `"mcp"`.
    pub surface: &'static str,
    /// The client of `clients` (`None`: the main token).
    pub client: Option<Arc<str>>,
    /// The view it opened (`None`: the aggregate).
    pub view: Option<Arc<str>>,
}

/// Every live session (cheap to share through the hub).
#[derive(Default)]
pub struct Connected {
    map: DashMap<SessionId, Presence>,
}

impl Connected {
    /// `session` is live.
    pub fn enter(&self, session: SessionId, presence: Presence) {
        self.map.insert(session, presence);
    }

    /// `session` has ended.
    pub fn leave(&self, session: &str) {
        self.map.remove(session);
    }

    /// A live session's presence.
    pub fn presence(&self, session: &str) -> Option<Presence> {
        self.map.get(session).map(|p| p.clone())
    }

    /// The client a live session belongs to (`None`: the main token, or
    /// no such session).
    pub fn client_of(&self, session: &str) -> Option<Arc<str>> {
        self.map.get(session).and_then(|p| p.client.clone())
    }

    /// How many live sessions belong to the client `name`.
    pub fn sessions_of(&self, name: &str) -> usize {
        self.map
            .iter()
            .filter(|p| p.client.as_deref() == Some(name))
            .count()
    }

    /// For health and the dashboard: per view (`""` is the aggregate), how
    /// many sessions are connected and which clients they are, e.g.
    /// `{"chat": {"sessions": 2, "clients": ["extension"], "ws": 1, "mcp": 1}}`.
    pub fn summary(&self) -> Value {
        self.summary_where(|_| true)
    }

    /// [`Connected::summary`] of the sessions `keep` picks (a client's
    /// health shows only its own).
    pub fn summary_where(&self, keep: impl Fn(&Presence) -> bool) -> Value {
        let mut views = std::collections::BTreeMap::<String, (u64, u64, Vec<String>)>::new();
        for p in self.map.iter().filter(|p| keep(p.value())) {
            let e = views
                .entry(p.view.as_deref().unwrap_or("").to_string())
                .or_default();
            if p.surface == "ws" {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
            let who = p.client.as_deref().unwrap_or("(main token)").to_string();
            if !e.2.contains(&who) {
                e.2.push(who);
            }
        }
        Value::Object(
            views
                .into_iter()
                .map(|(view, (ws, mcp, mut clients))| {
                    clients.sort();
                    (
                        view,
                        json!({"sessions": ws + mcp, "ws": ws, "mcp": mcp, "clients": clients}),
                    )
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_counted_per_view_with_their_clients() {
        let c = Connected::default();
        let chat = Some(Arc::from("chat"));
        let ext = Some(Arc::from("extension"));
        c.enter(
            "a".into(),
            Presence {
                surface: "ws",
                client: ext.clone(),
                view: chat.clone(),
            },
        );
        c.enter(
            "b".into(),
            Presence {
                surface: "mcp",
                client: ext.clone(),
                view: chat,
            },
        );
        c.enter(
            "c".into(),
            Presence {
                surface: "ws",
                client: None,
                view: None,
            },
        );
        assert_eq!(c.client_of("a").as_deref(), Some("extension"));
        assert_eq!(c.client_of("c"), None);
        assert_eq!(c.sessions_of("extension"), 2);
        let s = c.summary();
        assert_eq!(
            s["chat"],
            json!({"sessions": 2, "ws": 1, "mcp": 1, "clients": ["extension"]})
        );
        assert_eq!(s[""]["clients"], json!(["(main token)"]));
        c.leave("a");
        assert_eq!(c.client_of("a"), None);
        assert_eq!(c.summary()["chat"]["sessions"], 1);
    }
}
