//! The wire error object [`HubError`] and its builders.

use serde::{Deserialize, Serialize};

use super::classify::{classify, suggestion_for};
use super::kind::ErrorType;

/// The wire error object: `{"errorType","message","suggestion","recoverable","server"?,"tool"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubError {
    pub error_type: ErrorType,
    pub message: String,
    pub suggestion: String,
    pub recoverable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

impl HubError {
    /// An error of a known class; the suggestion is the class's default.
    pub fn new(error_type: ErrorType, message: impl Into<String>) -> Self {
        let message = message.into();
        HubError {
            error_type,
            suggestion: suggestion_for(error_type, &message),
            recoverable: error_type.recoverable(),
            message,
            server: None,
            tool: None,
        }
    }

    /// Classify free text (a tool's error output, an rmcp error) into a class.
    pub fn classified(message: impl Into<String>) -> Self {
        let message = message.into();
        HubError::new(classify(&message), message)
    }

    pub fn with_suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = suggestion.into();
        self
    }

    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }
}

impl std::fmt::Display for HubError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error_type, self.message)
    }
}

impl std::error::Error for HubError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_a_suggestion() {
        for t in ErrorType::ALL {
            assert!(!suggestion_for(t, "").trim().is_empty(), "{t}");
            assert!(!suggestion_for(t, "x").trim().is_empty(), "{t}");
            assert_eq!(HubError::new(t, "boom").recoverable, t.recoverable());
        }
    }
}
