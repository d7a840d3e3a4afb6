//! HTTP side: the axum router with `/ws` (gated upgrade), `/mcp` (the
//! aggregate as an MCP server, `mcp`), `/health` and `/ui` (the dashboard's
//! embedded files, `ui`).

mod artifact;
mod conn;
mod dispatch;
pub mod gate;
mod keep;
mod keyed;
pub mod mcp;
pub mod session;
pub mod slots;
pub mod stdio;
pub mod surfaces;
pub mod ui;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use gate::Gate;

/// Read and write buffer of one WebSocket connection.
const WS_BUFFER: usize = 8 * 1024;

#[derive(Clone)]
pub struct AppState {
    pub app: App,
    pub gate: Gate,
    /// Every `/ws` session, with or without a socket.
    pub sessions: session::Sessions,
}

pub fn router(state: AppState) -> Router {
    let mcp = state
        .app
        .hub
        .config()
        .server
        .mcp_endpoint
        .then(|| mcp::router(state.app.clone(), state.gate.clone()));
    let router = Router::new()
        .route("/ws", get(ws_upgrade))
        .route("/ws/{view}", get(ws_upgrade_view))
        .route("/health", get(health))
        .route("/ui", get(ui::index))
        .route("/ui/", get(ui::index))
        .route("/ui/{file}", get(ui::file))
        // An explicit fallback so the strict-head layer covers unknown
        // paths too (a layer wraps only the routes added before it).
        .fallback(not_found)
        .with_state(state.clone());
    let router = match mcp {
        Some(m) => router.merge(m),
        None => router,
    };
    // Last, so it wraps every route: /ws, /health, /mcp and the fallback.
    router.layer(middleware::from_fn_with_state(state, strict_head))
}

/// Every route: duplicate `Host`/`Origin` or a foreign absolute-form target
/// is refused (400) before any handler runs.
async fn strict_head(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Err(r) = state.gate.check_head(req.uri(), req.headers()) {
        return refuse(r);
    }
    next.run(req).await
}

async fn not_found() -> StatusCode {
    StatusCode::NOT_FOUND
}

/// Serve until `shutdown` fires. Each connection gets
/// `server.handshakeTimeout` to send its request headers: a half-open
/// handshake (slowloris) is dropped, never held.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let handshake = state.app.hub.config().server.handshake_timeout;
    let app = router(state);
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // EMFILE and friends: back off a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => return Ok(()),
        };
        // Replies are small frames sent back to back (task_state, then the
        // step result): Nagle's algorithm would hold the second one until the
        // client's delayed ACK of the first, 40 ms later.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let svc = hyper_util::service::TowerToHyperService::new(app.clone());
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(handshake);
            let conn = http
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .with_upgrades();
            tokio::pin!(conn);
            let ended = tokio::select! {
                r = conn.as_mut() => r,
                _ = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.as_mut().await
                }
            };
            if let Err(e) = ended {
                if e.is_timeout() {
                    tracing::info!(limit_ms = handshake.as_millis() as u64,
                        "dropped a connection that did not finish its request in time (server.handshakeTimeout)");
                } else {
                    tracing::debug!(error = %e, "http connection ended with an error");
                }
            }
        });
    }
}

fn refuse(r: gate::Refusal) -> Response {
    tracing::warn!(status = %r.status, reason = %r.message, "request refused by the gate");
    let kind = if r.status == StatusCode::BAD_REQUEST {
        crate::errors::ErrorType::InvalidMessage
    } else {
        crate::errors::ErrorType::Unauthorized
    };
    let mut err = crate::errors::HubError::new(kind, r.message);
    if let Some(s) = r.suggestion {
        err = err.with_suggestion(s);
    }
    (r.status, Json(serde_json::json!({ "error": err }))).into_response()
}

/// `/ws/<view>`: a session that sees and reaches only the view's tools.
async fn ws_upgrade_view(
    State(state): State<AppState>,
    axum::extract::Path(view): axum::extract::Path<String>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    upgrade(state, Some(view), headers, ws)
}

async fn ws_upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    upgrade(state, None, headers, ws)
}

fn upgrade(
    state: AppState,
    view: Option<String>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let who = match state.gate.check(&headers) {
        Ok(who) => who,
        Err(r) => return refuse(r),
    };
    let view = match state.gate.open(&who, view.as_deref()) {
        Ok(v) => v,
        Err(r) => return refuse(r),
    };
    let cfg = state.app.hub.config();
    // Reserve a slot before upgrading; the connection holds it to its end
    // (a failed upgrade drops it with the callback).
    let slot = match slots::Slot::reserve(&state.app.hub) {
        Ok(slot) => slot,
        Err(e) => return slots::refused(e),
    };
    // Frames a little over the limit are still read so they can be answered
    // with LIMIT_EXCEEDED; far larger ones close the socket (1009).
    let frame_cap = cfg
        .server
        .max_message_bytes
        .saturating_mul(2)
        .max(64 * 1024);
    let app = state.app.clone();
    let sessions = state.sessions.clone();
    let admitted = crate::session::Admission {
        scope: state.gate.key_scope(&who, view.as_deref()),
        view: view.map(std::sync::Arc::from),
        client: who.client_name().map(std::sync::Arc::from),
    };
    ws.protocols([gate::SUBPROTOCOL])
        // Our frames are small: an 8 KiB read buffer (it grows for a large
        // frame) instead of tungstenite's eager 128 KiB per connection.
        .read_buffer_size(WS_BUFFER)
        .write_buffer_size(WS_BUFFER)
        .max_message_size(frame_cap)
        .max_frame_size(frame_cap)
        .on_failed_upgrade(|e| tracing::warn!(error = %e, "websocket upgrade failed"))
        .on_upgrade(move |socket| conn::run(socket, app, slot, sessions, admitted))
}

async fn health(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let who = match state.gate.check(&headers) {
        Ok(who) => who,
        Err(r) => return refuse(r),
    };
    // Health by principal, as `health_check` on /ws: a client's token
    // gets its views' servers only. The request has no session of its own.
    let caller = crate::caller::Caller {
        client: who.client_name().map(std::sync::Arc::from),
        view: None,
        session: "GET /health".into(),
    };
    let report = state.app.health(&caller).await;
    let code = if report.get("status").and_then(|s| s.as_str()) == Some("down") {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (code, Json(report)).into_response()
}
