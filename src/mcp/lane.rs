//! The fast lane: plain `tools/call`s on a stdio server, sent and answered
//! beside rmcp instead of through its service loop.
//!
//! rmcp's client costs about three times a raw JSON-RPC client per call
//! (the relay benchmark's "rmcp client" row: its request bookkeeping, a hop
//! through its service task, and decoding every answer through an untagged
//! enum that tries each result type in turn). A call that needs none of
//! rmcp's machinery, one with no client call to relay progress, sampling or
//! elicitation to (every `/ws` call and every batch step), takes the lane:
//!
//! - the request is written as one line with an id of the lane's own
//!   (`"toolhub:<n>"`, a string, so it can never collide with rmcp's numeric
//!   ids) to a writer task that owns the child's stdin and coalesces
//!   whatever is queued into one write;
//! - a reader task owns the child's stdout: an answer to a lane id goes
//!   straight to the waiting call; every other line is passed on, unchanged
//!   and in order, to rmcp's own line transport through an in-memory pipe,
//!   so notifications, the server's requests and rmcp's calls (`tools/list`,
//!   pings, …) behave exactly as before;
//! - giving up on a call (timeout, cancel, a dropped future) sends
//!   `notifications/cancelled` for its id, as rmcp does; the server's exit
//!   fails every waiting call at once (`LaneError::Closed`).
//!
//! [`ChildTransport`] is the rmcp transport over the same pipes; it owns
//! the child process and shuts it down the way rmcp's `TokioChildProcess`
//! does (close stdin, wait, SIGTERM, kill).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use process_wrap::tokio::ChildWrapper;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::{
    AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf, SimplexStream, WriteHalf,
};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

/// The longest line read from a server (rmcp's own limit).
const MAX_LINE: usize = 16 * 1024 * 1024;
/// What the reader may hold for rmcp before it waits for rmcp to read.
const RMCP_PIPE: usize = 256 * 1024;
/// The most the writer gathers into one write.
const WRITE_BATCH: usize = 64 * 1024;
/// The id prefix of lane calls, as it appears in an answer's JSON.
const ID_MARK: &[u8] = b"\"toolhub:";

/// Why a lane call has no answer.
#[derive(Debug)]
pub enum LaneError {
    /// The server's pipes closed (it exited or crashed) before it answered.
    Closed,
    /// The server answered with a JSON-RPC error.
    Rpc(rmcp::ErrorData),
}

/// What the writer task is given.
enum Out {
    Line(Vec<u8>),
    /// Close the child's stdin (the first step of a graceful shutdown).
    Close,
}

struct Waiting {
    calls: HashMap<u64, oneshot::Sender<Result<Value, LaneError>>>,
    closed: bool,
}

/// The fast lane of one running stdio server (see the module docs).
pub struct Lane {
    out: mpsc::UnboundedSender<Out>,
    waiting: Mutex<Waiting>,
    /// How many calls wait: the reader looks at no line while it is zero.
    open: AtomicU64,
    next: AtomicU64,
}

#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'static str,
    params: CallParams<'a>,
}

#[derive(Serialize)]
struct CallParams<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a Map<String, Value>>,
}

/// An answer, as far as the reader needs to look into it.
#[derive(Deserialize)]
struct Envelope {
    id: Option<Value>,
    method: Option<serde::de::IgnoredAny>,
    result: Option<Value>,
    error: Option<Value>,
}

impl Lane {
    /// Send `tools/call` for `name` and wait for the server's `result`.
    /// Dropping the future before the answer cancels the call upstream.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<Value, LaneError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("toolhub:{n}");
        let mut line = serde_json::to_vec(&Request {
            jsonrpc: "2.0",
            id: &id,
            method: "tools/call",
            params: CallParams { name, arguments },
        })
        .map_err(|e| LaneError::Rpc(rmcp::ErrorData::invalid_params(e.to_string(), None)))?;
        line.push(b'\n');
        let (tx, rx) = oneshot::channel();
        {
            let Ok(mut w) = self.waiting.lock() else {
                return Err(LaneError::Closed);
            };
            if w.closed {
                return Err(LaneError::Closed);
            }
            w.calls.insert(n, tx);
            self.open.fetch_add(1, Ordering::Relaxed);
        }
        let mut guard = Abandon {
            lane: self,
            n,
            id: Some(id),
        };
        if self.out.send(Out::Line(line)).is_err() {
            return Err(LaneError::Closed);
        }
        let answer = rx.await;
        guard.id = None;
        answer.unwrap_or(Err(LaneError::Closed))
    }

    fn forget(&self, n: u64) -> bool {
        let Ok(mut w) = self.waiting.lock() else {
            return false;
        };
        let found = w.calls.remove(&n).is_some();
        if found {
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
        found
    }

    /// If `line` answers a waiting lane call, hand it over and say so.
    fn take_answer(&self, line: &[u8]) -> bool {
        if self.open.load(Ordering::Relaxed) == 0 || !contains(line, ID_MARK) {
            return false;
        }
        let Ok(env) = serde_json::from_slice::<Envelope>(line) else {
            return false;
        };
        if env.method.is_some() {
            return false;
        }
        let Some(n) = env
            .id
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|s| s.strip_prefix("toolhub:"))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return false;
        };
        let waiter = self.waiting.lock().ok().and_then(|mut w| {
            let t = w.calls.remove(&n);
            if t.is_some() {
                self.open.fetch_sub(1, Ordering::Relaxed);
            }
            t
        });
        let answer = match (env.result, env.error) {
            // An error object of the wrong shape still ends the call, with
            // what the server sent.
            (_, Some(e)) => Err(LaneError::Rpc(
                serde_json::from_value::<rmcp::ErrorData>(e.clone()).unwrap_or_else(|_| {
                    rmcp::ErrorData::internal_error(
                        format!("malformed error from the server: {e}"),
                        None,
                    )
                }),
            )),
            (Some(r), None) => Ok(r),
            (None, None) => Ok(Value::Null),
        };
        if let Some(tx) = waiter {
            let _ = tx.send(answer);
        }
        // An answer to a call already given up on is ours too: rmcp never
        // sent that id.
        true
    }

    /// The server's pipes closed: every waiting call fails now.
    fn close(&self) {
        if let Ok(mut w) = self.waiting.lock() {
            w.closed = true;
            w.calls.clear();
            self.open.store(0, Ordering::Relaxed);
        }
    }
}

