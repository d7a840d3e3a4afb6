//! The receiving half of a child's transport: lines from its stdout
//! (through [`Bounded`]) become rmcp messages. A line of
//! [`OFF_THREAD_BYTES`] or more is parsed on the blocking pool: parsing an
//! 8 MB tool result takes milliseconds of CPU, and on the runtime's worker
//! it held every other client's frames for that long (issue 38.5).
//!
//! What a line that is not a message does follows rmcp's own
//! `AsyncRwTransport`: an empty line is skipped; text that is not JSON is
//! ignored (answering it could start an error storm); a notification of a
//! method rmcp does not know is ignored; other JSON that is no message is
//! answered with "Invalid request".

use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::RoleClient;
use serde_json::Value;
use tokio::process::ChildStdout;
use tokio::task::JoinHandle;

use super::Bounded;

/// Lines at least this long are parsed off the runtime's threads.
pub const OFF_THREAD_BYTES: usize = 256 * 1024;

/// What a line was.
enum Parsed {
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    /// Not a message; skip it.
    Skip,
    /// JSON of the wrong shape: answer "Invalid request".
    Invalid,
}

/// The reader of a child's stdout, as rmcp messages.
pub struct Receiver {
    /// Whole lines. `receive` may be dropped mid-read (rmcp polls it in a
    /// `select!`): what was read stays there for the next call.
    reader: Bounded<ChildStdout>,
    /// A large line being parsed on the blocking pool; awaited by the next
    /// call if this one was dropped.
    parsing: Option<JoinHandle<Parsed>>,
}

impl Receiver {
    pub fn new(stdout: ChildStdout) -> Receiver {
        Receiver {
            reader: Bounded::new(stdout),
            parsing: None,
        }
    }

    /// The next message; `None` at the end of the stream. An invalid
    /// request is answered through `answer` (given the error to send).
    pub async fn receive(
        &mut self,
        mut answer: impl FnMut(TxJsonRpcMessage<RoleClient>),
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let parsed = match self.parsing.as_mut() {
                Some(job) => {
                    let done = job.await;
                    self.parsing = None;
                    match done {
                        Ok(p) => p,
                        Err(e) => {
                            tracing::error!(error = %e, "parsing a server's message failed unexpectedly");
                            Parsed::Skip
                        }
                    }
                }
                None => match std::future::poll_fn(|cx| self.reader.poll_line(cx)).await {
                    Ok(None) => return None,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot read from the server's stdout");
                        return None;
                    }
                    Ok(Some(line)) => {
                        if line.len() < OFF_THREAD_BYTES {
                            parse(&line)
                        } else {
                            self.parsing = Some(tokio::task::spawn_blocking(move || parse(&line)));
                            continue;
                        }
                    }
                },
            };
            match parsed {
                Parsed::Message(m) => return Some(*m),
                Parsed::Skip => {}
                Parsed::Invalid => answer(TxJsonRpcMessage::<RoleClient>::error(
                    ErrorData::invalid_request("Invalid request", None),
                    None,
                )),
            }
        }
    }
}

/// One line (with its newline) as a message, the way rmcp reads it.
fn parse(line: &[u8]) -> Parsed {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.is_empty() {
        return Parsed::Skip;
    }
    match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line) {
        Ok(m) => Parsed::Message(Box::new(m)),
        Err(e) => match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                tracing::debug!(error = %e, "ignoring a line from the server that is not JSON");
                Parsed::Skip
            }
            serde_json::error::Category::Data | serde_json::error::Category::Io => {
                // A notification rmcp does not know (an LSP message, a
                // vendor's own) is ignored, as rmcp does.
                let notification = serde_json::from_slice::<Value>(line).is_ok_and(|v| {
                    v.get("id").is_none() && v.get("method").is_some_and(Value::is_string)
                });
                if notification {
                    tracing::trace!(error = %e, "ignoring a notification rmcp does not know");
                    Parsed::Skip
                } else {
                    tracing::debug!(error = %e, "a message from the server is not valid MCP; answering Invalid request");
                    Parsed::Invalid
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> &'static str {
        match parse(text.as_bytes()) {
            Parsed::Message(_) => "message",
            Parsed::Skip => "skip",
            Parsed::Invalid => "invalid",
        }
    }

    #[test]
    fn lines_are_read_the_way_rmcp_reads_them() {
        assert_eq!(
            kind("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n"),
            "message"
        );
        assert_eq!(
            kind("\u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}\n"),
            "message"
        );
        assert_eq!(kind("\n"), "skip");
        assert_eq!(kind("Server listening on stdio\n"), "skip");
        // rmcp takes another method's notification as a custom one.
        assert_eq!(
            kind("{\"jsonrpc\":\"2.0\",\"method\":\"window/logMessage\",\"params\":{}}\n"),
            "message"
        );
        // One it cannot read is ignored, not answered.
        assert_eq!(
            kind("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":7}\n"),
            "skip"
        );
        assert_eq!(kind("{\"hello\":1}\n"), "invalid");
    }
}
