//! A connection's bounded send queue. Everything bound for one client (a
//! reply, a streamed step, an event) goes through its [`Outbox`]; a client
//! that stops reading fills it and is evicted instead of making the hub
//! buffer without limit or stall a producer.

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A cheap handle to a connection's bounded send queue.
#[derive(Clone)]
pub struct Outbox {
    pub session: String,
    tx: mpsc::Sender<String>,
    evict: CancellationToken,
}

impl Outbox {
    /// A queue of `capacity` frames for `session`; the connection's writer
    /// drains the receiver and ends when `evict` fires.
    pub fn new(
        session: String,
        capacity: usize,
        evict: CancellationToken,
    ) -> (Outbox, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Outbox { session, tx, evict }, rx)
    }

    /// Queue a message; a full queue evicts the client (never blocks).
    pub fn send(&self, msg: Value) -> bool {
        self.send_text(msg.to_string())
    }

    /// Queue an already serialised message (one JSON object).
    pub fn send_text(&self, text: String) -> bool {
        if self.evict.is_cancelled() {
            return false;
        }
        match self.tx.try_send(text) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(session = %self.session, "client is not reading; its send queue is full (server.sendQueue); disconnecting it");
                self.evict.cancel();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    pub fn is_closed(&self) -> bool {
        self.evict.is_cancelled() || self.tx.is_closed()
    }
}
