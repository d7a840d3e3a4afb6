//! The child's stdin, shared by every writer of whole lines: a lane call,
//! a cancel notice, rmcp's own messages.
//!
//! A call that finds nothing queued and no other lane call in flight writes
//! its line itself, at once (the pipe almost always takes a short line
//! whole): no hand-over to another task, so a sequential call pays no
//! wake-up for it. Otherwise the line is queued and the writer task writes
//! the queue, several lines per write, which is what matters when many
//! calls are in flight. Either way lines are written whole and in the order
//! they were given, never interleaved.

use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;
use tokio::sync::Notify;

/// The pipe is gone (closed, or the server exited) or is being closed.
#[derive(Debug)]
pub struct Closed;

type Pipe = Pin<Box<dyn AsyncWrite + Send>>;

struct State {
    /// `None` once closed or broken.
    pipe: Option<Pipe>,
    /// Bytes not yet written, whole lines only; `queued[sent..]` is left.
    queued: Vec<u8>,
    sent: usize,
    /// Close the pipe once the queue is written.
    closing: bool,
}

pub struct Writer {
    state: Mutex<State>,
    wake: Notify,
}

impl Writer {
    pub fn new(pipe: impl AsyncWrite + Send + 'static) -> Writer {
        Writer {
            state: Mutex::new(State {
                pipe: Some(Box::pin(pipe)),
                queued: Vec::with_capacity(8 * 1024),
                sent: 0,
                closing: false,
            }),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, Closed> {
        self.state.lock().map_err(|_| Closed)
    }

    /// Write one whole line (ending in `\n`). `direct`: try to write it
    /// now, from this task, when nothing is queued before it.
    pub fn send(&self, line: &[u8], direct: bool) -> Result<(), Closed> {
        let mut s = self.lock()?;
        if s.closing {
            return Err(Closed);
        }
        let State {
            pipe, queued, sent, ..
        } = &mut *s;
        let Some(p) = pipe.as_mut() else {
            return Err(Closed);
        };
        let mut rest = line;
        if direct && *sent == queued.len() {
            // A non-blocking write: the pipe takes what fits right now.
            let mut cx = Context::from_waker(Waker::noop());
            match p.as_mut().poll_write(&mut cx, line) {
                Poll::Ready(Ok(n)) if n == line.len() => return Ok(()),
                Poll::Ready(Ok(n)) => rest = &line[n..],
                Poll::Ready(Err(_)) => {
                    *pipe = None;
                    return Err(Closed);
                }
                Poll::Pending => {}
            }
        }
        if *sent == queued.len() {
            queued.clear();
            *sent = 0;
        }
        queued.extend_from_slice(rest);
        drop(s);
        self.wake.notify_one();
        Ok(())
    }

    /// Close the pipe once everything queued is written.
    pub fn close(&self) {
        if let Ok(mut s) = self.lock() {
            s.closing = true;
        }
        self.wake.notify_one();
    }

    fn is_gone(&self) -> bool {
        self.lock().map(|s| s.pipe.is_none()).unwrap_or(true)
    }

    /// Write the queue; `Ready(Ok(true))` when it is empty and the pipe is
    /// to be closed.
    fn poll_drain(&self, cx: &mut Context<'_>) -> Poll<Result<bool, Closed>> {
        let mut s = self.lock()?;
        let State {
            pipe,
            queued,
            sent,
            closing,
        } = &mut *s;
        let Some(p) = pipe.as_mut() else {
            return Poll::Ready(Err(Closed));
        };
        while *sent < queued.len() {
            match p.as_mut().poll_write(cx, &queued[*sent..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    *pipe = None;
                    return Poll::Ready(Err(Closed));
                }
                Poll::Ready(Ok(n)) => *sent += n,
                Poll::Pending => return Poll::Pending,
            }
        }
        queued.clear();
        *sent = 0;
        // A burst's big buffer is not kept for every later small line.
        if queued.capacity() > 1024 * 1024 {
            *queued = Vec::with_capacity(8 * 1024);
        }
        Poll::Ready(Ok(*closing))
    }
}

/// The writer task: writes what [`Writer::send`] queued, until asked to
/// close or the pipe breaks; then the pipe is shut down and dropped (the
/// child's stdin closes).
pub async fn write_loop(w: std::sync::Arc<Writer>) {
    // Ok(true): asked to close and all is written; Err: the pipe broke.
    while let Ok(false) = std::future::poll_fn(|cx| w.poll_drain(cx)).await {
        w.wake.notified().await;
        // Only queued with other calls in flight: let the tasks that are
        // ready queue their lines too, so they leave in one write.
        tokio::task::yield_now().await;
        if w.is_gone() {
            break;
        }
    }
    let pipe = w.lock().ok().and_then(|mut s| {
        s.closing = true;
        s.pipe.take()
    });
    if let Some(mut pipe) = pipe {
        let _ = std::future::poll_fn(|cx| pipe.as_mut().poll_shutdown(cx)).await;
    }
}
