//! Hub → client messages. Events are built here so their field names live in
//! one place; replies get `replyTo` through [`reply`].

use crate::errors::HubError;
use serde_json::{json, Map, Value};

use super::MsgId;

/// Attach `replyTo` to a message (no-op for events without an id).
pub fn with_reply_to(mut msg: Value, id: &MsgId) -> Value {
    if let (Some(id), Value::Object(obj)) = (id, &mut msg) {
        obj.insert("replyTo".into(), id.clone());
    }
    msg
}

/// A reply of `type` with the given fields.
pub fn reply(ty: &str, id: &MsgId, fields: Value) -> Value {
    let mut obj = Map::new();
    obj.insert("type".into(), Value::String(ty.into()));
    if let Some(id) = id {
        obj.insert("replyTo".into(), id.clone());
    }
    if let Value::Object(f) = fields {
        obj.extend(f);
    }
    Value::Object(obj)
}

/// `{"type":"error","replyTo":…,"error":{…}}`.
pub fn error_msg(id: &MsgId, error: &HubError) -> Value {
    reply("error", id, json!({ "error": error }))
}

/// The greeting sent on connect. `resume_token` is the session's secret
/// for `resume_session`: it is sent here once and never logged.
pub fn hello(session_id: &str, resume_token: &str, servers: Value, tool_count: usize) -> Value {
    json!({
        "type": "hello",
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": 1,
        "sessionId": session_id,
        "resumeToken": resume_token,
        "bootId": crate::util::run_id(),
        "servers": servers,
        "toolCount": tool_count,
    })
}

/// A `tool_result` from an outcome object (already camelCase JSON).
pub fn tool_result_msg(id: &MsgId, outcome: Value) -> Value {
    reply("tool_result", id, outcome)
}

/// A `tool_result` frame serialised straight from the outcome's fields,
/// with no intermediate JSON tree (the call path's reply).
pub fn tool_result_text<T: serde::Serialize>(id: &MsgId, outcome: &T) -> Option<String> {
    #[derive(serde::Serialize)]
    struct Frame<'a, T> {
        #[serde(rename = "type")]
        ty: &'static str,
        #[serde(rename = "replyTo", skip_serializing_if = "Option::is_none")]
        reply_to: Option<&'a Value>,
        #[serde(flatten)]
        outcome: &'a T,
    }
    serde_json::to_string(&Frame {
        ty: "tool_result",
        reply_to: id.as_ref(),
        outcome,
    })
    .ok()
}
