//! What an assertion checks, the plan the probe gets for it, and the
//! verdict on one look (pure), plus the ToolResult the tools answer:
//! `{"ok": true, …evidence}` or `{"ok": false, "error": {"code", "message",
//! "retriable", "suggestion"}}` (see `hub::local::tool_result`).

use serde_json::{json, Map, Value};

use super::browser::Probe;
use super::locator::{self, clip, Pick, Query};
use crate::errors::HubError;

/// How much of the caller's text a message repeats.
const ECHO: usize = 80;
/// Evidence never carries more page text than this.
pub const CONTEXT_MAX: usize = 200;

/// One assertion.
#[derive(Debug, Clone, PartialEq)]
pub enum Assertion {
    /// `text` is on the page and visible (`exact`: some element's whole
    /// text is `text`, case-sensitive; else contained, ignoring case).
    Text { text: String, exact: bool },
    /// An element fitting `description` is visible.
    Element { description: String, query: Query },
}

/// The verdict on one look.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    Pass(Map<String, Value>),
    Miss(Miss),
}

/// A failed look: what to say and what to suggest.
#[derive(Debug, Clone, PartialEq)]
pub struct Miss {
    pub message: String,
    /// Something matched but is hidden (the suggestion differs).
    pub hidden: bool,
}

impl Assertion {
    /// The probe's plan (see probe.js).
    pub fn plan(&self) -> Value {
        match self {
            Assertion::Text { text, exact } => json!({
                "mode": "text", "text": text, "exact": exact, "needles": locator::needles(text),
            }),
            Assertion::Element { query, .. } => json!({
                "mode": "element",
                "roles": query.role.map(|r| r.aria()).unwrap_or_default(),
                "needles": query.needles(),
            }),
        }
    }

    /// Judge one look at the page.
    pub fn judge(&self, p: &Probe) -> Judgement {
        match self {
            Assertion::Text { text, exact } => judge_text(text, *exact, p),
            Assertion::Element { description, query } => judge_element(description, query, p),
        }
    }

    /// The message of a miss that lasted the whole `waited_ms`.
    pub fn after_wait(miss: Miss, waited_ms: Option<u64>) -> Miss {
        match waited_ms {
            Some(ms) => Miss {
                message: format!("{} (waited {ms} ms)", miss.message),
                ..miss
            },
            None => miss,
        }
    }
}

fn judge_text(text: &str, exact: bool, p: &Probe) -> Judgement {
    let shown = clip(&locator::norm(text), ECHO);
    if let Some(f) = &p.found {
        let mut ev = Map::new();
        ev.insert("text".into(), json!(shown));
        ev.insert(
            "match".into(),
            json!(if exact { "exact" } else { "case-insensitive" }),
        );
        ev.insert("context".into(), json!(clip(&f.context, CONTEXT_MAX)));
        ev.insert("element".into(), json!(format!("<{}>", f.tag)));
        ev.insert("inViewport".into(), json!(f.in_viewport));
        return Judgement::Pass(ev);
    }
    if !p.hidden.is_empty() {
        let places: Vec<String> = p
            .hidden
            .iter()
            .map(|h| format!("<{}> ({})", h.tag, h.hidden))
            .collect();
        return Judgement::Miss(Miss {
            message: format!(
                "text \"{shown}\" is on the page only in hidden elements: {}",
                places.join(", ")
            ),
            hidden: true,
        });
    }
    let how = if exact {
        " as an element's whole text"
    } else {
        ""
    };
    let message = match locator::nearest_text(text, &p.near) {
        Some(n) => format!(
            "text \"{shown}\" is not on the page{how}; nearest text: \"{}\"",
            clip(n, ECHO)
        ),
        None => format!("text \"{shown}\" is not on the page{how} (nothing similar either)"),
    };
    Judgement::Miss(Miss {
        message,
        hidden: false,
    })
}

fn judge_element(description: &str, q: &Query, p: &Probe) -> Judgement {
    let shown = clip(&locator::norm(description), ECHO);
    let more = if p.more {
        "; only the first 200 possible elements were checked"
    } else {
        ""
    };
    let miss = |message: String, hidden: bool| {
        Judgement::Miss(Miss {
            message: format!("{message}{more}"),
            hidden,
        })
    };
    match locator::pick(q, &p.candidates) {
        Pick::Found(h) => {
            let c = h.candidate;
            let role = if c.role.is_empty() {
                "generic"
            } else {
                &c.role
            };
            let name = c.label().unwrap_or_default();
            let mut ev = Map::new();
            ev.insert("role".into(), json!(role));
            ev.insert("name".into(), json!(clip(name, ECHO)));
            ev.insert("element".into(), json!(format!("<{}>", c.tag)));
            ev.insert("matchedBy".into(), json!(h.strategy.label()));
            ev.insert("match".into(), json!(h.tier.label()));
            ev.insert("inViewport".into(), json!(c.in_viewport));
            Judgement::Pass(ev)
        }
        Pick::Hidden(h) => miss(
            format!(
                "no visible element matches \"{shown}\"; found a hidden {} ({})",
                h.candidate.describe(),
                h.candidate.hidden.as_deref().unwrap_or("hidden")
            ),
            true,
        ),
        Pick::Nearest(c) => {
            let state = match &c.hidden {
                Some(why) => format!(", hidden: {why}"),
                None => String::new(),
            };
            miss(
                format!(
                    "no element matches \"{shown}\"; nearest: {}{state}",
                    c.describe()
                ),
                false,
            )
        }
        Pick::Nothing => miss(
            format!("no element matches \"{shown}\" and nothing on the page resembles it"),
            false,
        ),
    }
}

/// `{"ok": true, …evidence}`.
pub fn ok(evidence: Map<String, Value>) -> Value {
    let mut m = Map::new();
    m.insert("ok".into(), Value::Bool(true));
    m.extend(evidence);
    Value::Object(m)
}

/// `{"ok": false, "error": {…}}` for any failure.
pub fn failure(e: &HubError) -> Value {
    json!({"ok": false, "error": {
        "code": e.error_type.as_str(),
        "message": e.message,
        "retriable": e.recoverable,
        "suggestion": e.suggestion,
    }})
}

/// The ASSERTION_FAILED error of a miss, with a suggestion that fits it.
pub fn miss_error(check: &Assertion, miss: &Miss) -> HubError {
    let what = match check {
        Assertion::Text { .. } => "the text",
        Assertion::Element { .. } => "the element",
    };
    let suggestion = if miss.hidden {
        format!("{what} exists but is hidden: wait for it to show (give `timeout` in ms), or do what reveals it (open the menu or section, scroll, close what covers it)")
    } else {
        format!("{what} may not be there yet or may read differently: wait (give `timeout` in ms), re-locate it from a fresh browser_snapshot (role and name), or reach it another way; a miss is retried once by default")
    };
    HubError::new(crate::errors::ErrorType::AssertionFailed, &miss.message)
        .with_suggestion(suggestion)
}

#[cfg(test)]
mod tests;
