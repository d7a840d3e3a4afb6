//! A finished call → a LogEntry: the action type and execution method
//! inferred from the tool, redacted params, a bounded summary of the result.

use serde_json::{json, Map, Value};

use super::model::{
    ActionType, EntryStatus, ExecutionMethod, LogEntry, ENTRY_SCHEMA, MAX_DATA_LINES, MAX_STEP,
};
use crate::config::SecurityConfig;
use crate::hub::observe::Capture;

/// Most bytes of a result summary kept in the log.
pub const SUMMARY_BYTES: usize = 2048;

/// What kind of call produced the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    ToolCall,
    BatchStep,
    /// A step of a recording's replay.
    Replay,
}

impl Origin {
    pub fn of(capture: &Capture<'_>) -> Origin {
        // A live replay runs as a task whose batch id is its replay id.
        let replay = capture
            .source
            .batch_id
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(|b| b.starts_with("replay-"));
        match (capture.source.kind.as_str(), replay) {
            (_, true) => Origin::Replay,
            // A tools/call over /mcp is a tool call too.
            ("tool_call" | "mcp_call", _) => Origin::ToolCall,
            _ => Origin::BatchStep,
        }
    }
}

/// The tool's own name, without its server prefix.
pub fn bare(tool: &str) -> &str {
    tool.rsplit_once("__").map_or(tool, |(_, t)| t)
}

/// The action type and method of a call of `tool` with `params`.
pub fn infer(tool: &str, params: &Value, origin: Origin) -> (ActionType, ExecutionMethod) {
    if origin == Origin::Replay {
        return (ActionType::RecipeExecution, ExecutionMethod::Recipe);
    }
    let name = bare(tool).to_ascii_lowercase();
    if name == "run_command" {
        let method = if script_of(params).is_some() {
            ExecutionMethod::File
        } else {
            ExecutionMethod::Command
        };
        return (ActionType::DataProcessing, method);
    }
    let words: Vec<&str> = name.split(['_', '-', '.']).collect();
    let has = |set: &[&str]| words.iter().any(|w| set.contains(w));
    let action = if has(&["screenshot"]) {
        ActionType::Screenshot
    } else if has(&["navigate", "goto", "open"]) {
        ActionType::Navigation
    } else if has(&[
        "click", "type", "fill", "select", "press", "hover", "scroll", "drag",
    ]) {
        ActionType::Interaction
    } else if has(&[
        "snapshot", "read", "get", "list", "query", "extract", "evaluate", "search",
    ]) {
        ActionType::Extraction
    } else {
        ActionType::Other
    };
    (action, ExecutionMethod::Tool)
}

/// The `scripts/…` file a `run_command` runs, if its command names one
/// (also as `$TOOLHUB_RUN_SCRIPTS/…`, the current run's scripts folder).
pub fn script_of(params: &Value) -> Option<String> {
    let cmd = params.get("command")?.as_str()?;
    cmd.split_whitespace()
        .map(|w| w.trim_matches(['"', '\'']))
        .find_map(|w| {
            for var in ["$TOOLHUB_RUN_SCRIPTS/", "${TOOLHUB_RUN_SCRIPTS}/"] {
                if let Some(rest) = w.strip_prefix(var) {
                    return Some(format!("scripts/{rest}"));
                }
            }
            let i = w.find("scripts/")?;
            let before = &w[..i];
            (before.is_empty() || before.ends_with('/')).then(|| w[i..].to_string())
        })
}

/// Cut every string to [`MAX_DATA_LINES`] lines and `max` bytes, so no code
/// and no page ends up whole in the log.
pub fn clip(v: &Value, max: usize) -> Value {
    match v {
        Value::String(s) => {
            let lines = s.lines().count();
            if lines <= MAX_DATA_LINES && s.len() <= max {
                return v.clone();
            }
            let mut out: String = s
                .lines()
                .take(MAX_DATA_LINES / 2)
                .collect::<Vec<_>>()
                .join("\n");
            if out.len() > max {
                let mut cut = max;
                while !out.is_char_boundary(cut) {
                    cut -= 1;
                }
                out.truncate(cut);
            }
            out.push_str(&format!("…(cut: {} bytes, {lines} lines)", s.len()));
            Value::String(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| clip(x, max)).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, x)| (k.clone(), clip(x, max))).collect())
        }
        other => other.clone(),
    }
}

/// At most [`SUMMARY_BYTES`] of the result: the value itself when small,
/// else its start as text.
pub fn summary(result: &Value) -> Value {
    let text = result.to_string();
    if text.len() <= SUMMARY_BYTES {
        return clip(result, SUMMARY_BYTES);
    }
    let mut cut = SUMMARY_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    clip(
        &Value::String(format!("{}…(cut: {} bytes)", &text[..cut], text.len())),
        SUMMARY_BYTES + 64,
    )
}

