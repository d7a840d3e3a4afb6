//! One render call: the string leaves it renders, the output budget they
//! share, and render failures turned into [`TemplateError`]s.

use handlebars::{Context, Handlebars, RenderContext, RenderError, RenderErrorReason, Renderable};
use serde_json::Value;

use super::compile::{compile, single_placeholder, Checked};
use super::error::{shown, TemplateError};
use super::helpers;
use super::limits::{MAX_OUTPUT_BYTES, MAX_RENDER_STEPS};
use super::lookup::{listed, lookup, split_path};
use super::walk;

/// State shared by the string leaves of one render call.
pub(super) struct Job<'c> {
    ctx: &'c Value,
    hctx: Option<Context>,
    output_left: usize,
}

impl<'c> Job<'c> {
    pub(super) fn new(ctx: &'c Value) -> Self {
        Job {
            ctx,
            hctx: None,
            output_left: MAX_OUTPUT_BYTES,
        }
    }

    pub(super) fn leaf(
        &mut self,
        hb: &Handlebars<'static>,
        s: &str,
    ) -> Result<Value, TemplateError> {
        // Fast path: most strings are not templates.
        if !s.contains("{{") {
            return Ok(Value::String(s.to_string()));
        }
        let checked = compile(s)?;
        if let Some(segs) = single_placeholder(&checked.tpl) {
            let raw = checked.refs.first().map(|r| r.raw.as_str()).unwrap_or(s);
            return lookup(self.ctx, &segs, raw).cloned();
        }
        self.text(hb, s, checked).map(Value::String)
    }

    pub(super) fn text(
        &mut self,
        hb: &Handlebars<'static>,
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
        match tpl.render(hb, hctx, &mut rc, &mut out) {
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
