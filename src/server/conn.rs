//! One task per socket, split into a reader (this task) and a writer.
//!
//! Everything bound for the client goes through one bounded queue
//! ([`Outbox`]). A client that stops reading fills it; it is then evicted
//! instead of making the hub buffer without limit or stall a producer.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::slots::Slot;
use crate::app::App;
use crate::protocol::{self, Outbox};

/// Serve one socket; every log line carries `conn{session}`.
pub async fn run(socket: WebSocket, app: App, slot: Slot) {
    let session = uuid::Uuid::new_v4().to_string();
    let span = tracing::info_span!("conn", session = %session);
    tracing::Instrument::instrument(serve(socket, app, session, slot), span).await;
}

/// `slot` is the connection's place in `server.maxConnections`, given
/// back when this ends.
async fn serve(socket: WebSocket, app: App, session: String, slot: Slot) {
    let hub = app.hub.clone();
    tracing::info!("client connected");
    let cfg = hub.config();
    let (sink, mut stream) = socket.split();
    let evict = CancellationToken::new();
    let (outbox, rx) = Outbox::new(session.clone(), cfg.server.send_queue.max(8), evict.clone());
    // The close frame the writer sends when the connection ends: 1008
    // (policy) unless the reader says why it ended; 0 = send none.
    let close = Arc::new(AtomicU16::new(CLOSE_EVICTED));
    let writer = tokio::spawn(write_loop(
        sink,
        rx,
        evict.clone(),
        close.clone(),
        cfg.server.ping_interval,
    ));
    let tools = hub.tools();
    outbox.send(protocol::hello(
        &session,
        hub.server_summaries(),
        tools.tools().len(),
    ));
    let events = tokio::spawn(forward_events(hub.subscribe(), outbox.clone()));
    let idle = cfg.server.idle_timeout;
    let max_bytes = cfg.server.max_message_bytes;
    loop {
        let next = tokio::select! {
            n = tokio::time::timeout(idle, stream.next()) => n,
            _ = evict.cancelled() => break,
            _ = hub.shutdown.cancelled() => {
                close.store(CLOSE_SHUTDOWN, Ordering::SeqCst);
                break;
            }
        };
        let frame = match next {
            Err(_) => {
                tracing::info!(session = %session, idle_ms = idle.as_millis() as u64, "closing idle connection (server.idleTimeout)");
                close.store(CLOSE_IDLE, Ordering::SeqCst);
                break;
            }
            Ok(None) => {
                close.store(0, Ordering::SeqCst);
                break;
            }
            Ok(Some(Err(e))) => {
                tracing::info!(session = %session, error = %e, "socket error");
                close.store(0, Ordering::SeqCst);
                break;
            }
            Ok(Some(Ok(m))) => m,
        };
        match frame {
            Message::Text(text) => super::dispatch::handle(&app, &outbox, text.as_str(), max_bytes),
            Message::Binary(_) => {
                let e = crate::errors::HubError::new(
                    crate::errors::ErrorType::InvalidMessage,
                    "binary frames are not supported; send one JSON object per text frame",
                );
                outbox.send(protocol::error_msg(&None, &e));
            }
            Message::Close(_) => {
                // The client closed; the library answers its close frame.
                close.store(0, Ordering::SeqCst);
                break;
            }
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    evict.cancel();
    events.abort();
    app.connection_closed(&session);
    let _ = writer.await;
    // Free the slot first: whoever reads "client disconnected" (a person,
    // a test) may connect again at once.
    drop(slot);
    tracing::info!(session = %session, "client disconnected");
    crate::trim::soon();
}

async fn write_loop(
    mut sink: futures::stream::SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<String>,
    evict: CancellationToken,
    close: Arc<AtomicU16>,
    ping_every: std::time::Duration,
) {
    let mut ping = tokio::time::interval(ping_every.max(std::time::Duration::from_millis(50)));
    ping.tick().await;
    loop {
        let out = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => Message::Text(m.into()),
                None => break,
            },
            _ = ping.tick() => Message::Ping(Vec::new().into()),
            _ = evict.cancelled() => {
                // Best effort: a client that does not read may never see it.
                let code = close.load(Ordering::SeqCst);
                if code != 0 {
                    let frame = Message::Close(Some(CloseFrame { code, reason: close_reason(code).into() }));
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), sink.send(frame)).await;
                }
                break;
            }
        };
        // Whatever else is already queued leaves with it, in one write (a
        // busy connection pays one send per burst, not one per message).
        let send = async {
            sink.feed(out).await?;
            for _ in 0..COALESCE {
                match rx.try_recv() {
                    Ok(m) => sink.feed(Message::Text(m.into())).await?,
                    Err(_) => break,
                }
            }
            sink.flush().await
        };
        // A client that stopped reading blocks this send once the socket's
        // buffers are full; eviction (or shutdown) must still end it, or the
        // connection and its slot would leak.
        tokio::select! {
            r = send => if r.is_err() { break },
            _ = evict.cancelled() => break,
        }
    }
    evict.cancel();
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
