//! The run data model: ids, metadata, log entries, their validation and the
//! schema migration. Pure: no IO, no clock except where a caller passes one.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::errors::{ErrorType, HubError};

/// The LogEntry schema this hub writes.
pub const ENTRY_SCHEMA: &str = "1.0";
/// The metadata schema this hub writes.
pub const META_SCHEMA: &str = "1.0";
/// Longest run id and screenshot slug.
pub const MAX_ID: usize = 50;
/// Longest theme.
pub const MAX_THEME: usize = 500;
/// Longest step description.
pub const MAX_STEP: usize = 200;
/// Most lines a string in `data` may have (no code in the log).
pub const MAX_DATA_LINES: usize = 100;

/// `^[a-z0-9-]{1,50}$`, checked by hand before any path is built: no `.`,
/// `/`, NUL or non-ASCII byte gets through.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A slug of `text` that passes [`valid_id`], or `None` when nothing of it is
/// ASCII alphanumeric.
pub fn slugify(text: &str, max: usize) -> Option<String> {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut out: String = out.chars().take(max).collect();
    while out.ends_with('-') {
        out.pop();
    }
    (!out.is_empty()).then_some(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Active,
    Archived,
}

/// `.metadata.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub run_id: String,
    pub theme_description: String,
    pub created_at: String,
    pub last_accessed: String,
    pub status: RunStatus,
    #[serde(default = "meta_schema")]
    pub schema_version: String,
    /// The client of `clients` that created the run (absent: the main
    /// token, and every run made before runs had owners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

fn meta_schema() -> String {
    META_SCHEMA.into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryStatus {
    Success,
    Error,
    Warning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionType {
    Navigation,
    Extraction,
    Interaction,
    Screenshot,
    RecipeExecution,
    DataProcessing,
    Analysis,
    UserInteraction,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionMethod {
    Command,
    Recipe,
    File,
    Manual,
    Analysis,
    Tool,
}

/// One line of `logs/execution.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub timestamp: String,
    pub step: String,
    pub status: EntryStatus,
    pub action_type: ActionType,
    pub execution_method: ExecutionMethod,
    pub data: Map<String, Value>,
    pub schema_version: String,
}

fn invalid(message: String, suggestion: &str) -> HubError {
    HubError::new(ErrorType::InvalidParams, message).with_suggestion(suggestion)
}

/// A run id as the client gave it, checked.
pub fn check_id(id: &str) -> Result<&str, HubError> {
    if valid_id(id) {
        Ok(id)
    } else {
        let hint = match slugify(id, MAX_ID) {
            Some(s) => format!("use lowercase letters, digits and '-', e.g. {s:?}"),
            None => "use lowercase letters, digits and '-' (1-50 characters)".into(),
        };
        Err(invalid(
            format!(
                "{:?} is not a run id: run ids are 1-50 lowercase letters, digits and '-' \
                 (a slug of the run's theme), see list_runs",
                crate::util::truncate(id, 80)
            ),
            &hint,
        ))
    }
}

pub fn check_theme(theme: &str) -> Result<(), HubError> {
    let n = theme.chars().count();
    if n == 0 || n > MAX_THEME || theme.trim().is_empty() {
        return Err(invalid(
            format!("theme must be 1-{MAX_THEME} characters (got {n})"),
            "describe the topic in one sentence",
        ));
    }
    Ok(())
}

impl LogEntry {
    /// Every rule of the data model, before the entry is written.
    pub fn validate(&self) -> Result<(), HubError> {
        let n = self.step.chars().count();
        if n == 0 || n > MAX_STEP {
            return Err(invalid(
                format!("step must be 1-{MAX_STEP} characters (got {n})"),
                "describe the step in a short sentence",
            ));
        }
        if !is_iso8601(&self.timestamp) {
            return Err(invalid(
                format!("timestamp {:?} is not ISO 8601", self.timestamp),
                "use YYYY-MM-DDTHH:MM:SSZ",
            ));
        }
        if self.schema_version != ENTRY_SCHEMA {
            return Err(invalid(
                format!(
                    "schema_version {:?} is not {ENTRY_SCHEMA:?}",
                    self.schema_version
                ),
                "omit schema_version; the hub fills it",
            ));
        }
        if self.execution_method == ExecutionMethod::File
            && !self.data.get("file").is_some_and(Value::is_string)
        {
            return Err(invalid(
                "execution_method \"file\" needs data.file (the script's path, e.g. \"scripts/x.py\")"
                    .into(),
                "add data.file",
            ));
        }
        if let Some(path) = long_text(&Value::Object(self.data.clone()), "data") {
            return Err(invalid(
                format!(
                    "{path} has more than {MAX_DATA_LINES} lines; code does not belong in the log"
                ),
                "save the code under scripts/ and name it in data.file",
            ));
        }
        Ok(())
    }
}

/// The path of the first string in `v` with more than [`MAX_DATA_LINES`] lines.
fn long_text(v: &Value, path: &str) -> Option<String> {
    match v {
        Value::String(s) => (s.lines().count() > MAX_DATA_LINES).then(|| path.to_string()),
        Value::Object(m) => m
            .iter()
            .find_map(|(k, x)| long_text(x, &format!("{path}.{k}"))),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| long_text(x, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or `±HH:MM`.
pub fn is_iso8601(t: &str) -> bool {
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(digits(0..4) && at(4, b'-') && digits(5..7) && at(7, b'-') && digits(8..10))
        || !(at(10, b'T') && digits(11..13) && at(13, b':') && digits(14..16))
        || !(at(16, b':') && digits(17..19))
    {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            i + 6 == b.len() && digits(i + 1..i + 3) && at(i + 3, b':') && digits(i + 4..i + 6)
        }
        _ => false,
    }
}

/// A `MAJOR.MINOR` version as numbers.
fn version(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Why a stored line cannot be read.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadError {
    /// Not JSON, or not a LogEntry after migration.
    Corrupt(String),
    /// Written by a newer hub.
    TooNew(String),
}

/// A stored line → a current LogEntry, migrating older schemas.
///
/// Version history:
/// - `0.9` (the seed's draft): `action` instead of `action_type`, `method`
///   instead of `execution_method`, `ts` instead of `timestamp`, and a
///   `details` string instead of the `data` object.
/// - `1.0`: the current shape.
pub fn read_entry(line: &str) -> Result<LogEntry, ReadError> {
    let v: Value = serde_json::from_str(line).map_err(|e| ReadError::Corrupt(e.to_string()))?;
    let Value::Object(mut m) = v else {
        return Err(ReadError::Corrupt("not a JSON object".into()));
    };
    let ver = m
        .get("schema_version")
        .and_then(Value::as_str)
        .unwrap_or("0.9")
        .to_string();
    let Some(parsed) = version(&ver) else {
        return Err(ReadError::Corrupt(format!("schema_version {ver:?}")));
    };
    let current = version(ENTRY_SCHEMA).unwrap_or((1, 0));
    if parsed > current {
        return Err(ReadError::TooNew(ver));
    }
    if parsed < (1, 0) {
        migrate_0_9(&mut m);
    }
    serde_json::from_value(Value::Object(m)).map_err(|e| ReadError::Corrupt(e.to_string()))
}

/// 0.9 → 1.0: rename the fields and wrap `details` into `data`.
fn migrate_0_9(m: &mut Map<String, Value>) {
    for (old, new) in [
        ("ts", "timestamp"),
        ("action", "action_type"),
        ("method", "execution_method"),
    ] {
        if let Some(v) = m.remove(old) {
            m.entry(new.to_string()).or_insert(v);
        }
    }
    if !m.get("data").is_some_and(Value::is_object) {
        let mut data = Map::new();
        if let Some(d) = m.remove("details") {
            data.insert("details".into(), d);
        }
        m.insert("data".into(), Value::Object(data));
    }
    m.insert("schema_version".into(), Value::String(ENTRY_SCHEMA.into()));
}

/// Check a metadata file's version: newer than this hub knows is refused.
pub fn check_meta_version(meta: &Metadata) -> Result<(), HubError> {
    let known = version(META_SCHEMA).unwrap_or((1, 0));
    match version(&meta.schema_version) {
        Some(v) if v <= known => Ok(()),
        _ => Err(HubError::new(
            ErrorType::InvalidParams,
            format!(
                "run {:?} has metadata schema_version {:?}; this hub reads up to {META_SCHEMA}",
                meta.run_id, meta.schema_version
            ),
        )
        .with_suggestion("upgrade toolhub to open this run")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_by_hand() {
        for ok in ["a", "find-job-on-upwork", "0-9", &"a".repeat(50)] {
            assert!(valid_id(ok), "{ok}");
        }
        for bad in [
            "",
            "A",
            "a_b",
            "../x",
            "a/b",
            ".",
            "a.b",
            "é",
            &"a".repeat(51),
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn timestamps_are_iso_8601() {
        for ok in [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.123Z",
            "2026-01-01T00:00:00+08:00",
        ] {
            assert!(is_iso8601(ok), "{ok}");
        }
        for bad in [
            "2026-01-01",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00.Z",
            "x",
        ] {
            assert!(!is_iso8601(bad), "{bad}");
        }
    }

    #[test]
    fn slugs_fit_the_id_rule() {
        assert_eq!(
            slugify("Find a Python job on Upwork!", 50).as_deref(),
            Some("find-a-python-job-on-upwork")
        );
        assert_eq!(slugify("--x--", 50).as_deref(), Some("x"));
        assert_eq!(slugify("找工作", 50), None);
        let long = slugify(&"ab ".repeat(40), 50).unwrap_or_default();
        assert!(valid_id(&long) && long.len() <= 50, "{long}");
    }

    fn entry() -> LogEntry {
        LogEntry {
            timestamp: "2026-01-01T00:00:00Z".into(),
            step: "look".into(),
            status: EntryStatus::Success,
            action_type: ActionType::Analysis,
            execution_method: ExecutionMethod::Analysis,
            data: Map::new(),
            schema_version: ENTRY_SCHEMA.into(),
        }
    }

    #[test]
    fn entries_are_validated() {
        assert!(entry().validate().is_ok());
        let mut e = entry();
        e.step = String::new();
        assert!(e.validate().is_err());
        let mut e = entry();
        e.step = "x".repeat(201);
        assert!(e.validate().is_err());
        let mut e = entry();
        e.execution_method = ExecutionMethod::File;
        assert!(e.validate().is_err());
        e.data.insert("file".into(), "scripts/a.py".into());
        assert!(e.validate().is_ok());
        let mut e = entry();
        e.data
            .insert("code".into(), Value::String("x\n".repeat(101)));
        let err = e.validate().expect_err("code");
        assert_eq!(err.error_type, ErrorType::InvalidParams);
        let mut e = entry();
        e.timestamp = "yesterday".into();
        assert!(e.validate().is_err());
    }

    #[test]
    fn an_older_entry_is_migrated() {
        let old = r#"{"ts":"2025-11-21T10:30:00Z","step":"go","status":"success","action":"navigation","method":"command","details":"ok"}"#;
        let e = read_entry(old).expect("migrated");
        assert_eq!(e.action_type, ActionType::Navigation);
        assert_eq!(e.execution_method, ExecutionMethod::Command);
        assert_eq!(e.data["details"], "ok");
        assert_eq!(e.schema_version, ENTRY_SCHEMA);
    }

    #[test]
    fn a_newer_entry_is_refused_and_a_torn_one_is_corrupt() {
        let new = r#"{"timestamp":"2025-11-21T10:30:00Z","step":"go","status":"success","action_type":"navigation","execution_method":"command","data":{},"schema_version":"2.0"}"#;
        assert_eq!(read_entry(new), Err(ReadError::TooNew("2.0".into())));
        assert!(matches!(
            read_entry(r#"{"timestamp":"2025-1"#),
            Err(ReadError::Corrupt(_))
        ));
    }
}
