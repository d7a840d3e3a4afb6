//! Compare a recorded step outcome with a new one (a replay), and find the
//! recorded params nearest to a missed call (the offline server's miss message).
//!
//! A difference names its place with a JSON pointer (RFC 6901 escaping) into
//! the step outcome: `""` for a success flip, `/error/errorType`, or
//! `/result/…`. Strings that both hold JSON objects or arrays (MCP text content
//! often does) are compared structurally and the pointer continues inside them.
//! Volatile values (timestamps, UUIDs, user patterns) and ignored pointers are
//! skipped, so a replay against an unchanged server reports nothing.

use regex::{Regex, RegexBuilder};
use serde::Serialize;
use serde_json::Value;

use crate::errors::HubError;

/// Most differences listed for one step; the rest are counted in one entry.
pub const MAX_DIFFERENCES: usize = 100;
/// Compiled size limit of one ignore regex.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Deepest nesting walked (JSON inside text adds levels); below it values are
/// compared whole, so a pathological value cannot exhaust the stack.
const MAX_DEPTH: usize = 256;

/// RFC 3339 / ISO-8601 date-times with a time part: `2026-11-22T03:49:36.123Z`,
/// `2026-11-22 03:49:36+02:00`, `2026-11-22T03:49`. A bare date is not matched:
/// it is more often data (a due date) than a clock reading, and hiding a real
/// change is worse than showing noise; add a regex for dates when needed.
/// `(?-u:\b)` keeps the regex engine on its fast path for non-ASCII text.
const TIMESTAMP: &str = r"(?-u:\b)\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?(?-u:\b)";
/// UUIDs of any version, either case.
const UUID: &str =
    r"(?i)(?-u:\b)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?-u:\b)";

/// One difference between a recorded and a new step outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// JSON pointer: `""` for a success flip, `/error/errorType`, `/result/items/0/id`.
    pub path: String,
    pub kind: DiffKind,
    /// `null` when the value is absent on this side.
    pub recorded: Value,
    pub actual: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    SuccessFlipped,
    Changed,
    Added,
    Removed,
    TypeChanged,
}

/// What a comparison skips: pointers (with `*` for one segment) and volatile
/// string patterns. Built once per replay.
#[derive(Debug, Clone)]
pub struct Ignore {
    /// Each pattern split into unescaped segments; `*` matches any one.
    paths: Vec<Vec<String>>,
    /// Defaults first, then the caller's. Every match inside a string is
    /// replaced by a marker naming the regex before two strings are compared,
    /// so `"saved at <timestamp>"` equals `"saved at <other timestamp>"` while
    /// the text around the volatile part still counts.
    regexes: Vec<Regex>,
}

impl Ignore {
    /// `paths`: JSON pointers to skip (the subtree below one is skipped too),
    /// `*` standing for any one segment: `/result/items/*/updatedAt`.
    /// `regexes`: patterns of volatile text; two strings that differ only in
    /// parts matching the same pattern are equal (anchor with `^…$` to require
    /// the whole value to match). Timestamps and UUIDs are always included.
    pub fn new(paths: &[String], regexes: &[String]) -> Result<Ignore, String> {
        let mut ignore = Ignore::defaults();
        for p in paths {
            if !p.is_empty() && !p.starts_with('/') {
                return Err(format!(
                    "diff ignore path \"{p}\" is not a JSON pointer; expected \"\" or a path starting with \"/\" such as \"/result/items/*/updatedAt\""
                ));
            }
            ignore.paths.push(split_pointer(p));
        }
        for r in regexes {
            let re = RegexBuilder::new(r)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| {
                    let detail = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
                    format!("diff ignore regex \"{r}\" is invalid: {detail}; expected a regex that compiles within 1 MiB")
                })?;
            ignore.regexes.push(re);
        }
        Ok(ignore)
    }

    /// Only the default volatile patterns (timestamps, UUIDs).
    pub fn defaults() -> Ignore {
        let regexes = [TIMESTAMP, UUID]
            .iter()
            .filter_map(|p| {
                RegexBuilder::new(p)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .ok()
            })
            .collect();
        Ignore {
            paths: Vec::new(),
            regexes,
        }
    }

    /// Nothing ignored: for explaining a params mismatch, where a differing
    /// timestamp is exactly the thing to show.
    fn none() -> Ignore {
        Ignore {
            paths: Vec::new(),
            regexes: Vec::new(),
        }
    }

    /// True when `pointer` (RFC 6901, e.g. `/result/items/3/updatedAt`) is an
    /// ignored path or lies below one.
    pub fn ignores_path(&self, pointer: &str) -> bool {
        self.path_ignored(&split_pointer(pointer))
    }

    fn path_ignored(&self, segs: &[String]) -> bool {
        self.paths
            .iter()
            .any(|p| p.len() <= segs.len() && p.iter().zip(segs).all(|(p, s)| p == "*" || p == s))
    }

    /// Equal once every volatile part is replaced by its pattern's marker.
    fn volatile_equal(&self, a: &str, b: &str) -> bool {
        if self.regexes.is_empty() {
            return false;
        }
        let (mut a, mut b) = (a.to_string(), b.to_string());
        for (i, re) in self.regexes.iter().enumerate() {
            // U+FFFF is a noncharacter: it does not occur in real text.
            let marker = format!("\u{FFFF}{i}\u{FFFF}");
            a = re.replace_all(&a, marker.as_str()).into_owned();
            b = re.replace_all(&b, marker.as_str()).into_owned();
        }
        a == b
    }
}

