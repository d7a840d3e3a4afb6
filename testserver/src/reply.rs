//! What the test server's tools answer with: a text result, and the
//! JSON-RPC errors for bad arguments and for its own failures; and the
//! garbage line a `garbage` call writes past the transport.

use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::ErrorData;

pub fn text(message: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(message)])
}

pub fn invalid(message: String) -> ErrorData {
    ErrorData::invalid_params(message, None)
}

pub fn internal(message: String) -> ErrorData {
    ErrorData::internal_error(message, None)
}

/// Writes a non-JSON line to fd 1, past the MCP transport. Going through
/// `std::io::stdout()` shares the lock tokio's stdout takes per write, so the
/// garbage lands between messages rather than inside one.
pub fn write_garbage_line() -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(b"this is not json-rpc: testserver garbage\n")?;
    out.flush()
}
