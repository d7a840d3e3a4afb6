//! The single consumer of supervisor events: it alone writes the per-server
//! tool lists, so the aggregate is rebuilt in one place and in order.

use tokio::sync::mpsc;

use super::Hub;
use crate::mcp::supervisor::{ServerEvent, SupervisorEvent};

pub(super) async fn run(hub: Hub, mut rx: mpsc::UnboundedReceiver<ServerEvent>) {
    while let Some(env) = rx.recv().await {
        // Events of a replaced (reloaded) server generation are stale.
        let current = hub
            .servers
            .get(&env.server)
            .map(|h| h.generation == env.generation)
            .unwrap_or(false);
        if !current {
            continue;
        }
        match env.event {
            SupervisorEvent::Status(status) => {
                if let Some(h) = hub.server(&env.server) {
                    h.apply_state(&status);
                }
                tracing::info!(server = %status.name, state = ?status.state, restarts = status.restarts,
                    error = status.last_error.as_deref().unwrap_or(""), "server status");
                let mut msg = serde_json::json!({"type": "server_status"});
                if let (Some(obj), Ok(serde_json::Value::Object(s))) =
                    (msg.as_object_mut(), serde_json::to_value(&status))
                {
                    obj.extend(s);
                }
                hub.broadcast(msg);
                // A server that went down makes its tools unavailable.
                hub.rebuild_tools(&format!("server {} is {}", status.name, status.state));
            }
            SupervisorEvent::Tools { tools, reason } => {
                if let Ok(mut st) = hub.server_tools.lock() {
                    match tools {
                        Some(t) => {
                            st.insert(env.server.clone(), t);
                        }
                        None => {
                            st.remove(&env.server);
                        }
                    }
                }
                hub.rebuild_tools(&reason);
            }
        }
    }
}
