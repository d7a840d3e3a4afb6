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
//!
//! The parts: `limits` (the limits above), `error` ([`TemplateError`] and its
//! wire form), `compile` (parse and check a template), `render` (one render
//! call over a params tree or a string), `lookup` (variable paths in the
//! context), `walk` (what a template uses) and `helpers` (the registered
//! helpers and the render budget). This file holds the [`Templates`] registry.

mod compile;
mod error;
mod helpers;
mod limits;
mod lookup;
mod render;
#[cfg(test)]
mod tests;
mod walk;

use handlebars::Handlebars;
use serde_json::{Map, Value};

use compile::compile;
use error::depth_error;
use render::Job;

pub use compile::roots;
pub(crate) use error::shorten;
pub use error::TemplateError;
pub(crate) use helpers::value_text;
pub use limits::{
    MAX_NESTING, MAX_OUTPUT_BYTES, MAX_PARAMS_DEPTH, MAX_RENDER_STEPS, MAX_TEMPLATE_BYTES,
};
pub(crate) use lookup::lookup;

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
        walk::helper_names()
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

    /// Whether rendering `params` needs the template context: some string
    /// in it holds `{{` (or the tree is deeper than rendering allows, which
    /// rendering refuses). Any other tree renders to an exact copy of itself.
    pub fn is_templated(params: &Value) -> bool {
        fn walk(v: &Value, depth: usize) -> bool {
            if depth > MAX_PARAMS_DEPTH {
                return true;
            }
            match v {
                Value::String(s) => s.contains("{{"),
                Value::Array(a) => a.iter().any(|x| walk(x, depth + 1)),
                Value::Object(m) => m.values().any(|x| walk(x, depth + 1)),
                _ => false,
            }
        }
        walk(params, 0)
    }

    /// Render one string as a params leaf: an exact single placeholder keeps
    /// the value's JSON type, anything else becomes a string.
    pub fn render_value(&self, s: &str, ctx: &Value) -> Result<Value, TemplateError> {
        helpers::begin(MAX_RENDER_STEPS);
        Job::new(ctx).leaf(&self.hb, s)
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
        job.text(&self.hb, s, checked)
    }

    fn render_tree(&self, v: &Value, depth: usize, job: &mut Job) -> Result<Value, TemplateError> {
        if depth > MAX_PARAMS_DEPTH {
            return Err(depth_error());
        }
        Ok(match v {
            Value::String(s) => job.leaf(&self.hb, s)?,
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
