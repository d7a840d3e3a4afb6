//! Redaction: what every writer (history, task journals, recordings and
//! their edits, `need_user`) puts a value or a text through before it
//! leaves the hub. Values of secret keys are replaced, then every known
//! secret value left anywhere is masked (`crate::secrets`).

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use crate::config::SecurityConfig;

/// The one function every writer (history, task journals, recordings and
/// their edits, `need_user`) puts a value through: every key that looks
/// secret has its value replaced with `{"$redacted": key}`, then every
/// known secret value left anywhere is masked (`crate::secrets`).
pub fn redact(v: &Value, security: &SecurityConfig) -> Value {
    // One implementation of the rules: [`Redacted`], here writing a tree.
    // It cannot fail (every key is a string); if it ever did, nothing of
    // the value is let through.
    serde_json::to_value(Redacted { value: v, security })
        .unwrap_or_else(|_| json!({ "$redacted": "value" }))
}

/// `s` with every known secret value masked (error messages, log text).
pub fn mask_text<'a>(s: &'a str, security: &SecurityConfig) -> std::borrow::Cow<'a, str> {
    security.secrets.mask_str(s)
}

/// Free text (an error message) under the same rules as [`redact`]: the
/// value of every secret key written in it as JSON (`"token": "…"`, as an
/// assertion message quoting a result does) or as `key=value` (a URL's
/// query) becomes `"[redacted]"`, then every known secret value is masked.
pub fn redact_text(s: &str, security: &SecurityConfig) -> String {
    if security.redact_keys.is_empty() {
        return mask_text(s, security).into_owned();
    }
    let keyed = redact_keyed_text(s, security);
    mask_text(&keyed, security).into_owned()
}

fn redact_keyed_text(s: &str, security: &SecurityConfig) -> String {
    // Every delimiter looked at is ASCII, so each index cut at is a char
    // boundary.
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let (mut copied, mut k) = (0, 0);
    while k < b.len() {
        if b[k] == b'"' {
            let Some(end) = string_end(b, k) else { break };
            let mut j = skip_spaces(b, end + 1);
            if b.get(j) == Some(&b':') && security.is_secret_key(&s[k + 1..end]) {
                j = skip_spaces(b, j + 1);
                out.push_str(&s[copied..j]);
                out.push_str("\"[redacted]\"");
                k = value_end(b, j);
                copied = k;
                continue;
            }
            // Not a secret key: look inside (a value may hold `key=value`).
            k += 1;
            continue;
        }
        if b[k] == b'=' {
            let start = s[..k]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
                .map_or(0, |p| p + 1);
            let end = s[k + 1..]
                .find(|c: char| c.is_whitespace() || "&,;\"')]}".contains(c))
                .map_or(s.len(), |p| k + 1 + p);
            if start < k && end > k + 1 && security.is_secret_key(&s[start..k]) {
                out.push_str(&s[copied..=k]);
                out.push_str("[redacted]");
                k = end;
                copied = end;
                continue;
            }
        }
        k += 1;
    }
    out.push_str(&s[copied..]);
    out
}

/// The index of the quote closing the JSON string opened at `open`.
fn string_end(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// Where the JSON value starting at `i` ends: after a string, after a
/// balanced object or array, or at the delimiter after a scalar; the end of
/// the text when it was cut off.
fn value_end(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => string_end(b, i).map_or(b.len(), |e| e + 1),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => match string_end(b, j) {
                        Some(e) => j = e,
                        None => return b.len(),
                    },
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            b.len()
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace()
            {
                j += 1;
            }
            j
        }
    }
}

/// `value` under the redaction rules, written straight to a serializer:
/// every key matching `security.redactKeys` gets `{"$redacted": KEY}` as its
/// value, then every known secret value (in strings, keys, and numbers that
/// are a secret as a whole) is masked. [`redact`] writes it to a tree; the
/// history writes its entry with it once, with no redacted copy first.
pub struct Redacted<'a> {
    pub value: &'a Value,
    pub security: &'a SecurityConfig,
}

impl Serialize for Redacted<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let node = |values: &[&str]| {
            Node {
                v: self.value,
                security: self.security,
                values,
            }
            .serialize(s)
        };
        if self.security.secrets.is_empty() {
            return node(&[]);
        }
        self.security.secrets.with_values(node)
    }
}

struct Node<'a> {
    v: &'a Value,
    security: &'a SecurityConfig,
    /// The secret values, longest first (none: nothing to mask).
    values: &'a [&'a str],
}

