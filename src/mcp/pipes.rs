//! A stdio child's pipes as rmcp's transport: [`ChildTransport`] owns the
//! child and shuts it down the way rmcp's `TokioChildProcess` does (close
//! stdin, wait, SIGTERM, wait, kill), and reads its stdout through
//! [`Bounded`].
//!
//! Why not `TokioChildProcess`: rmcp drops a line longer than 16 MiB and
//! logs it, so the request it answers is never answered and its caller
//! waits out its whole timeout (docs/rmcp-upstream.md). [`Bounded`] hands
//! rmcp every line of at most [`MAX_LINE`] bytes unchanged; a longer one is
//! read to its end without being kept, and when it answered a request (a
//! top-level `id` and no `method`) rmcp gets an error answer for that id in
//! its place, which the call path turns into `LIMIT_EXCEEDED` at once.
//! Lines are parsed into messages by [`receive::Receiver`], large ones off
//! the runtime's threads.
//!
//! Waits for upstream: rmcp answering an over-long line's request instead of
//! dropping it (docs/rmcp-upstream.md §2; open in 3.11.0).

mod receive;

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use process_wrap::tokio::ChildWrapper;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::ChildStdin;

/// The longest line read from a server (rmcp's own limit).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// The marker in an oversized answer's error `data` (`hub::call` maps it
/// to `LIMIT_EXCEEDED`).
pub const OVERSIZED: &str = "toolhub/oversized";

/// rmcp's transport over a child's pipes; owns the child process.
pub struct ChildTransport {
    child: Option<Box<dyn ChildWrapper>>,
    /// rmcp's transport, for sending only (it reads nothing).
    inner: AsyncRwTransport<RoleClient, tokio::io::Empty, ChildStdin>,
    rx: receive::Receiver,
}

impl ChildTransport {
    /// Takes the child's stdin and stdout (spawned piped).
    pub fn new(mut child: Box<dyn ChildWrapper>) -> std::io::Result<ChildTransport> {
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
        let inner = AsyncRwTransport::new(tokio::io::empty(), stdin);
        Ok(ChildTransport {
            child: Some(child),
            inner,
            rx: receive::Receiver::new(stdout),
        })
    }

