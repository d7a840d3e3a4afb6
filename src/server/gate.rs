//! The gate: Host (DNS rebinding), Origin (CSWSH) and token checks, run
//! before the WebSocket upgrade and before any session exists. The token
//! and the allowed origins are read from [`SharedAccess`] on every request,
//! so a config reload changes them for the next connection.

use std::net::SocketAddr;

use axum::http::{HeaderMap, StatusCode, Uri};
use subtle::ConstantTimeEq;

use crate::access::{Principal, SharedAccess};

/// The subprotocol the hub speaks; a browser offers the token beside it.
pub const SUBPROTOCOL: &str = "toolhub.v1";
pub const TOKEN_PROTOCOL_PREFIX: &str = "toolhub.token.";

/// Where a request came in, for how it may carry the token.
#[derive(Debug, Clone, Copy)]
enum Surface {
    /// `/ws` and `/health`: Bearer header or the WebSocket subprotocol.
    WebSocket,
    /// `/mcp`: Bearer header only.
    Mcp,
}

/// Why a request was refused (status + a message for the body and the log,
/// and what to do about it).
#[derive(Debug)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
    pub suggestion: Option<String>,
}

/// The checks in front of every route; the token and origins in force come
/// from the shared access values.
#[derive(Clone)]
pub struct Gate {
    listen: SocketAddr,
    access: SharedAccess,
}

impl Gate {
    pub fn new(access: SharedAccess, bound: SocketAddr) -> Gate {
        Gate {
            listen: bound,
            access,
        }
    }

    /// The strict request head, checked on every route before anything
    /// else: at most one `Host` and one `Origin` (a gate that reads only the
    /// first of two is fooled by the second), and an absolute-form target
    /// (`GET http://evil.example/ws`) only when its authority is this hub.
    pub fn check_head(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        for name in ["host", "origin"] {
            let n = headers.get_all(name).iter().count();
            if n > 1 {
                return Err(bad_request(format!(
                    "the request carries {n} {name} headers; at most one is allowed"
                )));
            }
        }
        if let Some(authority) = uri.authority() {
            let authority = authority.as_str();
            let own = if self.listen.ip().is_loopback() {
                self.own_host(authority)
            } else {
                // Beyond loopback any Host may reach us, but the target must
                // name the same host as the Host header.
                headers
                    .get("host")
                    .and_then(|h| h.to_str().ok())
                    .is_some_and(|h| h.eq_ignore_ascii_case(authority))
            };
            if !own {
                return Err(bad_request(format!(
                    "the request target names {authority:?}, which is not this hub; send an origin-form target (GET /ws)"
                )));
            }
        }
        Ok(())
    }

    /// The scope of the call keys of a client the gate just let in: a
    /// fingerprint of the token in force (clients of one token share their
    /// keys; a new token starts afresh). The token itself is never kept.
    /// A client's keys are its own and its view's: a repeat in another
    /// view never gets an answer of a tool it cannot reach.
    pub fn key_scope(&self, who: &Principal, view: Option<&str>) -> std::sync::Arc<str> {
        use sha2::{Digest, Sha256};
        let access = self.access.current();
        let token = match who {
            Principal::Main => access.token.clone(),
            Principal::Client { name, .. } => access
                .clients
                .iter()
                .find(|c| &c.name == name)
                .map(|c| c.token.clone()),
        };
        let base: String = match token {
            Some(t) => hex::encode(&Sha256::digest(t.as_bytes())[..8]),
            None => "no-token".into(),
        };
        match view {
            None => base.into(),
            Some(v) => format!("{base}/{v}").into(),
        }
    }

    /// What a principal may open at a path: the aggregate (`None`) or the
    /// view it names. The main token opens every view and the aggregate; a
    /// client's only its own views (403 naming them otherwise); a view
    /// that is not configured is 404 naming those that are.
    pub fn open(&self, who: &Principal, view: Option<&str>) -> Result<Option<String>, Refusal> {
        let access = self.access.current();
        if let Some(v) = view {
            if !access.views.iter().any(|k| k == v) {
                let known = if access.views.is_empty() {
                    "no views are configured".to_string()
                } else {
                    format!("the views are {}", access.views.join(", "))
                };
                return Err(Refusal {
                    status: StatusCode::NOT_FOUND,
                    message: format!("there is no view \"{v}\"; {known}"),
                    suggestion: Some("connect to /ws/<view> or /mcp/<view> with a view from \"views\" in config.json".into()),
                });
            }
        }
        match who {
            Principal::Main => Ok(view.map(str::to_string)),
            Principal::Client { name, views } => match view {
                Some(v) if views.iter().any(|k| k == v) => Ok(Some(v.to_string())),
                _ => {
                    let what = match view {
                        Some(v) => format!("view \"{v}\""),
                        None => "the whole aggregate".to_string(),
                    };
                    Err(forbidden(
                        format!("client \"{name}\" may not open {what}; its token opens only the views {}", views.join(", ")),
                        format!("connect to /ws/<view> or /mcp/<view> with one of: {}", views.join(", ")),
                    ))
                }
            },
        }
    }