/// Differences between a recorded outcome and a new one. A success flip comes
/// first (with the error type that appeared or went away); when both failed
/// only `errorType` is compared (messages carry times, paths and ids); when
/// both succeeded the results are compared under `/result`. At most
/// [`MAX_DIFFERENCES`] are listed, in pointer order, then one entry at `/…`
/// says how many more there were.
pub fn compare(
    recorded_success: bool,
    recorded: &Value,
    recorded_error: Option<&HubError>,
    actual_success: bool,
    actual: &Value,
    actual_error: Option<&HubError>,
    ignore: &Ignore,
) -> Vec<Difference> {
    let mut walk = Walk::new(ignore, MAX_DIFFERENCES);
    let error_type = |e: Option<&HubError>| {
        e.map_or(Value::Null, |e| {
            Value::String(e.error_type.as_str().to_string())
        })
    };
    let mut out = Vec::new();
    if recorded_success != actual_success {
        if !ignore.path_ignored(&[]) {
            out.push(Difference {
                path: String::new(),
                kind: DiffKind::SuccessFlipped,
                recorded: Value::Bool(recorded_success),
                actual: Value::Bool(actual_success),
            });
        }
        // What went wrong (or stopped going wrong) is the actionable part; a
        // failed call has no result worth comparing.
        let (kind, rec, act) = if actual_success {
            (DiffKind::Removed, error_type(recorded_error), Value::Null)
        } else {
            (DiffKind::Added, Value::Null, error_type(actual_error))
        };
        walk.push_at(&["error", "errorType"], kind, rec, act);
    } else if !recorded_success {
        let (rec, act) = (error_type(recorded_error), error_type(actual_error));
        if rec != act {
            walk.push_at(&["error", "errorType"], DiffKind::Changed, rec, act);
        }
    } else {
        walk.segs.push("result".to_string());
        walk.value(recorded, actual, 0);
    }
    out.extend(walk.finish());
    out
}

/// The candidate (`(index, params)`) whose params differ from `wanted` in the
/// fewest fields, with the differing field pointers (e.g. `/path`); the first
/// candidate wins a tie. `None` when there are no candidates.
pub fn nearest<'a>(
    wanted: &Value,
    candidates: &'a [(usize, &'a Value)],
) -> Option<(usize, Vec<String>)> {
    let none = Ignore::none();
    let mut best: Option<(usize, usize, Vec<String>)> = None;
    for (index, params) in candidates {
        let mut walk = Walk::new(&none, MAX_DIFFERENCES);
        walk.value(params, wanted, 0);
        let total = walk.total;
        if best.as_ref().is_some_and(|(_, t, _)| *t <= total) {
            continue;
        }
        let paths = walk.listed.into_iter().map(|d| d.path).collect();
        best = Some((*index, total, paths));
        if total == 0 {
            break;
        }
    }
    best.map(|(index, _, paths)| (index, paths))
}

/// A depth-first walk in pointer order (object keys sorted, array indices
/// ascending), so the listed differences are already sorted.
struct Walk<'i> {
    ignore: &'i Ignore,
    segs: Vec<String>,
    listed: Vec<Difference>,
    total: usize,
    cap: usize,
}