    /// The child's process id.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// The MCP stdio shutdown: close stdin, wait; SIGTERM, wait; kill.
    async fn shutdown(&mut self) -> std::io::Result<()> {
        self.inner.close().await?;
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
        let inner = &mut self.inner;
        self.rx.receive(move |invalid| {
            tokio::spawn(inner.send(invalid));
        })
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

/// A reader that passes whole lines of at most [`MAX_LINE`] bytes and puts
/// an error answer in place of a longer answer (see the module docs).
pub struct Bounded<R> {
    inner: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The line being read (while it fits).
    line: Vec<u8>,
    /// What the reader gets next: `out[taken..]`.
    out: Vec<u8>,
    taken: usize,
    /// Set while an oversized line is read to its end.
    over: Option<Scan>,
}

impl<R> Bounded<R> {
    pub fn new(inner: R) -> Bounded<R> {
        Bounded {
            inner,
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            start: 0,
            end: 0,
            line: Vec::new(),
            out: Vec::new(),
            taken: 0,
            over: None,
        }
    }

    /// Take in what is buffered, up to the end of one line.
    fn consume(&mut self) {
        let got = &self.buf[self.start..self.end];
        let (take, done) = match memchr::memchr(b'\n', got) {
            Some(i) => (i + 1, true),
            None => (got.len(), false),
        };
        let piece = &got[..take];
        self.start += take;
        if let Some(scan) = &mut self.over {
            scan.feed(piece);
        } else {
            self.line.extend_from_slice(piece);
            if self.line.len() > MAX_LINE + 1 || (!done && self.line.len() > MAX_LINE) {
                let mut scan = Scan::default();
                scan.feed(&self.line);
                self.over = Some(scan);
                self.line = Vec::new();
            }
        }
        if !done {
            return;
        }
        match self.over.take() {
            Some(scan) => {
                if let Some(answer) = scan.answer() {
                    self.out = answer;
                }
            }
            None => {
                std::mem::swap(&mut self.out, &mut self.line);
                self.line.clear();
                // A huge line's buffer is not kept for every later one.
                if self.line.capacity() > 1024 * 1024 {
                    self.line = Vec::new();
                }
            }
        }
        self.taken = 0;
    }
}

impl<R: AsyncRead + Unpin> Bounded<R> {
    /// The next whole line, with its newline (an oversized answer's error
    /// line in its place); `None` at the end (an unfinished last line is no
    /// message). The line is handed over as it was gathered, not copied
    /// again. Cancel-safe: what was read stays for the next call.
    pub fn poll_line(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<Option<Vec<u8>>>> {
        loop {
            if self.taken < self.out.len() {
                let line = if self.taken == 0 {
                    std::mem::take(&mut self.out)
                } else {
                    self.out.split_off(self.taken)
                };
                self.out.clear();
                self.taken = 0;
                return Poll::Ready(Ok(Some(line)));
            }
            if self.start < self.end {
                self.consume();
                continue;
            }
            let mut rb = ReadBuf::new(&mut self.buf);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(None));
            }
            self.start = 0;
            self.end = n;
        }
    }
}

/// Reads an oversized line as it streams by, keeping only what an answer
/// in its place needs: its length, its top-level `id` and whether it has a
/// top-level `method` (then it is a request or a notification, not an
/// answer).
#[derive(Default)]
struct Scan {
    len: usize,
    depth: u32,
    in_str: bool,
    esc: bool,
    /// At depth 1, the next string is a key.
    want_key: bool,
    key: Option<Vec<u8>>,
    last_key: Vec<u8>,
    /// The `id` value's bytes, while it is read.
    capture: Option<Vec<u8>>,
    id: Option<Vec<u8>>,
    method: bool,
}

impl Scan {
    fn push(&mut self, b: u8) {
        if let Some(k) = &mut self.key {
            if k.len() < 16 {
                k.push(b);
            }
        } else if let Some(c) = &mut self.capture {
            if self.depth == 1 && c.len() < 256 {
                c.push(b);
            }
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.len += bytes.len();
        for &b in bytes {
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if b == b'\\' {
                    self.esc = true;
                } else if b == b'"' {
                    self.in_str = false;
                    if let Some(k) = self.key.take() {
                        self.last_key = k;
                        continue;
                    }
                }
                self.push(b);
                continue;
            }
            match b {
                b'"' => {
                    self.in_str = true;
                    if self.depth == 1 && self.want_key {
                        self.want_key = false;
                        self.key = Some(Vec::new());
                    } else {
                        self.push(b);
                    }
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth == 1 {
                        self.want_key = b == b'{';
                    } else if self.depth == 2 {
                        self.capture = None; // an object or array is no id
                    }
                }
                b'}' | b']' => {
                    if self.depth == 1 {
                        self.finish_value();
                    }
                    self.depth = self.depth.saturating_sub(1);
                }
                b',' if self.depth == 1 => {
                    self.finish_value();
                    self.want_key = true;
                }
                b':' if self.depth == 1 => match self.last_key.as_slice() {
                    b"id" => self.capture = Some(Vec::new()),
                    b"method" => self.method = true,
                    _ => {}
                },
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ => self.push(b),
            }
        }
    }

    fn finish_value(&mut self) {
        if let Some(c) = self.capture.take() {
            self.id = Some(c);
        }
    }

