//! `export_recording`: a recording as JSON, Markdown, a self-contained HTML
//! report, its flowchart (Mermaid and SVG), or a `tool_batch` message that
//! replays it. Pure functions: the
//! caller reads the recording (and the image files, through a callback).

mod flow;
mod html;
mod markdown;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashSet};

use serde_json::{json, Map, Value};

#[cfg(test)]
use crate::engine::redacted::var_template;
use crate::engine::redacted::{template_vars, templated};
use crate::store::recordings::format::{Recording, Step};

pub use html::html;
pub use markdown::markdown;

/// The `flowchart` export: `{"mermaid": "flowchart TD…", "svg": "<svg…>"}`
/// (both "" for a recording without steps), the picture the reports draw.
pub fn flowchart(rec: &Recording) -> Value {
    json!({"mermaid": flow::chart(rec), "svg": flow::svg(rec)})
}

/// `{"header":…, "steps":[…], "end":…|null, "incomplete":bool}`, each part
/// in its on-disk (camelCase) shape.
pub fn json(rec: &Recording) -> Value {
    json_of(rec, &rec.steps)
}

/// `get_recording`: [`json`] with one page of the steps, plus the
/// recording's `summary` (step count, success rate…), `stepCount` and
/// `stepsPage` saying where the next page starts.
pub fn json_page(rec: &Recording, page: crate::protocol::StepPage) -> Value {
    let (range, info) = page.window(rec.steps.len());
    let mut v = json_of(rec, &rec.steps[range]);
    v["stepCount"] = json!(rec.steps.len());
    v["summary"] = rec.summary();
    v["stepsPage"] = info;
    v
}

fn json_of(rec: &Recording, steps: &[Step]) -> Value {
    json!({
        "header": to_value(&rec.header),
        "steps": steps.iter().map(to_value).collect::<Vec<_>>(),
        "end": rec.end.as_ref().map_or(Value::Null, to_value),
        "incomplete": rec.incomplete,
    })
}

/// A `tool_batch` message that can be sent back as it is:
/// `{"type":"tool_batch","id":"replay-<recordingId>","steps":[…],"options":{"stopOnError":true,"variables":{…}}}`
/// with the recording's [`variable_defaults`], and the names the batch reads
/// as `{{vars.<name>}}` that have no default, which the sender must supply
/// in `options.variables` (sorted, once each).
///
/// Tools are named by their qualified name when recorded (else as asked).
/// Batch steps keep their params template, `saveAs`, `when`, `expect` and id
/// (made unique when two recorded batches reused one). Steps recorded from
/// single `tool_call`s send their params as recorded, with `{{` written as
/// `\{{` so the batch engine passes the text on literally. A redacted value
/// `{"$redacted":"password"}` becomes `"{{vars.password}}"`. The names
/// returned are those secrets plus every `vars.<name>` the recorded templates
/// read that no recorded batch gave a non-secret value.
pub fn batch(rec: &Recording) -> (Value, Vec<String>) {
    let mut needed = BTreeSet::new();
    let mut ids = HashSet::new();
    let steps: Vec<Value> = rec
        .steps
        .iter()
        .map(|s| batch_step(s, &mut ids, &mut needed))
        .collect();
    let defaults = variable_defaults(rec);
    let mut options = json!({"stopOnError": true});
    if !defaults.is_empty() {
        options["variables"] = Value::Object(defaults.clone());
    }
    let message = json!({
        "type": "tool_batch",
        "id": format!("replay-{}", rec.header.recording_id),
        "steps": steps,
        "options": options,
    });
    let required = needed
        .into_iter()
        .filter(|n| !defaults.contains_key(n))
        .collect();
    (message, required)
}

