//! A lane's pipes: the writer and reader tasks over the child's stdin and
//! stdout, the line-cutting sink rmcp writes into, and [`ChildTransport`],
//! rmcp's transport over them, which owns the child process.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use process_wrap::tokio::ChildWrapper;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::io::{
    AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf, SimplexStream, WriteHalf,
};
use tokio::process::{ChildStdin, ChildStdout};

use super::writer::Writer;
use super::{Lane, MAX_LINE};

pub(super) async fn read_loop(
    stdout: ChildStdout,
    mut to_rmcp: WriteHalf<SimplexStream>,
    lane: Arc<Lane>,
) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::with_capacity(8 * 1024);
    loop {
        // A huge answer's buffer is not kept for every later small line.
        if line.capacity() > 1024 * 1024 {
            line = Vec::with_capacity(8 * 1024);
        }
        line.clear();
        match read_line(&mut r, &mut line).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                tracing::debug!(error = %e, "reading the server's stdout failed");
                break;
            }
        }
        if line.len() > MAX_LINE {
            tracing::error!(
                max_line_length = MAX_LINE,
                "a message from the server exceeded the maximum line length; it was discarded"
            );
            continue;
        }
        if lane.take_answer(&line) {
            continue;
        }
        if to_rmcp.write_all(&line).await.is_err() {
            break;
        }
    }
    lane.close();
    let _ = to_rmcp.shutdown().await;
}

/// One `\n`-terminated line (kept with its newline); an oversized line is
/// read to its end but only its first `MAX_LINE + 1` bytes are kept.
/// `Ok(false)` at the end of the stream.
pub(super) async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    loop {
        let got = r.fill_buf().await?;
        if got.is_empty() {
            return Ok(false);
        }
        let (take, done) = match memchr::memchr(b'\n', got) {
            Some(i) => (i + 1, true),
            None => (got.len(), false),
        };
        let room = (MAX_LINE + 1).saturating_sub(line.len());
        line.extend_from_slice(&got[..take.min(room)]);
        r.consume(take);
        if done {
            return Ok(true);
        }
    }
}

/// rmcp's writes, cut into whole lines for the [`Writer`] (a line is never
/// interleaved with a lane call's).
pub(super) struct LineSink {
    out: Option<Arc<Writer>>,
    partial: Vec<u8>,
}

impl LineSink {
    pub(super) fn new(out: Arc<Writer>) -> LineSink {
        LineSink {
            out: Some(out),
            partial: Vec::new(),
        }
    }
}

impl AsyncWrite for LineSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let Some(out) = &this.out else {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        };
        let mut rest = buf;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            let mut line = std::mem::take(&mut this.partial);
            line.extend_from_slice(&rest[..=i]);
            if out.send(&line, true).is_err() {
                return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
            }
            rest = &rest[i + 1..];
        }
        this.partial.extend_from_slice(rest);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.out = None;
        Poll::Ready(Ok(()))
    }
}

/// rmcp's transport over a lane's pipes; owns the child process.
pub struct ChildTransport {
    pub(super) child: Option<Box<dyn ChildWrapper>>,
    pub(super) inner: AsyncRwTransport<RoleClient, ReadHalf<SimplexStream>, LineSink>,
    pub(super) lane: Arc<Lane>,
}

impl ChildTransport {
    /// The child's process id.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// The MCP stdio shutdown: close stdin, wait; SIGTERM, wait; kill.
    async fn shutdown(&mut self) -> std::io::Result<()> {
        self.inner.close().await?;
        // Lines already queued are written first, then stdin is closed.
        self.lane.writer.close();
        self.lane.close();
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        const WAIT: Duration = Duration::from_secs(3);
        if tokio::time::timeout(WAIT, child.wait()).await.is_ok() {
            self.child = None;
            return Ok(());
        }
        if child.signal(libc::SIGTERM).is_ok()
            && tokio::time::timeout(WAIT, child.wait()).await.is_ok()
        {
            self.child = None;
            return Ok(());
        }
        let killed = Box::into_pin(child.kill()).await;
        self.child = None;
        killed
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        // Like rmcp's: never leave the child running (or a zombie).
        if let Some(mut child) = self.child.take() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = Box::into_pin(child.kill()).await;
                });
            }
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

/// Pipes of a spawned child, for [`open`].
pub fn pipes(child: &mut Box<dyn ChildWrapper>) -> std::io::Result<(ChildStdin, ChildStdout)> {
    let stdin = child
        .inner_mut()
        .stdin()
        .take()
        .ok_or_else(|| std::io::Error::other("the child's stdin was already taken"))?;
    let stdout = child
        .inner_mut()
        .stdout()
        .take()
        .ok_or_else(|| std::io::Error::other("the child's stdout was already taken"))?;
    Ok((stdin, stdout))
}