    /// The error answer to put in the line's place, or `None` (logged)
    /// when the line answered nothing.
    fn answer(self) -> Option<Vec<u8>> {
        let id = self
            .id
            .as_deref()
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
            .filter(|v| v.is_number() || v.is_string());
        let Some(id) = id.filter(|_| !self.method) else {
            tracing::error!(
                bytes = self.len,
                max_line_length = MAX_LINE,
                "a message from the server exceeded the maximum line length; it was discarded"
            );
            return None;
        };
        tracing::warn!(%id, bytes = self.len, max_line_length = MAX_LINE, "a server's answer exceeded the maximum line length; its caller gets LIMIT_EXCEEDED");
        let message = format!(
            "the server's answer was {} bytes, over the {MAX_LINE}-byte limit of one stdio message",
            self.len.saturating_sub(1)
        );
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32603, "message": message, "data": {OVERSIZED: self.len}},
        });
        let mut line = body.to_string().into_bytes();
        line.push(b'\n');
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line `input` gives, in order.
    async fn lines_of(input: &[u8]) -> Vec<Vec<u8>> {
        let mut r = Bounded::new(input);
        let mut lines = Vec::new();
        while let Some(l) = std::future::poll_fn(|cx| r.poll_line(cx))
            .await
            .expect("read")
        {
            lines.push(l);
        }
        lines
    }

    fn scan(text: &str) -> Scan {
        let mut s = Scan::default();
        // Fed in small pieces, as a pipe delivers it.
        for piece in text.as_bytes().chunks(3) {
            s.feed(piece);
        }
        s
    }

    #[test]
    fn the_scan_finds_the_top_level_id_wherever_it_is() {
        let first = scan(r#"{"jsonrpc":"2.0","id":7,"result":{"id":"inner","x":[1,{"id":2}]}}"#);
        assert_eq!(first.id.as_deref(), Some(&b"7"[..]));
        assert!(!first.method);
        // The TypeScript SDK writes the id last.
        let last = scan(
            r#"{"result":{"content":[{"type":"text","text":"a\"id\":9"}]},"jsonrpc":"2.0","id":"r-1"}"#,
        );
        assert_eq!(last.id.as_deref(), Some(&br#""r-1""#[..]));
        let request =
            scan(r#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}"#);
        assert!(request.method);
        assert!(request.answer().is_none(), "a request is not answered for");
        let nested = scan(r#"{"id":{"a":1},"result":{}}"#);
        assert!(nested.answer().is_none(), "an object is no id");
    }

    #[tokio::test]
    async fn an_oversized_line_becomes_an_error_answer_and_the_rest_passes() {
        let mut input = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n".to_vec();
        input.extend_from_slice(b"{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"");
        input.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        input.extend_from_slice(b"\"}]},\"jsonrpc\":\"2.0\",\"id\":42}\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":43,\"result\":{}}\n");
        let lines: Vec<Value> = lines_of(&input)
            .await
            .iter()
            .map(|l| serde_json::from_slice(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["method"], "notifications/message");
        assert_eq!(lines[1]["id"], 42);
        assert!(lines[1]["error"]["data"][OVERSIZED].as_u64() > Some(MAX_LINE as u64));
        assert_eq!(lines[2]["id"], 43, "the next line is whole");
    }

    #[tokio::test]
    async fn lines_are_handed_over_whole_and_an_unfinished_last_one_is_dropped() {
        let input = b"{\"id\":1}\n\n{\"id\":2}\r\n{\"id\":3".to_vec();
        let lines: Vec<String> = lines_of(&input)
            .await
            .into_iter()
            .map(|l| String::from_utf8(l).expect("utf-8"))
            .collect();
        assert_eq!(lines, ["{\"id\":1}\n", "\n", "{\"id\":2}\r\n"]);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_passes() {
        let mut input = b"{\"id\":1,\"result\":\"".to_vec();
        let pad = MAX_LINE - input.len() - 2;
        input.extend(std::iter::repeat_n(b'y', pad));
        input.extend_from_slice(b"\"}\n");
        assert_eq!(input.len(), MAX_LINE + 1);
        assert_eq!(lines_of(&input).await, [input]);
    }
}
