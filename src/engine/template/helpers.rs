//! The block helpers and value helpers the hub registers itself, the capped
//! output, and the per-render work budget.
//!
//! `if`, `unless`, `each` and `with` replace the handlebars built-ins so every
//! block entry and every loop iteration spends from a budget: a template can then
//! never loop for long without producing output (which is capped separately),
//! e.g. nested `{{#each}}` over large arrays with empty bodies. `each` and `with`
//! follow handlebars 6.4's own implementations (block context, `@index`,
//! `@first`, `@last`, `@key`, block params).

use std::cell::Cell;

use handlebars::{
    BlockContext, BlockParams, Context, Handlebars, Helper, HelperDef, HelperResult, JsonTruthy,
    Output, PathAndJson, RenderContext, RenderError, RenderErrorReason, Renderable,
};
use serde_json::Value;

/// The internal helper a bare `{{path}}` is rewritten to, so objects and arrays
/// come out as compact JSON instead of handlebars' `[object]`.
pub(super) const TEXT_HELPER: &str = "__text";

thread_local! {
    // Rendering is synchronous on one thread and never re-entered from a helper,
    // so a thread-local is an exact per-render budget without threading state
    // through handlebars' API.
    static STEPS_LEFT: Cell<u64> = const { Cell::new(0) };
    static LIMIT_HIT: Cell<Option<Limit>> = const { Cell::new(None) };
}

/// Which budget stopped a render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    Steps,
    Output,
}

/// Start a render with `steps` units of work.
pub(super) fn begin(steps: u64) {
    STEPS_LEFT.with(|s| s.set(steps));
    LIMIT_HIT.with(|l| l.set(None));
}

/// The limit that stopped the last render, if one did.
pub(super) fn limit_hit() -> Option<Limit> {
    LIMIT_HIT.with(|l| l.get())
}

fn spend(n: u64) -> Result<(), RenderError> {
    let left = STEPS_LEFT.with(|s| s.get());
    if left < n {
        LIMIT_HIT.with(|l| l.set(Some(Limit::Steps)));
        return Err(RenderErrorReason::Other("render step budget exhausted".into()).into());
    }
    STEPS_LEFT.with(|s| s.set(left - n));
    Ok(())
}

fn cost(h: &Helper<'_>) -> u64 {
    1 + h.params().len() as u64 + h.hash().len() as u64
}

/// A value as text: strings raw, everything else (objects, arrays, numbers,
/// booleans, null) as compact JSON.
pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An in-memory output that refuses to grow past `cap` bytes.
pub(super) struct CappedOutput {
    pub(super) buf: String,
    cap: usize,
}

impl CappedOutput {
    pub(super) fn new(cap: usize) -> Self {
        CappedOutput {
            buf: String::new(),
            cap,
        }
    }
}

impl Output for CappedOutput {
    fn write(&mut self, seg: &str) -> std::io::Result<()> {
        if self.buf.len().saturating_add(seg.len()) > self.cap {
            LIMIT_HIT.with(|l| l.set(Some(Limit::Output)));
            return Err(std::io::Error::other("template output limit reached"));
        }
        self.buf.push_str(seg);
        Ok(())
    }
}

/// Register the hub's own helpers on `hb` (replacing the built-in block helpers).
pub(super) fn register(hb: &mut Handlebars<'static>) {
    hb.register_helper("if", Box::new(IfHelper { positive: true }));
    hb.register_helper("unless", Box::new(IfHelper { positive: false }));
    hb.register_helper("each", Box::new(EachHelper));
    hb.register_helper("with", Box::new(WithHelper));
    hb.register_helper("json", Box::new(ValueHelper { json: true }));
    hb.register_helper(TEXT_HELPER, Box::new(ValueHelper { json: false }));
}

fn first_param<'a, 'rc>(
    h: &'a Helper<'rc>,
    name: &'static str,
) -> Result<&'a PathAndJson<'rc>, RenderError> {
    h.param(0)
        .ok_or_else(|| RenderErrorReason::ParamNotFoundForIndex(name, 0).into())
}

/// `__text` (bare placeholders) and `json`: write one value; a missing value is
/// a strict-mode error naming the path.
struct ValueHelper {
    json: bool,
}

impl HelperDef for ValueHelper {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        spend(cost(h))?;
        let p = first_param(h, if self.json { "json" } else { "value" })?;
        if p.is_value_missing() {
            return Err(RenderError::strict_error(p.relative_path()));
        }
        let text = if self.json {
            p.value().to_string()
        } else {
            value_text(p.value())
        };
        out.write(&text)?;
        Ok(())
    }
}

/// `if` / `unless`: a missing value is falsy (the validator has already made
/// sure the root variable exists), `includeZero=true` makes 0 truthy.
struct IfHelper {
    positive: bool,
}

