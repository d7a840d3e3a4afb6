//! A session's send queue. Everything bound for one client session (a
//! reply, a streamed step, an event) goes through its [`Outbox`].
//!
//! Every frame gets the session's next sequence number (`seq`, from 1) as
//! it is queued, so the order on the wire is the order of `seq`. The queue
//! is a log: frames not yet written, and (when the session may be resumed)
//! frames written but not yet acknowledged. A session outlives its socket:
//! when the socket drops, frames keep queueing, and a new socket that
//! resumes the session ([`Outbox::attach`]) is written every frame after the
//! last one its client saw. The log is bounded by bytes
//! (`server.resumeBufferBytes`): written frames are forgotten first (a
//! resume from before them is then refused); unwritten frames over the
//! bound end a detached session, and a socket that stops reading while its
//! unwritten frames grow past the bound (or past `server.sendQueue`
//! frames) is evicted.
//!
//! The queue wakes its reader through a [`Notify`], not a channel's stored
//! waker: the connection task both reads frames and drains this queue, and
//! answers quick requests (a ping, `list_tools`) into it from the same
//! task. A channel keeps the waker of its last `recv` poll, so each such
//! answer woke the task from inside itself, which tokio handles as a yield
//! and which wakes the other worker thread too. A dropped `Notified`
//! leaves nothing behind: a message queued while nobody waits just leaves a
//! permit for the next `recv`.

mod log;

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::session::InFlight;
pub use log::{Dropped, ResumeRefusal};
use log::{Log, Pushed};

/// The bounds of one session's queue.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Unwritten frames a reading socket may fall behind by
    /// (`server.sendQueue`) before it is evicted.
    pub queue: usize,
    /// Bytes the log may hold for a detached session
    /// (`server.resumeBufferBytes`); of frames already written, a quarter of
    /// that is kept until acknowledged; a socket that reads may fall behind
    /// by four times that before it is evicted.
    pub bytes: usize,
    /// Keep written frames until they are acknowledged, for a resume
    /// (`server.sessionGraceMs` > 0).
    pub resumable: bool,
}

struct Queue {
    log: Mutex<Log>,
    ready: Notify,
    /// The session ended: nothing more is queued or written.
    ended: CancellationToken,
    /// The session's work whose reply is not queued yet.
    work: InFlight,
}

impl Queue {
    fn log(&self) -> MutexGuard<'_, Log> {
        match self.log.lock() {
            Ok(l) => l,
            Err(p) => p.into_inner(),
        }
    }
}

/// A cheap handle to a session's send queue.
#[derive(Clone)]
pub struct Outbox {
    pub session: super::SessionId,
    /// Whose call keys this session's requests use: a fingerprint of the
    /// token its socket presented ([`crate::callkeys`]).
    pub scope: Arc<str>,
    /// The view the session was opened in (`/ws/<view>`): its calls, its
    /// tasks and what it lists stay within it. `None`: the aggregate.
    pub view: Option<Arc<str>>,
    /// The client of `clients` whose token opened it (`None`: the main
    /// token); history and recordings name it.
    pub client: Option<Arc<str>>,
    queue: Arc<Queue>,
}

/// One socket's end of its session's [`Outbox`]: it writes what is queued.
/// A receiver of a socket that was replaced by a resume reads nothing more.
pub struct OutboxReceiver {
    queue: Arc<Queue>,
    socket: u64,
}

impl OutboxReceiver {
    /// The next frame to write, waiting for one; `None` once this socket no
    /// longer serves the session (it was taken over, or the session ended).
    pub async fn recv(&mut self) -> Option<Bytes> {
        loop {
            let notified = self.queue.ready.notified();
            match self.try_next() {
                Next::Frame(b) => return Some(b),
                Next::Gone => return None,
                Next::Empty => {}
            }
            tokio::select! {
                _ = notified => {}
                _ = self.queue.ended.cancelled() => return None,
            }
        }
    }

    /// The next frame to write, if there is one now.
    pub fn try_recv(&mut self) -> Option<Bytes> {
        match self.try_next() {
            Next::Frame(b) => Some(b),
            _ => None,
        }
    }

    fn try_next(&self) -> Next {
        let mut log = self.queue.log();
        if log.socket() != Some(self.socket) {
            return Next::Gone;
        }
        match log.next_to_write() {
            Some(b) => Next::Frame(b),
            None => Next::Empty,
        }
    }

    /// This receiver's socket no longer serves the session: another socket
    /// resumed it.
    pub fn taken_over(&self) -> bool {
        self.queue.log().attachments() > self.socket
    }

    /// More replies are coming: calls of this session are still running.
    /// The connection then lets the tasks that are ready run first, so the
    /// replies ready now leave in one write (one wake-up of the client)
    /// instead of one each; a lone call never waits for that.
    pub fn replies_coming(&self) -> bool {
        self.queue.work.count() > 0
    }

