//! Static analysis of a compiled template: which constructs it uses, which
//! variables it reads, and the rewrite that makes bare `{{path}}` render
//! objects as compact JSON.

use handlebars::template::{HelperTemplate, Parameter, Template, TemplateElement};
use handlebars::{Path, PathSeg};

use super::helpers::TEXT_HELPER;

/// Helpers usable with a block (`{{#if x}}…{{/if}}`).
pub(super) const BLOCK_HELPERS: &[&str] = &["if", "unless", "each", "with"];
/// Helpers usable inline or as a subexpression (`{{eq a b}}`, `(len x)`).
pub(super) const VALUE_HELPERS: &[&str] = &[
    "eq", "ne", "gt", "gte", "lt", "lte", "not", "and", "or", "len", "lookup", "json",
];
/// Most parameters (counting nested subexpressions) one tag may have: each tag
/// spends a bounded amount of work per render.
const MAX_TAG_PARAMS: usize = 64;

/// A variable read at the template's root context.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Reference {
    /// Path segments from the root, e.g. `["fileA", "result", "0"]`.
    pub segs: Vec<String>,
    /// As written in the template.
    pub raw: String,
    /// When false only the root name must exist (the tested value of `if`,
    /// `unless`, `each`, `with` may be absent: absent is falsy).
    pub whole: bool,
}

pub(super) fn is_helper(name: &str) -> bool {
    BLOCK_HELPERS.contains(&name) || VALUE_HELPERS.contains(&name) || name == TEXT_HELPER
}

/// Every helper a template may use: the block helpers, then the value helpers.
pub(super) fn helper_names() -> Vec<&'static str> {
    BLOCK_HELPERS.iter().chain(VALUE_HELPERS).copied().collect()
}

fn allowed_list() -> String {
    helper_names().join(", ")
}

/// Check what `t` uses and collect the root-level variables it reads. The
/// error is a sentence for `TemplateError::Forbidden`.
pub(super) fn analyse(t: &Template) -> Result<Vec<Reference>, String> {
    let mut refs = Vec::new();
    walk_template(t, 0, &mut refs)?;
    Ok(refs)
}

fn walk_template(t: &Template, depth: usize, refs: &mut Vec<Reference>) -> Result<(), String> {
    for e in &t.elements {
        walk_element(e, depth, refs)?;
    }
    Ok(())
}

fn is_name_only(ht: &HelperTemplate) -> bool {
    !ht.block && ht.params.is_empty() && ht.hash.is_empty()
}

/// The path of a bare `{{path}}` tag (not a helper call), if `ht` is one.
pub(super) fn bare_path(ht: &HelperTemplate) -> Option<&Path> {
    match &ht.name {
        Parameter::Path(p) if is_name_only(ht) && !is_helper(path_raw(p)) => Some(p),
        _ => None,
    }
}

fn path_raw(p: &Path) -> &str {
    match p {
        Path::Relative((_, raw)) => raw,
        Path::Local((_, _, raw)) => raw,
    }
}

fn helper_name(ht: &HelperTemplate) -> String {
    match &ht.name {
        Parameter::Name(n) => n.clone(),
        Parameter::Path(p) => path_raw(p).to_string(),
        other => format!("{other:?}"),
    }
}

fn walk_element(
    e: &TemplateElement,
    depth: usize,
    refs: &mut Vec<Reference>,
) -> Result<(), String> {
    match e {
        TemplateElement::RawString(_) | TemplateElement::Comment(_) => Ok(()),
        TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) => {
            if let Some(p) = bare_path(ht) {
                record(p, depth, true, refs);
                return Ok(());
            }
            let name = helper_name(ht);
            if BLOCK_HELPERS.contains(&name.as_str()) {
                return Err(format!(
                    "helper \"{name}\" needs a block: {{{{#{name} …}}}}…{{{{/{name}}}}}"
                ));
            }
            check_value_helper(&name)?;
            walk_params(ht, depth, None, refs)
        }
        TemplateElement::HelperBlock(ht) => {
            let name = helper_name(ht);
            if !BLOCK_HELPERS.contains(&name.as_str()) {
                return Err(format!(
                    "\"{{{{#{name}}}}}\" is not allowed: only if, unless, each and with take a block"
                ));
            }
            walk_params(ht, depth, Some(0), refs)?;
            let inner = if name == "each" || name == "with" {
                depth + 1
            } else {
                depth
            };
            if let Some(t) = &ht.template {
                walk_template(t, inner, refs)?;
            }
            if let Some(t) = &ht.inverse {
                walk_template(t, depth, refs)?;
            }
            Ok(())
        }
        TemplateElement::DecoratorExpression(_) | TemplateElement::DecoratorBlock(_) => {
            Err("decorators ({{* …}}) are not supported".to_string())
        }
        TemplateElement::PartialExpression(_) | TemplateElement::PartialBlock(_) => {
            Err("partials ({{> …}}) are not supported".to_string())
        }
        other => Err(format!("unsupported template construct {other:?}")),
    }
}

fn check_value_helper(name: &str) -> Result<(), String> {
    if VALUE_HELPERS.contains(&name) {
        Ok(())
    } else {
        Err(format!(
            "unknown helper \"{name}\"; allowed helpers: {}",
            allowed_list()
        ))
    }
}

