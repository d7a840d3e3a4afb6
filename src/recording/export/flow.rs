//! A picture of a recording: the steps top to bottom, one box per step with
//! its tool and outcome, failed steps marked, and where the sequence
//! branches. A step with a `when` is entered through a decision (`yes` runs
//! it, `no` skips to what follows); a cleanup step (`when` asks for
//! `failure` or `always`, also inside `all`/`any`) is drawn dashed, and a
//! dashed "on failure" edge leads to it from every earlier step that is no
//! cleanup step itself, since under `stopOnError` a failure anywhere there
//! jumps to it (the steps between are not run). The Markdown report draws it
//! as a Mermaid flowchart (GitHub renders those); the HTML report and the
//! `flowchart` export as inline SVG laid out here (no script, nothing loaded).

use std::fmt::Write;

use serde_json::Value;

use super::{clip, escape};
use crate::engine::condition::{self, Condition};
use crate::engine::template::Templates;
use crate::store::recordings::format::{Recording, Step};

/// Steps drawn; a longer recording ends in a "… N more steps" box (GitHub
/// refuses Mermaid charts with more than 500 edges, and nobody reads more).
pub const MAX_NODES: usize = 100;
/// Longest tool, condition or outcome text in one box.
const LABEL_CHARS: usize = 60;

/// What one step shows.
struct Node {
    seq: usize,
    tool: String,
    /// `when: …` when the step had a condition.
    condition: Option<String>,
    /// Entered through a decision (a condition that can be false).
    decision: bool,
    /// Runs after `stopOnError` stopped the batch.
    cleanup: bool,
    /// "ok", "ok (3 attempts)", "failed: NOT_FOUND".
    outcome: String,
    failed: bool,
}

fn node(step: &Step, templates: &Templates) -> Node {
    let when = step.when.as_ref().filter(|w| !w.is_null());
    let condition = when.map(|w| {
        let text = match w {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        clip(&format!("when: {text}"), LABEL_CHARS)
    });
    // The engine's own reading of the condition; one it cannot parse is
    // drawn as a plain decision.
    let parsed = when.map(|w| condition::parse(w, templates));
    let cleanup = matches!(&parsed, Some(Ok(c)) if c.runs_after_stop());
    let decision = when.is_some() && !matches!(parsed, Some(Ok(Condition::Always)));
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
        decision,
        cleanup,
        outcome,
        failed: !step.success,
    }
}

/// The steps to draw and how many were left out.
fn nodes(rec: &Recording) -> (Vec<Node>, usize) {
    let templates = Templates::new();
    let shown: Vec<Node> = rec
        .steps
        .iter()
        .take(MAX_NODES)
        .map(|s| node(s, &templates))
        .collect();
    let rest = rec.steps.len().saturating_sub(shown.len());
    (shown, rest)
}

/// For each drawn step, the index of the cleanup step a failure there leads
/// to: the first cleanup step after it, when that is not simply the next
/// step (the plain arrow already goes there). Cleanup steps lead nowhere.
fn failure_targets(nodes: &[Node]) -> Vec<Option<usize>> {
    let mut out = vec![None; nodes.len()];
    let mut next_cleanup = None;
    for k in (0..nodes.len()).rev() {
        if !nodes[k].cleanup {
            out[k] = next_cleanup.filter(|&j| j > k + 1);
        }
        if nodes[k].cleanup {
            next_cleanup = Some(k);
        }
    }
    out
}

/// A fenced ```mermaid flowchart (with a blank line after), or "" when the
/// recording has no steps.
pub fn mermaid(rec: &Recording) -> String {
    let chart = chart(rec);
    if chart.is_empty() {
        return chart;
    }
    format!("```mermaid\n{chart}```\n\n")
}

