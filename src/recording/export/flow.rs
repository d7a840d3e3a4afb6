//! A picture of a recording: the steps as a vertical chain, one box per step
//! with its tool, its `when` and its outcome, failed steps marked. The
//! Markdown report draws it as a Mermaid flowchart (GitHub renders those);
//! the HTML report as inline SVG laid out here (no script, nothing loaded).

use std::fmt::Write;

use serde_json::Value;

use super::{clip, escape};
use crate::store::recordings::format::{Recording, Step};

/// Steps drawn; a longer recording ends in a "… N more steps" box (GitHub
/// refuses Mermaid charts with more than 500 edges, and nobody reads more).
pub const MAX_NODES: usize = 100;
/// Longest tool, condition or outcome text in one box.
const LABEL_CHARS: usize = 60;

/// What one box shows.
struct Node {
    seq: usize,
    tool: String,
    /// `when: …` when the step had a condition.
    condition: Option<String>,
    /// "ok", "ok (3 attempts)", "failed: NOT_FOUND".
    outcome: String,
    failed: bool,
}

fn node(step: &Step) -> Node {
    let condition = step.when.as_ref().filter(|w| !w.is_null()).map(|w| {
        let text = match w {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        clip(&format!("when: {text}"), LABEL_CHARS)
    });
    let attempts = if step.attempts > 1 {
        format!(" ({} attempts)", step.attempts)
    } else {
        String::new()
    };
    let outcome = if step.success {
        format!("ok{attempts}")
    } else {
        let class = step.error.as_ref().map_or("failed".to_string(), |e| {
            format!("failed: {}", e.error_type.as_str())
        });
        format!("{class}{attempts}")
    };
    Node {
        seq: step.seq,
        tool: clip(&format!("#{} {}", step.seq, step.tool), LABEL_CHARS),
        condition,
        outcome,
        failed: !step.success,
    }
}

/// The boxes to draw and how many steps were left out.
fn nodes(rec: &Recording) -> (Vec<Node>, usize) {
    let shown: Vec<Node> = rec.steps.iter().take(MAX_NODES).map(node).collect();
    let rest = rec.steps.len().saturating_sub(shown.len());
    (shown, rest)
}

/// A fenced ```mermaid flowchart (with a blank line after), or "" when the
/// recording has no steps.
pub fn mermaid(rec: &Recording) -> String {
    let (nodes, rest) = nodes(rec);
    if nodes.is_empty() {
        return String::new();
    }
    let mut out = String::from("```mermaid\nflowchart TD\n");
    let mut prev: Option<String> = None;
    for n in &nodes {
        let id = format!("s{}", n.seq);
        let mut label = mermaid_text(&n.tool);
        if let Some(c) = &n.condition {
            let _ = write!(label, "<br/>{}", mermaid_text(c));
        }
        let mark = if n.failed { "✗ " } else { "" };
        let _ = write!(label, "<br/>{mark}{}", mermaid_text(&n.outcome));
        let class = if n.failed { ":::failed" } else { "" };
        let _ = writeln!(out, "    {id}[\"{label}\"]{class}");
        if let Some(p) = prev {
            let _ = writeln!(out, "    {p} --> {id}");
        }
        prev = Some(id);
    }
    if rest > 0 {
        let _ = writeln!(out, "    more[\"… {rest} more steps\"]");
        if let Some(p) = prev {
            let _ = writeln!(out, "    {p} --> more");
        }
    }
    out.push_str("    classDef failed fill:#fee4e2,stroke:#d92d20,color:#912018\n");
    out.push_str("```\n\n");
    out
}

/// Text for a quoted Mermaid label: every character Mermaid or Markdown could
/// read as syntax becomes a Mermaid entity (`#quot;`, `#91;`…), so a tool
/// name or condition cannot close the label, the node or the code fence.
pub(super) fn mermaid_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '&' => out.push_str("#amp;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\n' | '\r' | '\t' => out.push(' '),
            '[' | ']' | '{' | '}' | '(' | ')' | '|' | ';' | '`' | '\\' | '%' => {
                let _ = write!(out, "#{};", c as u32);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Layout of the SVG chain, in pixels.
const WIDTH: usize = 520;
const BOX_X: usize = 40;
const BOX_W: usize = WIDTH - 2 * BOX_X;
const LINE_H: usize = 18;
/// The gap between two boxes (the arrow).
const GAP: usize = 36;

/// The same chain as the Mermaid chart, as an inline `<svg>`: boxes top to
/// bottom (tool, condition label, outcome), an arrow between each two,
/// failed boxes red. "" when the recording has no steps.
pub fn svg(rec: &Recording) -> String {
    let (nodes, rest) = nodes(rec);
    if nodes.is_empty() {
        return String::new();
    }
    let box_h = |n: &Node| {
        let lines = 2 + usize::from(n.condition.is_some());
        lines * LINE_H + 12
    };
    let mut body = String::new();
    let mut y = 10;
    for (k, n) in nodes.iter().enumerate() {
        if k > 0 {
            arrow(&mut body, y);
            y += GAP;
        }
        let h = box_h(n);
        let (fill, stroke) = if n.failed {
            ("#fee4e2", "#d92d20")
        } else {
            ("#f3f5f9", "#7a9cc6")
        };
        let _ = writeln!(
            body,
            "<g class=\"step{}\"><rect x=\"{BOX_X}\" y=\"{y}\" width=\"{BOX_W}\" height=\"{h}\" rx=\"6\" fill=\"{fill}\" stroke=\"{stroke}\"/>",
            if n.failed { " failed" } else { "" }
        );
        let cx = WIDTH / 2;
        let mut ty = y + LINE_H;
        let _ = writeln!(
            body,
            "<text x=\"{cx}\" y=\"{ty}\" text-anchor=\"middle\" font-weight=\"600\">{}</text>",
            escape(&n.tool)
        );
        if let Some(c) = &n.condition {
            ty += LINE_H;
            let _ = writeln!(
                body,
                "<text class=\"cond\" x=\"{cx}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"#667085\" font-style=\"italic\">{}</text>",
                escape(c)
            );
        }
        ty += LINE_H;
        let mark = if n.failed { "✗ " } else { "" };
        let _ = writeln!(
            body,
            "<text x=\"{cx}\" y=\"{ty}\" text-anchor=\"middle\">{mark}{}</text></g>",
            escape(&n.outcome)
        );
        y += h;
    }
    if rest > 0 {
        arrow(&mut body, y);
        y += GAP;
        let _ = writeln!(
            body,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#667085\">… {rest} more steps</text>",
            WIDTH / 2,
            y + LINE_H / 2
        );
        y += LINE_H;
    }
    let height = y + 10;
    format!(
        "<svg class=\"flow\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"flowchart of the recorded steps\" font-family=\"system-ui,sans-serif\" font-size=\"13\">\n{body}</svg>\n"
    )
}

/// The arrow from the box ending at `y` down to the next.
fn arrow(out: &mut String, y: usize) {
    let cx = WIDTH / 2;
    let end = y + GAP - 1;
    // The head drawn as a path: a `marker` would need a `url(#…)` reference.
    let _ = writeln!(
        out,
        "<line x1=\"{cx}\" y1=\"{y}\" x2=\"{cx}\" y2=\"{}\" stroke=\"#667085\"/><path d=\"M{},{} L{cx},{end} L{},{} z\" fill=\"#667085\"/>",
        end - 6,
        cx - 5,
        end - 7,
        cx + 5,
        end - 7
    );
}
