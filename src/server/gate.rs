//! The gate: Host (DNS rebinding), Origin (CSWSH) and token checks, run
//! before the WebSocket upgrade and before any session exists.

use std::net::SocketAddr;
use std::path::Path;

use axum::http::{HeaderMap, StatusCode, Uri};
use subtle::ConstantTimeEq;

use crate::config::{Config, TokenSetting};

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

/// Why a request was refused (status + a message for the body and the log).
#[derive(Debug)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

/// The token every client must present, if any (resolved at start-up).
#[derive(Clone)]
pub struct Gate {
    listen: SocketAddr,
    allowed_origins: Vec<String>,
    token: Option<String>,
}

impl Gate {
    pub fn new(cfg: &Config, token: Option<String>, bound: SocketAddr) -> Gate {
        Gate {
            listen: bound,
            allowed_origins: cfg.server.allowed_origins.clone(),
            token,
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

    /// Check a request's headers; `Ok` lets it through.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_host(headers)?;
        self.check_origin(headers)?;
        self.check_token(headers, Surface::WebSocket)
    }

    /// The same checks for `/mcp`, where the token travels only as
    /// `Authorization: Bearer`.
    pub fn check_mcp(&self, headers: &HeaderMap) -> Result<(), Refusal> {
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
            return Err(forbidden("missing Host header".into()));
        };
        if !self.listen.ip().is_loopback() {
            // Beyond loopback the token is mandatory; any Host may reach us.
            return Ok(());
        }
        let port = self.listen.port();
        if self.own_host(host) {
            Ok(())
        } else {
            Err(forbidden(format!(
                "Host {host:?} is not this hub (expected 127.0.0.1:{port} or localhost:{port}); refusing a possible DNS-rebinding request"
            )))
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
        if self.own_origin(origin) || origin_allowed(origin, &self.allowed_origins) {
            Ok(())
        } else {
            Err(forbidden(format!(
                "Origin {origin:?} is not in server.allowedOrigins"
            )))
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

    fn check_token(&self, headers: &HeaderMap, surface: Surface) -> Result<(), Refusal> {
        let Some(expected) = &self.token else {
            return Ok(());
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
        match (presented, surface) {
            (Some(t), _) if bool::from(t.as_bytes().ct_eq(expected.as_bytes())) => Ok(()),
            (Some(_), _) => Err(unauthorized("the token presented is wrong")),
            (None, Surface::WebSocket) => Err(unauthorized(
                "no token presented: send `Authorization: Bearer <token>` or offer the subprotocol toolhub.token.<token> beside toolhub.v1 (the token is in <stateDir>/token)",
            )),
            (None, Surface::Mcp) => Err(unauthorized(
                "no token presented: send the header `Authorization: Bearer <token>` with every request to /mcp (the token is in <stateDir>/token; `toolhub stdio` passes it for clients that can only launch a command)",
            )),
        }
    }
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

fn forbidden(message: String) -> Refusal {
    Refusal {
        status: StatusCode::FORBIDDEN,
        message,
    }
}

fn bad_request(message: String) -> Refusal {
    Refusal {
        status: StatusCode::BAD_REQUEST,
        message,
    }
}

fn unauthorized(message: &str) -> Refusal {
    Refusal {
        status: StatusCode::UNAUTHORIZED,
        message: message.into(),
    }
}

/// Resolve `server.token`: a fixed string, none, or generated at first start
/// into `<stateDir>/token` (mode 0600). Logs the file's path, never the token.
pub fn resolve_token(cfg: &Config) -> Result<Option<String>, String> {
    match &cfg.server.token {
        TokenSetting::Fixed(t) => Ok(Some(t.clone())),
        TokenSetting::Disabled => {
            if !cfg.server.listen.ip().is_loopback() {
                return Err("server.token is false but server.listen is not loopback; set a token or listen on 127.0.0.1".into());
            }
            tracing::warn!("server.token is false: any local process can use this hub");
            Ok(None)
        }
        TokenSetting::Generate => {
            load_or_create(&cfg.task_engine.state_dir.join("token")).map(Some)
        }
    }
}

fn load_or_create(path: &Path) -> Result<String, String> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        let t = existing.trim().to_string();
        if t.len() >= 32 {
            tracing::info!(path = %path.display(), "using the token stored in the state dir");
            return Ok(t);
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let bytes: [u8; 32] = rand::random();
    let token = hex::encode(bytes);
    write_private(path, &token).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    tracing::info!(path = %path.display(), "generated a new token (256 bits); clients must present it");
    Ok(token)
}

fn write_private(path: &Path, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(&tmp)?;
    f.write_all(token.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate_on(listen: &str) -> Gate {
        let addr: SocketAddr = listen.parse().expect("addr");
        Gate {
            listen: addr,
            allowed_origins: vec!["chrome-extension://*".to_string()],
            token: None,
        }
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
