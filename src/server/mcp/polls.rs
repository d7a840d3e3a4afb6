//! SEP-1699 polling for 2025-11-25 session clients: a `tools/call` still
//! running after `server.mcpStreamPoll` has its SSE stream ended by the
//! hub, after a priming event with a `retry` hint; the client resumes with
//! `GET` and `Last-Event-ID`, and the call's later messages (progress, the
//! server's questions, the result) wait in the session's cache (rmcp's)
//! for that stream. The call itself runs on, once. A long call then holds
//! no connection that a proxy's idle timeout could cut.
//!
//! rmcp's handler context does not name the HTTP request a call came on
//! (docs/rmcp-upstream.md, section 5), so [`Streams`] is the session
//! manager: rmcp's own, with each POST's request number noted under its
//! session and JSON-RPC id while its stream is open.
//!
//! Waits for upstream: a handler able to close its own request's SSE stream
//! (docs/rmcp-upstream.md §5; open in 3.11.0).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RequestContext;
use rmcp::transport::common::server_side_http::{ServerSseMessage, SessionId};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::WorkerTransport;
use rmcp::RoleServer;

use super::SESSION_HEADER;

/// The first revision whose clients resume a stream the server ended.
const FIRST_POLLING_REVISION: &str = "2025-11-25";

/// A POST's stream: (session, JSON-RPC id) → rmcp's HTTP request number.
type Open = Arc<Mutex<HashMap<(SessionId, String), u64>>>;

/// rmcp's session manager, noting which HTTP request each call came on.
pub struct Streams {
    local: Arc<LocalSessionManager>,
    open: Open,
}

impl Streams {
    pub fn new(local: Arc<LocalSessionManager>) -> Arc<Streams> {
        Arc::new(Streams {
            local,
            open: Arc::default(),
        })
    }

    /// End the stream of `session`'s request `id` with a `retry` hint; the
    /// request goes on. Nothing if its stream has already ended.
    async fn close(&self, session: &SessionId, id: &str, retry: Duration) {
        let number = self
            .open
            .lock()
            .ok()
            .and_then(|m| m.get(&(session.clone(), id.to_string())).copied());
        let Some(number) = number else { return };
        let handle = self.local.sessions.read().await.get(session).cloned();
        let Some(handle) = handle else { return };
        match handle.close_sse_stream(number, Some(retry)).await {
            Ok(()) => {
                tracing::debug!(%session, request = %id, "long call: SSE stream ended for the client to resume (SEP-1699)")
            }
            Err(e) => {
                tracing::debug!(%session, request = %id, "long call: its SSE stream could not be ended: {e}")
            }
        }
    }
}

impl SessionManager for Streams {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.local.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.local.close_session(id).await
    }

    /// rmcp's own, but the request's number is noted (before the request
    /// reaches its handler) until its stream ends.
    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let handle = self.local.sessions.read().await.get(id).cloned();
        let handle = handle.ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))?;
        let receiver = handle.establish_request_wise_channel().await?;
        let noted = match (&message, receiver.http_request_id) {
            (JsonRpcMessage::Request(r), Some(number)) => Some(Noted::new(
                self.open.clone(),
                (id.clone(), r.id.to_string()),
                number,
            )),
            _ => None,
        };
        handle
            .push_message(message, receiver.http_request_id)
            .await?;
        Ok(Tracked {
            inner: receiver.inner,
            _noted: noted,
        })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await
    }
}

/// A request's number, noted while its stream is open.
struct Noted {
    open: Open,
    key: (SessionId, String),
}

impl Noted {
    fn new(open: Open, key: (SessionId, String), number: u64) -> Noted {
        if let Ok(mut m) = open.lock() {
            m.insert(key.clone(), number);
        }
        Noted { open, key }
    }
}

impl Drop for Noted {
    fn drop(&mut self) {
        if let Ok(mut m) = self.open.lock() {
            m.remove(&self.key);
        }
    }
}

/// A POST's stream and its note.
struct Tracked {
    inner: tokio::sync::mpsc::Receiver<ServerSseMessage>,
    _noted: Option<Noted>,
}

impl Stream for Tracked {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_recv(cx)
    }
}

/// Ends long calls' streams, with the `retry` hint the streams' priming
/// events carry (rmcp's `sse_retry`; none: no polling).
pub struct Polls {
    streams: Arc<Streams>,
    retry: Option<Duration>,
}

impl Polls {
    pub fn new(streams: Arc<Streams>, retry: Option<Duration>) -> Polls {
        Polls { streams, retry }
    }

    /// Arm the timer for a session client's call: after `after` (the
    /// config's `server.mcpStreamPoll`; zero: never), it ends the call's
    /// stream unless the returned guard is dropped first (the call ended).
    /// Nothing for a client older than 2025-11-25, which would not resume.
    pub fn arm(&self, cx: &RequestContext<RoleServer>, after: Duration) -> Option<Disarm> {
        let retry = self.retry?;
        if after.is_zero() {
            return None;
        }
        let revision = cx.peer.peer_info()?.protocol_version.to_string();
        if revision.as_str() < FIRST_POLLING_REVISION {
            return None;
        }
        let parts = cx.extensions.get::<http::request::Parts>()?;
        let session: SessionId = parts.headers.get(SESSION_HEADER)?.to_str().ok()?.into();
        let id = cx.id.to_string();
        let streams = self.streams.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            streams.close(&session, &id, retry).await;
        });
        Some(Disarm(timer))
    }
}

/// Stops a call's stream timer when dropped.
pub struct Disarm(tokio::task::JoinHandle<()>);

impl Drop for Disarm {
    fn drop(&mut self) {
        self.0.abort();
    }
}
