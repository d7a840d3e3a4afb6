//! Where an `/mcp` `tools/call` takes its place under a cap
//! (`server.maxInFlightPerSession`): a session's calls under the session's
//! own count; a stateless (2026-07-28) request, which is a session of its
//! own, under the count of its token's principal ([`StatelessInFlight`]),
//! so the main token's stateless requests together, and each client's,
//! count as one session. A call that becomes an MCP task holds its place
//! until the task ends, joined with one under `server.maxUnattendedTasks`
//! (`engine::unattended::place`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::CallToolResult;

use super::Endpoint;
use crate::caller::Caller;
use crate::errors::{ErrorType, HubError};
use crate::session::{InFlight, Place};

/// The stateless requests' work in flight, one count per principal (the
/// main token, each client of `clients`).
#[derive(Default)]
pub struct StatelessInFlight(Mutex<HashMap<Option<Arc<str>>, InFlight>>);

impl StatelessInFlight {
    /// A place for one more stateless call of `client`'s token (`None`:
    /// the main token) unless `cap` are in flight.
    pub fn take(&self, client: Option<&Arc<str>>, cap: usize) -> Result<Place, HubError> {
        let count = {
            let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
            all.entry(client.cloned()).or_default().clone()
        };
        count.try_take(cap).ok_or_else(|| {
            let whose = match client {
                Some(c) => format!("client \"{c}\""),
                None => "the main token".to_string(),
            };
            HubError::new(
                ErrorType::LimitExceeded,
                format!("the stateless requests of {whose} already have {cap} calls in flight (server.maxInFlightPerSession; a token's stateless requests count as one session); the tools/call was not started"),
            )
            .with_suggestion("wait for a running call or task to end, send many steps as one hub__tool_batch, or raise server.maxInFlightPerSession in config.json")
        })
    }
}

/// The place a `tools/call` of `caller` takes: its session's (`session`),
/// or for a stateless request its principal's.
pub fn place(
    ep: &Endpoint,
    caller: &Caller,
    session: &InFlight,
    stateless: bool,
) -> Result<Place, HubError> {
    if stateless {
        return stateless_place(ep, caller);
    }
    let cap = ep.app.hub.config().server.max_in_flight_per_session;
    session.take(cap, "tools/call")
}

/// The place of a stateless request's call, under its principal's count.
pub fn stateless_place(ep: &Endpoint, caller: &Caller) -> Result<Place, HubError> {
    let cap = ep.app.hub.config().server.max_in_flight_per_session;
    ep.stateless.take(caller.client.as_ref(), cap)
}

/// The place of a call that becomes an MCP task: the caller's, joined
/// with one under the hub's cap on unattended tasks.
pub fn task_place(
    ep: &Endpoint,
    caller: &Caller,
    session: &InFlight,
    stateless: bool,
) -> Result<Place, HubError> {
    let mine = place(ep, caller, session, stateless)?;
    let hub_wide = crate::engine::unattended::place(&ep.app.engine)?;
    Ok(mine.and(hub_wide))
}

/// A refused `tools/call` as the call's failed result (what a client sees
/// of any failed call: `isError`, the error object).
pub fn refused(tool: &str, e: HubError) -> CallToolResult {
    let failed = crate::hub::CallOutcome::failed(tool, e, Default::default());
    super::tools_call::to_result(&failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_principal_has_its_own_count() {
        let all = StatelessInFlight::default();
        let ext: Arc<str> = "ext".into();
        let a = all.take(Some(&ext), 1);
        assert!(a.is_ok());
        let e = all.take(Some(&ext), 1).err().map(|e| e.message);
        assert!(
            e.as_deref().is_some_and(
                |m| m.contains("client \"ext\"") && m.contains("server.maxInFlightPerSession")
            ),
            "{e:?}"
        );
        // The main token's count is another.
        assert!(all.take(None, 1).is_ok());
        drop(a);
        assert!(all.take(Some(&ext), 1).is_ok());
    }
}
