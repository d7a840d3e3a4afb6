//! A step's `when`: parsed once when the batch arrives, evaluated before the
//! step runs. An unmet condition skips the step with a reason a person can read.
//!
//! Forms: `"success"` / `"failure"` (the last step that ran; after
//! `stopOnError` stopped the batch, `"failure"` holds), `"always"`, `{"var","success"}`,
//! `{"var","contains"}`, `{"var","regex"}`, a template string that renders truthy,
//! and `{"not"}`, `{"all":[…]}`, `{"any":[…]}` around them.

use regex::{Regex, RegexBuilder};
use serde_json::Value;

use super::template::{self, lookup, shorten, value_text, TemplateError, Templates};

/// Compiled size limits for `regex` conditions and expectations.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Deepest nesting of `not`/`all`/`any`.
const MAX_DEPTH: usize = 32;
const EXPECTED_FORMS: &str = "expected \"success\", \"failure\", \"always\", {\"var\",\"success\"|\"contains\"|\"regex\"}, {\"not\"}, {\"all\"}, {\"any\"} or a template string";

#[derive(Debug, Clone)]
pub enum Condition {
    /// The last step that ran succeeded.
    Success,
    /// The last step that ran failed, or the batch was stopped by a failure.
    Failure,
    /// Always holds: a cleanup step that runs even after `stopOnError`.
    Always,
    Var {
        var: String,
        test: VarTest,
    },
    /// A template rendered as text; see [`is_truthy`].
    Template(String),
    Not(Box<Condition>),
    All(Vec<Condition>),
    Any(Vec<Condition>),
}

#[derive(Debug, Clone)]
pub enum VarTest {
    /// The variable's `success` equals this.
    Success(bool),
    /// The variable's `result` as text contains this.
    Contains(String),
    /// The variable's `result` as text matches.
    Regex(Regex),
}

/// What a condition is evaluated against.
pub struct EvalCtx<'a> {
    /// Whether the last step that ran succeeded; `None` when none has run.
    pub last_success: Option<bool>,
    /// The step whose failure made `stopOnError` stop the batch, if one did:
    /// then the batch has failed, and `"failure"` holds for every later step.
    pub stopped_at: Option<usize>,
    /// The template context: `{"vars":{…}, "stepX":{"result","success","error"}}`.
    pub vars: &'a Value,
    pub templates: &'a Templates,
}

/// Compile a regex for a condition or an expectation, bounded in size.
pub(crate) fn compile_regex(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let e = e.to_string();
            let e = e.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("regex \"{}\" is invalid: {e}", shorten(pattern, 120))
        })
}

/// Template truthiness: "", "false", "0", "null", "undefined" (any case) and
/// whitespace-only text are false; anything else is true.
pub fn is_truthy(text: &str) -> bool {
    let t = text.trim();
    !(t.is_empty()
        || ["false", "0", "null", "undefined"]
            .iter()
            .any(|f| t.eq_ignore_ascii_case(f)))
}

/// Parse a `when` value.
pub fn parse(v: &Value, templates: &Templates) -> Result<Condition, String> {
    parse_at(v, templates, 0)
}

fn parse_at(v: &Value, templates: &Templates, depth: usize) -> Result<Condition, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "when: conditions are nested more than {MAX_DEPTH} deep"
        ));
    }
    match v {
        Value::String(s) if s == "success" => Ok(Condition::Success),
        Value::String(s) if s == "failure" => Ok(Condition::Failure),
        Value::String(s) if s == "always" => Ok(Condition::Always),
        Value::String(s) if s.contains("{{") => {
            templates.check(s).map_err(|e| format!("when: {e}"))?;
            Ok(Condition::Template(s.clone()))
        }
        Value::Object(m) if m.contains_key("var") => parse_var(m),
        Value::Object(m) if m.len() == 1 => {
            let (key, inner) = m.iter().next().ok_or_else(|| unknown_form(v))?;
            let list = |name: &str| -> Result<Vec<Condition>, String> {
                let items = inner.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                    format!(
                        "when: \"{name}\" needs a non-empty array of conditions, got {}",
                        compact(inner)
                    )
                })?;
                items
                    .iter()
                    .map(|c| parse_at(c, templates, depth + 1))
                    .collect()
            };
            match key.as_str() {
                "not" => Ok(Condition::Not(Box::new(parse_at(
                    inner,
                    templates,
                    depth + 1,
                )?))),
                "all" => Ok(Condition::All(list("all")?)),
                "any" => Ok(Condition::Any(list("any")?)),
                _ => Err(unknown_form(v)),
            }
        }
        _ => Err(unknown_form(v)),
    }
}

