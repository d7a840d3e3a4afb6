//! Handlebars templates inside batch step params and `when` conditions.
//!
//! A params string that is exactly one placeholder (`"{{fileA.result}}"`) takes
//! the value with its JSON type; any other string containing `{{` is rendered
//! as text, with objects and arrays as compact JSON, strings raw, and numbers,
//! booleans and null as their JSON text. Every string leaf is rendered on its
//! own and values are inserted as data: handlebars renders in one pass, so a
//! value containing `{{` is never rendered again. No HTML escaping.
//!
//! Allowed constructs: `{{path}}` / `{{{path}}}` (`a.b.0.c`, `a.[0]`, `@root.x`,
//! `../x`, `this`, `@index`, `@key`, `@first`, `@last`), comments, `\{{` for a
//! literal brace pair, the block helpers `if`, `unless` (`includeZero=true`),
//! `each`, `with` (with `{{else}}` and block params), and the value helpers
//! `eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `not`, `and`, `or`, `len`, `lookup`
//! and `json` (compact JSON of a value). Partials, decorators, `raw`, `log`
//! and any other helper are refused before rendering.
//!
//! Unknown variables are errors (strict mode), except that the tested value of
//! `if`/`unless`/`each`/`with` may be absent below an existing root variable
//! (absent is falsy). Limits: [`MAX_TEMPLATE_BYTES`] per string,
//! [`MAX_NESTING`] block/subexpression nesting, [`MAX_OUTPUT_BYTES`] and
//! [`MAX_RENDER_STEPS`] per render call, [`MAX_PARAMS_DEPTH`] for the params tree.

mod helpers;
#[cfg(test)]
mod tests;
mod walk;

use handlebars::template::{Template, TemplateElement};
use handlebars::{
    Context, Handlebars, Path, PathSeg, RenderContext, RenderError, RenderErrorReason, Renderable,
};
use serde_json::{Map, Value};

use crate::errors::{ErrorType, HubError};

pub(crate) use helpers::value_text;

/// Longest template string, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;
/// Most text one render call (all string leaves of one params tree) may produce.
pub const MAX_OUTPUT_BYTES: usize = 10 * 1024 * 1024;
/// Deepest params tree (objects and arrays) that is walked.
pub const MAX_PARAMS_DEPTH: usize = 64;
/// Work units (helper calls, loop iterations) one render call may spend.
pub const MAX_RENDER_STEPS: u64 = 200_000;
/// Deepest block or subexpression nesting in one template string.
pub const MAX_NESTING: usize = 32;
/// Most names listed in an unknown-variable error.
const MAX_LISTED: usize = 40;

/// Why a template could not be checked or rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("template \"{template}\" does not parse: {message}")]
    Parse { template: String, message: String },
    /// `at` is the part of `variable` that exists ("" when the first name is
    /// unknown), `missing` the name not found there and `available` the names
    /// that exist there.
    #[error("{}", unknown_message(variable, at, missing, available))]
    Unknown {
        variable: String,
        at: String,
        missing: String,
        available: Vec<String>,
    },
    #[error("template limit exceeded: {what}")]
    Limit { what: String },
    #[error("template \"{template}\" is not allowed: {what}")]
    Forbidden { template: String, what: String },
    #[error("template \"{template}\" failed to render: {message}")]
    Render { template: String, message: String },
}

fn unknown_message(variable: &str, at: &str, missing: &str, available: &[String]) -> String {
    let list = if available.is_empty() {
        "none".to_string()
    } else {
        available.join(", ")
    };
    if at.is_empty() {
        format!("unknown variable \"{variable}\": no variable \"{missing}\" is defined; defined variables: {list}")
    } else {
        format!("unknown variable \"{variable}\": \"{at}\" has no \"{missing}\"; it has: {list}")
    }
}

