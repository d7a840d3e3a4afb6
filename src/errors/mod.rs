//! The one place that turns failures into the wire error object.
//!
//! Every failure in the hub (a tool call, a batch step, a bad frame, a refused
//! request) becomes a [`HubError`]. `errorType`, `suggestion` and `recoverable`
//! come from [`ErrorType`]; `classify` is the only code that reads error text.
//!
//! `kind` holds the class table, `classify` the rules that read error text
//! and the suggestions, `wire` the [`HubError`] object built from both.

mod classify;
mod kind;
#[cfg(test)]
mod table_tests;
mod wire;

pub use classify::{classify, never_connected, retry_after, suggestion_for};
pub use kind::ErrorType;
pub use wire::HubError;
