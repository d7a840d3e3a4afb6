//! The wire protocol: the ONLY place client JSON is parsed.
//!
//! A frame is decoded in three steps: size and JSON syntax (serde_json's own
//! recursion limit rejects absurd nesting), the envelope (`id`, `type`), then
//! the message body for that type with exact field errors
//! (`serde_path_to_error`). Every failure becomes an `INVALID_MESSAGE`
//! [`HubError`] that says what was wrong and what was expected.

pub mod artifact;
mod from_client;
pub mod keep;
mod page;
pub mod paging;
pub mod recording;
pub mod runs;
mod to_client;

pub use from_client::{
    AckReq, BatchOptions, BatchReq, BatchStep, ClientMsg, ConfirmReq, HistoryReq, ListTasksReq,
    ReloadToolsReq, ResumeSessionReq, ResumeTaskReq, SaveImages, TaskRef, ToolCallReq,
};
pub use page::StepPage;
pub use to_client::{error_msg, hello, reply, tool_result_msg, tool_result_text, with_reply_to};

use crate::errors::{ErrorType, HubError};
use serde_json::Value;

/// The `id` a client put on a message: a string or a number, echoed as `replyTo`.
pub type MsgId = Option<Value>;

/// A decoded client frame.
#[derive(Debug)]
pub struct Envelope {
    pub id: MsgId,
    pub msg: ClientMsg,
}

/// Why a frame could not be decoded; carries the id when it could be read,
/// so the error still answers the request.
#[derive(Debug)]
pub struct DecodeError {
    pub id: MsgId,
    pub error: HubError,
}

/// Every message type a client may send, for did-you-mean suggestions.
pub const CLIENT_TYPES: &[&str] = &[
    "ping",
    "list_tools",
    "tool_call",
    "tool_batch",
    "cancel_task",
    "resume_task",
    "task_status",
    "list_tasks",
    "confirm",
    "health_check",
    "reload_tools",
    "history",
    "start_recording",
    "stop_recording",
    "list_recordings",
    "get_recording",
    "delete_recording",
    "export_recording",
    "replay_recording",
    "update_recording",
    "create_run",
    "set_run",
    "list_runs",
    "get_run",
    "log_run_entry",
    "archive_run",
    "delete_run",
    "get_artifact",
    "resume_session",
    "ack",
    "stop_instance",
    "keep_result",
];

/// Decode one text frame.
// The error is built once per bad frame; its size does not matter.
#[allow(clippy::result_large_err)]
pub fn decode(text: &str, max_bytes: usize) -> Result<Envelope, DecodeError> {
    decode_limited(text, max_bytes, SERDE_DEPTH)
}

/// serde_json's own nesting limit; deeper frames are refused by it anyway.
const SERDE_DEPTH: usize = 128;

/// The deepest `[`/`{` nesting of a JSON text (strings skipped), in one pass.
pub fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Decode with `server.maxJsonDepth` as well as `server.maxMessageBytes`.
#[allow(clippy::result_large_err)]
pub fn decode_limited(
    text: &str,
    max_bytes: usize,
    max_depth: usize,
) -> Result<Envelope, DecodeError> {
    let limit = max_depth.min(SERDE_DEPTH);
    if text.len() <= max_bytes && limit < SERDE_DEPTH {
        let depth = nesting_depth(text);
        if depth > limit {
            return Err(DecodeError {
                id: None,
                error: HubError::new(
                    ErrorType::LimitExceeded,
                    format!("message nests {depth} levels deep, over the limit of {limit} (server.maxJsonDepth)"),
                ),
            });
        }
    }
    if text.len() > max_bytes {
        return Err(DecodeError {
            id: None,
            error: HubError::new(
                ErrorType::LimitExceeded,
                format!(
                    "message of {} bytes is over the limit of {} bytes (server.maxMessageBytes)",
                    text.len(),
                    max_bytes
                ),
            ),
        });
    }
    if let Some((id, req)) = from_client::direct_tool_call(text) {
        return Ok(Envelope {
            id,
            msg: ClientMsg::ToolCall(req),
        });
    }
    let value: Value = serde_json::from_str(text).map_err(|e| DecodeError {
        id: None,
        error: invalid(format!(
            "frame is not valid JSON: {e}; expected one JSON object per text frame, e.g. {{\"type\":\"ping\",\"id\":1}}"
        )),
    })?;
    decode_value(value)
}