/// Sends `notifications/cancelled` for a lane call nobody waits for anymore.
struct Abandon<'a> {
    lane: &'a Lane,
    n: u64,
    id: Option<String>,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        if !self.lane.forget(self.n) {
            return; // answered (or the server is gone) in the meantime
        }
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "request abandoned by the caller"},
        });
        let mut line = note.to_string().into_bytes();
        line.push(b'\n');
        let _ = self.lane.out.send(Out::Line(line));
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// Split a spawned child's pipes into its lane and the rmcp transport.
pub fn open(
    child: Box<dyn ChildWrapper>,
    stdin: ChildStdin,
    stdout: ChildStdout,
) -> (Arc<Lane>, ChildTransport) {
    let (tx, rx) = mpsc::unbounded_channel();
    let lane = Arc::new(Lane {
        out: tx.clone(),
        waiting: Mutex::new(Waiting {
            calls: HashMap::new(),
            closed: false,
        }),
        open: AtomicU64::new(0),
        next: AtomicU64::new(1),
    });
    let (from_reader, to_rmcp) = tokio::io::simplex(RMCP_PIPE);
    tokio::spawn(write_loop(stdin, rx));
    tokio::spawn(read_loop(stdout, to_rmcp, lane.clone()));
    let sink = LineSink {
        out: Some(tx),
        partial: Vec::new(),
    };
    let transport = ChildTransport {
        child: Some(child),
        inner: AsyncRwTransport::new(from_reader, sink),
        lane: lane.clone(),
    };
    (lane, transport)
}

