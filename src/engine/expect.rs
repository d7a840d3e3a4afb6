//! A step's `expect`: checks on its result, parsed once when the batch
//! arrives. A miss fails the step with `ASSERTION_FAILED` (the runner does
//! that) and a message showing what was expected and what came back.
//!
//! Forms: `{"contains":"…"}`, `{"regex":"…"}`, `{"equals":…}`,
//! `{"path":"/a/0/b" | "a.0.b", "equals":…|"exists":bool|"regex":"…"}`,
//! `{"success":false}`, or an array of these (all must hold).

use regex::Regex;
use serde_json::{Map, Value};

use super::condition::compile_regex;
use super::template::{shorten, value_text};
use crate::errors::HubError;

/// How much of the actual result a failure message shows.
const ACTUAL_CHARS: usize = 300;
const EXPECTED_FORMS: &str = "expected {\"contains\"}, {\"regex\"}, {\"equals\"}, {\"path\",\"equals\"|\"exists\"|\"regex\"}, {\"success\":false} or an array of them";

#[derive(Debug, Clone)]
pub enum Expect {
    /// The result as text contains this.
    Contains(String),
    /// The result as text matches.
    Regex(Regex),
    /// The result equals this value. A string result holding JSON text is
    /// also compared as the parsed value when the expected value is not a string.
    Equals(Value),
    /// A value inside the result, by JSON pointer (`/items/0/id`). A string
    /// result holding JSON text is parsed first.
    Path { pointer: String, check: PathCheck },
    /// `{"success": false}`: the step must fail (and then counts as passed).
    Failure,
}

#[derive(Debug, Clone)]
pub enum PathCheck {
    Equals(Value),
    Exists(bool),
    Regex(Regex),
}

/// Every expectation of one step; all must hold.
#[derive(Debug, Clone, Default)]
pub struct Expectations(pub Vec<Expect>);

impl Expectations {
    /// Parse a step's `expect` value (one object or an array of objects).
    pub fn parse(v: &Value) -> Result<Expectations, String> {
        match v {
            Value::Array(items) => items
                .iter()
                .map(parse_one)
                .collect::<Result<_, _>>()
                .map(Expectations),
            other => Ok(Expectations(vec![parse_one(other)?])),
        }
    }

    /// True when the step is expected to fail (`{"success": false}`).
    pub fn expects_failure(&self) -> bool {
        self.0.iter().any(|e| matches!(e, Expect::Failure))
    }

    /// Check a finished step. `Err` holds every miss, each saying what was
    /// expected and what came back (the actual value cut to ~300 characters).
    pub fn check(
        &self,
        success: bool,
        result: &Value,
        error: Option<&HubError>,
    ) -> Result<(), String> {
        let misses: Vec<String> = self
            .0
            .iter()
            .filter_map(|e| e.check(success, result, error).err())
            .collect();
        if misses.is_empty() {
            Ok(())
        } else {
            Err(misses.join("; "))
        }
    }
}

fn compact(v: &Value) -> String {
    shorten(&v.to_string(), 200)
}

fn parse_one(v: &Value) -> Result<Expect, String> {
    let Value::Object(m) = v else {
        return Err(format!(
            "expect: {} is not an expectation; {EXPECTED_FORMS}",
            compact(v)
        ));
    };
    if let Some(p) = m.get("path") {
        return parse_path(p, m);
    }
    let [(key, val)] = m.iter().collect::<Vec<_>>()[..] else {
        return Err(format!(
            "expect: {} has {} keys; one expectation has one check (use an array for several); {EXPECTED_FORMS}",
            compact(v),
            m.len()
        ));
    };
    match (key.as_str(), val) {
        ("contains", Value::String(s)) => Ok(Expect::Contains(s.clone())),
        ("regex", Value::String(p)) => Ok(Expect::Regex(regex(p)?)),
        ("equals", x) => Ok(Expect::Equals(x.clone())),
        ("success", Value::Bool(false)) => Ok(Expect::Failure),
        ("success", Value::Bool(true)) => Err(
            "expect: {\"success\":true} is always required; use {\"success\":false} to expect a failure"
                .to_string(),
        ),
        ("contains" | "regex", other) => Err(format!("expect: \"{key}\" must be a string, got {}", compact(other))),
        ("success", other) => Err(format!("expect: \"success\" must be false, got {}", compact(other))),
        _ => Err(format!("expect: unknown check \"{key}\"; {EXPECTED_FORMS}")),
    }
}

fn regex(p: &str) -> Result<Regex, String> {
    compile_regex(p).map_err(|e| format!("expect: {e}"))
}

