//! Looking a variable path up in the render context, and naming what exists
//! there when it is missing.

use serde_json::Value;

use super::error::TemplateError;

/// Most names listed in an unknown-variable error.
const MAX_LISTED: usize = 40;

/// Segments of a path as written (`a.b`, `a/[0]`, `this.x`, `../x`, `@root.x`).
pub(super) fn split_path(raw: &str) -> Vec<String> {
    let mut segs = Vec::new();
    let mut cur = String::new();
    let mut in_brackets = false;
    for c in raw.chars() {
        match c {
            '[' if !in_brackets => in_brackets = true,
            ']' if in_brackets => in_brackets = false,
            '.' | '/' if !in_brackets => segs.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    segs.push(cur);
    segs.retain(|s| !s.is_empty() && s != "this" && s != "@root");
    segs
}

/// The value at `segs` under `root`; numeric segments index arrays.
pub(crate) fn lookup<'v>(
    root: &'v Value,
    segs: &[String],
    raw: &str,
) -> Result<&'v Value, TemplateError> {
    let mut cur = root;
    for (i, s) in segs.iter().enumerate() {
        let next = match cur {
            Value::Object(m) => m.get(s),
            Value::Array(a) => s.parse::<usize>().ok().and_then(|n| a.get(n)),
            _ => None,
        };
        cur = next.ok_or_else(|| TemplateError::Unknown {
            variable: raw.to_string(),
            at: segs[..i].join("."),
            missing: s.clone(),
            available: listed(cur),
        })?;
    }
    Ok(cur)
}

/// What a person could write after `cur.`: field names or the index range.
pub(super) fn listed(cur: &Value) -> Vec<String> {
    match cur {
        Value::Object(m) => {
            let mut names: Vec<String> = m.keys().cloned().collect();
            names.sort();
            names.truncate(MAX_LISTED);
            if m.len() > MAX_LISTED {
                names.push(format!("… ({} more)", m.len() - MAX_LISTED));
            }
            names
        }
        Value::Array(a) if !a.is_empty() => vec![format!("indexes 0 to {}", a.len() - 1)],
        Value::Array(_) => vec!["nothing (an empty array)".to_string()],
        Value::String(_) => vec!["nothing (a string)".to_string()],
        Value::Null => vec!["nothing (null)".to_string()],
        _ => vec![format!(
            "nothing (a {})",
            if cur.is_number() { "number" } else { "boolean" }
        )],
    }
}