    /// Check a request's headers; `Ok` lets it through and says whose
    /// token it presented.
    pub fn check(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        self.check_host(headers)?;
        self.check_origin(headers)?;
        self.check_token(headers, Surface::WebSocket)
    }

    /// The same checks for `/mcp`, where the token travels only as
    /// `Authorization: Bearer`.
    pub fn check_mcp(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        self.check_host(headers)?;
        self.check_origin(headers)?;
        self.check_token(headers, Surface::Mcp)
    }

    /// Only the Host check: for `/ui`, which serves no data and needs no
    /// token, but must not be reachable through DNS rebinding either.
    pub fn check_host_only(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_host(headers)
    }

    fn check_host(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let Some(host) = headers.get("host").and_then(|h| h.to_str().ok()) else {
            return Err(forbidden(
                "missing Host header".into(),
                "send a Host header naming this hub (HTTP/1.1 clients do so by themselves)".into(),
            ));
        };
        if !self.listen.ip().is_loopback() {
            // Beyond loopback the token is mandatory; any Host may reach us.
            return Ok(());
        }
        let port = self.listen.port();
        if self.own_host(host) {
            Ok(())
        } else {
            Err(forbidden(
                format!(
                    "Host {host:?} is not this hub (expected 127.0.0.1:{port} or localhost:{port}); refusing a possible DNS-rebinding request"
                ),
                format!("connect to ws://127.0.0.1:{port}/ws or ws://localhost:{port}/ws"),
            ))
        }
    }

    /// One of the hub's own loopback names with its exact port.
    fn own_host(&self, host: &str) -> bool {
        let port = self.listen.port();
        [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ]
        .iter()
        .any(|a| a.eq_ignore_ascii_case(host))
    }

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let Some(origin) = headers.get("origin") else {
            return Ok(()); // wscat, scripts: no Origin
        };
        let origin = origin.to_str().unwrap_or("");
        if self.own_origin(origin) || origin_allowed(origin, &self.access.current().allowed_origins)
        {
            Ok(())
        } else {
            Err(forbidden(
                format!("Origin {origin:?} is not in server.allowedOrigins"),
                format!(
                    "if this page or extension should reach the hub, add {origin:?} to server.allowedOrigins in config.json (applied on save, no restart)"
                ),
            ))
        }
    }

    /// The hub's own origin, where `/ui` is served from: `http://` and one
    /// of the loopback names with the exact port, or beyond loopback the
    /// listen address itself (a wildcard address is no origin; list the
    /// name people use in `server.allowedOrigins`).
    fn own_origin(&self, origin: &str) -> bool {
        let Some(host) = origin.strip_prefix("http://") else {
            return false;
        };
        if self.listen.ip().is_loopback() {
            self.own_host(host)
        } else {
            !self.listen.ip().is_unspecified()
                && host.eq_ignore_ascii_case(&self.listen.to_string())
        }
    }

    fn check_token(&self, headers: &HeaderMap, surface: Surface) -> Result<Principal, Refusal> {
        let access = self.access.current();
        let Some(expected) = &access.token else {
            // No hub token (`server.token: false`): there are no clients
            // either, as config and `Access::resolve` refuse them then.
            return Ok(Principal::Main);
        };
        let bearer = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let from_protocol = headers
            .get_all("sec-websocket-protocol")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .find_map(|p| p.strip_prefix(TOKEN_PROTOCOL_PREFIX));
        let presented = match surface {
            Surface::WebSocket => bearer.or(from_protocol),
            Surface::Mcp => bearer,
        };
        let source = &access.token_source;
        let how = match surface {
            Surface::WebSocket => "send `Authorization: Bearer <token>` or offer the subprotocol toolhub.token.<token> beside toolhub.v1",
            Surface::Mcp => "send the header `Authorization: Bearer <token>` with every request to /mcp (`toolhub stdio` passes it for clients that can only launch a command)",
        };
        let client = presented.and_then(|t| client_of(&access, t));
        match presented {
            Some(t) if bool::from(t.as_bytes().ct_eq(expected.as_bytes())) => Ok(Principal::Main),
            Some(_) if client.is_some() => Ok(client.map_or(Principal::Main, |c| Principal::Client {
                name: c.name.clone(),
                views: c.views.clone(),
            })),
            Some(_) => Err(unauthorized(
                format!("the token presented is wrong; the hub's token is in {source}"),
                format!(
                    "copy the token from {source} again (it changes when that file or server.token changes) and {how}"
                ),
            )),
            None => Err(unauthorized(
                format!("no token presented: {how} (the token is in {source})"),
                format!("read the token from {source} and {how}"),
            )),
        }
    }
}

