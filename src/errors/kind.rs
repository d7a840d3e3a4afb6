//! The error classes: [`ErrorType`], the wire `errorType`, its list and
//! which classes are recoverable.

use serde::{Deserialize, Serialize};

/// The wire `errorType`. `recoverable` is true exactly for the classes the
/// retry manager may retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorType {
    Timeout,
    NotFound,
    Permission,
    BrowserMissing,
    PageClosed,
    ElementNotFound,
    Network,
    ToolNotFound,
    AmbiguousTool,
    InvalidParams,
    ServerUnavailable,
    TemplateError,
    SafetyBlocked,
    Cancelled,
    InvalidMessage,
    Unauthorized,
    LimitExceeded,
    AssertionFailed,
    /// An upstream service is rate limiting (HTTP 429, "too many requests").
    RateLimited,
    /// An upstream server failed internally (JSON-RPC -32603).
    UpstreamError,
    Unknown,
}

impl ErrorType {
    pub const ALL: [ErrorType; 21] = [
        ErrorType::Timeout,
        ErrorType::NotFound,
        ErrorType::Permission,
        ErrorType::BrowserMissing,
        ErrorType::PageClosed,
        ErrorType::ElementNotFound,
        ErrorType::Network,
        ErrorType::ToolNotFound,
        ErrorType::AmbiguousTool,
        ErrorType::InvalidParams,
        ErrorType::ServerUnavailable,
        ErrorType::TemplateError,
        ErrorType::SafetyBlocked,
        ErrorType::Cancelled,
        ErrorType::InvalidMessage,
        ErrorType::Unauthorized,
        ErrorType::LimitExceeded,
        ErrorType::AssertionFailed,
        ErrorType::RateLimited,
        ErrorType::UpstreamError,
        ErrorType::Unknown,
    ];

    /// The wire name, e.g. `"SERVER_UNAVAILABLE"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::Timeout => "TIMEOUT",
            ErrorType::NotFound => "NOT_FOUND",
            ErrorType::Permission => "PERMISSION",
            ErrorType::BrowserMissing => "BROWSER_MISSING",
            ErrorType::PageClosed => "PAGE_CLOSED",
            ErrorType::ElementNotFound => "ELEMENT_NOT_FOUND",
            ErrorType::Network => "NETWORK",
            ErrorType::ToolNotFound => "TOOL_NOT_FOUND",
            ErrorType::AmbiguousTool => "AMBIGUOUS_TOOL",
            ErrorType::InvalidParams => "INVALID_PARAMS",
            ErrorType::ServerUnavailable => "SERVER_UNAVAILABLE",
            ErrorType::TemplateError => "TEMPLATE_ERROR",
            ErrorType::SafetyBlocked => "SAFETY_BLOCKED",
            ErrorType::Cancelled => "CANCELLED",
            ErrorType::InvalidMessage => "INVALID_MESSAGE",
            ErrorType::Unauthorized => "UNAUTHORIZED",
            ErrorType::LimitExceeded => "LIMIT_EXCEEDED",
            ErrorType::AssertionFailed => "ASSERTION_FAILED",
            ErrorType::RateLimited => "RATE_LIMITED",
            ErrorType::UpstreamError => "UPSTREAM_ERROR",
            ErrorType::Unknown => "UNKNOWN",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorType> {
        ErrorType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// True exactly for the classes the retry manager may retry.
    pub fn recoverable(self) -> bool {
        matches!(
            self,
            ErrorType::Timeout
                | ErrorType::PageClosed
                | ErrorType::ElementNotFound
                | ErrorType::Network
                | ErrorType::ServerUnavailable
                | ErrorType::AssertionFailed
                | ErrorType::RateLimited
                | ErrorType::UpstreamError
        )
    }
}

impl std::fmt::Display for ErrorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recoverable_is_exactly_the_retryable_set() {
        let recoverable: Vec<_> = ErrorType::ALL
            .into_iter()
            .filter(|t| t.recoverable())
            .collect();
        assert_eq!(
            recoverable,
            [
                ErrorType::Timeout,
                ErrorType::PageClosed,
                ErrorType::ElementNotFound,
                ErrorType::Network,
                ErrorType::ServerUnavailable,
                ErrorType::AssertionFailed,
                ErrorType::RateLimited,
                ErrorType::UpstreamError,
            ]
        );
    }
}