impl TemplateError {
    /// The wire error for a step that failed on its template.
    pub fn to_hub_error(&self) -> HubError {
        let suggestion = match self {
            TemplateError::Parse { .. } => {
                "fix the template syntax; write \\{{ for a literal {{".to_string()
            }
            TemplateError::Unknown { available, .. } if !available.is_empty() => format!(
                "use one of: {} (a step's variable exists once a step with that saveAs has run)",
                available.join(", ")
            ),
            TemplateError::Unknown { .. } => {
                "check the variable name; a step's variable exists once a step with that saveAs has run"
                    .to_string()
            }
            TemplateError::Limit { .. } => "make the template or the text it produces smaller".to_string(),
            TemplateError::Forbidden { .. } => format!(
                "use {{{{path}}}} placeholders and only these helpers: {}",
                Templates::helper_names().join(", ")
            ),
            TemplateError::Render { .. } => "check the values the template uses".to_string(),
        };
        HubError::new(ErrorType::TemplateError, self.to_string()).with_suggestion(suggestion)
    }
}

/// A template as it appears in an error: at most 120 characters.
fn shown(src: &str) -> String {
    shorten(src, 120)
}

/// `text` cut to at most `max_chars` characters, saying how long it was.
pub(crate) fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}… ({} bytes in all)", &text[..i], text.len()),
        None => text.to_string(),
    }
}

/// The configured handlebars registry; cheap to share (`Send + Sync`).
pub struct Templates {
    hb: Handlebars<'static>,
}

impl Default for Templates {
    fn default() -> Self {
        Templates::new()
    }
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates").finish_non_exhaustive()
    }
}

/// A template that parsed and uses only allowed constructs.
struct Checked {
    tpl: Template,
    refs: Vec<walk::Reference>,
}

/// State shared by the string leaves of one render call.
struct Job<'c> {
    ctx: &'c Value,
    hctx: Option<Context>,
    output_left: usize,
}

impl Templates {
    pub fn new() -> Self {
        let mut hb = Handlebars::new();
        hb.set_strict_mode(true);
        hb.register_escape_fn(handlebars::no_escape);
        hb.set_prevent_indent(true);
        hb.unregister_helper("raw");
        hb.unregister_helper("log");
        helpers::register(&mut hb);
        Templates { hb }
    }