/// Decode an already parsed JSON value.
#[allow(clippy::result_large_err)]
pub fn decode_value(value: Value) -> Result<Envelope, DecodeError> {
    let Value::Object(mut obj) = value else {
        return Err(DecodeError {
            id: None,
            error: invalid(format!(
                "frame is a JSON {}, expected a JSON object with a \"type\" field",
                json_kind(&value)
            )),
        });
    };
    let id = match obj.remove("id") {
        None | Some(Value::Null) => None,
        Some(v @ (Value::String(_) | Value::Number(_))) => Some(v),
        Some(other) => {
            return Err(DecodeError {
                id: None,
                error: invalid(format!(
                    "field \"id\" is a {}, expected a string or a number",
                    json_kind(&other)
                )),
            })
        }
    };
    let fail = |id: &MsgId, message: String| DecodeError {
        id: id.clone(),
        error: invalid(message),
    };
    let ty = match obj.remove("type") {
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(fail(
                &id,
                format!(
                    "field \"type\" is a {}, expected a string; known types: {}",
                    json_kind(&other),
                    CLIENT_TYPES.join(", ")
                ),
            ))
        }
        None => {
            return Err(fail(
                &id,
                format!(
                    "missing field \"type\"; known types: {}",
                    CLIENT_TYPES.join(", ")
                ),
            ))
        }
    };
    if !CLIENT_TYPES.contains(&ty.as_str()) {
        let near = crate::suggest::did_you_mean(&ty, CLIENT_TYPES.iter().copied());
        let hint = match near.first() {
            Some(n) => format!("; did you mean \"{n}\"?"),
            None => String::new(),
        };
        return Err(fail(
            &id,
            format!(
                "unknown type \"{ty}\"{hint} known types: {}",
                CLIENT_TYPES.join(", ")
            ),
        ));
    }
    let body = Value::Object(obj);
    match from_client::parse_body(&ty, body) {
        Ok(msg) => Ok(Envelope { id, msg }),
        Err(message) => Err(fail(&id, format!("{ty}: {message}"))),
    }
}

fn invalid(message: String) -> HubError {
    HubError::new(ErrorType::InvalidMessage, message)
}