impl<'i> Walk<'i> {
    fn new(ignore: &'i Ignore, cap: usize) -> Self {
        Walk {
            ignore,
            segs: Vec::new(),
            listed: Vec::new(),
            total: 0,
            cap,
        }
    }

    fn push(&mut self, kind: DiffKind, recorded: &Value, actual: &Value) {
        self.total += 1;
        if self.listed.len() < self.cap {
            self.listed.push(Difference {
                path: pointer(&self.segs),
                kind,
                recorded: recorded.clone(),
                actual: actual.clone(),
            });
        }
    }

    fn push_at(&mut self, segs: &[&str], kind: DiffKind, recorded: Value, actual: Value) {
        self.segs = segs.iter().map(|s| s.to_string()).collect();
        if !self.ignore.path_ignored(&self.segs) {
            self.push(kind, &recorded, &actual);
        }
        self.segs.clear();
    }

    fn value(&mut self, a: &Value, b: &Value, depth: usize) {
        if self.ignore.path_ignored(&self.segs) {
            return;
        }
        if depth >= MAX_DEPTH {
            if a != b {
                self.push(DiffKind::Changed, a, b);
            }
            return;
        }
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    self.segs.push(k.clone());
                    match (x.get(k), y.get(k)) {
                        (Some(va), Some(vb)) => self.value(va, vb, depth + 1),
                        (Some(va), None) => self.leaf(DiffKind::Removed, va, &Value::Null),
                        (None, Some(vb)) => self.leaf(DiffKind::Added, &Value::Null, vb),
                        (None, None) => {}
                    }
                    self.segs.pop();
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                for i in 0..x.len().max(y.len()) {
                    self.segs.push(i.to_string());
                    match (x.get(i), y.get(i)) {
                        (Some(va), Some(vb)) => self.value(va, vb, depth + 1),
                        (Some(va), None) => self.leaf(DiffKind::Removed, va, &Value::Null),
                        (None, Some(vb)) => self.leaf(DiffKind::Added, &Value::Null, vb),
                        (None, None) => {}
                    }
                    self.segs.pop();
                }
            }
            (Value::String(x), Value::String(y)) => self.strings(a, b, x, y, depth),
            (Value::Number(x), Value::Number(y)) => {
                // 1 and 1.0 are the same number to every JSON consumer.
                let same =
                    x == y || matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q)) if p == q);
                if !same {
                    self.push(DiffKind::Changed, a, b);
                }
            }
            _ if a == b => {}
            _ if std::mem::discriminant(a) == std::mem::discriminant(b) => {
                self.push(DiffKind::Changed, a, b);
            }
            _ => self.push(DiffKind::TypeChanged, a, b),
        }
    }

    /// An added or removed value, unless its own path is ignored.
    fn leaf(&mut self, kind: DiffKind, recorded: &Value, actual: &Value) {
        if !self.ignore.path_ignored(&self.segs) {
            self.push(kind, recorded, actual);
        }
    }

    fn strings(&mut self, a: &Value, b: &Value, x: &str, y: &str, depth: usize) {
        if x == y {
            return;
        }
        if let (Some(px), Some(py)) = (embedded_json(x), embedded_json(y)) {
            self.value(&px, &py, depth + 1);
            return;
        }
        if !self.ignore.volatile_equal(x, y) {
            self.push(DiffKind::Changed, a, b);
        }
    }

    /// The listed differences, plus one `/…` entry counting the rest.
    fn finish(self) -> Vec<Difference> {
        let mut out = self.listed;
        let more = self.total - out.len();
        if more > 0 {
            out.push(Difference {
                path: "/…".to_string(),
                kind: DiffKind::Changed,
                recorded: Value::Null,
                actual: Value::String(format!("{more} more differences")),
            });
        }
        out
    }
}

/// A JSON object or array held in a string (MCP text content), if it is one.
fn embedded_json(s: &str) -> Option<Value> {
    let t = s.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<Value>(s)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
}

/// RFC 6901: `~` → `~0`, `/` → `~1`.
fn pointer(segs: &[String]) -> String {
    let mut out = String::new();
    for s in segs {
        out.push('/');
        out.push_str(&s.replace('~', "~0").replace('/', "~1"));
    }
    out
}

fn split_pointer(p: &str) -> Vec<String> {
    if p.is_empty() {
        return Vec::new();
    }
    p.split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

#[cfg(test)]
mod tests;
