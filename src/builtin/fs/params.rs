//! Reading tool parameters out of a JSON object with errors that name the
//! field and the expected type. Shared by the file tools and `run_command`.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::errors::{ErrorType, HubError};

/// The params object; `null` (no params at all) counts as `{}`.
pub fn object(params: &Value) -> Result<&Map<String, Value>, HubError> {
    static EMPTY: OnceLock<Map<String, Value>> = OnceLock::new();
    match params {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(EMPTY.get_or_init(Map::new)),
        other => Err(HubError::new(
            ErrorType::InvalidParams,
            format!("params must be a JSON object, got {}", type_name(other)),
        )
        .with_suggestion("pass the parameters as an object, e.g. {\"path\": \"notes.txt\"}")),
    }
}

/// A string field; `None` when absent or null.
pub fn opt_str<'a>(map: &'a Map<String, Value>, field: &str) -> Result<Option<&'a str>, HubError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(wrong_type(field, "a string", other)),
    }
}

pub fn req_str<'a>(map: &'a Map<String, Value>, field: &str) -> Result<&'a str, HubError> {
    opt_str(map, field)?.ok_or_else(|| missing(field, "a string"))
}

pub fn opt_bool(map: &Map<String, Value>, field: &str) -> Result<Option<bool>, HubError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong_type(field, "a boolean", other)),
    }
}

/// A positive integer field (milliseconds, counts).
pub fn opt_positive_u64(map: &Map<String, Value>, field: &str) -> Result<Option<u64>, HubError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(wrong_type(field, "a positive integer", v)),
        },
    }
}

/// `encoding`: `"utf8"` (default) or `"base64"`. Returns true for base64.
pub fn base64_encoding(map: &Map<String, Value>) -> Result<bool, HubError> {
    match opt_str(map, "encoding")? {
        None | Some("utf8") | Some("utf-8") => Ok(false),
        Some("base64") => Ok(true),
        Some(other) => Err(HubError::new(
            ErrorType::InvalidParams,
            format!("parameter 'encoding' is \"{other}\", expected \"utf8\" or \"base64\""),
        )
        .with_suggestion("use \"encoding\": \"utf8\" for text or \"base64\" for binary data")),
    }
}

pub fn missing(field: &str, expected: &str) -> HubError {
    HubError::new(
        ErrorType::InvalidParams,
        format!("missing required parameter '{field}' (expected {expected})"),
    )
    .with_suggestion(format!("add '{field}' to the params object"))
}

pub fn wrong_type(field: &str, expected: &str, got: &Value) -> HubError {
    HubError::new(
        ErrorType::InvalidParams,
        format!(
            "parameter '{field}' must be {expected}, got {}",
            type_name(got)
        ),
    )
    .with_suggestion(format!("pass '{field}' as {expected}"))
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
