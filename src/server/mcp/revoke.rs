//! A client of `clients` loses its open `/mcp` sessions at the reload that
//! removes it, replaces its token, or takes the session's view from it
//! (issue 40), as its `/ws` sockets do (`server::conn`): the session is
//! closed through rmcp's session manager, which ends its streams (an open
//! SSE stream included) as a DELETE would. Its next request is refused by
//! the gate, which already holds the new config.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;

use super::sessions::McpSessions;
use crate::config::views::ClientToken;
use crate::config::Config;
use crate::hub::connected::Presence;
use crate::hub::Hub;

/// Each client's token in `cfg`.
fn tokens(cfg: &Config) -> BTreeMap<String, ClientToken> {
    cfg.clients
        .iter()
        .map(|(name, c)| (name.clone(), c.token.clone()))
        .collect()
}

/// Does `presence` still hold under `cfg`, whose previous client tokens
/// were `before`? A session of the main token always does.
fn still_allowed(
    presence: &Presence,
    cfg: &Config,
    before: &BTreeMap<String, ClientToken>,
) -> bool {
    let Some(client) = presence.client.as_deref() else {
        return true;
    };
    cfg.clients.get(client).is_some_and(|c| {
        before.get(client) == Some(&c.token)
            && presence
                .view
                .as_deref()
                .is_some_and(|v| c.views.iter().any(|x| x == v))
    })
}

/// Close revoked clients' sessions at every config change, until shutdown.
pub fn spawn(hub: Hub, sessions: Arc<McpSessions>, manager: Arc<LocalSessionManager>) {
    let mut rx = hub.watch_config();
    let mut before = tokens(&rx.borrow());
    let shutdown = hub.shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
                _ = shutdown.cancelled() => return,
            }
            let cfg = rx.borrow_and_update().clone();
            for (key, http_id) in sessions.ids() {
                let Some(p) = hub.connected.presence(&key) else {
                    continue;
                };
                if still_allowed(&p, &cfg, &before) {
                    continue;
                }
                tracing::info!(session = %key, client = p.client.as_deref().unwrap_or_default(),
                    "client revoked in config.json (removed, its token replaced, or this view taken away): closing its MCP session");
                if let Some(id) = http_id {
                    if let Err(e) = manager.close_session(&id).await {
                        tracing::warn!(session = %key, error = %e, "a revoked client's MCP session could not be closed");
                    }
                }
            }
            before = tokens(&cfg);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn presence(client: Option<&str>, view: Option<&str>) -> Presence {
        Presence {
            surface: "mcp",
            client: client.map(Arc::from),
            view: view.map(Arc::from),
        }
    }

    #[test]
    fn a_client_stays_only_while_its_token_and_view_do() {
        let cfg = |clients: serde_json::Value| {
            crate::config::parse(
                &serde_json::json!({
                    "views": {"chat": {}, "other": {}},
                    "clients": clients
                })
                .to_string(),
                std::path::Path::new("/tmp/config.json"),
            )
            .map(|l| l.config)
            .expect("config")
        };
        let now =
            cfg(serde_json::json!({"ext": {"token": "tok-0123456789abcdef", "views": ["chat"]}}));
        let before = tokens(&now);
        assert!(still_allowed(
            &presence(Some("ext"), Some("chat")),
            &now,
            &before
        ));
        assert!(
            still_allowed(&presence(None, None), &now, &before),
            "the main token"
        );
        assert!(
            !still_allowed(&presence(Some("ext"), Some("other")), &now, &before),
            "not its view"
        );
        let moved =
            cfg(serde_json::json!({"ext": {"token": "tok-0123456789abcdef", "views": ["other"]}}));
        assert!(
            !still_allowed(&presence(Some("ext"), Some("chat")), &moved, &before),
            "view taken away"
        );
        let rotated =
            cfg(serde_json::json!({"ext": {"token": "new-0123456789abcdef", "views": ["chat"]}}));
        assert!(
            !still_allowed(&presence(Some("ext"), Some("chat")), &rotated, &before),
            "token replaced"
        );
        let gone = cfg(serde_json::json!({}));
        assert!(
            !still_allowed(&presence(Some("ext"), Some("chat")), &gone, &before),
            "removed"
        );
    }
}
