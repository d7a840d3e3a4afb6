//! The HTML report: one self-contained document (inline style, images as
//! `data:` URIs, no scripts, no external resources) that can be mailed or
//! attached to a ticket. Every recorded text is escaped, and a
//! Content-Security-Policy forbids scripts and remote loads in case a future
//! change forgets to escape something.

use std::fmt::Write;

use serde_json::Value;

use super::{
    clip, diff_fields, escape, short_json, success_summary, used_servers, variable_rows, Replay,
};
use crate::store::recordings::format::{Recording, Step};

/// Longest pretty-printed params or result shown per step; recordings may hold
/// megabytes of tool output.
const VALUE_CHARS: usize = 20_000;
/// Total image bytes embedded in one report; later images are named only.
const MAX_IMAGE_BYTES: usize = 32 * 1024 * 1024;

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem;color:#1d2330;background:#fff}
h1{margin:0 0 .3rem}h2{margin-top:2rem;border-bottom:1px solid #d8dce4;padding-bottom:.2rem}
.muted{color:#667085;font-size:12px}
dl.summary{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}
dl.summary dt{font-weight:600}dl.summary dd{margin:0}
table{border-collapse:collapse;width:100%;margin-top:.5rem}
th,td{border:1px solid #d8dce4;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f5f9}td.num{text-align:right;white-space:nowrap}
tr.fail td{background:#fff4f2}
.badge{display:inline-block;padding:0 .45rem;border-radius:.6rem;font-size:12px;font-weight:600}
.ok{background:#dcfae6;color:#085d3a}.bad{background:#fee4e2;color:#912018}
.bar{height:4px;background:#7a9cc6;margin-top:3px;min-width:1px}
pre{margin:.3rem 0 0;max-height:24rem;overflow:auto;background:#f6f8fa;padding:.5rem;white-space:pre-wrap;word-break:break-word}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
details summary{cursor:pointer}
figure{display:inline-block;margin:.3rem .6rem .3rem 0}
figure img{max-width:480px;max-height:360px;border:1px solid #d8dce4}
figcaption{font-size:12px;color:#667085}
";

/// The recording as one HTML document. `image(name)` returns the bytes of a
/// file stored beside the recording (`step.screenshot`, `step.images`), or
/// `None` when it is missing.
pub fn html(
    rec: &Recording,
    last_replay: Option<&Value>,
    image: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> String {
    let h = &rec.header;
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = write!(
        out,
        "<title>Recording: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(&h.name)
    );
    let _ = writeln!(out, "<h1>{}</h1>", escape(&h.name));
    if let Some(d) = h.description.as_deref().filter(|d| !d.trim().is_empty()) {
        let _ = writeln!(out, "<p>{}</p>", escape(d).replace('\n', "<br>"));
    }
    out.push_str(&summary(rec));
    let flow = super::flow::svg(rec);
    if !flow.is_empty() {
        out.push_str("<h2>Flow</h2>\n");
        out.push_str(&flow);
    }
    out.push_str("<h2>Steps</h2>\n");
    if rec.steps.is_empty() {
        out.push_str("<p>No steps were recorded.</p>\n");
    } else {
        out.push_str(&steps(rec, image));
    }
    if let Some(replay) = last_replay {
        out.push_str(&replay_section(&Replay::read(replay)));
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn summary(rec: &Recording) -> String {
    let h = &rec.header;
    let (ok, rate) = success_summary(rec);
    let mut rows: Vec<(&str, String)> = vec![
        (
            "Recording",
            format!("<code>{}</code>", escape(&h.recording_id)),
        ),
        ("Created", escape(&h.created_at)),
        ("Hub version", escape(&h.hub_version)),
    ];
    if let Some(c) = &h.context {
        rows.push(("Context", format!("<code>{}</code>", escape(c))));
    }
    // What the recording used, not what was configured at the time.
    let servers = used_servers(rec);
    if !servers.is_empty() {
        rows.push(("Servers", escape(&servers.join(", "))));
    }
    let (defaults, required) = variable_rows(rec);
    if let Some(d) = defaults {
        rows.push(("Variable defaults", format!("<code>{}</code>", escape(&d))));
    }
    if let Some(r) = required {
        rows.push(("Variables to give", escape(&r)));
    }
    rows.push((
        "Steps",
        format!("{} ({ok} succeeded, {rate:.1}%)", rec.steps.len()),
    ));
    match &rec.end {
        Some(end) => {
            rows.push(("Total duration", format!("{} ms", end.total_duration_ms)));
            rows.push((
                "Stopped",
                format!("{} ({})", escape(&end.stopped_at), escape(&end.reason)),
            ));
        }
        None => rows.push((
            "Status",
            "<span class=\"badge bad\">incomplete</span> no end record: the hub stopped while recording, or it is still recording".to_string(),
        )),
    }
    let mut out = String::from("<dl class=\"summary\">\n");
    for (k, v) in rows {
        let _ = writeln!(out, "<dt>{k}</dt><dd>{v}</dd>");
    }
    out.push_str("</dl>\n");
    out
}

fn steps(rec: &Recording, image: &dyn Fn(&str) -> Option<Vec<u8>>) -> String {
    let longest = rec
        .steps
        .iter()
        .map(|s| s.duration_ms)
        .max()
        .unwrap_or(0)
        .max(1);
    let mut budget = MAX_IMAGE_BYTES;
    let mut out = String::from(
        "<table class=\"steps\">\n<thead><tr><th>#</th><th>Tool</th><th>Params</th><th>Result</th><th>Outcome</th><th>Duration</th><th>Error</th></tr></thead>\n<tbody>\n",
    );
    for step in &rec.steps {
        out.push_str(&step_row(step, longest));
        let images = images(step, image, &mut budget);
        if !images.is_empty() {
            let _ = writeln!(
                out,
                "<tr class=\"images\"><td></td><td colspan=\"6\">{images}</td></tr>"
            );
        }
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

fn step_row(step: &Step, longest_ms: u64) -> String {
    let class = if step.success { "ok" } else { "fail" };
    let mut tool = format!("<code>{}</code>", escape(&step.tool));
    let qualified = step.qualified_name.as_deref().filter(|q| *q != step.tool);
    if let Some(q) = qualified.or(step.server.as_deref()) {
        let _ = write!(tool, "<div class=\"muted\">{}</div>", escape(q));
    }
    if let Some(id) = &step.source.step_id {
        let _ = write!(tool, "<div class=\"muted\">step {}</div>", escape(id));
    }
    let outcome = match (step.success, step.attempts) {
        (true, n) if n > 1 => format!(
            "<span class=\"badge ok\">success</span> <span class=\"muted\">{n} attempts</span>"
        ),
        (true, _) => "<span class=\"badge ok\">success</span>".to_string(),
        (false, n) if n > 1 => format!(
            "<span class=\"badge bad\">failed</span> <span class=\"muted\">{n} attempts</span>"
        ),
        (false, _) => "<span class=\"badge bad\">failed</span>".to_string(),
    };
    // Bar widths are whole percents of the slowest step.
    let width = (step.duration_ms.saturating_mul(100) / longest_ms).min(100);
    let duration = format!(
        "{} ms<div class=\"bar\" style=\"width:{width}%\"></div>",
        step.duration_ms
    );
    let error = step.error.as_ref().map_or(String::new(), |e| {
        format!(
            "<code>{}</code> {}<div class=\"muted\">{}</div>",
            escape(e.error_type.as_str()),
            escape(&e.message),
            escape(&e.suggestion)
        )
    });
    format!(
        "<tr class=\"{class}\"><td class=\"num\">{}</td><td>{tool}</td><td>{}</td><td>{}</td><td>{outcome}</td><td class=\"num\">{duration}</td><td>{error}</td></tr>\n",
        step.seq,
        value_cell(&step.params),
        value_cell(&step.result),
    )
}

/// A short one-line preview that opens to the pretty-printed value.
fn value_cell(v: &Value) -> String {
    if v.is_null() {
        return String::new();
    }
    let pretty = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    format!(
        "<details><summary><code>{}</code></summary><pre>{}</pre></details>",
        escape(&short_json(v, 60)),
        escape(&clip(&pretty, VALUE_CHARS))
    )
}

/// The step's screenshot and result images as `<img>` with data URIs, within
/// the report's image budget.
fn images(step: &Step, image: &dyn Fn(&str) -> Option<Vec<u8>>, budget: &mut usize) -> String {
    let names = step.screenshot.iter().chain(step.images.iter());
    let mut out = String::new();
    for name in names {
        let caption = escape(name);
        let body = match image(name) {
            None => "<div class=\"muted\">(file missing)</div>".to_string(),
            Some(bytes) => match media_type(&bytes) {
                None => "<div class=\"muted\">(not embedded: not a PNG, JPEG, GIF or WebP image)</div>".to_string(),
                Some(_) if bytes.len() > *budget => {
                    "<div class=\"muted\">(not embedded: the report's 32 MiB image budget is used up)</div>".to_string()
                }
                Some(mt) => {
                    *budget -= bytes.len();
                    format!("<img alt=\"{caption}\" src=\"data:{mt};base64,{}\">", crate::b64::encode(&bytes))
                }
            },
        };
        let _ = write!(
            out,
            "<figure>{body}<figcaption>{caption}</figcaption></figure>"
        );
    }
    out
}

/// The image type from the file's magic bytes. Only raster types: an SVG
/// could carry script, and a name's extension is only a claim.
fn media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn replay_section(replay: &Replay) -> String {
    let badge = match replay.success {
        Some(true) => "<span class=\"badge ok\">passed</span> ",
        Some(false) => "<span class=\"badge bad\">failed</span> ",
        None => "",
    };
    let mut out = format!(
        "<h2>Last replay</h2>\n<p>{badge}{}</p>\n",
        escape(&replay.headline())
    );
    if !replay.problems.is_empty() {
        out.push_str("<ul class=\"problems\">\n");
        for (index, problem) in &replay.problems {
            let _ = writeln!(
                out,
                "<li>step {}: {}</li>",
                escape(&index.to_string()),
                escape(problem)
            );
        }
        out.push_str("</ul>\n");
    }
    if replay.steps.is_empty() {
        if replay.problems.is_empty() {
            out.push_str("<p>No differences.</p>\n");
        }
        return out;
    }
    out.push_str("<table class=\"diffs\">\n<thead><tr><th>Step</th><th>Path</th><th>Kind</th><th>Recorded</th><th>Actual</th></tr></thead>\n<tbody>\n");
    for (index, diffs) in &replay.steps {
        for d in diffs {
            let (path, kind, recorded, actual) = diff_fields(d);
            let path = if path.is_empty() {
                "(outcome)".to_string()
            } else {
                path
            };
            let _ = writeln!(
                out,
                "<tr><td class=\"num\">{}</td><td><code>{}</code></td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
                escape(&index.to_string()),
                escape(&path),
                escape(&kind),
                escape(&recorded),
                escape(&actual)
            );
        }
    }
    out.push_str("</tbody>\n</table>\n");
    out
}
