//! A connection's bounded send queue. Everything bound for one client (a
//! reply, a streamed step, an event) goes through its [`Outbox`]; a client
//! that stops reading fills it and is evicted instead of making the hub
//! buffer without limit or stall a producer.
//!
//! The queue wakes its reader through a [`Notify`], not a channel's stored
//! waker: the connection task both reads frames and drains this queue, and
//! answers quick requests (a ping, `list_tools`) into it from the same
//! task. A channel keeps the waker of its last `recv` poll, so each such
//! answer woke the task from inside itself, which tokio handles as a yield
//! and which wakes the other worker thread too. A dropped `Notified`
//! leaves nothing behind: a message queued while nobody waits just leaves a
//! permit for the next `recv`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

struct Queue {
    items: Mutex<VecDeque<String>>,
    ready: Notify,
    capacity: usize,
    /// The receiver was dropped: the connection is gone.
    closed: AtomicBool,
    /// Calls of this connection whose reply is not queued yet.
    running: AtomicUsize,
}

impl Queue {
    fn pop(&self) -> Option<String> {
        match self.items.lock() {
            Ok(mut q) => q.pop_front(),
            Err(p) => p.into_inner().pop_front(),
        }
    }
}

/// A cheap handle to a connection's bounded send queue.
#[derive(Clone)]
pub struct Outbox {
    pub session: String,
    queue: Arc<Queue>,
    evict: CancellationToken,
}

/// The connection's end of its [`Outbox`] (one reader).
pub struct OutboxReceiver {
    queue: Arc<Queue>,
}

impl OutboxReceiver {
    /// The next queued message, waiting for one.
    pub async fn recv(&mut self) -> String {
        loop {
            if let Some(m) = self.queue.pop() {
                return m;
            }
            self.queue.ready.notified().await;
        }
    }

    /// The next queued message, if there is one now.
    pub fn try_recv(&mut self) -> Option<String> {
        self.queue.pop()
    }

    /// More replies are coming: calls of this connection are still running.
    /// The connection then lets the tasks that are ready run first, so the
    /// replies ready now leave in one write (one wake-up of the client)
    /// instead of one each; a lone call never waits for that.
    pub fn replies_coming(&self) -> bool {
        self.queue.running.load(Ordering::Relaxed) > 0
    }
}

/// A running call of the connection ([`Outbox::call_started`]); dropped
/// just before its reply is queued.
pub struct Running(Arc<Queue>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for OutboxReceiver {
    fn drop(&mut self) {
        self.queue.closed.store(true, Ordering::SeqCst);
    }
}

impl Outbox {
    /// A queue of `capacity` frames for `session`; the connection's writer
    /// drains the receiver and ends when `evict` fires.
    pub fn new(
        session: String,
        capacity: usize,
        evict: CancellationToken,
    ) -> (Outbox, OutboxReceiver) {
        let queue = Arc::new(Queue {
            items: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            capacity: capacity.max(1),
            closed: AtomicBool::new(false),
            running: AtomicUsize::new(0),
        });
        let rx = OutboxReceiver {
            queue: queue.clone(),
        };
        (
            Outbox {
                session,
                queue,
                evict,
            },
            rx,
        )
    }

    /// Queue a message; a full queue evicts the client (never blocks).
    pub fn send(&self, msg: Value) -> bool {
        self.send_text(msg.to_string())
    }

    /// Queue an already serialised message (one JSON object).
    pub fn send_text(&self, text: String) -> bool {
        if self.is_closed() {
            return false;
        }
        {
            let mut q = match self.queue.items.lock() {
                Ok(q) => q,
                Err(p) => p.into_inner(),
            };
            if q.len() >= self.queue.capacity {
                drop(q);
                tracing::warn!(session = %self.session, "client is not reading; its send queue is full (server.sendQueue); disconnecting it");
                self.evict.cancel();
                return false;
            }
            q.push_back(text);
        }
        self.queue.ready.notify_one();
        true
    }

    /// A call whose reply will come through this queue has started; drop
    /// the guard right before queueing the reply.
    pub fn call_started(&self) -> Running {
        self.queue.running.fetch_add(1, Ordering::Relaxed);
        Running(self.queue.clone())
    }

    pub fn is_closed(&self) -> bool {
        self.evict.is_cancelled() || self.queue.closed.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn messages_arrive_in_order_and_a_waiting_reader_is_woken() {
        let (out, mut rx) = Outbox::new("s".into(), 8, CancellationToken::new());
        assert!(out.send(serde_json::json!({"n": 1})));
        assert!(out.send_text("{\"n\":2}".into()));
        assert_eq!(rx.recv().await, "{\"n\":1}");
        assert_eq!(rx.try_recv().as_deref(), Some("{\"n\":2}"));
        assert_eq!(rx.try_recv(), None);
        // A reader already waiting is woken by a send from another task.
        let o = out.clone();
        let waiting = tokio::spawn(async move { rx.recv().await });
        tokio::task::yield_now().await;
        assert!(o.send_text("{\"n\":3}".into()));
        let got = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("woken within 10 s")
            .expect("join");
        assert_eq!(got, "{\"n\":3}");
    }

    #[tokio::test]
    async fn a_full_queue_evicts_and_a_gone_reader_closes() {
        let evict = CancellationToken::new();
        let (out, rx) = Outbox::new("s".into(), 2, evict.clone());
        assert!(out.send_text("a".into()));
        assert!(out.send_text("b".into()));
        assert!(!evict.is_cancelled());
        assert!(!out.send_text("c".into()), "the third does not fit");
        assert!(
            evict.is_cancelled(),
            "a client that does not read is evicted"
        );
        assert!(out.is_closed());
        let (out, rx2) = Outbox::new("s".into(), 2, CancellationToken::new());
        assert!(!out.is_closed());
        drop(rx2);
        assert!(out.is_closed());
        assert!(!out.send_text("late".into()));
        drop(rx);
    }

    #[test]
    fn replies_are_coming_while_a_call_runs() {
        let (out, rx) = Outbox::new("s".into(), 8, CancellationToken::new());
        assert!(!rx.replies_coming());
        let (a, b) = (out.call_started(), out.clone().call_started());
        assert!(rx.replies_coming());
        drop(a);
        assert!(rx.replies_coming());
        drop(b);
        assert!(!rx.replies_coming());
    }
}