/// "object", "array", "string", … for error messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> DecodeError {
        match decode(text, 1 << 20) {
            Ok(e) => panic!("expected an error, got {e:?}"),
            Err(e) => e,
        }
    }

    /// The general decoder alone (no direct `tool_call` path).
    #[allow(clippy::result_large_err)]
    fn general(text: &str) -> Result<Envelope, DecodeError> {
        match serde_json::from_str::<Value>(text) {
            Ok(v) => decode_value(v),
            Err(e) => panic!("test frames are JSON: {e}"),
        }
    }

    #[test]
    fn the_direct_tool_call_path_decodes_exactly_what_the_general_one_does() {
        let frames = [
            r#"{"type":"tool_call","id":1,"tool":"t__echo","params":{"message":"hi"}}"#,
            r#"{"type":"tool_call","id":"a\"b","tool":"echo"}"#,
            r#"{"type":"tool_call","tool":"echo","params":{"a":[1,{"b":null}]},"timeout":5000,"retry":false,"saveImages":"shot","extra":1}"#,
            r#"{"tool":"echo","type":"tool_call","id":null,"saveImages":true,"retry":{"maxAttempts":2}}"#,
            r#"{"type":"tool_c\u0061ll","id":2,"tool":"echo"}"#,
            // Not direct: each must get the general decoder's answer.
            r#"{"type":"tool_call","id":true,"tool":"echo"}"#,
            r#"{"type":"tool_call","id":3}"#,
            r#"{"type":"tool_call","id":4,"tool":5}"#,
            r#"{"type":"tool_call","id":5,"tool":"x","timeout":"soon"}"#,
            r#"{"type":"tool_call","id":6,"tool":"x","tool":"y"}"#,
            r#"{"type":"tool_call","type":"ping","id":7,"tool":"x"}"#,
            r#"{"type":"ping","id":8,"tool":"x"}"#,
            r#"{"type":"tool_batch","id":9,"tool":"x","steps":[]}"#,
            r#"{"type":["tool_call"],"id":10,"tool":"x"}"#,
            r#"{"type":"tool_call","id":11,"tool":"x","saveImages":3}"#,
        ];
        for f in frames {
            let fast = format!("{:?}", decode(f, 1 << 20));
            let slow = format!("{:?}", general(f));
            assert_eq!(fast, slow, "frame {f}");
        }
        // The direct path is taken for a plain call, and not for the rest.
        assert!(from_client::direct_tool_call(frames[0]).is_some());
        assert!(from_client::direct_tool_call(frames[5]).is_none());
        assert!(from_client::direct_tool_call(frames[9]).is_none());
    }

    #[test]
    fn unknown_type_gets_did_you_mean() {
        let e = err(r#"{"type":"tool_bach","id":7}"#);
        assert_eq!(e.id, Some(Value::from(7)));
        assert!(
            e.error.message.contains("did you mean \"tool_batch\""),
            "{}",
            e.error.message
        );
        assert_eq!(e.error.error_type, ErrorType::InvalidMessage);
    }

    #[test]
    fn wrong_field_type_names_the_field() {
        let e = err(r#"{"type":"tool_call","id":"a","tool":5}"#);
        assert!(e.error.message.contains("tool"), "{}", e.error.message);
        assert!(
            e.error.message.contains("expected a string"),
            "{}",
            e.error.message
        );
        let e = err(r#"{"type":"tool_call","id":"a","tool":"x","timeout":"soon"}"#);
        assert!(e.error.message.contains("timeout"), "{}", e.error.message);
    }

    #[test]
    fn non_objects_and_bad_json_are_refused() {
        assert!(err("[1,2]").error.message.contains("array"));
        assert!(err("{not json").error.message.contains("not valid JSON"));
        assert!(err(r#"{"id":{}}"#).error.message.contains("\"id\""));
        assert!(err(r#"{"id":1}"#)
            .error
            .message
            .contains("missing field \"type\""));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let text = format!(r#"{{"type":"ping","x":{deep}}}"#);
        let e = err(&text);
        assert!(
            e.error.message.contains("recursion limit"),
            "{}",
            e.error.message
        );
    }

    #[test]
    fn configured_depth_limit_is_enforced_and_strings_do_not_count() {
        assert_eq!(nesting_depth(r#"{"a":[1,{"b":"[[[{{{"}]}"#), 3);
        assert_eq!(nesting_depth(r#"{"a":"\"[[["}"#), 1);
        let deep = r#"{"type":"ping","x":[[[[[1]]]]]}"#;
        match decode_limited(deep, 1 << 20, 4) {
            Err(e) => assert_eq!(e.error.error_type, ErrorType::LimitExceeded),
            Ok(_) => panic!("accepted"),
        }
        assert!(decode_limited(deep, 1 << 20, 6).is_ok());
    }

    #[test]
    fn over_size_is_limit_exceeded() {
        let e = match decode(&"x".repeat(100), 10) {
            Err(e) => e,
            Ok(_) => panic!("accepted"),
        };
        assert_eq!(e.error.error_type, ErrorType::LimitExceeded);
    }

    #[test]
    fn tool_call_parses() {
        let env = match decode(
            r#"{"type":"tool_call","id":1,"tool":"read_file","params":{"path":"a"},"timeout":500}"#,
            1 << 20,
        ) {
            Ok(e) => e,
            Err(e) => panic!("{e:?}"),
        };
        match env.msg {
            ClientMsg::ToolCall(c) => {
                assert_eq!(c.tool, "read_file");
                assert_eq!(c.timeout, Some(500));
            }
            other => panic!("{other:?}"),
        }
    }
}
