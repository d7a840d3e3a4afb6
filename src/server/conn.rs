//! One task per socket: it reads frames and writes what is queued for the
//! client.
//!
//! Everything bound for the client goes through one bounded queue
//! ([`Outbox`]). A client that stops reading fills it; it is then evicted
//! instead of making the hub buffer without limit or stall a producer.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::slots::Slot;
use crate::app::App;
use crate::protocol::{self, Outbox, OutboxReceiver};
use crate::spin::Spin;

/// Serve one socket; every log line carries `conn{session}`.
pub async fn run(socket: WebSocket, app: App, slot: Slot, spin: Spin) {
    let session = uuid::Uuid::new_v4().to_string();
    let span = tracing::info_span!("conn", session = %session);
    tracing::Instrument::instrument(serve(socket, app, session, slot, spin), span).await;
}

/// `slot` is the connection's place in `server.maxConnections`, given
/// back when this ends.
///
/// One task owns the socket, reading frames and writing what the
/// [`Outbox`] holds in one `select!`. Reading and writing in two tasks over
/// a split socket cost a wake-up of the other task (often on the other
/// worker thread) for every frame: the socket's readiness wakes both
/// halves. The relay benchmark counts these ("hub threads went to sleep").
async fn serve(mut socket: WebSocket, app: App, session: String, slot: Slot, spin: Spin) {
    let hub = app.hub.clone();
    tracing::info!("client connected");
    let cfg = hub.config();
    let evict = CancellationToken::new();
    let (outbox, mut rx) =
        Outbox::new(session.clone(), cfg.server.send_queue.max(8), evict.clone());
    let tools = hub.tools();
    outbox.send(protocol::hello(
        &session,
        hub.server_summaries(),
        tools.tools().len(),
    ));
    let events = tokio::spawn(forward_events(hub.subscribe(), outbox.clone()));
    let idle = cfg.server.idle_timeout;
    let max_bytes = cfg.server.max_message_bytes;
    let ping_every = cfg.server.ping_interval.max(Duration::from_millis(50));
    let mut ping = tokio::time::interval_at(Instant::now() + ping_every, ping_every);
    // Any frame from the client (a pong too) starts the idle time again.
    let idle_end = tokio::time::sleep(idle);
    tokio::pin!(idle_end);
    // The close frame sent when the connection ends: 1008 (policy) unless
    // the loop says why it ended; 0 = send none.
    let mut close = CLOSE_EVICTED;
    loop {
        let frame = tokio::select! {
            first = rx.recv() => {
                if rx.replies_coming() {
                    // Let the calls that are ready queue their replies too.
                    tokio::task::yield_now().await;
                }
                // Whatever else is already queued leaves with it, in one write.
                let write = send_burst(&mut socket, first, &mut rx);
                if let Some(code) = write_or_end(write, &evict, &hub.shutdown).await {
                    close = code;
                    break;
                }
                // The client's next request is likely on its way.
                spin.touch();
                continue;
            }
            f = socket.next() => f,
            _ = ping.tick() => {
                let write = socket.send(Message::Ping(Vec::new().into()));
                if let Some(code) = write_or_end(write, &evict, &hub.shutdown).await {
                    close = code;
                    break;
                }
                continue;
            }
            _ = &mut idle_end => {
                tracing::info!(session = %session, idle_ms = idle.as_millis() as u64, "closing idle connection (server.idleTimeout)");
                close = CLOSE_IDLE;
                break;
            }
            _ = evict.cancelled() => break,
            _ = hub.shutdown.cancelled() => {
                close = CLOSE_SHUTDOWN;
                break;
            }
        };
        let frame = match frame {
            None => {
                close = 0;
                break;
            }
            Some(Err(e)) => {
                tracing::info!(session = %session, error = %e, "socket error");
                close = 0;
                break;
            }
            Some(Ok(m)) => m,
        };
        idle_end.as_mut().reset(Instant::now() + idle);
        match frame {
            Message::Text(text) => {
                // Its answer (or the server's) is likely on its way.
                spin.touch();
                super::dispatch::handle(&app, &outbox, text.as_str(), max_bytes)
            }
            Message::Binary(_) => {
                let e = crate::errors::HubError::new(
                    crate::errors::ErrorType::InvalidMessage,
                    "binary frames are not supported; send one JSON object per text frame",
                );
                outbox.send(protocol::error_msg(&None, &e));
            }
            Message::Close(_) => {
                // The client closed; the library answers its close frame.
                close = 0;
                break;
            }
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    evict.cancel();
    events.abort();
    app.connection_closed(&session);
    if close != 0 {
        // Best effort: a client that does not read may never see it.
        let frame = Message::Close(Some(CloseFrame {
            code: close,
            reason: close_reason(close).into(),
        }));
        let _ = tokio::time::timeout(Duration::from_secs(1), socket.send(frame)).await;
    }
    drop(socket);
    // Free the slot first: whoever reads "client disconnected" (a person,
    // a test) may connect again at once.
    drop(slot);
    tracing::info!(session = %session, "client disconnected");
    crate::trim::soon();
}

/// A socket write raced with eviction and shutdown: a client that stopped
/// reading blocks it once the socket's buffers are full, and the connection
/// (and its slot) must still end. `None` once written, else the close code
/// to end with (0: the socket failed, send none).
async fn write_or_end(
    write: impl std::future::Future<Output = Result<(), axum::Error>>,
    evict: &CancellationToken,
    shutdown: &CancellationToken,
) -> Option<u16> {
    tokio::select! {
        r = write => r.err().map(|_| 0),
        _ = evict.cancelled() => Some(CLOSE_EVICTED),
        _ = shutdown.cancelled() => Some(CLOSE_SHUTDOWN),
    }
}

/// Write `first` and whatever else is queued (up to [`COALESCE`] more),
/// then flush once: a busy connection pays one send per burst.
async fn send_burst(
    socket: &mut WebSocket,
    first: String,
    rx: &mut OutboxReceiver,
) -> Result<(), axum::Error> {
    socket.feed(Message::Text(first.into())).await?;
    for _ in 0..COALESCE {
        match rx.try_recv() {
            Some(m) => socket.feed(Message::Text(m.into())).await?,
            None => break,
        }
    }
    socket.flush().await
}

/// The most queued messages written together with the first.
const COALESCE: usize = 32;

/// Close codes, one meaning each (docs/protocol.md, "Connections").
const CLOSE_EVICTED: u16 = 1008;
const CLOSE_SHUTDOWN: u16 = 1001;
const CLOSE_IDLE: u16 = 1000;

fn close_reason(code: u16) -> &'static str {
    match code {
        CLOSE_SHUTDOWN => "the hub is shutting down",
        CLOSE_IDLE => "idle for longer than server.idleTimeout",
        _ => "send queue full (server.sendQueue): the client stopped reading",
    }
}

/// Hub-wide events (tools_updated, server_status, …) to this client.
async fn forward_events(mut rx: broadcast::Receiver<Arc<Value>>, outbox: Outbox) {
    loop {
        match rx.recv().await {
            Ok(ev) => {
                if let Some(owner) = ev.get("_session").and_then(Value::as_str) {
                    if owner != outbox.session {
                        continue;
                    }
                }
                if !outbox.send(strip_private(&ev)) && outbox.is_closed() {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                outbox.send(serde_json::json!({
                    "type": "warning",
                    "message": format!("{n} hub events were dropped because this connection fell behind; send list_tools and health_check to resynchronise"),
                }));
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Fields starting with `_` route an event inside the hub; never sent.
fn strip_private(ev: &Value) -> Value {
    match ev {
        Value::Object(m) if m.keys().any(|k| k.starts_with('_')) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('_'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}
