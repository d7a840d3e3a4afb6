//! What a stateless (2026-07-28) request gets that a session does not:
//! no server-to-client request can reach it mid-call. A server's request
//! for a capability the request declared holds the call for the client's
//! answer (`stateless_call`); one it did not declare is refused here:
//!
//! - the call ends with `-32021` (MissingRequiredClientCapabilityError,
//!   HTTP 400), `data.requiredCapabilities` naming it (`{"sampling": {}}`),
//!   as the revision asks; the server's request is refused and its call
//!   cancelled;
//! - a further request of a call already refused is refused too, with an
//!   error that says the client is stateless.

use rmcp::model::ClientCapabilities;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use crate::mcp::input::Ask;

/// Whether this request is a stateless one (a 2026-07-28 request carries
/// its version in `_meta`; a session's version has a handshake).
pub fn is_stateless(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version().is_some_and(|v| !v.has_initialize())
}

/// How a server's request during a stateless call is refused: the error
/// its server gets, and the one that ends the client's call (if any).
pub struct StatelessRefusal {
    pub upstream: ErrorData,
    pub client: Option<ErrorData>,
}

/// Refuse a server's request made during a stateless call;
/// `can_sample`/`can_elicit` are what the request declared.
pub fn refuse(ask: &Ask, can_sample: bool, can_elicit: bool) -> StatelessRefusal {
    let what = ask.capability();
    let declared = match ask {
        Ask::Sampling(_) => can_sample,
        Ask::Elicitation(_) => can_elicit,
        // A session-era server has no roots to ask of the hub.
        Ask::Roots => false,
    };
    if !declared {
        return StatelessRefusal {
            upstream: ErrorData::internal_error(
                format!("toolhub: the MCP client whose call this serves did not declare {what}"),
                None,
            ),
            client: Some(missing(what)),
        };
    }
    StatelessRefusal {
        upstream: ErrorData::internal_error(
            format!(
                "toolhub: the MCP client whose call this serves is stateless (2026-07-28) and cannot be sent {what} requests mid-call"
            ),
            None,
        ),
        client: None,
    }
}

/// `-32021` naming the capability the call needed.
pub fn missing(what: &str) -> ErrorData {
    let required: ClientCapabilities =
        serde_json::from_value(json!({ what: {} })).unwrap_or_default();
    let mut e = ErrorData::missing_required_client_capability(required);
    e.message = format!(
        "this call needs the client capability {what:?}, which the request did not declare in _meta[\"io.modelcontextprotocol/clientCapabilities\"]: declare it and send the call again"
    )
    .into();
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_names_the_capability_as_an_object() {
        let e = missing("sampling");
        assert_eq!(e.code.0, -32021);
        let data = e.data.unwrap_or_default();
        assert_eq!(data["requiredCapabilities"], json!({"sampling": {}}));
    }
}
