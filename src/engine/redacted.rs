//! Redaction markers as template variables: a secret the hub never stored
//! (`{"$redacted": "password"}` in a journal or a recording) becomes
//! `{{vars.password}}`, which the sender supplies again on resume or replay.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// The params as a template: redactions become `{{vars.<name>}}`; with
/// `escape`, literal `{{` in strings is escaped so it is not rendered.
pub fn templated(v: &Value, escape: bool, needed: &mut BTreeSet<String>) -> Value {
    match v {
        Value::Object(m) => {
            if let Some(name) = redacted_name(m) {
                let (template, var) = var_template(name);
                needed.insert(var);
                return Value::String(template);
            }
            Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), templated(x, escape, needed)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| templated(x, escape, needed)).collect()),
        Value::String(s) if escape => Value::String(s.replace("{{", "\\{{")),
        Value::String(s) => {
            template_vars(s, needed);
            v.clone()
        }
        other => other.clone(),
    }
}

/// The name in `{"$redacted":"name"}` (a `rule` field may sit beside it).
fn redacted_name(m: &Map<String, Value>) -> Option<&str> {
    let name = m.get("$redacted")?.as_str()?;
    m.keys()
        .all(|k| k == "$redacted" || k == "rule")
        .then_some(name)
}

/// The placeholder for variable `name` and the name the sender must supply.
/// Names that are not plain identifiers use handlebars' `[…]` segment; a name
/// that cannot be written even so is reduced to `_`-joined word characters.
pub fn var_template(name: &str) -> (String, String) {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        return (format!("{{{{vars.{name}}}}}"), name.to_string());
    }
    if !name.is_empty() && !name.contains([']', '}', '{', '\n', '\r']) {
        return (format!("{{{{vars.[{name}]}}}}"), name.to_string());
    }
    let mut safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !safe.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        safe.insert(0, '_');
    }
    (format!("{{{{vars.{safe}}}}}"), safe)
}

/// Every `vars.<name>` read inside `{{…}}` in a template string. A plain scan
/// (the real parser lives in the engine): it finds the names a sender must
/// supply; a miss only means the engine will name the variable on replay.
pub fn template_vars(s: &str, out: &mut BTreeSet<String>) {
    let mut rest = s;
    while let Some(open) = rest.find("{{") {
        let escaped = rest[..open].ends_with('\\');
        let after = &rest[open + 2..];
        let close = after.find("}}").unwrap_or(after.len());
        if !escaped {
            vars_in_expression(&after[..close], out);
        }
        rest = &after[close..];
    }
}

fn vars_in_expression(expr: &str, out: &mut BTreeSet<String>) {
    for (at, _) in expr.match_indices("vars.") {
        let before = &expr[..at];
        let bounded = before.ends_with("@root.")
            || !before.ends_with(|c: char| {
                c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '@' | '$')
            });
        if !bounded {
            continue;
        }
        let tail = &expr[at + 5..];
        let name = match tail.strip_prefix('[') {
            Some(inner) => inner.split(']').next().unwrap_or(""),
            None => {
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$')))
                    .unwrap_or(tail.len());
                &tail[..end]
            }
        };
        if !name.is_empty() {
            out.insert(name.to_string());
        }
    }
}
