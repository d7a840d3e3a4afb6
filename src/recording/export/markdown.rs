//! The Markdown report: title, description, a Mermaid flowchart of the
//! steps, a metadata table, one table row per step, and the last replay's differences. Recorded text is escaped so a
//! tool's output cannot break the tables or inject HTML into a renderer.

use std::fmt::Write;

use serde_json::Value;

use super::{clip, diff_fields, short_json, success_summary, used_servers, variable_rows, Replay};
use crate::store::recordings::format::{Recording, Step};

/// Longest params text shown in the step table.
const PARAMS_CHARS: usize = 80;
/// Longest error message shown in the step table.
const ERROR_CHARS: usize = 200;

/// The recording as Markdown; `last_replay` is a `replay_complete` message
/// (`{"success","totalSteps","successCount","failureCount","differences":[{"stepIndex","differences":[…]}]}`).
pub fn markdown(rec: &Recording, last_replay: Option<&Value>) -> String {
    let h = &rec.header;
    let mut out = format!("# {}\n\n", text(&h.name));
    if let Some(d) = h.description.as_deref().filter(|d| !d.trim().is_empty()) {
        for line in d.lines() {
            out.push_str(&block_line(line));
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str(&super::flow::mermaid(rec));
    out.push_str("| Field | Value |\n|---|---|\n");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(out, "| {k} | {v} |");
    };
    row("Recording", code(&h.recording_id));
    row("Created", text(&h.created_at));
    row("Hub version", text(&h.hub_version));
    if let Some(c) = &h.context {
        row("Context", code(c));
    }
    // What the recording used, not what was configured at the time.
    let servers = used_servers(rec);
    if !servers.is_empty() {
        row("Servers", text(&servers.join(", ")));
    }
    let (defaults, required) = variable_rows(rec);
    if let Some(d) = defaults {
        row("Variable defaults", code(&d));
    }
    if let Some(r) = required {
        row("Variables to give", text(&r));
    }
    let (ok, rate) = success_summary(rec);
    row("Steps", rec.steps.len().to_string());
    row(
        "Succeeded",
        format!("{ok} of {} ({rate:.1}%)", rec.steps.len()),
    );
    match &rec.end {
        Some(end) => {
            row("Total duration", format!("{} ms", end.total_duration_ms));
            row(
                "Stopped",
                text(&format!("{} ({})", end.stopped_at, end.reason)),
            );
        }
        None => row(
            "Status",
            "incomplete (no end record: the hub stopped while recording, or it is still recording)"
                .to_string(),
        ),
    }
    out.push_str("\n## Steps\n\n");
    if rec.steps.is_empty() {
        out.push_str("No steps were recorded.\n");
    } else {
        out.push_str("| # | Tool | Params | Success | Duration | Error |\n");
        out.push_str("|---:|---|---|---|---:|---|\n");
        for step in &rec.steps {
            out.push_str(&step_row(step));
        }
    }
    if let Some(replay) = last_replay {
        out.push_str(&replay_section(&Replay::read(replay)));
    }
    out
}

fn step_row(step: &Step) -> String {
    let success = match (step.success, step.attempts) {
        (true, n) if n > 1 => format!("yes ({n} attempts)"),
        (true, _) => "yes".to_string(),
        (false, n) if n > 1 => format!("**no** ({n} attempts)"),
        (false, _) => "**no**".to_string(),
    };
    let error = step.error.as_ref().map_or(String::new(), |e| {
        format!(
            "{} {}",
            code(e.error_type.as_str()),
            text(&clip(&e.message, ERROR_CHARS))
        )
    });
    format!(
        "| {} | {} | {} | {} | {} ms | {} |\n",
        step.seq,
        code(&step.tool),
        code(&short_json(&step.params, PARAMS_CHARS)),
        success,
        step.duration_ms,
        error
    )
}

fn replay_section(replay: &Replay) -> String {
    let mut out = format!("\n## Last replay\n\n{}.\n\n", text(&replay.headline()));
    for (index, problem) in &replay.problems {
        let _ = writeln!(
            out,
            "- step {}: {}",
            text(&index.to_string()),
            text(problem)
        );
    }
    if !replay.problems.is_empty() {
        out.push('\n');
    }
    if replay.steps.is_empty() {
        if replay.problems.is_empty() {
            out.push_str("No differences.\n");
        }
        return out;
    }
    out.push_str("| Step | Path | Kind | Recorded | Actual |\n|---:|---|---|---|---|\n");
    for (index, diffs) in &replay.steps {
        for d in diffs {
            let (path, kind, recorded, actual) = diff_fields(d);
            let path = if path.is_empty() {
                "(outcome)".to_string()
            } else {
                code(&path)
            };
            let _ = writeln!(
                out,
                "| {} | {path} | {} | {} | {} |",
                text(&index.to_string()),
                text(&kind),
                code(&recorded),
                code(&actual)
            );
        }
    }
    out
}

/// Plain text for a table cell or heading: one line, Markdown punctuation
/// backslash-escaped, `<`/`>`/`&` as entities (renderers pass raw HTML).
pub(super) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' | '\t' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// A description line: [`text`], plus an escaped first character so a line
/// cannot turn into a list, quote or heading.
fn block_line(line: &str) -> String {
    let escaped = text(line.trim());
    if escaped.starts_with(['-', '+', '=']) {
        return format!("\\{escaped}");
    }
    // "1. x" and "1) x" start ordered lists.
    let digits = escaped.len()
        - escaped
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .len();
    match escaped[digits..].chars().next() {
        Some('.' | ')') if digits > 0 => format!("{}\\{}", &escaped[..digits], &escaped[digits..]),
        _ => escaped,
    }
}

/// A code span that holds any text: a fence longer than the longest backtick
/// run inside, `|` escaped (GFM splits cells before parsing spans).
pub(super) fn code(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    if one_line.is_empty() {
        return String::new();
    }
    let mut longest = 0;
    let mut run = 0;
    for c in one_line.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if one_line.starts_with('`') || one_line.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{}{pad}{fence}", one_line.replace('|', "\\|"))
}