/// The Mermaid source (`flowchart TD` …), or "" when the recording has no
/// steps.
pub fn chart(rec: &Recording) -> String {
    let (nodes, rest) = nodes(rec);
    if nodes.is_empty() {
        return String::new();
    }
    // Where an edge into step `k` lands: its decision, else its box.
    let entry = |k: usize| match nodes.get(k) {
        Some(n) if n.decision => format!("c{}", n.seq),
        Some(n) => format!("s{}", n.seq),
        None if rest > 0 => "more".to_string(),
        None => "done".to_string(),
    };
    let mut out = String::from("flowchart TD\n");
    let mut ends = false;
    for (k, n) in nodes.iter().enumerate() {
        let id = format!("s{}", n.seq);
        let mut label = mermaid_text(&n.tool);
        if let Some(c) = n.condition.as_ref().filter(|_| !n.decision) {
            let _ = write!(label, "<br/>{}", mermaid_text(c));
        }
        let mark = if n.failed { "✗ " } else { "" };
        let _ = write!(label, "<br/>{mark}{}", mermaid_text(&n.outcome));
        let class = match (n.failed, n.cleanup) {
            (true, _) => ":::failed",
            (false, true) => ":::cleanup",
            _ => "",
        };
        if n.decision {
            let c = n.condition.as_deref().unwrap_or("when");
            let _ = writeln!(out, "    c{}{{\"{}\"}}", n.seq, mermaid_text(c));
            let _ = writeln!(out, "    c{} -->|yes| {id}[\"{label}\"]{class}", n.seq);
            let next = entry(k + 1);
            ends |= next == "done";
            let _ = writeln!(out, "    c{} -->|no: skipped| {next}", n.seq);
        } else {
            let _ = writeln!(out, "    {id}[\"{label}\"]{class}");
        }
        // The last step leads on only to "… more", or to the end a skip reaches.
        if k + 1 < nodes.len() || rest > 0 || n.decision {
            let _ = writeln!(out, "    {id} --> {}", entry(k + 1));
        }
    }
    for (k, target) in failure_targets(&nodes).into_iter().enumerate() {
        if let Some(j) = target {
            let _ = writeln!(
                out,
                "    s{} -.->|on failure, stopOnError| {}",
                nodes[k].seq,
                entry(j)
            );
        }
    }
    if rest > 0 {
        let _ = writeln!(out, "    more[\"… {rest} more steps\"]");
    }
    if ends {
        out.push_str("    done([end])\n");
    }
    out.push_str("    classDef failed fill:#fee4e2,stroke:#d92d20,color:#912018\n");
    out.push_str("    classDef cleanup stroke-dasharray:5 3\n");
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

/// Layout of the SVG chart, in pixels.
const WIDTH: usize = 600;
const BOX_X: usize = 70;
const BOX_W: usize = 440;
const LINE_H: usize = 18;
/// The gap between two steps (the arrow).
const GAP: usize = 36;
/// A decision's height, and the arrow from it to its step.
const DIAMOND_H: usize = 48;
const YES_GAP: usize = 28;
/// Where a skipped step's `no` path runs down, and the failure rail.
const BYPASS_X: usize = 36;
const RAIL_X: usize = 570;
const GREY: &str = "#667085";

/// Where one step's shapes sit, top to bottom.
struct Place {
    /// The top of what an arrow into the step enters (decision or box).
    entry_top: usize,
    /// The middle of that shape (where a failure edge enters from the side).
    entry_mid: usize,
    /// The decision's middle, when there is one.
    decision_mid: Option<usize>,
    box_top: usize,
    box_h: usize,
}

fn box_h(n: &Node) -> usize {
    let cond_line = n.condition.is_some() && !n.decision;
    (2 + usize::from(cond_line)) * LINE_H + 12
}

fn places(nodes: &[Node]) -> (Vec<Place>, usize) {
    let mut out = Vec::with_capacity(nodes.len());
    let mut y = 10;
    for (k, n) in nodes.iter().enumerate() {
        if k > 0 {
            y += GAP;
        }
        let entry_top = y;
        let decision_mid = n.decision.then(|| {
            let mid = y + DIAMOND_H / 2;
            y += DIAMOND_H + YES_GAP;
            mid
        });
        let h = box_h(n);
        out.push(Place {
            entry_top,
            entry_mid: decision_mid.unwrap_or(y + h / 2),
            decision_mid,
            box_top: y,
            box_h: h,
        });
        y += h;
    }
    (out, y)
}

/// The same chart as the Mermaid one, as an inline `<svg>`: decisions as
/// diamonds with `yes` down to their step and `no` round it on the left,
/// boxes (tool, outcome; a cleanup step dashed), arrows between them,
/// failure edges on a rail at the right, failed boxes red. "" when the
/// recording has no steps.
pub fn svg(rec: &Recording) -> String {
    let (nodes, rest) = nodes(rec);
    if nodes.is_empty() {
        return String::new();
    }
    let (places, mut y) = places(&nodes);
    let cx = WIDTH / 2;
    let right = BOX_X + BOX_W;
    let mut body = String::new();
    // What follows the last step: "… N more", or an end when a skip goes there.
    let last_skips = nodes.last().is_some_and(|n| n.decision);
    let tail_top = (rest > 0 || last_skips).then(|| {
        y += GAP;
        y
    });
    // Where a path into step `k` (or the tail) joins its incoming arrow.
    let join = |k: usize| places.get(k).map_or(tail_top.unwrap_or(y), |p| p.entry_top) - GAP / 2;
    for (k, (n, p)) in nodes.iter().zip(&places).enumerate() {
        if k > 0 {
            let prev = &places[k - 1];
            arrow(&mut body, prev.box_top + prev.box_h, p.entry_top);
        }
        if let Some(mid) = p.decision_mid {
            let (top, bottom) = (p.entry_top, p.entry_top + DIAMOND_H);
            let _ = writeln!(
                body,
                "<g class=\"decision\"><polygon points=\"{BOX_X},{mid} {cx},{top} {right},{mid} {cx},{bottom}\" fill=\"#fffbea\" stroke=\"#b08800\"/>"
            );
            let _ = writeln!(
                body,
                "<text class=\"cond\" x=\"{cx}\" y=\"{}\" text-anchor=\"middle\" font-style=\"italic\">{}</text></g>",
                mid + 4,
                escape(n.condition.as_deref().unwrap_or("when"))
            );
            arrow(&mut body, bottom, p.box_top);
            let _ = writeln!(
                body,
                "<text x=\"{}\" y=\"{}\" fill=\"{GREY}\">yes</text>",
                cx + 8,
                bottom + YES_GAP / 2 + 4
            );
            let j = join(k + 1);
            let _ = writeln!(
                body,
                "<path class=\"skip\" d=\"M{BOX_X},{mid} H{BYPASS_X} V{j} H{cx}\" fill=\"none\" stroke=\"{GREY}\"/><text x=\"{}\" y=\"{}\" fill=\"{GREY}\" text-anchor=\"end\">no</text>",
                BOX_X - 4,
                mid - 5
            );
        }
        let (fill, stroke) = if n.failed {
            ("#fee4e2", "#d92d20")
        } else {
            ("#f3f5f9", "#7a9cc6")
        };
        let dash = if n.cleanup {
            " stroke-dasharray=\"5 3\""
        } else {
            ""
        };
        let class = match (n.failed, n.cleanup) {
            (true, true) => " failed cleanup",
            (true, false) => " failed",
            (false, true) => " cleanup",
            (false, false) => "",
        };
        let _ = writeln!(
            body,
            "<g class=\"step{class}\"><rect x=\"{BOX_X}\" y=\"{}\" width=\"{BOX_W}\" height=\"{}\" rx=\"6\" fill=\"{fill}\" stroke=\"{stroke}\"{dash}/>",
            p.box_top, p.box_h
        );
        let mut ty = p.box_top + LINE_H;
        let _ = writeln!(
            body,
            "<text x=\"{cx}\" y=\"{ty}\" text-anchor=\"middle\" font-weight=\"600\">{}</text>",
            escape(&n.tool)
        );
        if let Some(c) = n.condition.as_ref().filter(|_| !n.decision) {
            ty += LINE_H;
            let _ = writeln!(
                body,
                "<text class=\"cond\" x=\"{cx}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"{GREY}\" font-style=\"italic\">{}</text>",
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
    }
    // Failure edges: out of each source's right side, down the rail, into
    // the cleanup step's right side (one head per target).
    let mut headed = Vec::new();
    for (k, target) in failure_targets(&nodes).into_iter().enumerate() {
        let Some(j) = target else { continue };
        let from = places[k].box_top + places[k].box_h / 2;
        let to = places[j].entry_mid;
        let _ = writeln!(
            body,
            "<path class=\"on-failure\" d=\"M{right},{from} H{RAIL_X} V{to} H{}\" fill=\"none\" stroke=\"#d92d20\" stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"{}\" fill=\"#d92d20\" font-size=\"11\">failure</text>",
            right + 1,
            right + 6,
            from - 4
        );
        if !headed.contains(&j) {
            headed.push(j);
            let _ = writeln!(
                body,
                "<path d=\"M{right},{to} L{},{} L{},{} z\" fill=\"#d92d20\"/>",
                right + 7,
                to - 5,
                right + 7,
                to + 5
            );
        }
    }
    if let Some(top) = tail_top {
        if let Some(p) = places.last() {
            arrow(&mut body, p.box_top + p.box_h, top);
        }
        if rest > 0 {
            let _ = writeln!(
                body,
                "<text x=\"{cx}\" y=\"{}\" text-anchor=\"middle\" fill=\"{GREY}\">… {rest} more steps</text>",
                top + LINE_H / 2
            );
            y = top + LINE_H;
        } else {
            let _ = writeln!(
                body,
                "<g class=\"end\"><ellipse cx=\"{cx}\" cy=\"{}\" rx=\"28\" ry=\"12\" fill=\"#f3f5f9\" stroke=\"{GREY}\"/><text x=\"{cx}\" y=\"{}\" text-anchor=\"middle\" fill=\"{GREY}\">end</text></g>",
                top + 12,
                top + 16
            );
            y = top + 24;
        }
    }
    let height = y + 10;
    format!(
        "<svg class=\"flow\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"flowchart of the recorded steps\" font-family=\"system-ui,sans-serif\" font-size=\"13\">\n{body}</svg>\n"
    )
}

/// The arrow from `y` down to `end`.
fn arrow(out: &mut String, y: usize, end: usize) {
    let cx = WIDTH / 2;
    let end = end.saturating_sub(1);
    // The head drawn as a path: a `marker` would need a `url(#…)` reference.
    let _ = writeln!(
        out,
        "<line x1=\"{cx}\" y1=\"{y}\" x2=\"{cx}\" y2=\"{}\" stroke=\"{GREY}\"/><path d=\"M{},{} L{cx},{end} L{},{} z\" fill=\"{GREY}\"/>",
        end - 6,
        cx - 5,
        end - 7,
        cx + 5,
        end - 7
    );
}
