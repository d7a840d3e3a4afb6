//! `--fast-echo`: the leanest correct MCP server we can write, for the relay
//! benchmark's backend. JSON-RPC lines over stdio, one `echo` tool, no
//! framework: what it costs is what a direct call costs.

use std::io::{BufRead, Write};

use serde_json::{json, Value};

/// Serve until stdin closes.
pub fn serve() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue; // a notification
        };
        let reply = match answer(&msg) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        };
        serde_json::to_writer(&mut out, &reply)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
}

fn answer(msg: &Value) -> Result<Value, (i64, String)> {
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    match msg.get("method").and_then(Value::as_str).unwrap_or("") {
        "initialize" => Ok(json!({
            "protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-06-18")),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fast-echo", "version": "1"},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": [{
            "name": "echo",
            "description": "Returns `message` as text.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
            "annotations": {"readOnlyHint": true},
        }]})),
        "tools/call" => {
            if params.get("name").and_then(Value::as_str) != Some("echo") {
                return Err((-32602, "unknown tool; this server has `echo` only".into()));
            }
            let text = params
                .pointer("/arguments/message")
                .and_then(Value::as_str)
                .ok_or((-32602, "echo needs a string `message`".to_string()))?;
            Ok(json!({"content": [{"type": "text", "text": text}]}))
        }
        other => Err((-32601, format!("method {other:?} is not supported"))),
    }
}