/// The client whose token this is, compared in constant time with every
/// client's token (the loop does not stop at a match).
fn client_of<'a>(
    access: &'a crate::access::Access,
    presented: &str,
) -> Option<&'a crate::access::ClientAccess> {
    let mut found = None;
    for c in &access.clients {
        if bool::from(presented.as_bytes().ct_eq(c.token.as_bytes())) {
            found = Some(c);
        }
    }
    found
}

/// Exact match, or `chrome-extension://*` matching any well-formed extension id.
pub fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    allowed.iter().any(|a| {
        if a == origin {
            return true;
        }
        match a.strip_suffix('*') {
            Some(prefix) if prefix == "chrome-extension://" => {
                origin.strip_prefix(prefix).is_some_and(|id| {
                    !id.is_empty()
                        && id.len() <= 64
                        && id
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                })
            }
            _ => false,
        }
    })
}

fn forbidden(message: String, suggestion: String) -> Refusal {
    Refusal {
        status: StatusCode::FORBIDDEN,
        message,
        suggestion: Some(suggestion),
    }
}

fn bad_request(message: String) -> Refusal {
    Refusal {
        status: StatusCode::BAD_REQUEST,
        message,
        suggestion: None,
    }
}

fn unauthorized(message: String, suggestion: String) -> Refusal {
    Refusal {
        status: StatusCode::UNAUTHORIZED,
        message,
        suggestion: Some(suggestion),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate_on(listen: &str) -> Gate {
        let addr: SocketAddr = listen.parse().expect("addr");
        let access = crate::access::Access {
            allowed_origins: vec!["chrome-extension://*".to_string()],
            ..Default::default()
        };
        Gate::new(crate::access::SharedAccess::new(access), addr)
    }

    #[test]
    fn the_hubs_own_origin_is_allowed_and_no_other_page() {
        let g = gate_on("127.0.0.1:8765");
        for ok in [
            "http://127.0.0.1:8765",
            "http://localhost:8765",
            "http://[::1]:8765",
        ] {
            assert!(g.own_origin(ok), "{ok}");
        }
        for bad in [
            "http://127.0.0.1:8766",
            "https://127.0.0.1:8765",
            "http://evil.example",
            "http://127.0.0.1:8765.evil.example",
            "null",
        ] {
            assert!(!g.own_origin(bad), "{bad}");
        }
        let lan = gate_on("192.168.1.5:8765");
        assert!(lan.own_origin("http://192.168.1.5:8765"));
        assert!(!lan.own_origin("http://localhost:8765"));
        assert!(!gate_on("0.0.0.0:8765").own_origin("http://0.0.0.0:8765"));
    }

    #[test]
    fn extension_wildcard_matches_only_plain_ids() {
        let allowed = vec!["chrome-extension://*".to_string()];
        assert!(origin_allowed(
            "chrome-extension://abcdefghijklmnopabcdefghijklmnop",
            &allowed
        ));
        assert!(!origin_allowed("chrome-extension://abc.evil", &allowed));
        assert!(!origin_allowed("https://evil.example", &allowed));
        assert!(!origin_allowed("chrome-extension://", &allowed));
        let pinned = vec!["chrome-extension://abc".to_string()];
        assert!(origin_allowed("chrome-extension://abc", &pinned));
        assert!(!origin_allowed("chrome-extension://abd", &pinned));
        assert!(!origin_allowed("chrome-extension://abc.evil", &pinned));
    }
}