fn parse_path(p: &Value, m: &Map<String, Value>) -> Result<Expect, String> {
    let Value::String(path) = p else {
        return Err(format!(
            "expect: \"path\" must be a string, got {}",
            compact(p)
        ));
    };
    let pointer = to_pointer(path);
    let checks: Vec<(&String, &Value)> = m.iter().filter(|(k, _)| k.as_str() != "path").collect();
    let [(key, val)] = checks[..] else {
        return Err(format!(
            "expect: {{\"path\":{}}} needs exactly one of \"equals\", \"exists\" or \"regex\"",
            compact(p)
        ));
    };
    let check = match (key.as_str(), val) {
        ("equals", x) => PathCheck::Equals(x.clone()),
        ("exists", Value::Bool(b)) => PathCheck::Exists(*b),
        ("regex", Value::String(r)) => PathCheck::Regex(regex(r)?),
        ("exists", other) => return Err(format!("expect: \"exists\" must be true or false, got {}", compact(other))),
        ("regex", other) => return Err(format!("expect: \"regex\" must be a string, got {}", compact(other))),
        _ => {
            return Err(format!(
                "expect: unknown key \"{key}\" next to \"path\"; expected \"equals\", \"exists\" or \"regex\""
            ))
        }
    };
    Ok(Expect::Path { pointer, check })
}

/// A JSON pointer from `/a/0/b` (kept) or the dotted `a.0.b` (converted).
fn to_pointer(path: &str) -> String {
    if path.is_empty() || path.starts_with('/') {
        return path.to_string();
    }
    path.split('.')
        .map(|seg| format!("/{}", seg.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The result, or the JSON a string result holds.
fn as_document(result: &Value) -> Option<Value> {
    match result {
        Value::String(s) => serde_json::from_str(s.trim()).ok(),
        _ => None,
    }
}

fn actual(v: &Value) -> String {
    shorten(&v.to_string(), ACTUAL_CHARS)
}

impl Expect {
    /// Check one expectation against a finished step.
    pub fn check(
        &self,
        success: bool,
        result: &Value,
        error: Option<&HubError>,
    ) -> Result<(), String> {
        if let Expect::Failure = self {
            return if success {
                Err(format!(
                    "expected the step to fail, but it succeeded; actual result: {}",
                    actual(result)
                ))
            } else {
                Ok(())
            };
        }
        if !success {
            let why = error
                .map(|e| shorten(&e.to_string(), ACTUAL_CHARS))
                .unwrap_or_else(|| "no error given".into());
            return Err(format!(
                "expected {}, but the step failed: {why}",
                self.describe()
            ));
        }
        let text = || value_text(result);
        let held = match self {
            Expect::Contains(s) => text().contains(s.as_str()),
            Expect::Regex(r) => r.is_match(&text()),
            Expect::Equals(want) => {
                result == want || (!want.is_string() && as_document(result).as_ref() == Some(want))
            }
            Expect::Path { pointer, check } => {
                let parsed = as_document(result);
                let doc = parsed.as_ref().unwrap_or(result);
                let found = doc.pointer(pointer);
                let held = match (check, found) {
                    (PathCheck::Exists(b), f) => f.is_some() == *b,
                    (PathCheck::Equals(want), Some(f)) => f == want,
                    (PathCheck::Regex(r), Some(f)) => r.is_match(&value_text(f)),
                    (_, None) => false,
                };
                if !held {
                    let at = found
                        .map(actual)
                        .unwrap_or_else(|| "nothing there".to_string());
                    return Err(format!("expected {}; actual: {at}", self.describe()));
                }
                true
            }
            Expect::Failure => true,
        };
        if held {
            Ok(())
        } else {
            Err(format!(
                "expected {}; actual result: {}",
                self.describe(),
                actual(result)
            ))
        }
    }

    /// "result to contain \"OK\"" and the like.
    fn describe(&self) -> String {
        match self {
            Expect::Contains(s) => format!("result to contain {}", Value::String(s.clone())),
            Expect::Regex(r) => format!("result to match /{}/", r.as_str()),
            Expect::Equals(v) => format!("result to equal {}", compact(v)),
            Expect::Path { pointer, check } => match check {
                PathCheck::Equals(v) => format!("result at \"{pointer}\" to equal {}", compact(v)),
                PathCheck::Exists(true) => format!("result at \"{pointer}\" to exist"),
                PathCheck::Exists(false) => format!("result at \"{pointer}\" not to exist"),
                PathCheck::Regex(r) => format!("result at \"{pointer}\" to match /{}/", r.as_str()),
            },
            Expect::Failure => "the step to fail".to_string(),
        }
    }
}

#[cfg(test)]
mod tests;
