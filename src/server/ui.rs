//! `GET /ui`: the dashboard, a single page whose files (hand-written ES
//! modules and CSS under `ui/`) are compiled into the binary. It serves no
//! data and holds no secret: the page talks to `/ws` like any client, with
//! the token it was given in its URL fragment or a field. Only the Host
//! check applies here (no token: the page itself is public); the headers
//! forbid inline script, eval, framing and foreign connections.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{refuse, AppState};

/// One embedded file.
struct Asset {
    name: &'static str,
    mime: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($name:literal, $mime:expr) => {
        Asset {
            name: $name,
            mime: $mime,
            body: include_str!(concat!("../../ui/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the page; anything else under `/ui/` is a 404.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("conn.js", JS),
    asset!("dom.js", JS),
    asset!("artifact.js", JS),
    asset!("need.js", JS),
    asset!("form.js", JS),
    asset!("servers.js", JS),
    asset!("tools.js", JS),
    asset!("tasks.js", JS),
    asset!("recordings.js", JS),
    asset!("runs.js", JS),
    asset!("history.js", JS),
];

/// `GET /ui`: the page itself.
pub async fn index(State(state): State<AppState>, headers: HeaderMap) -> Response {
    serve(&state, &headers, "index.html")
}

/// `GET /ui/{file}`: one of the page's scripts or its style sheet.
pub async fn file(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    serve(&state, &headers, &name)
}

fn serve(state: &AppState, headers: &HeaderMap, name: &str) -> Response {
    if let Err(r) = state.gate.check_host_only(headers) {
        return refuse(r);
    }
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let mut resp = (StatusCode::OK, asset.body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.mime));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(csp) = HeaderValue::from_str(&csp(host)) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    resp
}

/// The page's policy: its own files only, no inline script or style, no
/// eval, no framing, and sockets only to this hub. `'self'` covers a
/// same-origin `ws:` in CSP Level 3 browsers (checked in Debian's chromium
/// 148); the explicit `ws://HOST` keeps older ones working. `host` passed the gate's Host check; on a
/// non-loopback hub any Host passes, so anything but a host name is dropped
/// rather than let into the header.
pub fn csp(host: &str) -> String {
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    let ws = if host_ok {
        format!(" ws://{host}")
    } else {
        String::new()
    };
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'{ws}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// `toolhub ui`: the ready link, `http://ADDR/ui#token=…`, from the
/// config's listen address and the token (the fragment never reaches the
/// server; the page removes it from the address bar once read).
pub fn link(cfg: &crate::config::Config) -> Result<String, String> {
    let target = super::stdio::Target::from_config(cfg, None, None, None)?;
    let base = target.url.trim_end_matches("/mcp");
    Ok(match target.token {
        Some(t) => format!("{base}/ui#token={t}"),
        None => format!("{base}/ui"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_the_host_and_refuses_injected_directives() {
        let p = csp("127.0.0.1:8765");
        assert!(p.contains("connect-src 'self' ws://127.0.0.1:8765;"), "{p}");
        assert!(p.contains("script-src 'self';"), "{p}");
        assert!(!p.contains("unsafe"), "{p}");
        let p = csp("evil; script-src *");
        assert!(!p.contains("evil"), "{p}");
        assert!(p.contains("connect-src 'self';"), "{p}");
    }

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for line in a.body.lines() {
                let Some(rest) = line.split(" from \"./").nth(1) else {
                    continue;
                };
                let target = rest.split('"').next().unwrap_or("");
                assert!(
                    ASSETS.iter().any(|b| b.name == target),
                    "{} imports {target}, which is not in ASSETS",
                    a.name
                );
            }
        }
    }
}