    /// The socket of this receiver ends: the session is detached (it goes
    /// on, queueing, until it is resumed or ended). No-op when another
    /// socket has taken it over already.
    pub fn detach(self) {
        self.queue.log().detach(self.socket);
    }
}

enum Next {
    Frame(Bytes),
    Empty,
    Gone,
}

impl Outbox {
    /// A session's queue, attached to its first socket (whose `evict` token
    /// fires when the socket must go: it stopped reading).
    pub fn new(
        session: super::SessionId,
        limits: Limits,
        evict: CancellationToken,
    ) -> (Outbox, OutboxReceiver) {
        let mut log = Log::new(limits);
        let socket = log.attach_first(evict);
        let queue = Arc::new(Queue {
            log: Mutex::new(log),
            ready: Notify::new(),
            ended: CancellationToken::new(),
            work: InFlight::default(),
        });
        let rx = OutboxReceiver {
            queue: queue.clone(),
            socket,
        };
        let scope = Arc::from("");
        (
            Outbox {
                session,
                scope,
                view: None,
                client: None,
                queue,
            },
            rx,
        )
    }

    /// Queue a message; never blocks. `false` when the session has ended.
    pub fn send(&self, msg: Value) -> bool {
        self.send_text(msg.to_string())
    }

    /// Queue an already serialised message (one JSON object); it gets the
    /// session's next `seq`.
    pub fn send_text(&self, text: String) -> bool {
        if self.queue.ended.is_cancelled() {
            return false;
        }
        let pushed = self.queue.log().push(text);
        match pushed {
            Pushed::Queued => {}
            Pushed::Evicted => {
                tracing::warn!(session = %self.session, "client is not reading; its send queue is full (server.sendQueue / server.resumeBufferBytes); disconnecting its socket");
            }
            Pushed::Overflow(d) => {
                tracing::warn!(session = %self.session, frames = d.frames, bytes = d.bytes,
                    "session ended: frames for its detached socket went over server.resumeBufferBytes; {} frames ({} bytes) were dropped", d.frames, d.bytes);
                self.queue.ended.cancel();
                return false;
            }
        }
        self.queue.ready.notify_one();
        true
    }

    /// The session's work in flight, under `server.maxInFlightPerSession`:
    /// whatever replies through this queue takes a place there first.
    /// Who this session's requests come from: its client, view and id.
    pub fn caller(&self) -> crate::caller::Caller {
        crate::caller::Caller {
            client: self.client.clone(),
            view: self.view.clone(),
            session: self.session.clone(),
        }
    }

    pub fn in_flight(&self) -> &InFlight {
        &self.queue.work
    }

    /// The session has ended: nothing more reaches its client.
    pub fn is_closed(&self) -> bool {
        self.queue.ended.is_cancelled()
    }

    /// Fires when the session ends.
    pub fn ended(&self) -> CancellationToken {
        self.queue.ended.clone()
    }

    /// A socket serves the session now.
    pub fn is_attached(&self) -> bool {
        self.queue.log().socket().is_some()
    }

    /// The number of the socket serving the session (they count up), if
    /// one does.
    pub fn socket(&self) -> Option<u64> {
        self.queue.log().socket()
    }

    /// End the session: drop what is queued and stop taking frames. What
    /// was dropped unseen by the client (frames not yet written) is
    /// returned for the log line.
    pub fn end(&self) -> Dropped {
        let dropped = self.queue.log().clear();
        self.queue.ended.cancel();
        self.queue.ready.notify_waiters();
        dropped
    }

    /// A new socket takes the session over after its client saw every
    /// frame up to `last_seq`: those are dropped as acknowledged, the rest
    /// are written to the new socket in order. The socket serving the
    /// session until now (if any) has its `evict` token cancelled and its
    /// receiver reads nothing more. Returns the receiver and the number of
    /// frames that will be replayed.
    pub fn attach(
        &self,
        last_seq: u64,
        evict: CancellationToken,
    ) -> Result<(OutboxReceiver, u64), ResumeRefusal> {
        if self.queue.ended.is_cancelled() {
            return Err(ResumeRefusal::Ended);
        }
        let (socket, replayed) = self.queue.log().attach(last_seq, evict)?;
        self.queue.ready.notify_waiters();
        let rx = OutboxReceiver {
            queue: self.queue.clone(),
            socket,
        };
        Ok((rx, replayed))
    }

    /// The client saw every frame up to `seq`: free them.
    pub fn ack(&self, seq: u64) {
        self.queue.log().ack(seq);
    }

    /// How many sockets have served the session so far.
    pub fn attachments(&self) -> u64 {
        self.queue.log().attachments()
    }

    /// The `seq` the last queued frame got (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.queue.log().last_seq()
    }
}

#[cfg(test)]
mod tests;
