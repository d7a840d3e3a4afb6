//! Parsing a template string and checking what it uses, before anything is
//! rendered.

use handlebars::template::{Template, TemplateElement};
use handlebars::{Path, PathSeg};

use super::error::{shown, TemplateError};
use super::limits::{MAX_NESTING, MAX_TEMPLATE_BYTES};
use super::walk;

/// A template that parsed and uses only allowed constructs.
pub(super) struct Checked {
    pub(super) tpl: Template,
    pub(super) refs: Vec<walk::Reference>,
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

/// Parse `src` and check what it uses; nothing is rendered.
pub(super) fn compile(src: &str) -> Result<Checked, TemplateError> {
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
pub(super) fn single_placeholder(tpl: &Template) -> Option<Vec<String>> {
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