/// The recording's variable defaults: the non-secret `options.variables`
/// of every recorded batch (kept on its first step); when two batches gave
/// a name different values, the first one recorded wins.
pub fn variable_defaults(rec: &Recording) -> Map<String, Value> {
    let mut out = Map::new();
    for vars in rec.steps.iter().filter_map(|s| s.variables.as_ref()) {
        for (k, v) in vars {
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    out
}

fn batch_step(step: &Step, ids: &mut HashSet<String>, needed: &mut BTreeSet<String>) -> Value {
    let mut m = Map::new();
    if let Some(id) = &step.source.step_id {
        m.insert("id".into(), Value::String(unique_id(id, step.seq, ids)));
    }
    // The qualified name, as replay uses: a server added since recording
    // cannot make a bare name ambiguous.
    let tool = step.qualified_name.as_ref().unwrap_or(&step.tool);
    m.insert("tool".into(), Value::String(tool.clone()));
    let params = match &step.params_template {
        Some(template) => templated(template, false, needed),
        None => templated(&step.params, true, needed),
    };
    m.insert("params".into(), params);
    if let Some(save_as) = &step.save_as {
        m.insert("saveAs".into(), Value::String(save_as.clone()));
    }
    if let Some(when) = step.when.as_ref().filter(|w| !w.is_null()) {
        if let Value::String(s) = when {
            template_vars(s, needed);
        }
        m.insert("when".into(), when.clone());
    }
    if let Some(expect) = step.expect.as_ref().filter(|e| !e.is_null()) {
        m.insert("expect".into(), expect.clone());
    }
    Value::Object(m)
}

/// `id`, or `id-<seq>` (then `-2`, `-3`…) when an earlier step took it: the
/// batch engine refuses duplicate step ids.
fn unique_id(id: &str, seq: usize, ids: &mut HashSet<String>) -> String {
    let mut candidate = id.to_string();
    let mut n = 1;
    while !ids.insert(candidate.clone()) {
        candidate = if n == 1 {
            format!("{id}-{seq}")
        } else {
            format!("{id}-{seq}-{n}")
        };
        n += 1;
    }
    candidate
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    // The recording types have string keys only, so this cannot fail.
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Compact JSON cut to `max_chars` characters (with `…`).
fn short_json(v: &Value, max_chars: usize) -> String {
    clip(&v.to_string(), max_chars)
}

fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The servers the recorded steps called, in order of first use (`hub` for
/// the built-in and control tools); a step whose tool never resolved names none.
fn used_servers(rec: &Recording) -> Vec<&str> {
    let mut seen = HashSet::new();
    rec.steps
        .iter()
        .filter_map(|s| s.server.as_deref())
        .filter(|s| seen.insert(*s))
        .collect()
}

/// The report rows about variables: the defaults a replay uses (compact
/// JSON) and the names it must be given (the secrets), each `None` when empty.
fn variable_rows(rec: &Recording) -> (Option<String>, Option<String>) {
    let defaults = variable_defaults(rec);
    let (_, required) = batch(rec);
    (
        (!defaults.is_empty()).then(|| short_json(&Value::Object(defaults), 300)),
        (!required.is_empty()).then(|| required.join(", ")),
    )
}

/// Succeeded steps and the success rate in percent (the end record's, else
/// counted from the steps).
fn success_summary(rec: &Recording) -> (usize, f64) {
    let ok = rec.steps.iter().filter(|s| s.success).count();
    let rate = match &rec.end {
        Some(end) => end.success_rate * 100.0,
        None if rec.steps.is_empty() => 0.0,
        None => ok as f64 * 100.0 / rec.steps.len() as f64,
    };
    (ok, rate)
}

/// The parts of a `replay_complete` message the reports show.
struct Replay {
    success: Option<bool>,
    /// `"live"`, `"dry"`, … when the message says.
    mode: Option<String>,
    total: Option<u64>,
    succeeded: Option<u64>,
    failed: Option<u64>,
    /// `(stepIndex, [Difference as JSON])`, steps without differences left out.
    steps: Vec<(Value, Vec<Value>)>,
    /// `(stepIndex, problem)` from a `dry` replay (missing tools, schema misfits).
    problems: Vec<(Value, String)>,
}

impl Replay {
    fn read(v: &Value) -> Replay {
        let entries = v
            .get("differences")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let mut steps = Vec::new();
        let mut problems = Vec::new();
        for entry in entries {
            let index = entry.get("stepIndex").cloned().unwrap_or(Value::Null);
            // The brief names the list `differences`; the replay runner
            // writes `diff`. Read either.
            let diffs = entry.get("differences").or_else(|| entry.get("diff"));
            if let Some(diffs) = diffs.and_then(Value::as_array).filter(|d| !d.is_empty()) {
                steps.push((index.clone(), diffs.clone()));
            }
            for p in entry
                .get("problems")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let text = p.as_str().map_or_else(|| p.to_string(), str::to_string);
                problems.push((index.clone(), text));
            }
        }
        Replay {
            success: v.get("success").and_then(Value::as_bool),
            mode: v.get("mode").and_then(Value::as_str).map(str::to_string),
            total: v.get("totalSteps").and_then(Value::as_u64),
            succeeded: v.get("successCount").and_then(Value::as_u64),
            failed: v.get("failureCount").and_then(Value::as_u64),
            steps,
            problems,
        }
    }

    /// "passed (live): 5 of 6 steps succeeded, 1 failed".
    fn headline(&self) -> String {
        let verdict = match self.success {
            Some(true) => "passed",
            Some(false) => "failed",
            None => "finished",
        };
        let mut out = verdict.to_string();
        if let Some(mode) = &self.mode {
            out.push_str(&format!(" ({mode})"));
        }
        if let (Some(ok), Some(total)) = (self.succeeded, self.total) {
            out.push_str(&format!(": {ok} of {total} steps succeeded"));
        }
        if let Some(failed) = self.failed.filter(|f| *f > 0) {
            out.push_str(&format!(", {failed} failed"));
        }
        out
    }
}

/// A difference's fields as display text.
fn diff_fields(d: &Value) -> (String, String, String, String) {
    let text = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let value = |k: &str| d.get(k).map_or(String::new(), |v| short_json(v, 120));
    (
        text("path"),
        text("kind").replace('_', " "),
        value("recorded"),
        value("actual"),
    )
}

/// Text for HTML (and SVG) content and quoted attribute values.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}
