//! [`TemplateError`], its messages and its wire form, and how a template is
//! shown inside a message.

use crate::errors::{ErrorType, HubError};

use super::limits::MAX_PARAMS_DEPTH;
use super::walk::helper_names;

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
                helper_names().join(", ")
            ),
            TemplateError::Render { .. } => "check the values the template uses".to_string(),
        };
        HubError::new(ErrorType::TemplateError, self.to_string()).with_suggestion(suggestion)
    }
}

/// The error for a params tree nested deeper than [`MAX_PARAMS_DEPTH`].
pub(super) fn depth_error() -> TemplateError {
    TemplateError::Limit {
        what: format!("params are nested more than {MAX_PARAMS_DEPTH} levels deep"),
    }
}

/// A template as it appears in an error: at most 120 characters.
pub(super) fn shown(src: &str) -> String {
    shorten(src, 120)
}

/// `text` cut to at most `max_chars` characters, saying how long it was.
pub(crate) fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}… ({} bytes in all)", &text[..i], text.len()),
        None => text.to_string(),
    }
}