async fn write_loop(mut stdin: ChildStdin, mut rx: mpsc::UnboundedReceiver<Out>) {
    let mut buf = Vec::with_capacity(8 * 1024);
    let mut closing = false;
    while let Some(first) = rx.recv().await {
        buf.clear();
        let mut next = Some(first);
        while let Some(out) = next.take() {
            match out {
                Out::Line(l) => buf.extend_from_slice(&l),
                Out::Close => {
                    closing = true;
                    break;
                }
            }
            if buf.len() < WRITE_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if !buf.is_empty() && stdin.write_all(&buf).await.is_err() {
            break;
        }
        if closing {
            break;
        }
    }
    // Asked to close, every sender gone, or the pipe broke: dropping stdin
    // closes it.
}

async fn read_loop(stdout: ChildStdout, mut to_rmcp: WriteHalf<SimplexStream>, lane: Arc<Lane>) {
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
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
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

/// rmcp's writes, cut into whole lines for the writer task (a line is never
/// interleaved with a lane call's).
struct LineSink {
    out: Option<mpsc::UnboundedSender<Out>>,
    partial: Vec<u8>,
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
            if out.send(Out::Line(line)).is_err() {
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
    child: Option<Box<dyn ChildWrapper>>,
    inner: AsyncRwTransport<RoleClient, ReadHalf<SimplexStream>, LineSink>,
    lane: Arc<Lane>,
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
        let _ = self.lane.out.send(Out::Close);
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

/// Used by tests to look at a lane's traffic without a process.
#[cfg(test)]
fn test_lane() -> (Arc<Lane>, mpsc::UnboundedReceiver<Out>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let lane = Arc::new(Lane {
        out: tx,
        waiting: Mutex::new(Waiting {
            calls: HashMap::new(),
            closed: false,
        }),
        open: AtomicU64::new(0),
        next: AtomicU64::new(1),
    });
    (lane, rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(out: Out) -> Vec<u8> {
        match out {
            Out::Line(l) => l,
            Out::Close => panic!("expected a line, got Close"),
        }
    }

    fn sent(rx: &mut mpsc::UnboundedReceiver<Out>) -> Value {
        let line = line(rx.try_recv().expect("a line was sent"));
        assert_eq!(line.last(), Some(&b'\n'));
        serde_json::from_slice(&line).expect("json")
    }

    #[tokio::test]
    async fn an_answer_reaches_its_call_and_other_lines_pass_on() {
        let (lane, mut rx) = test_lane();
        let l = lane.clone();
        let call = tokio::spawn(async move {
            let mut args = Map::new();
            args.insert("message".into(), "hi".into());
            l.call_tool("echo", Some(&args)).await
        });
        while lane.open.load(Ordering::Relaxed) == 0 {
            tokio::task::yield_now().await;
        }
        let req = sent(&mut rx);
        assert_eq!(req["method"], "tools/call");
        assert_eq!(req["params"]["arguments"]["message"], "hi");
        let id = req["id"].as_str().expect("string id").to_string();
        // rmcp's own traffic is not the lane's.
        assert!(!lane.take_answer(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#));
        // A request from the server that mentions a lane id is not an answer.
        let ask = format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"ping"}}"#);
        assert!(!lane.take_answer(ask.as_bytes()));
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":"{id}","result":{{"content":[{{"type":"text","text":"hi"}}]}}}}"#
        );
        assert!(lane.take_answer(answer.as_bytes()));
        let got = call.await.expect("join").expect("answered");
        assert_eq!(got["content"][0]["text"], "hi");
        assert_eq!(lane.open.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn an_error_answer_and_a_closed_server_fail_the_call() {
        let (lane, mut rx) = test_lane();
        let l = lane.clone();
        let call = tokio::spawn(async move { l.call_tool("boom", None).await });
        while lane.open.load(Ordering::Relaxed) == 0 {
            tokio::task::yield_now().await;
        }
        let id = sent(&mut rx)["id"].as_str().expect("id").to_string();
        let answer =
            format!(r#"{{"jsonrpc":"2.0","id":"{id}","error":{{"code":-32602,"message":"bad"}}}}"#);
        assert!(lane.take_answer(answer.as_bytes()));
        match call.await.expect("join") {
            Err(LaneError::Rpc(e)) => assert_eq!(e.code.0, -32602),
            other => panic!("expected the server's error, got {other:?}"),
        }
        // An error of the wrong shape still ends the call.
        let l = lane.clone();
        let call = tokio::spawn(async move { l.call_tool("odd", None).await });
        while lane.open.load(Ordering::Relaxed) == 0 {
            tokio::task::yield_now().await;
        }
        let id = sent(&mut rx)["id"].as_str().expect("id").to_string();
        let answer = format!(r#"{{"jsonrpc":"2.0","id":"{id}","error":"nope"}}"#);
        assert!(lane.take_answer(answer.as_bytes()));
        match call.await.expect("join") {
            Err(LaneError::Rpc(e)) => assert!(e.message.contains("nope"), "{e:?}"),
            other => panic!("expected an error, got {other:?}"),
        }
        let l = lane.clone();
        let call = tokio::spawn(async move { l.call_tool("slow", None).await });
        while lane.open.load(Ordering::Relaxed) == 0 {
            tokio::task::yield_now().await;
        }
        lane.close();
        assert!(matches!(call.await.expect("join"), Err(LaneError::Closed)));
        assert!(matches!(
            lane.call_tool("after", None).await,
            Err(LaneError::Closed)
        ));
    }

    #[tokio::test]
    async fn giving_up_sends_cancelled_for_the_call() {
        let (lane, mut rx) = test_lane();
        let gave_up =
            tokio::time::timeout(Duration::from_millis(10), lane.call_tool("hang", None)).await;
        assert!(gave_up.is_err());
        let id = sent(&mut rx)["id"].clone();
        let note = sent(&mut rx);
        assert_eq!(note["method"], "notifications/cancelled");
        assert_eq!(note["params"]["requestId"], id);
        assert_eq!(lane.open.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn rmcp_writes_leave_as_whole_lines() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut sink = LineSink {
            out: Some(tx),
            partial: Vec::new(),
        };
        sink.write_all(b"{\"a\":").await.expect("write");
        assert!(rx.try_recv().is_err());
        sink.write_all(b"1}\n{\"b\":2}\n{\"c\"")
            .await
            .expect("write");
        assert_eq!(line(rx.try_recv().expect("one")), b"{\"a\":1}\n");
        assert_eq!(line(rx.try_recv().expect("two")), b"{\"b\":2}\n");
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn long_lines_are_cut_and_the_next_line_is_whole() {
        let data = format!("{}\n{{\"ok\":1}}\n", "x".repeat(100));
        let mut r = BufReader::with_capacity(16, data.as_bytes());
        let mut line = Vec::new();
        assert!(read_line(&mut r, &mut line).await.expect("read"));
        assert_eq!(line.len(), 101);
        line.clear();
        assert!(read_line(&mut r, &mut line).await.expect("read"));
        assert_eq!(line, b"{\"ok\":1}\n");
        line.clear();
        assert!(!read_line(&mut r, &mut line).await.expect("eof"));
    }
}
