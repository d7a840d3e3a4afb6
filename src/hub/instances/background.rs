//! The pool's two background tasks: the consumer of its instances'
//! supervisor events, and the idle reaper.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::{Instances, REAP_MAX_WAIT};
use crate::hub::Hub;
use crate::mcp::supervisor::{ServerEvent, ServerState, SupervisorEvent};

/// The single consumer of the instances' supervisor events: applies each
/// state to its instance and wakes the calls waiting for it.
pub(in crate::hub) async fn run_events(
    pool: Arc<Instances>,
    mut rx: mpsc::UnboundedReceiver<ServerEvent>,
) {
    while let Some(env) = rx.recv().await {
        let SupervisorEvent::Status(status) = env.event else {
            continue; // every instance offers the template's tools
        };
        let slot = pool.lock().by_gen.get(&env.generation).cloned();
        let Some(slot) = slot else { continue };
        slot.handle.apply_state(&status);
        let state = slot
            .handle
            .status()
            .map(|s| s.state)
            .unwrap_or(status.state);
        tracing::info!(server = %status.name, context = %slot.context, state = ?state,
            restarts = status.restarts, error = status.last_error.as_deref().unwrap_or(""),
            "server instance status");
        let before = slot.state.send_replace(state);
        // A change of an instance still in the pool (a retired one was
        // announced stopped when it left; it starts as `starting`).
        if before != state && pool.holds_slot(&slot) {
            pool.announce(&slot, state, None);
        }
        if state == ServerState::Stopped {
            pool.lock().by_gen.remove(&env.generation);
        }
    }
}

/// Stop instances unused past their server's `instanceIdleMs`; sleeps
/// until the next one falls due (or something changes), never polls fast.
pub(in crate::hub) async fn run_reaper(hub: Hub) {
    loop {
        let cfg = hub.config();
        let idle_of = |server: &str| {
            cfg.mcp_servers
                .get(server)
                .map(|s| s.instances.idle)
                .unwrap_or(REAP_MAX_WAIT)
        };
        let (due, next) = hub.instances.idle_sweep(Instant::now(), idle_of);
        for s in due {
            hub.instances
                .retire(s, "it was idle for instanceIdleMs".to_string());
        }
        let wait = next
            .map(|n| n.saturating_duration_since(Instant::now()))
            .unwrap_or(REAP_MAX_WAIT)
            .min(REAP_MAX_WAIT);
        tokio::select! {
            _ = hub.shutdown.cancelled() => return,
            _ = hub.instances.wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
