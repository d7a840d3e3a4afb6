//! The `/mcp` row: the same echo call through the hub's MCP endpoint, with
//! a lean HTTP/1.1 keep-alive client (one connection, a session opened
//! with no sampling or elicitation, no progress token), so the table shows
//! what the hub (rmcp's Streamable HTTP server) adds, not what a heavy
//! client costs. `benches/mcp_relay.rs` measures the same with rmcp's
//! own client.

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::{Caller, Hub};

struct Conn {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
}

/// One keep-alive connection to `/mcp` with an open session.
pub struct McpLean {
    conn: Mutex<Conn>,
    host: String,
    token: String,
    session: String,
}

impl McpLean {
    pub async fn open(hub: &Hub) -> McpLean {
        let s = TcpStream::connect(&hub.addr).await.expect("connect /mcp");
        s.set_nodelay(true).expect("nodelay");
        let (r, w) = s.into_split();
        let mut me = McpLean {
            conn: Mutex::new(Conn {
                r: BufReader::new(r),
                w,
            }),
            host: hub.addr.clone(),
            token: hub.token.clone(),
            session: String::new(),
        };
        let (status, headers, body) = me
            .post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "relay-bench", "version": "0"}}}),
            )
            .await;
        assert_eq!(status, 200, "initialize: {body}");
        me.session = headers
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id:"))
            .map(|v| v.trim().to_string())
            .expect("a session id");
        let (status, _, body) = me
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(status, 202, "initialized: {body}");
        me
    }

    /// One POST; (status, lower-cased headers, body).
    async fn post(&self, body: &Value) -> (u16, String, String) {
        let body = body.to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\n",
            self.host,
            self.token,
            body.len()
        );
        if !self.session.is_empty() {
            req.push_str(&format!(
                "Mcp-Session-Id: {}\r\nMcp-Protocol-Version: 2025-06-18\r\n",
                self.session
            ));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let mut c = self.conn.lock().await;
        c.w.write_all(req.as_bytes()).await.expect("send");
        read_response(&mut c.r).await
    }
}

async fn read_response(r: &mut BufReader<OwnedReadHalf>) -> (u16, String, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = r.read_line(&mut line).await.expect("read head");
        assert!(n > 0, "the hub closed the connection");
        if line == "\r\n" {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let mut body = Vec::new();
    if let Some(len) = header("content-length:").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(len, 0);
        r.read_exact(&mut body).await.expect("read body");
    } else if header("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).await.expect("chunk size");
            let n = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).await.expect("chunk");
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    (status, head, String::from_utf8_lossy(&body).into_owned())
}

impl Caller for McpLean {
    async fn echo(&self, n: u64) -> Value {
        let (status, headers, body) = self
            .post(
                &json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": {
                "name": "t__echo", "arguments": {"message": format!("hello {n}")}}}),
            )
            .await;
        debug_assert_eq!(status, 200, "{body}");
        if headers.contains("application/json") {
            return serde_json::from_str(&body).unwrap_or(Value::Null);
        }
        // rmcp answers a session's request as an SSE stream.
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or(Value::Null)
    }
}