/// Walk a helper's parameters; `lenient` is the index of the parameter whose
/// value may be absent (the tested value of a block helper).
fn walk_params(
    ht: &HelperTemplate,
    depth: usize,
    lenient: Option<usize>,
    refs: &mut Vec<Reference>,
) -> Result<(), String> {
    let mut count = 0;
    for (i, p) in ht.params.iter().enumerate() {
        walk_param(p, depth, lenient != Some(i), refs, &mut count)?;
    }
    for p in ht.hash.values() {
        walk_param(p, depth, true, refs, &mut count)?;
    }
    Ok(())
}

fn walk_param(
    p: &Parameter,
    depth: usize,
    whole: bool,
    refs: &mut Vec<Reference>,
    count: &mut usize,
) -> Result<(), String> {
    *count += 1;
    if *count > MAX_TAG_PARAMS {
        return Err(format!(
            "a tag has more than {MAX_TAG_PARAMS} parameters and subexpressions"
        ));
    }
    match p {
        Parameter::Path(path) => {
            record(path, depth, whole, refs);
            Ok(())
        }
        Parameter::Subexpression(sub) => match sub.as_element() {
            TemplateElement::Expression(ht) => {
                let name = helper_name(ht);
                check_value_helper(&name)?;
                for q in &ht.params {
                    walk_param(q, depth, true, refs, count)?;
                }
                for q in ht.hash.values() {
                    walk_param(q, depth, true, refs, count)?;
                }
                Ok(())
            }
            other => Err(format!("unsupported subexpression {other:?}")),
        },
        _ => Ok(()),
    }
}

/// Resolve `path` (read at block depth `depth`) to a root reference when it
/// points at the root context: plain paths at depth 0, `@root.x`, or enough
/// `../` to climb out of every `each`/`with`.
fn record(path: &Path, depth: usize, whole: bool, refs: &mut Vec<Reference>) {
    let Path::Relative((segs, raw)) = path else {
        return; // @index, @key, …: block-local values
    };
    let mut ups = 0;
    let mut rooted = false;
    let mut names = Vec::new();
    for s in segs {
        match s {
            PathSeg::Named(n) => names.push(n.clone()),
            PathSeg::Ruled(r) => match format!("{r:?}").as_str() {
                "path_root" => rooted = true,
                "path_up" => ups += 1,
                _ => return,
            },
            _ => return,
        }
    }
    if (rooted || ups >= depth) && !names.is_empty() {
        refs.push(Reference {
            segs: names,
            raw: raw.clone(),
            whole,
        });
    }
}

/// Prepare a checked template for rendering: bare `{{path}}` tags call the
/// internal text helper (objects become compact JSON, strings stay raw) and
/// comments are dropped so they cost nothing in loops.
pub(super) fn rewrite(t: &mut Template) {
    if t.mapping.len() == t.elements.len() {
        let mut keep = t
            .elements
            .iter()
            .map(|e| !matches!(e, TemplateElement::Comment(_)));
        t.mapping.retain(|_| keep.next().unwrap_or(true));
    }
    t.elements
        .retain(|e| !matches!(e, TemplateElement::Comment(_)));
    for e in &mut t.elements {
        match e {
            TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht)
                if bare_path(ht).is_some() =>
            {
                let name = std::mem::replace(&mut ht.name, Parameter::Name(TEXT_HELPER.into()));
                ht.params = vec![name];
            }
            TemplateElement::HelperBlock(ht) => {
                if let Some(inner) = &mut ht.template {
                    rewrite(inner);
                }
                if let Some(inner) = &mut ht.inverse {
                    rewrite(inner);
                }
            }
            _ => {}
        }
    }
}

/// Reject sources whose block or parenthesis nesting is deep enough to risk
/// the recursive parser, renderer or drop exhausting a worker's stack. Counts
/// conservatively on the raw text, before parsing.
pub(super) fn nesting_depth(src: &str) -> usize {
    let b = src.as_bytes();
    let (mut blocks, mut parens, mut max) = (0usize, 0usize, 0usize);
    let mut i = 0;
    let mut in_tag = false;
    while i < b.len() {
        if !in_tag && b[i..].starts_with(b"{{") {
            in_tag = true;
            i += 2;
            while i < b.len() && (b[i] == b'{' || b[i] == b'~' || b[i] == b' ') {
                i += 1;
            }
            match b.get(i) {
                Some(b'#') => blocks += 1,
                // `{{^}}` is an else; `{{^x}}` opens an inverse block.
                Some(b'^') if b.get(i + 1).is_some_and(|c| *c != b'}' && *c != b'~') => blocks += 1,
                Some(b'/') => blocks = blocks.saturating_sub(1),
                _ => {}
            }
            max = max.max(blocks);
            continue;
        }
        if in_tag {
            match b[i] {
                b'(' => {
                    parens += 1;
                    max = max.max(parens);
                }
                b')' => parens = parens.saturating_sub(1),
                b'}' if b[i..].starts_with(b"}}") => {
                    in_tag = false;
                    parens = 0;
                }
                _ => {}
            }
        }
        i += 1;
    }
    max
}