fn compact(v: &Value) -> String {
    shorten(&v.to_string(), 200)
}

fn unknown_form(v: &Value) -> String {
    format!(
        "when: unknown condition form {}; {EXPECTED_FORMS}",
        compact(v)
    )
}

fn parse_var(m: &serde_json::Map<String, Value>) -> Result<Condition, String> {
    let var = match m.get("var") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        other => {
            return Err(format!(
                "when: \"var\" must be a variable name (a saveAs), got {}",
                other.map(compact).unwrap_or_default()
            ))
        }
    };
    let tests: Vec<(&String, &Value)> = m.iter().filter(|(k, _)| k.as_str() != "var").collect();
    let [(key, val)] = tests.as_slice() else {
        return Err(format!(
            "when: {{\"var\":\"{var}\"}} needs exactly one of \"success\", \"contains\" or \"regex\", got {}",
            compact(&Value::Object(m.clone()))
        ));
    };
    let test = match (key.as_str(), val) {
        ("success", Value::Bool(b)) => VarTest::Success(*b),
        ("contains", Value::String(s)) => VarTest::Contains(s.clone()),
        ("regex", Value::String(p)) => VarTest::Regex(compile_regex(p).map_err(|e| format!("when: {e}"))?),
        ("success", other) => return Err(format!("when: \"success\" must be true or false, got {}", compact(other))),
        ("contains" | "regex", other) => {
            return Err(format!("when: \"{key}\" must be a string, got {}", compact(other)))
        }
        _ => {
            return Err(format!(
                "when: unknown key \"{key}\" next to \"var\"; expected \"success\", \"contains\" or \"regex\""
            ))
        }
    };
    Ok(Condition::Var { var, test })
}

impl std::fmt::Display for Condition {
    /// The condition as the compact JSON a client would write (`var` first,
    /// whatever the map order of serde_json).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |f: &mut std::fmt::Formatter<'_>, key: &str, cs: &[Condition]| {
            write!(f, "{{\"{key}\":[")?;
            for (i, c) in cs.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str("]}")
        };
        match self {
            Condition::Success => f.write_str("\"success\""),
            Condition::Failure => f.write_str("\"failure\""),
            Condition::Always => f.write_str("\"always\""),
            Condition::Var { var, test } => {
                let (key, value) = match test {
                    VarTest::Success(b) => ("success", Value::Bool(*b)),
                    VarTest::Contains(s) => ("contains", Value::String(s.clone())),
                    VarTest::Regex(r) => ("regex", Value::String(r.as_str().to_string())),
                };
                write!(
                    f,
                    "{{\"var\":{},\"{key}\":{value}}}",
                    Value::String(var.clone())
                )
            }
            Condition::Template(s) => write!(f, "{}", Value::String(s.clone())),
            Condition::Not(c) => write!(f, "{{\"not\":{c}}}"),
            Condition::All(cs) => list(f, "all", cs),
            Condition::Any(cs) => list(f, "any", cs),
        }
    }
}

impl Condition {
    /// Does this step run after `stopOnError` stopped the batch? Yes when
    /// its condition asks for a failure or to always run (also inside an
    /// `all`/`any`); it is then evaluated as usual. CI systems do the same
    /// with `if: failure()` / `always()`.
    pub fn runs_after_stop(&self) -> bool {
        match self {
            Condition::Failure | Condition::Always => true,
            Condition::All(cs) | Condition::Any(cs) => cs.iter().any(Condition::runs_after_stop),
            _ => false,
        }
    }