/// The LogEntry for a finished call.
pub fn entry(capture: &Capture<'_>, security: &SecurityConfig) -> LogEntry {
    let out = capture.outcome;
    let origin = Origin::of(capture);
    let tool = out.qualified_name.as_deref().unwrap_or(&out.tool);
    let (action_type, execution_method) = infer(tool, capture.params, origin);
    let status = match (out.success, out.attempts > 1) {
        (false, _) => EntryStatus::Error,
        (true, true) => EntryStatus::Warning,
        (true, false) => EntryStatus::Success,
    };
    let mut data = Map::new();
    data.insert("tool".into(), json!(out.tool));
    if let Some(q) = &out.qualified_name {
        data.insert("qualifiedName".into(), json!(q));
    }
    let params = crate::history::redact(capture.params, security);
    data.insert("params".into(), clip(&params, SUMMARY_BYTES));
    if out.success {
        let result = crate::history::redact(&out.result, security);
        data.insert("result".into(), summary(&result));
    }
    data.insert("durationMs".into(), json!(out.duration_ms));
    if out.attempts > 1 {
        data.insert("attempts".into(), json!(out.attempts));
    }
    if let Some(e) = &out.error {
        data.insert("errorType".into(), json!(e.error_type));
        data.insert("error".into(), clip(&json!(e.message), SUMMARY_BYTES));
    }
    let mut source = Map::new();
    source.insert("type".into(), json!(capture.source.kind));
    if let Some(t) = &capture.source.task_id {
        source.insert("taskId".into(), json!(t));
    }
    if let Some(s) = &capture.source.step_id {
        source.insert("stepId".into(), json!(s));
    }
    if let Some(c) = &out.context {
        source.insert("context".into(), json!(c));
    }
    data.insert("source".into(), Value::Object(source));
    if execution_method == ExecutionMethod::File {
        if let Some(f) = script_of(capture.params) {
            data.insert("file".into(), json!(f));
        }
    }
    let step = match (origin, &capture.source.step_id) {
        (Origin::ToolCall, _) => format!("tool_call {}", out.tool),
        (Origin::Replay, Some(s)) => format!("replay step {s}: {}", out.tool),
        (Origin::Replay, None) => format!("replay step: {}", out.tool),
        (Origin::BatchStep, Some(s)) => format!("batch step {s}: {}", out.tool),
        (Origin::BatchStep, None) => format!("batch step: {}", out.tool),
    };
    LogEntry {
        timestamp: crate::util::rfc3339(capture.started_at),
        step: step.chars().take(MAX_STEP).collect(),
        status,
        action_type,
        execution_method,
        data,
        schema_version: ENTRY_SCHEMA.into(),
    }
}

/// The image items of an MCP result (`raw.content[*]` of type `image`).
pub fn images(raw: Option<&Value>) -> Vec<&str> {
    raw.and_then(|r| r.get("content"))
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("image"))
                .filter_map(|i| i.get("data").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_types_follow_the_tool_name() {
        let t = |name: &str| infer(name, &json!({}), Origin::ToolCall);
        use ActionType::*;
        use ExecutionMethod::Tool;
        assert_eq!(t("playwright__browser_navigate"), (Navigation, Tool));
        assert_eq!(t("browser_click"), (Interaction, Tool));
        assert_eq!(t("browser_type"), (Interaction, Tool));
        assert_eq!(t("browser_select_option"), (Interaction, Tool));
        assert_eq!(t("browser_snapshot"), (Extraction, Tool));
        assert_eq!(t("hub__read_file"), (Extraction, Tool));
        assert_eq!(t("browser_evaluate"), (Extraction, Tool));
        assert_eq!(t("browser_take_screenshot"), (Screenshot, Tool));
        assert_eq!(t("t__echo"), (Other, Tool));
        assert_eq!(
            infer("t__echo", &json!({}), Origin::Replay),
            (RecipeExecution, ExecutionMethod::Recipe)
        );
        assert_eq!(
            infer(
                "hub__run_command",
                &json!({"command": "ls"}),
                Origin::ToolCall
            ),
            (DataProcessing, ExecutionMethod::Command)
        );
        assert_eq!(
            infer(
                "run_command",
                &json!({"command": "python3 runs/x/scripts/f.py"}),
                Origin::BatchStep
            ),
            (DataProcessing, ExecutionMethod::File)
        );
    }

    #[test]
    fn scripts_are_found_in_commands() {
        let s = |c: &str| script_of(&json!({ "command": c }));
        assert_eq!(s("python3 scripts/a.py").as_deref(), Some("scripts/a.py"));
        assert_eq!(s("sh './scripts/b.sh'").as_deref(), Some("scripts/b.sh"));
        assert_eq!(s("echo myscripts/x"), None);
        assert_eq!(s("ls"), None);
        assert_eq!(
            s("python3 \"$TOOLHUB_RUN_SCRIPTS/c.py\"").as_deref(),
            Some("scripts/c.py")
        );
        assert_eq!(
            s("sh ${TOOLHUB_RUN_SCRIPTS}/d.sh").as_deref(),
            Some("scripts/d.sh")
        );
    }

    #[test]
    fn long_text_is_clipped_to_lines_and_bytes() {
        let code = "x = 1\n".repeat(300);
        let c = clip(&json!({ "content": code }), 2048);
        let s = c["content"].as_str().unwrap_or_default();
        assert!(s.lines().count() <= MAX_DATA_LINES, "{s}");
        let big = json!({ "page": "y".repeat(10_000) });
        let s = summary(&big);
        assert!(s.to_string().len() <= SUMMARY_BYTES + 200, "{s}");
    }
}
