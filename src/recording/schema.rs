//! A small JSON Schema check for `dry` replays: does a params object still
//! fit a tool's current inputSchema? It covers what tool schemas use in
//! practice (type, required, properties, items, enum, additionalProperties:
//! false); anything else is accepted rather than guessed at.

use serde_json::Value;

/// Every way `value` does not fit `schema`, as `path: problem`.
pub fn check(schema: &Value, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, value, "", 0, &mut out);
    out
}

fn type_ok(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn walk(schema: &Value, v: &Value, path: &str, depth: usize, out: &mut Vec<String>) {
    if depth > 32 || out.len() > 50 {
        return;
    }
    let at = if path.is_empty() { "params" } else { path };
    match schema.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => {
            out.push(format!(
                "{at}: expected {t}, got {}",
                crate::protocol::json_kind(v)
            ));
            return;
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)) => {
            out.push(format!(
                "{at}: expected one of {}, got {}",
                Value::Array(ts.clone()),
                crate::protocol::json_kind(v)
            ));
            return;
        }
        _ => {}
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(v) {
            out.push(format!(
                "{at}: {v} is not one of {}",
                Value::Array(allowed.clone())
            ));
        }
    }
    if let Value::Object(obj) = v {
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(req)) = schema.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    out.push(format!("{at}: missing required property \"{r}\""));
                }
            }
        }
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => walk(sub, val, &format!("{path}/{k}"), depth + 1, out),
                None => {
                    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                        out.push(format!(
                            "{at}: property \"{k}\" is not allowed by the tool's schema"
                        ));
                    }
                }
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (v, schema.get("items")) {
        for (i, it) in items.iter().enumerate() {
            walk(item_schema, it, &format!("{path}/{i}"), depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_missing_and_mistyped_fields() {
        let s = json!({"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}, "additionalProperties": false});
        assert!(check(&s, &json!({"path": "a", "n": 3})).is_empty());
        let p = check(&s, &json!({"n": "x", "extra": 1}));
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p
            .iter()
            .any(|m| m.contains("missing required property \"path\"")));
        assert!(p.iter().any(|m| m.contains("/n: expected integer")));
    }
}