    /// The variables (root names) this condition reads, sorted, once each.
    pub fn referenced_vars(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_vars(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect_vars(&self, out: &mut Vec<String>) {
        match self {
            Condition::Success | Condition::Failure | Condition::Always => {}
            Condition::Var { var, .. } => out.push(var.clone()),
            // Parsing already checked the template, so it has roots.
            Condition::Template(s) => out.extend(template::roots(s).unwrap_or_default()),
            Condition::Not(c) => c.collect_vars(out),
            Condition::All(cs) | Condition::Any(cs) => cs.iter().for_each(|c| c.collect_vars(out)),
        }
    }

    /// Whether the condition holds, and a sentence saying why. An unknown
    /// variable is an error, as it is in templates.
    pub fn evaluate(&self, ctx: &EvalCtx) -> Result<(bool, String), TemplateError> {
        let (met, detail) = self.decide(ctx)?;
        let verdict = if met { "met" } else { "not met" };
        Ok((
            met,
            format!(
                "condition {} {verdict} ({detail})",
                shorten(&self.to_string(), 300)
            ),
        ))
    }

    /// Whether the condition holds and the detail behind it.
    fn decide(&self, ctx: &EvalCtx) -> Result<(bool, String), TemplateError> {
        Ok(match self {
            Condition::Always => (true, "it always runs".to_string()),
            Condition::Success | Condition::Failure => match (ctx.stopped_at, ctx.last_success) {
                (Some(at), _) if matches!(self, Condition::Failure) => (
                    true,
                    format!("step {at} failed and stopOnError stopped the batch"),
                ),
                (_, None) => (false, "no previous step has run".to_string()),
                (_, Some(ok)) => {
                    let word = if ok { "succeeded" } else { "failed" };
                    (
                        ok == matches!(self, Condition::Success),
                        format!("the last step that ran {word}"),
                    )
                }
            },
            Condition::Var { var, test } => {
                let v = lookup(ctx.vars, std::slice::from_ref(var), var)?;
                decide_var(var, v, test)
            }
            Condition::Template(s) => {
                let text = ctx.templates.render_text(s, ctx.vars)?;
                (
                    is_truthy(&text),
                    format!("{s:?} rendered {:?}", shorten(&text, 120)),
                )
            }
            Condition::Not(c) => {
                let (met, detail) = c.decide(ctx)?;
                (!met, detail)
            }
            Condition::All(cs) => {
                let mut details = Vec::new();
                for c in cs {
                    let (met, detail) = c.decide(ctx)?;
                    if !met {
                        return Ok((false, format!("{c} not met: {detail}")));
                    }
                    details.push(detail);
                }
                (true, details.join("; "))
            }
            Condition::Any(cs) => {
                let mut details = Vec::new();
                for c in cs {
                    let (met, detail) = c.decide(ctx)?;
                    if met {
                        return Ok((true, format!("{c} met: {detail}")));
                    }
                    details.push(detail);
                }
                (false, details.join("; "))
            }
        })
    }
}

fn decide_var(var: &str, v: &Value, test: &VarTest) -> (bool, String) {
    let result = v.get("result").unwrap_or(&Value::Null);
    let text = value_text(result);
    match test {
        VarTest::Success(want) => {
            let ok = v.get("success").and_then(Value::as_bool).unwrap_or(false);
            let detail = if ok {
                format!("{var} succeeded")
            } else {
                match v.get("error") {
                    Some(Value::Object(e)) if e.get("message").is_some_and(Value::is_string) => {
                        format!("{var} failed: {}", shorten(&value_text(&e["message"]), 200))
                    }
                    Some(e) if !e.is_null() => {
                        format!("{var} failed: {}", shorten(&value_text(e), 200))
                    }
                    _ => format!("{var} failed"),
                }
            };
            (ok == *want, detail)
        }
        VarTest::Contains(s) => {
            let met = text.contains(s.as_str());
            let verb = if met { "contains" } else { "does not contain" };
            (
                met,
                format!(
                    "{var}.result {verb} {s:?}; result: {:?}",
                    shorten(&text, 120)
                ),
            )
        }
        VarTest::Regex(r) => {
            let met = r.is_match(&text);
            let verb = if met { "matches" } else { "does not match" };
            (
                met,
                format!(
                    "{var}.result {verb} /{}/; result: {:?}",
                    r.as_str(),
                    shorten(&text, 120)
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests;
