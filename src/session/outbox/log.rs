//! The frames of one session, numbered: unwritten ones, and written ones
//! kept until acknowledged (for a resume). Pure bookkeeping under the
//! outbox's lock: no IO, no waiting.

use std::collections::VecDeque;
use std::fmt::Write;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::Limits;

/// Why a resume cannot take the session over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeRefusal {
    /// The session has ended.
    Ended,
    /// `lastSeq` is past the last frame the session sent.
    Beyond { last_seq: u64, sent: u64 },
    /// Frames after `lastSeq` are gone: the oldest still kept is `oldest`.
    TooOld { last_seq: u64, oldest: u64 },
}

/// What was dropped without reaching the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    pub frames: u64,
    pub bytes: usize,
}

pub(super) enum Pushed {
    Queued,
    /// Queued, and the socket was told to go: it stopped reading.
    Evicted,
    /// Over the bound with no socket: the session must end.
    Overflow(Dropped),
}

pub(super) struct Log {
    limits: Limits,
    /// Frames with `seq` from `frames[0].0` up to `next_seq - 1`.
    frames: VecDeque<(u64, Bytes)>,
    next_seq: u64,
    /// The `seq` of the next frame to write.
    cursor: u64,
    /// Bytes of the frames before `cursor` (written) and from it (not).
    written_bytes: usize,
    unwritten_bytes: usize,
    /// The socket serving the session: its number and its evict token.
    socket: Option<(u64, CancellationToken)>,
    sockets: u64,
}

impl Log {
    pub(super) fn new(limits: Limits) -> Log {
        Log {
            limits,
            frames: VecDeque::new(),
            next_seq: 1,
            cursor: 1,
            written_bytes: 0,
            unwritten_bytes: 0,
            socket: None,
            sockets: 0,
        }
    }

    pub(super) fn socket(&self) -> Option<u64> {
        self.socket.as_ref().map(|(n, _)| *n)
    }

    pub(super) fn attachments(&self) -> u64 {
        self.sockets
    }

    pub(super) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    pub(super) fn attach_first(&mut self, evict: CancellationToken) -> u64 {
        self.sockets += 1;
        self.socket = Some((self.sockets, evict));
        self.sockets
    }

    pub(super) fn push(&mut self, text: String) -> Pushed {
        let seq = self.next_seq;
        self.next_seq += 1;
        let frame = with_seq(text, seq);
        self.unwritten_bytes += frame.len();
        self.frames.push_back((seq, frame));
        self.forget_written();
        let unwritten = self.next_seq - self.cursor;
        // One frame alone is never too big to keep (a large reply is
        // written whole); a backlog of several over the bound is. A socket
        // that reads is allowed a burst of four times the bound before it
        // counts as not reading.
        let over = unwritten > 1 && self.unwritten_bytes > self.limits.bytes;
        let behind = unwritten > 1 && self.unwritten_bytes / 4 > self.limits.bytes;
        match &self.socket {
            Some((_, evict)) if behind || unwritten > self.limits.queue as u64 => {
                evict.cancel();
                self.socket = None;
                if !self.limits.resumable && behind {
                    return Pushed::Overflow(self.clear());
                }
                Pushed::Evicted
            }
            None if over => Pushed::Overflow(self.clear()),
            _ => Pushed::Queued,
        }
    }

    /// Written frames go first when the log is over its bound, and at once
    /// when the session cannot be resumed.
    fn forget_written(&mut self) {
        // Written frames matter only for a socket that died with them in
        // flight: a quarter of the bound is kept (a client that never acks,
        // wscat, holds at most that).
        let cap = self.limits.bytes / 4;
        while let Some((seq, f)) = self.frames.front() {
            let keep = self.limits.resumable
                && self.written_bytes <= cap
                && self.written_bytes + self.unwritten_bytes <= self.limits.bytes;
            if *seq >= self.cursor || keep {
                break;
            }
            self.written_bytes -= f.len();
            self.frames.pop_front();
        }
    }

    pub(super) fn next_to_write(&mut self) -> Option<Bytes> {
        let first = self.frames.front()?.0;
        let i = usize::try_from(self.cursor.checked_sub(first)?).ok()?;
        let frame = self.frames.get(i)?.1.clone();
        self.cursor += 1;
        self.unwritten_bytes -= frame.len();
        self.written_bytes += frame.len();
        self.forget_written();
        Some(frame)
    }

    pub(super) fn detach(&mut self, socket: u64) {
        if self.socket() == Some(socket) {
            self.socket = None;
        }
    }

    pub(super) fn ack(&mut self, seq: u64) {
        let upto = seq.min(self.cursor.saturating_sub(1));
        while let Some((s, f)) = self.frames.front() {
            if *s > upto {
                break;
            }
            self.written_bytes -= f.len();
            self.frames.pop_front();
        }
    }

    pub(super) fn attach(
        &mut self,
        last_seq: u64,
        evict: CancellationToken,
    ) -> Result<(u64, u64), ResumeRefusal> {
        let sent = self.last_seq();
        if last_seq > sent {
            return Err(ResumeRefusal::Beyond { last_seq, sent });
        }
        let oldest = self.frames.front().map_or(self.next_seq, |f| f.0);
        if oldest > last_seq + 1 {
            return Err(ResumeRefusal::TooOld { last_seq, oldest });
        }
        // Everything after last_seq is written again, in order.
        self.cursor = last_seq + 1;
        self.written_bytes = 0;
        self.unwritten_bytes = 0;
        while self.frames.front().is_some_and(|f| f.0 <= last_seq) {
            self.frames.pop_front();
        }
        self.unwritten_bytes = self.frames.iter().map(|(_, f)| f.len()).sum();
        if let Some((_, old)) = self.socket.take() {
            old.cancel();
        }
        self.sockets += 1;
        self.socket = Some((self.sockets, evict));
        Ok((self.sockets, sent - last_seq))
    }

    /// Drop every frame; what had not been written is reported.
    pub(super) fn clear(&mut self) -> Dropped {
        let dropped = Dropped {
            frames: self.next_seq - self.cursor,
            bytes: self.unwritten_bytes,
        };
        self.frames.clear();
        self.cursor = self.next_seq;
        self.written_bytes = 0;
        self.unwritten_bytes = 0;
        if let Some((_, evict)) = self.socket.take() {
            evict.cancel();
        }
        dropped
    }
}

/// The frame with `"seq":N` added as its last field: the closing brace is
/// replaced in place, so the text is usually not copied.
pub(crate) fn with_seq(mut text: String, seq: u64) -> Bytes {
    let trimmed = text.trim_end().len();
    text.truncate(trimmed);
    if text.ends_with('}') {
        text.pop();
        let empty = text.trim_end().ends_with('{');
        text.push_str(if empty { "\"seq\":" } else { ",\"seq\":" });
        let _ = write!(text, "{seq}}}");
    }
    Bytes::from(text)
}
