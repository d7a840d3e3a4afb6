//! HTTP side: the axum router with `/ws` (gated upgrade), `/mcp` (the
//! aggregate as an MCP server, `mcp`) and `/health`.

mod conn;
mod dispatch;
pub mod gate;
pub mod mcp;
pub mod stdio;

use std::sync::atomic::Ordering;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use gate::Gate;

#[derive(Clone)]
pub struct AppState {
    pub app: App,
    pub gate: Gate,
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
        .route("/health", get(health))
        .with_state(state);
    match mcp {
        Some(m) => router.merge(m),
        None => router,
    }
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
        // Small frames (WebSocket messages, SSE events) go out at once
        // instead of waiting on Nagle's algorithm for an ACK.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
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
    let err = crate::errors::HubError::new(crate::errors::ErrorType::Unauthorized, r.message);
    (r.status, Json(serde_json::json!({ "error": err }))).into_response()
}

async fn ws_upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if let Err(r) = state.gate.check(&headers) {
        return refuse(r);
    }
    let cfg = state.app.hub.config();
    let max = cfg.server.max_connections;
    // Reserve a slot before upgrading; conn::run releases it.
    let prev = state.app.hub.connections.fetch_add(1, Ordering::SeqCst);
    if prev >= max {
        state.app.hub.connections.fetch_sub(1, Ordering::SeqCst);
        tracing::warn!(
            limit = max,
            "connection refused: server.maxConnections reached"
        );
        let err = crate::errors::HubError::new(
            crate::errors::ErrorType::LimitExceeded,
            format!("the hub already serves {max} connections (server.maxConnections)"),
        );
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "error": err })),
        )
            .into_response();
    }
    // Frames a little over the limit are still read so they can be answered
    // with LIMIT_EXCEEDED; far larger ones close the socket (1009).
    let frame_cap = cfg
        .server
        .max_message_bytes
        .saturating_mul(2)
        .max(64 * 1024);
    let app = state.app.clone();
    let hub = app.hub.clone();
    ws.protocols([gate::SUBPROTOCOL])
        .max_message_size(frame_cap)
        .max_frame_size(frame_cap)
        .on_failed_upgrade({
            let hub = hub.clone();
            move |e| {
                hub.connections.fetch_sub(1, Ordering::SeqCst);
                tracing::warn!(error = %e, "websocket upgrade failed");
            }
        })
        .on_upgrade(move |socket| conn::run(socket, app))
}

async fn health(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(r) = state.gate.check(&headers) {
        return refuse(r);
    }
    let report = state.app.health().await;
    let code = if report.get("status").and_then(|s| s.as_str()) == Some("down") {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (code, Json(report)).into_response()
}