    /// Every helper a template may use.
    pub fn helper_names() -> Vec<&'static str> {
        walk::BLOCK_HELPERS
            .iter()
            .chain(walk::VALUE_HELPERS)
            .copied()
            .collect()
    }

    /// True when `name` would be read as a helper in `{{name}}`, so it cannot
    /// be used as a bare variable name (e.g. a `saveAs`).
    pub fn is_reserved(name: &str) -> bool {
        walk::is_helper(name)
    }

    /// Parse `s` and return the root variable names it reads; see [`roots`].
    pub fn check(&self, s: &str) -> Result<Vec<String>, TemplateError> {
        roots(s)
    }

    /// [`Templates::check`] over every string leaf of a params tree.
    pub fn check_params(&self, params: &Value) -> Result<Vec<String>, TemplateError> {
        let mut names = Vec::new();
        self.check_tree(params, 0, &mut names)?;
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn check_tree(
        &self,
        v: &Value,
        depth: usize,
        names: &mut Vec<String>,
    ) -> Result<(), TemplateError> {
        if depth > MAX_PARAMS_DEPTH {
            return Err(depth_error());
        }
        match v {
            Value::String(s) => names.extend(self.check(s)?),
            Value::Array(a) => {
                for x in a {
                    self.check_tree(x, depth + 1, names)?;
                }
            }
            Value::Object(m) => {
                for x in m.values() {
                    self.check_tree(x, depth + 1, names)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Render every string leaf of `params` against `ctx` (object keys stay
    /// literal). See the module docs for the typing rules.
    pub fn render_params(&self, params: &Value, ctx: &Value) -> Result<Value, TemplateError> {
        helpers::begin(MAX_RENDER_STEPS);
        let mut job = Job::new(ctx);
        self.render_tree(params, 0, &mut job)
    }

    /// Render one string as a params leaf: an exact single placeholder keeps
    /// the value's JSON type, anything else becomes a string.
    pub fn render_value(&self, s: &str, ctx: &Value) -> Result<Value, TemplateError> {
        helpers::begin(MAX_RENDER_STEPS);
        Job::new(ctx).leaf(self, s)
    }

    /// Render one string as text (a `when` template): values are interpolated
    /// as text even when `s` is a single placeholder.
    pub fn render_text(&self, s: &str, ctx: &Value) -> Result<String, TemplateError> {
        helpers::begin(MAX_RENDER_STEPS);
        let mut job = Job::new(ctx);
        if !s.contains("{{") {
            return Ok(s.to_string());
        }
        let checked = compile(s)?;
        job.text(self, s, checked)
    }

    fn render_tree(&self, v: &Value, depth: usize, job: &mut Job) -> Result<Value, TemplateError> {
        if depth > MAX_PARAMS_DEPTH {
            return Err(depth_error());
        }
        Ok(match v {
            Value::String(s) => job.leaf(self, s)?,
            Value::Array(a) => Value::Array(
                a.iter()
                    .map(|x| self.render_tree(x, depth + 1, job))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    out.insert(k.clone(), self.render_tree(x, depth + 1, job)?);
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }
}

/// Parse `s` and return the root variable names it reads (sorted, once each):
/// `{{fileA.result}}` → `fileA`, `{{vars.x}}` → `vars`. Names read inside
/// `each`/`with` relative to the block are not included. A string without
/// `{{` reads nothing.
pub fn roots(s: &str) -> Result<Vec<String>, TemplateError> {
    if !s.contains("{{") {
        return Ok(Vec::new());
    }
    let checked = compile(s)?;
    let mut names: Vec<String> = checked
        .refs
        .into_iter()
        .filter_map(|r| r.segs.into_iter().next())
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

fn depth_error() -> TemplateError {
    TemplateError::Limit {
        what: format!("params are nested more than {MAX_PARAMS_DEPTH} levels deep"),
    }
}

/// Parse `src` and check what it uses; nothing is rendered.
fn compile(src: &str) -> Result<Checked, TemplateError> {
    if src.len() > MAX_TEMPLATE_BYTES {
        return Err(TemplateError::Limit {
            what: format!(
                "a template string is {} bytes; the limit is {MAX_TEMPLATE_BYTES}",
                src.len()
            ),
        });
    }
    if walk::nesting_depth(src) > MAX_NESTING {
        return Err(TemplateError::Limit {
            what: format!(
                "template \"{}\" nests blocks or subexpressions more than {MAX_NESTING} deep",
                shown(src)
            ),
        });
    }
    let tpl = Template::compile(src).map_err(|e| {
        let reason = e.reason().to_string();
        let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
        let message = match e.pos() {
            Some((line, col)) => format!("{reason} at line {line}, column {col}"),
            None => reason,
        };
        TemplateError::Parse {
            template: shown(src),
            message,
        }
    })?;
    let refs = walk::analyse(&tpl).map_err(|what| TemplateError::Forbidden {
        template: shown(src),
        what,
    })?;
    Ok(Checked { tpl, refs })
}

/// The root path of a template that is exactly one bare placeholder.
fn single_placeholder(tpl: &Template) -> Option<Vec<String>> {
    let [TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht)] =
        tpl.elements.as_slice()
    else {
        return None;
    };
    let Path::Relative((segs, _)) = walk::bare_path(ht)? else {
        return None;
    };
    let mut names = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        match s {
            PathSeg::Named(n) => names.push(n.clone()),
            PathSeg::Ruled(r) if i == 0 && format!("{r:?}") == "path_root" => {}
            _ => return None,
        }
    }
    Some(names)
}

impl<'c> Job<'c> {
    fn new(ctx: &'c Value) -> Self {
        Job {
            ctx,
            hctx: None,
            output_left: MAX_OUTPUT_BYTES,
        }
    }

    fn leaf(&mut self, t: &Templates, s: &str) -> Result<Value, TemplateError> {
        // Fast path: most strings are not templates.
        if !s.contains("{{") {
            return Ok(Value::String(s.to_string()));
        }
        let checked = compile(s)?;
        if let Some(segs) = single_placeholder(&checked.tpl) {
            let raw = checked.refs.first().map(|r| r.raw.as_str()).unwrap_or(s);
            return lookup(self.ctx, &segs, raw).cloned();
        }
        self.text(t, s, checked).map(Value::String)
    }

    fn text(
        &mut self,
        t: &Templates,
        src: &str,
        checked: Checked,
    ) -> Result<String, TemplateError> {
        let Checked { mut tpl, refs } = checked;
        for r in &refs {
            let segs = if r.whole { &r.segs[..] } else { &r.segs[..1] };
            lookup(self.ctx, segs, &r.raw)?;
        }
        walk::rewrite(&mut tpl);
        let ctx = self.ctx;
        let hctx: &Context = self.hctx.get_or_insert_with(|| Context::from(ctx.clone()));
        let mut out = helpers::CappedOutput::new(self.output_left);
        let mut rc = RenderContext::new(None);
        match tpl.render(&t.hb, hctx, &mut rc, &mut out) {
            Ok(()) => {
                self.output_left = self.output_left.saturating_sub(out.buf.len());
                Ok(out.buf)
            }
            Err(e) => Err(render_error(&e, src, ctx)),
        }
    }
}

fn render_error(e: &RenderError, src: &str, ctx: &Value) -> TemplateError {
    match helpers::limit_hit() {
        Some(helpers::Limit::Output) => {
            return TemplateError::Limit {
                what: format!("rendering produced more than {MAX_OUTPUT_BYTES} bytes"),
            }
        }
        Some(helpers::Limit::Steps) => {
            return TemplateError::Limit {
                what: format!(
                    "rendering took more than {MAX_RENDER_STEPS} steps (helper calls and loop iterations)"
                ),
            }
        }
        None => {}
    }
    if let RenderErrorReason::MissingVariable(Some(raw)) = e.reason() {
        let segs = split_path(raw);
        return match lookup(ctx, &segs, raw) {
            Err(unknown) => unknown,
            // Relative to a block (inside each/with): name what was asked for.
            Ok(_) => TemplateError::Unknown {
                variable: raw.clone(),
                at: String::new(),
                missing: raw.clone(),
                available: listed(ctx),
            },
        };
    }
    let message = match e.reason() {
        RenderErrorReason::MissingVariable(None) => {
            "lookup found nothing at that key or index".to_string()
        }
        RenderErrorReason::ParamNotFoundForIndex(helper, i) => format!(
            "helper \"{helper}\" has no value for parameter {}; a variable it uses may be undefined",
            i + 1
        ),
        other => other.to_string(),
    };
    TemplateError::Render {
        template: shown(src),
        message,
    }
}

/// Segments of a path as written (`a.b`, `a/[0]`, `this.x`, `../x`, `@root.x`).
fn split_path(raw: &str) -> Vec<String> {
    let mut segs = Vec::new();
    let mut cur = String::new();
    let mut in_brackets = false;
    for c in raw.chars() {
        match c {
            '[' if !in_brackets => in_brackets = true,
            ']' if in_brackets => in_brackets = false,
            '.' | '/' if !in_brackets => segs.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    segs.push(cur);
    segs.retain(|s| !s.is_empty() && s != "this" && s != "@root");
    segs
}

/// The value at `segs` under `root`; numeric segments index arrays.
pub(crate) fn lookup<'v>(
    root: &'v Value,
    segs: &[String],
    raw: &str,
) -> Result<&'v Value, TemplateError> {
    let mut cur = root;
    for (i, s) in segs.iter().enumerate() {
        let next = match cur {
            Value::Object(m) => m.get(s),
            Value::Array(a) => s.parse::<usize>().ok().and_then(|n| a.get(n)),
            _ => None,
        };
        cur = next.ok_or_else(|| TemplateError::Unknown {
            variable: raw.to_string(),
            at: segs[..i].join("."),
            missing: s.clone(),
            available: listed(cur),
        })?;
    }
    Ok(cur)
}

/// What a person could write after `cur.`: field names or the index range.
fn listed(cur: &Value) -> Vec<String> {
    match cur {
        Value::Object(m) => {
            let mut names: Vec<String> = m.keys().cloned().collect();
            names.sort();
            names.truncate(MAX_LISTED);
            if m.len() > MAX_LISTED {
                names.push(format!("… ({} more)", m.len() - MAX_LISTED));
            }
            names
        }
        Value::Array(a) if !a.is_empty() => vec![format!("indexes 0 to {}", a.len() - 1)],
        Value::Array(_) => vec!["nothing (an empty array)".to_string()],
        Value::String(_) => vec!["nothing (a string)".to_string()],
        Value::Null => vec!["nothing (null)".to_string()],
        _ => vec![format!(
            "nothing (a {})",
            if cur.is_number() { "number" } else { "boolean" }
        )],
    }
}