impl Node<'_> {
    fn at<'b>(&'b self, v: &'b Value) -> Node<'b> {
        Node {
            v,
            security: self.security,
            values: self.values,
        }
    }
}

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use crate::secrets::{mask_with, MASK};
        match self.v {
            Value::String(t) => s.serialize_str(&mask_with(t, self.values)),
            // Only a number that is a secret as a whole (as `mask_in_place`).
            Value::Number(n)
                if !self.values.is_empty() && self.values.contains(&n.to_string().as_str()) =>
            {
                s.serialize_str(MASK)
            }
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for x in a {
                    seq.serialize_element(&self.at(x))?;
                }
                seq.end()
            }
            Value::Object(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, x) in m {
                    let key = mask_with(k, self.values);
                    if self.security.is_secret_key(k) {
                        map.serialize_entry(&key, &RedactedKey(&key))?;
                    } else {
                        map.serialize_entry(&key, &self.at(x))?;
                    }
                }
                map.end()
            }
            other => other.serialize(s),
        }
    }
}

/// `{"$redacted": key}`, what a secret key's value becomes.
struct RedactedKey<'a>(&'a str);

impl Serialize for RedactedKey<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("$redacted", self.0)?;
        map.end()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::path::Path;

    /// The default security section (its secret keys, no secret values).
    pub(crate) fn security() -> SecurityConfig {
        match crate::config::parse("{}", Path::new("/tmp/x/config.json")) {
            Ok(l) => l.config.security,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn redact_text_hides_values_of_secret_keys_in_json_and_query_text() {
        let s = security();
        let msg = r#"expected result to contain "x"; actual result: {"apiKey": "sk-1", "user":"bob","token":{"a":[1,"}"]},"password":12} see https://h/p?user=bob&token=t0k&x=1 "#;
        let out = redact_text(msg, &s);
        assert_eq!(
            out,
            r#"expected result to contain "x"; actual result: {"apiKey": "[redacted]", "user":"bob","token":"[redacted]","password":"[redacted]"} see https://h/p?user=bob&token=[redacted]&x=1 "#
        );
        // A message cut off inside the value, keys without values, plain text.
        assert_eq!(
            redact_text(r#"found {"secret":"abc…"#, &s),
            r#"found {"secret":"[redacted]""#
        );
        for plain in [
            r#"{"token"}"#,
            "token= x",
            "password: must be 8 chars",
            "ü\"é\":\"ö",
        ] {
            assert_eq!(redact_text(plain, &s), plain);
        }
    }

    #[test]
    fn redacted_serialises_what_redact_returns() {
        let mut s = security();
        s.secrets =
            crate::secrets::SecretValues::configured(["hunter2".to_string(), "4242".to_string()]);
        let params = serde_json::json!({
            "path": "/home/me/hunter2.txt",
            "apiKey": "sk-1",
            "nested": {"password": {"deep": 1}, "list": [1, 4242, "x hunter2 y", null, true]},
            "hunter2": "a key that is a secret",
            "n": 42.5,
        });
        // Written as text (the history's way) and as a tree (`redact`).
        let text = |security| {
            let text = serde_json::to_string(&Redacted {
                value: &params,
                security,
            })
            .unwrap();
            serde_json::from_str::<Value>(&text).unwrap()
        };
        let written = text(&s);
        assert_eq!(written, redact(&params, &s));
        assert_eq!(
            written,
            json!({"path": "/home/me/***.txt", "apiKey": {"$redacted": "apiKey"},
                "nested": {"password": {"$redacted": "password"}, "list": [1, "***", "x *** y", null, true]},
                "***": "a key that is a secret", "n": 42.5})
        );
        assert_eq!(
            written["apiKey"],
            serde_json::json!({"$redacted": "apiKey"})
        );
        assert_eq!(written["nested"]["list"][1], "***");
        assert_eq!(written["***"], "a key that is a secret");
        // No secret values configured: keys are still redacted.
        let plain = security();
        let written = text(&plain);
        assert_eq!(written, redact(&params, &plain));
        assert_eq!(
            written,
            json!({"path": "/home/me/hunter2.txt", "apiKey": {"$redacted": "apiKey"},
                "nested": {"password": {"$redacted": "password"}, "list": [1, 4242, "x hunter2 y", null, true]},
                "hunter2": "a key that is a secret", "n": 42.5})
        );
    }
}
