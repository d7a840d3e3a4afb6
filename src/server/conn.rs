//! One task per socket: it reads frames and writes what is queued for the
//! session it serves.
//!
//! Everything bound for the client goes through its session's bounded
//! queue ([`crate::session::Outbox`]). A client that stops reading fills
//! it; its socket is then evicted instead of making the hub buffer without
//! limit or stall a producer. A socket's first message may resume another
//! session ([`super::session`]); the socket then serves that one.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::session::{Session, Sessions};
use super::slots::Slot;
use crate::app::App;
use crate::errors::{ErrorType, HubError};
use crate::protocol::{self, MsgId, ResumeSessionReq};
use crate::session::OutboxReceiver;

/// Serve one socket; every log line carries `conn{session}` (the socket's
/// first session: a resume names the one it took over).
pub async fn run(
    socket: WebSocket,
    app: App,
    slot: Slot,
    sessions: Sessions,
    admitted: crate::session::Admission,
) {
    let evict = CancellationToken::new();
    if let Some(name) = &admitted.client {
        cut_when_revoked(&app, name.to_string(), admitted.view.clone(), evict.clone());
    }
    let (session, rx) = sessions.open(&app, admitted, evict.clone());
    let span = tracing::info_span!("conn", session = %session.id);
    let link = Link { session, rx, evict };
    tracing::Instrument::instrument(serve(socket, app, sessions, link, slot), span).await;
}

/// A client of `clients` loses its socket at the reload that removes it,
/// replaces its token, or takes this view from it (issue 40: revoking a
/// client cuts its open sessions, not only new ones). Its session cannot be
/// resumed either: the gate refuses the old token.
fn cut_when_revoked(app: &App, name: String, view: Option<Arc<str>>, evict: CancellationToken) {
    let mut rx = app.hub.watch_config();
    let first = rx.borrow().clients.get(&name).map(|c| c.token.clone());
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = evict.cancelled() => return,
                changed = rx.changed() => if changed.is_err() { return },
            }
            let cfg = rx.borrow_and_update().clone();
            let still = cfg.clients.get(&name).is_some_and(|c| {
                Some(&c.token) == first.as_ref()
                    && view
                        .as_deref()
                        .is_some_and(|v| c.views.iter().any(|x| x == v))
            });
            if !still {
                tracing::info!(client = %name, "client revoked in config.json (removed, its token replaced, or this view taken away): closing its socket");
                evict.cancel();
                return;
            }
        }
    });
}

/// The session a socket serves, its end of the session's outbox, and the
/// token that tells the socket to go.
struct Link {
    session: Arc<Session>,
    rx: OutboxReceiver,
    evict: CancellationToken,
}

