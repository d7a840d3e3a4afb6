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
//!   ids): by the call itself when it is the only one in flight, else
//!   through a writer task that coalesces whatever is queued into one write
//!   ([`writer`]);
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use process_wrap::tokio::ChildWrapper;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::oneshot;

mod pipes;
#[cfg(test)]
mod tests;
mod writer;

pub use pipes::{pipes, ChildTransport};
use pipes::{read_loop, LineSink};
use writer::{write_loop, Writer};

/// The longest line read from a server (rmcp's own limit).
const MAX_LINE: usize = 16 * 1024 * 1024;
/// What the reader may hold for rmcp before it waits for rmcp to read.
const RMCP_PIPE: usize = 256 * 1024;
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

struct Waiting {
    calls: HashMap<u64, oneshot::Sender<Result<Value, LaneError>>>,
    closed: bool,
}

/// The fast lane of one running stdio server (see the module docs).
pub struct Lane {
    writer: Arc<Writer>,
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
    fn new(writer: Arc<Writer>) -> Arc<Lane> {
        Arc::new(Lane {
            writer,
            waiting: Mutex::new(Waiting {
                calls: HashMap::new(),
                closed: false,
            }),
            open: AtomicU64::new(0),
            next: AtomicU64::new(1),
        })
    }

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
        let alone = {
            let Ok(mut w) = self.waiting.lock() else {
                return Err(LaneError::Closed);
            };
            if w.closed {
                return Err(LaneError::Closed);
            }
            w.calls.insert(n, tx);
            self.open.fetch_add(1, Ordering::Relaxed) == 0
        };
        let mut guard = Abandon {
            lane: self,
            n,
            id: Some(id),
        };
        // The only call in flight writes its line itself (no wake-up of
        // the writer task); with others in flight the writer coalesces.
        if self.writer.send(&line, alone).is_err() {
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

    /// Have the server's pipes closed?
    pub fn is_closed(&self) -> bool {
        self.waiting.lock().map_or(true, |w| w.closed)
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
        let _ = self.lane.writer.send(&line, false);
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
    let writer = Arc::new(Writer::new(stdin));
    let lane = Lane::new(writer.clone());
    let (from_reader, to_rmcp) = tokio::io::simplex(RMCP_PIPE);
    tokio::spawn(write_loop(writer.clone()));
    tokio::spawn(read_loop(stdout, to_rmcp, lane.clone()));
    let sink = LineSink::new(writer);
    let transport = ChildTransport {
        child: Some(child),
        inner: AsyncRwTransport::new(from_reader, sink),
        lane: lane.clone(),
    };
    (lane, transport)
}

/// Used by tests to look at a lane's traffic without a process: what the
/// lane writes comes out of the returned reader.
#[cfg(test)]
fn test_lane() -> (
    Arc<Lane>,
    tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::SimplexStream>>,
) {
    let (rx, tx) = tokio::io::simplex(1 << 20);
    let writer = Arc::new(Writer::new(tx));
    tokio::spawn(write_loop(writer.clone()));
    (Lane::new(writer), tokio::io::BufReader::new(rx))
}
