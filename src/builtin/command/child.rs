//! One running `/bin/sh -c` and its process group: reading both pipes while
//! waiting, and stopping the group (SIGTERM, grace, SIGKILL).
//!
//! The pipes are read in the same `select!` as the wait, so neither pipe can
//! fill up and block the child while we wait on the other, and output keeps
//! being drained (and counted, but not stored) past the cap.

use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStderr, ChildStdout};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Time a group gets between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long we keep reading pipes that a process outside the group (one that
/// called setsid) still holds open, after everything we own has ended.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// Bytes of each stream's end kept for error messages.
const TAIL_BYTES: usize = 2048;
const READ_CHUNK: usize = 64 * 1024;

/// The first `cap` bytes of a stream, its total length, and its last bytes.
pub struct StreamCapture {
    head: Vec<u8>,
    cap: usize,
    total: u64,
    tail: Vec<u8>,
}

impl StreamCapture {
    pub fn new(cap: usize) -> Self {
        StreamCapture {
            head: Vec::new(),
            cap,
            total: 0,
            tail: Vec::new(),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.cap.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        self.tail
            .extend_from_slice(&bytes[bytes.len().saturating_sub(TAIL_BYTES)..]);
        if self.tail.len() > TAIL_BYTES {
            self.tail.drain(..self.tail.len() - TAIL_BYTES);
        }
    }

    pub fn truncated(&self) -> bool {
        self.total > self.cap as u64
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.head).into_owned()
    }

    /// The end of the stream as text, for error messages.
    pub fn tail_text(&self) -> String {
        String::from_utf8_lossy(&self.tail).trim_end().to_string()
    }
}

/// Why [`Running::pump`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The wanted condition was reached (see [`Until`]).
    Done,
    Deadline,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// The shell has exited (pipes may still be open).
    Exit,
    /// The shell has exited and both pipes are at end of file.
    Drained,
}

pub struct Running {
    pub child: Child,
    /// Process group id (= the shell's pid, from `process_group(0)`).
    pub pgid: libc::pid_t,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    pub out: StreamCapture,
    pub err: StreamCapture,
    /// `Some` once the shell has been reaped; `Err` if waiting failed.
    pub status: Option<Result<ExitStatus, String>>,
    buf_out: Vec<u8>,
    buf_err: Vec<u8>,
}

impl Running {
    pub fn new(mut child: Child, pgid: libc::pid_t, cap: usize) -> Self {
        Running {
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            pgid,
            out: StreamCapture::new(cap),
            err: StreamCapture::new(cap),
            status: None,
            buf_out: vec![0; READ_CHUNK],
            buf_err: vec![0; READ_CHUNK],
        }
    }

    /// Reads output and waits for the shell until `until` holds, `deadline`
    /// passes or `cancel` fires.
    pub async fn pump(
        &mut self,
        deadline: Instant,
        cancel: Option<&CancellationToken>,
        until: Until,
    ) -> Stop {
        let Running {
            child,
            stdout,
            stderr,
            out,
            err,
            status,
            buf_out,
            buf_err,
            ..
        } = self;
        let sleep = tokio::time::sleep_until(deadline);
        tokio::pin!(sleep);
        loop {
            let pipes_closed = stdout.is_none() && stderr.is_none();
            if status.is_some() && (until == Until::Exit || pipes_closed) {
                return Stop::Done;
            }
            tokio::select! {
                r = read_some(stdout, buf_out) => match r {
                    Ok(n) if n > 0 => out.push(&buf_out[..n]),
                    _ => *stdout = None,
                },
                r = read_some(stderr, buf_err) => match r {
                    Ok(n) if n > 0 => err.push(&buf_err[..n]),
                    _ => *stderr = None,
                },
                s = child.wait(), if status.is_none() => {
                    *status = Some(s.map_err(|e| e.to_string()));
                }
                _ = &mut sleep => return Stop::Deadline,
                _ = cancelled(cancel) => return Stop::Cancelled,
            }
        }
    }

    /// Ends the command's process group. `force` (timeout, cancel) signals it
    /// unconditionally; after a normal exit only leftovers (background jobs)
    /// are signalled. SIGTERM first, then SIGKILL once the shell is reaped and
    /// the pipes are closed or [`KILL_GRACE`] has passed. Never waits longer
    /// than about `KILL_GRACE + 2 * DRAIN_GRACE`.
    pub async fn wind_down(&mut self, force: bool) {
        // Zombies still count as members here, which only means a harmless
        // extra signal.
        let signalled = force || signal_group(self.pgid, 0);
        if signalled {
            signal_group(self.pgid, libc::SIGTERM);
        }
        let grace = if signalled { KILL_GRACE } else { DRAIN_GRACE };
        let stop = self
            .pump(Instant::now() + grace, None, Until::Drained)
            .await;
        if signalled {
            // Also catches members that ignore SIGTERM but closed their pipes.
            signal_group(self.pgid, libc::SIGKILL);
        }
        if stop != Stop::Done {
            self.pump(Instant::now() + DRAIN_GRACE, None, Until::Drained)
                .await;
        }
    }
}

/// Sends `sig` to the process group; true if it exists. `pgid` is always a
/// child's pid (> 1) here, never 0 or -1, which would mean our own group or
/// every process.
pub fn signal_group(pgid: libc::pid_t, sig: libc::c_int) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: killpg has no memory-safety preconditions.
    unsafe { libc::killpg(pgid, sig) == 0 }
}

async fn read_some<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match pipe {
        Some(p) => p.read(buf).await,
        None => std::future::pending().await,
    }
}

async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(t) => t.cancelled().await,
        None => std::future::pending().await,
    }
}

/// Kills the group if the call is dropped half-way (the caller gave up on the
/// future), so no command outlives its call. Disarmed after a normal wind-down.
pub struct GroupGuard {
    pub pgid: Option<libc::pid_t>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGKILL);
        }
    }
}