/// `slot` is the connection's place in `server.maxConnections`, given
/// back when this ends.
///
/// One task owns the socket, reading frames and writing what the
/// session's [`crate::session::Outbox`] holds in one `select!`. Reading
/// and writing in two tasks over a split socket cost a wake-up of the other
/// task (often on the other worker thread) for every frame: the socket's
/// readiness wakes both halves. The relay benchmark counts these ("hub
/// threads went to sleep").
async fn serve(mut socket: WebSocket, app: App, sessions: Sessions, mut link: Link, slot: Slot) {
    let hub = app.hub.clone();
    tracing::info!("client connected");
    let cfg = hub.config();
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
    // Only a socket's first messages may resume a session (refused
    // attempts do not count).
    let mut first = true;
    loop {
        let frame = tokio::select! {
            next = link.rx.recv() => {
                let Some(next) = next else {
                    close = if link.rx.taken_over() { CLOSE_TAKEN_OVER } else { CLOSE_EVICTED };
                    break;
                };
                if link.rx.replies_coming() {
                    // Let the calls that are ready queue their replies too.
                    tokio::task::yield_now().await;
                }
                // Whatever else is already queued leaves with it, in one write.
                let write = send_burst(&mut socket, next, &mut link.rx);
                if let Some(code) = write_or_end(write, &link.evict, &hub.shutdown).await {
                    close = if link.rx.taken_over() { CLOSE_TAKEN_OVER } else { code };
                    break;
                }
                continue;
            }
            f = socket.next() => f,
            _ = ping.tick() => {
                let write = socket.send(Message::Ping(Vec::new().into()));
                if let Some(code) = write_or_end(write, &link.evict, &hub.shutdown).await {
                    close = if link.rx.taken_over() { CLOSE_TAKEN_OVER } else { code };
                    break;
                }
                continue;
            }
            _ = &mut idle_end => {
                tracing::info!(session = %link.session.id, idle_ms = idle.as_millis() as u64, "closing idle connection (server.idleTimeout)");
                close = CLOSE_IDLE;
                break;
            }
            _ = link.evict.cancelled() => {
                if link.rx.taken_over() {
                    close = CLOSE_TAKEN_OVER;
                }
                break;
            }
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
                tracing::info!(session = %link.session.id, error = %e, "socket error");
                close = 0;
                break;
            }
            Some(Ok(m)) => m,
        };
        idle_end.as_mut().reset(Instant::now() + idle);
        match frame {
            Message::Text(text) => {
                let Some((id, req)) =
                    super::dispatch::handle(&app, &link.session, text.as_str(), max_bytes)
                else {
                    first = false;
                    continue;
                };
                if !first {
                    let e = HubError::new(
                        ErrorType::InvalidMessage,
                        "resume_session must be the first message a socket sends (right after the hub's hello); this socket already serves its own session",
                    )
                    .with_suggestion("open a new socket and send resume_session first");
                    link.session.outbox.send(protocol::error_msg(&id, &e));
                    continue;
                }
                match resume(&mut socket, &app, &sessions, &mut link, id, req).await {
                    Ok(resumed) => first = !resumed,
                    Err(code) => {
                        close = code;
                        break;
                    }
                }
            }
            Message::Binary(_) => {
                let e = HubError::new(
                    ErrorType::InvalidMessage,
                    "binary frames are not supported; send one JSON object per text frame",
                );
                link.session.outbox.send(protocol::error_msg(&None, &e));
            }
            Message::Close(_) => {
                // The client closed; the library answers its close frame.
                close = 0;
                break;
            }
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    let Link { session, rx, .. } = link;
    sessions.socket_closed(&app, &session, rx);
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
    tracing::info!(session = %session.id, "client disconnected");
    crate::trim::soon();
}

/// `resume_session`: take the named session over. On success the socket
/// gets `session_resumed` (outside the session's numbering: it is about
/// the stream, not in it), then every frame after `lastSeq`; its own new
/// session is given up. A refusal is an error in the socket's own session,
/// which goes on (and may try again). `Ok(true)` once resumed; `Err` is
/// the close code when the socket failed.
async fn resume(
    socket: &mut WebSocket,
    app: &App,
    sessions: &Sessions,
    link: &mut Link,
    id: MsgId,
    req: ResumeSessionReq,
) -> Result<bool, u16> {
    let target = match sessions.find(&req) {
        Ok(t) if t.id == link.session.id => {
            let e = HubError::new(
                ErrorType::InvalidMessage,
                "this socket already serves that session",
            );
            link.session.outbox.send(protocol::error_msg(&id, &e));
            return Ok(false);
        }
        // A session stays in its view and with its principal: a socket of
        // another view (or of the aggregate), or of another token, cannot
        // take it over, even with its resume token.
        Ok(t) if t.outbox.client != link.session.outbox.client => {
            // Answered as for a session that never existed: the socket
            // learns nothing of another principal's sessions.
            let e = super::session::gone(&req.session_id);
            link.session.outbox.send(protocol::error_msg(&id, &e));
            return Ok(false);
        }
        Ok(t) if t.outbox.view != link.session.outbox.view => {
            let e = HubError::new(
                ErrorType::NotFound,
                format!(
                    "session {} belongs to another view; resume it from the path it was opened at",
                    req.session_id
                ),
            );
            link.session.outbox.send(protocol::error_msg(&id, &e));
            return Ok(false);
        }
        Ok(t) => t,
        Err(e) => {
            tracing::info!(session = %req.session_id, error = %e.message, "resume_session refused");
            link.session.outbox.send(protocol::error_msg(&id, &e));
            return Ok(false);
        }
    };
    let evict = CancellationToken::new();
    let (rx, replayed) = match sessions.take_over(&target, req.last_seq, evict.clone()) {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(session = %req.session_id, error = %e.message, "resume_session refused");
            link.session.outbox.send(protocol::error_msg(&id, &e));
            return Ok(false);
        }
    };
    let own = std::mem::replace(
        link,
        Link {
            session: target,
            rx,
            evict,
        },
    );
    sessions.discard(&own.session, own.rx);
    tracing::info!(resumed = %link.session.id, last_seq = req.last_seq, replayed, "session resumed on this socket");
    let msg = protocol::reply(
        "session_resumed",
        &id,
        serde_json::json!({
            "sessionId": link.session.id,
            "fromSeq": req.last_seq + 1,
            "replayed": replayed,
        }),
    );
    let write = socket.send(Message::Text(msg.to_string().into()));
    match write_or_end(write, &link.evict, &app.hub.shutdown).await {
        None => Ok(true),
        Some(code) => Err(code),
    }
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
    first: Bytes,
    rx: &mut OutboxReceiver,
) -> Result<(), axum::Error> {
    socket.feed(text_frame(first)).await?;
    for _ in 0..COALESCE {
        match rx.try_recv() {
            Some(m) => socket.feed(text_frame(m)).await?,
            None => break,
        }
    }
    socket.flush().await
}

/// A queued frame (always UTF-8: it was a `String`) as a text message,
/// without copying it.
fn text_frame(b: Bytes) -> Message {
    match Utf8Bytes::try_from(b) {
        Ok(t) => Message::Text(t),
        Err(_) => Message::Text(Utf8Bytes::from_static(
            "{\"type\":\"warning\",\"message\":\"a frame that was not UTF-8 was dropped\"}",
        )),
    }
}

/// The most queued messages written together with the first.
const COALESCE: usize = 32;

/// Close codes, one meaning each (docs/protocol.md, "Connections").
const CLOSE_EVICTED: u16 = 1008;
const CLOSE_SHUTDOWN: u16 = 1001;
const CLOSE_IDLE: u16 = 1000;
/// Another socket resumed this socket's session (`resume_session`).
pub const CLOSE_TAKEN_OVER: u16 = 4001;

fn close_reason(code: u16) -> &'static str {
    match code {
        CLOSE_TAKEN_OVER => "session taken over: another socket resumed it",
        CLOSE_SHUTDOWN => "the hub is shutting down",
        CLOSE_IDLE => "idle for longer than server.idleTimeout",
        _ => "send queue full (server.sendQueue): the client stopped reading",
    }
}