impl HelperDef for IfHelper {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        spend(cost(h))?;
        let name = if self.positive { "if" } else { "unless" };
        let param = first_param(h, name)?;
        let include_zero = h
            .hash_get("includeZero")
            .and_then(|v| v.value().as_bool())
            .unwrap_or(false);
        let truthy = param.value().is_truthy(include_zero) == self.positive;
        match if truthy { h.template() } else { h.inverse() } {
            Some(t) => t.render(r, ctx, rc, out),
            None => Ok(()),
        }
    }
}

fn new_block<'rc>(param: &PathAndJson<'rc>) -> BlockContext<'rc> {
    let mut block = BlockContext::new();
    if let Some(path) = param.context_path() {
        block.base_path_mut().clone_from(path);
    } else {
        block.set_base_value(param.value().clone());
    }
    block
}

/// `with`: a missing or falsy value renders the `{{else}}` part (or nothing).
struct WithHelper;

impl HelperDef for WithHelper {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        spend(cost(h))?;
        let param = first_param(h, "with")?;
        if !param.value().is_truthy(false) {
            return match h.inverse() {
                Some(t) => t.render(r, ctx, rc, out),
                None => Ok(()),
            };
        }
        let mut block = new_block(param);
        // Keep @index/@key of an enclosing each visible, as handlebars.js does.
        if let Some(parent) = rc.block() {
            block
                .local_variables_mut()
                .clone_from(parent.local_variables());
        }
        if let Some(name) = h.block_param() {
            let mut params = BlockParams::new();
            if param.context_path().is_some() {
                params.add_path(name, Vec::new())?;
            } else {
                params.add_value(name, param.value().clone())?;
            }
            block.set_block_params(params);
        }
        rc.push_block(block);
        let result = match h.template() {
            Some(t) => t.render(r, ctx, rc, out),
            None => Ok(()),
        };
        rc.pop_block();
        result
    }
}

/// `each` over an array or an object; anything else (including a missing
/// value) renders the `{{else}}` part. Every iteration spends one step.
struct EachHelper;

impl HelperDef for EachHelper {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        spend(cost(h))?;
        let param = first_param(h, "each")?;
        let Some(body) = h.template() else {
            return Ok(());
        };
        let items: Vec<(Value, &Value)> = match param.value() {
            Value::Array(list) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, v)| (Value::from(i), v))
                .collect(),
            Value::Object(map) if !map.is_empty() => map
                .iter()
                .map(|(k, v)| (Value::String(k.clone()), v))
                .collect(),
            _ => {
                return match h.inverse() {
                    Some(t) => t.render(r, ctx, rc, out),
                    None => Ok(()),
                }
            }
        };
        let is_object = param.value().is_object();
        let base_path = param.context_path();
        rc.push_block(new_block(param));
        let len = items.len();
        let mut result = Ok(());
        for (i, (key, v)) in items.into_iter().enumerate() {
            if let Err(e) = spend(1) {
                result = Err(e);
                break;
            }
            if let Some(block) = rc.block_mut() {
                block.set_local_var("first", Value::Bool(i == 0));
                block.set_local_var("last", Value::Bool(i + 1 == len));
                block.set_local_var("index", Value::from(i));
                if is_object {
                    block.set_local_var("key", key.clone());
                }
                let seg = match &key {
                    Value::String(k) => k.clone(),
                    other => other.to_string(),
                };
                match base_path {
                    Some(p) => {
                        let mut path = p.clone();
                        path.push(seg);
                        *block.base_path_mut() = path;
                    }
                    None => block.set_base_value(v.clone()),
                }
                if let Err(e) = set_block_params(block, h, base_path.is_some(), key, v) {
                    result = Err(e);
                    break;
                }
            }
            if let Err(e) = body.render(r, ctx, rc, out) {
                result = Err(e);
                break;
            }
        }
        rc.pop_block();
        result
    }
}

fn set_block_params<'rc>(
    block: &mut BlockContext<'rc>,
    h: &Helper<'rc>,
    by_path: bool,
    key: Value,
    v: &Value,
) -> Result<(), RenderError> {
    let mut params = BlockParams::new();
    if let Some(name) = h.block_param() {
        add_item(&mut params, name, by_path, v)?;
    } else if let Some((name, key_name)) = h.block_param_pair() {
        add_item(&mut params, name, by_path, v)?;
        params.add_value(key_name, key)?;
    } else {
        return Ok(());
    }
    block.set_block_params(params);
    Ok(())
}

fn add_item<'rc>(
    params: &mut BlockParams<'rc>,
    name: &'rc str,
    by_path: bool,
    v: &Value,
) -> Result<(), RenderError> {
    if by_path {
        params.add_path(name, Vec::new())
    } else {
        params.add_value(name, v.clone())
    }
}
