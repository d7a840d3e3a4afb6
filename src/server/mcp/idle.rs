//! `/mcp` sessions end after `server.mcpSessionIdle` of idleness, counted
//! by the hub rather than by rmcp. rmcp's own clock (`keep_alive`) runs
//! from its session worker's last event, so a `tools/call` longer than the
//! idle time with nothing else on the session ended the session in the
//! middle of the call, and a client listening on its standalone stream was
//! dropped after the idle time of quiet.
//!
//! Here a session is idle only while none of its requests is in flight and
//! none of its streams is open: `limit` marks the session busy for each
//! request that names it (until the response is complete, the whole stream
//! for an SSE response) and registers each session an `initialize` opens;
//! the reaper closes a session idle for longer than the setting through
//! rmcp's session manager, which then drops it as a DELETE would.
//!
//! Waits for upstream: rmcp's session keep-alive not counting time with a
//! request in flight (docs/rmcp-upstream.md §4; open in 3.11.0).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use tokio_util::sync::CancellationToken;

/// What the reaper knows of one session.
struct Activity {
    /// Requests (and open streams) of the session right now.
    busy: AtomicUsize,
    /// When the last of them ended (or the session opened).
    last: Mutex<Instant>,
}

/// A request or stream of a session in flight: the session is not idle
/// until it is dropped.
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Ok(mut last) = self.0.last.lock() {
            *last = Instant::now();
        }
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The `/mcp` sessions' idleness, by `Mcp-Session-Id`.
pub struct Idle {
    after: Duration,
    sessions: Mutex<HashMap<Arc<str>, Arc<Activity>>>,
}

impl Idle {
    pub fn new(after: Duration) -> Arc<Idle> {
        Arc::new(Idle {
            after,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// An `initialize` opened the session `id`.
    pub fn opened(&self, id: &str) {
        if let Ok(mut s) = self.sessions.lock() {
            s.insert(
                id.into(),
                Arc::new(Activity {
                    busy: AtomicUsize::new(0),
                    last: Mutex::new(Instant::now()),
                }),
            );
        }
    }

    /// A request of session `id` begins; `None` for a session the hub
    /// does not know (rmcp answers it 404).
    pub fn busy(&self, id: &str) -> Option<Busy> {
        let a = self.sessions.lock().ok()?.get(id)?.clone();
        a.busy.fetch_add(1, Ordering::AcqRel);
        Some(Busy(a))
    }

    /// The sessions idle for longer than the setting at `now`, with how
    /// long each has been.
    fn expired(&self, now: Instant) -> Vec<(Arc<str>, Duration)> {
        let Ok(s) = self.sessions.lock() else {
            return Vec::new();
        };
        s.iter()
            .filter(|(_, a)| a.busy.load(Ordering::Acquire) == 0)
            .filter_map(|(id, a)| {
                let quiet = now.saturating_duration_since(*a.last.lock().ok()?);
                (quiet >= self.after).then(|| (id.clone(), quiet))
            })
            .collect()
    }

    fn ids(&self) -> Vec<Arc<str>> {
        self.sessions
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn forget(&self, id: &str) {
        if let Ok(mut s) = self.sessions.lock() {
            s.remove(id);
        }
    }
}

/// Keep `busy` until `resp` is complete: an SSE response (a call that
/// streams progress, a standalone stream) holds it for as long as its body
/// is read; any other response is complete already.
pub fn hold(resp: Response, busy: Option<Busy>) -> Response {
    let Some(busy) = busy else {
        return resp;
    };
    let streaming = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streaming {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _in_flight = &busy;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Close idle sessions until `shutdown`, looking every quarter of the idle
/// time (at least every 30 s); forget the ones rmcp closed itself (DELETE).
pub fn spawn_reaper(
    idle: Arc<Idle>,
    manager: Arc<LocalSessionManager>,
    shutdown: CancellationToken,
) {
    let tick = (idle.after / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = shutdown.cancelled() => return,
            }
            for (id, quiet) in idle.expired(Instant::now()) {
                tracing::info!(
                    session = %id,
                    idle_ms = quiet.as_millis() as u64,
                    "MCP session idle (no request, call or stream) for server.mcpSessionIdle; ending it"
                );
                if let Err(e) = manager.close_session(&id).await {
                    tracing::warn!(session = %id, error = %e, "an idle MCP session could not be closed");
                }
                idle.forget(&id);
            }
            for id in idle.ids() {
                if !manager.has_session(&id).await.unwrap_or(false) {
                    idle.forget(&id);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_idle_only_with_nothing_in_flight() {
        let idle = Idle::new(Duration::from_millis(100));
        idle.opened("a");
        idle.opened("b");
        let later = Instant::now() + Duration::from_millis(150);
        let call = idle.busy("a").expect("known");
        let ids: Vec<_> = idle.expired(later).into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![Arc::<str>::from("b")], "a has a call in flight");
        drop(call);
        // Its clock starts again when the call ends.
        assert!(idle.expired(Instant::now()).is_empty());
        let much_later = Instant::now() + Duration::from_millis(150);
        assert_eq!(idle.expired(much_later).len(), 2);
        assert!(idle.busy("unknown").is_none());
        idle.forget("a");
        assert_eq!(idle.ids(), vec![Arc::<str>::from("b")]);
    }
}
