//! The hub's side of the pool: a call finds or starts its context's
//! instance (capped, waited for until it runs), a reload respawns a
//! changed entry's instances, and shutdown stops them all.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{InstanceSlot, InstanceUse};
use crate::client_context::ClientContext;
use crate::config::{Scope, ServerSpec};
use crate::errors::{ErrorType, HubError};
use crate::hub::Hub;
use crate::mcp::supervisor::{ServerHandle, ServerState};

impl Hub {
    /// The instance of `template`'s server for `context`, started when it
    /// has none, and running: waits (up to `limit`) while it starts.
    pub(in crate::hub) async fn instance(
        &self,
        template: &ServerHandle,
        context: &ClientContext,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<InstanceUse, HubError> {
        let slot = self.slot_for(template, context)?;
        slot.calls.fetch_add(1, Ordering::Relaxed);
        slot.touch();
        let active = InstanceUse {
            slot: slot.clone(),
            pool: self.instances.clone(),
        };
        let mut state = slot.state.subscribe();
        let wait = async {
            loop {
                let now = *state.borrow_and_update();
                match now {
                    ServerState::Running => return Ok(()),
                    ServerState::Starting | ServerState::Restarting => {}
                    other => return Err(other),
                }
                if state.changed().await.is_err() {
                    return Err(ServerState::Stopped);
                }
            }
        };
        let down = |why: String| {
            HubError::new(
                ErrorType::ServerUnavailable,
                format!(
                    "server {}'s instance for context {context} {why}",
                    template.name
                ),
            )
            .with_server(&template.name)
        };
        tokio::select! {
            r = tokio::time::timeout(limit, wait) => match r {
                Ok(Ok(())) => Ok(active),
                Ok(Err(state)) => {
                    let err = slot.handle.status().and_then(|s| s.last_error);
                    Err(down(match err {
                        Some(e) => format!("is {state}: {e}"),
                        None => format!("is {state}"),
                    }))
                }
                Err(_) => Err(down(format!(
                    "did not start within {} ms (see health_status for its stderr)",
                    limit.as_millis()
                ))),
            },
            _ = cancel.cancelled() => Err(HubError::new(ErrorType::Cancelled, "the call was cancelled")),
        }
    }

    /// The slot of (server, context), spawned if missing, marked busy
    /// under the pool's lock (so no reaper stops it before the call runs);
    /// refused past the server's `maxInstances`.
    fn slot_for(
        &self,
        template: &ServerHandle,
        context: &ClientContext,
    ) -> Result<Arc<InstanceSlot>, HubError> {
        let key = (template.name.clone(), context.clone());
        let limits = self
            .config()
            .mcp_servers
            .get(&template.name)
            .map(|s| s.instances)
            .unwrap_or(template.spec.instances);
        let mut p = self.instances.lock();
        if let Some(s) = p.slots.get(&key) {
            s.active.fetch_add(1, Ordering::AcqRel);
            return Ok(s.clone());
        }
        let holders: Vec<String> = p
            .slots
            .keys()
            .filter(|(s, _)| *s == template.name)
            .map(|(_, c)| c.to_string())
            .collect();
        if holders.len() >= limits.max {
            let name = &template.name;
            return Err(HubError::new(
                ErrorType::LimitExceeded,
                format!(
                    "server {name} already runs its maximum of {} instances (mcpServers.{name}.maxInstances), held by the contexts {}; context {context} cannot get one",
                    limits.max,
                    holders.join(", ")
                ),
            )
            .with_server(name)
            .with_suggestion(format!(
                "wait for an instance to go idle (instanceIdleMs, {} s), stop one (stop_instance or the dashboard), end a session that holds one, or raise mcpServers.{name}.maxInstances",
                limits.idle.as_secs()
            )));
        }
        let slot = self.spawn_instance(&template.spec, context);
        slot.active.fetch_add(1, Ordering::AcqRel);
        if p.ended.contains(context.owner()) {
            slot.orphan.store(true, Ordering::Release);
        }
        p.by_gen.insert(slot.handle.generation, slot.clone());
        p.slots.insert(key, slot.clone());
        drop(p);
        tracing::info!(server = %template.name, %context, instances = holders.len() + 1,
            "starting a server instance for a new context");
        self.instances
            .announce(&slot, ServerState::Starting, Some("a new context"));
        Ok(slot)
    }

    fn spawn_instance(&self, spec: &Arc<ServerSpec>, context: &ClientContext) -> Arc<InstanceSlot> {
        let generation = self.instances.next_gen.fetch_add(1, Ordering::Relaxed);
        let recordings = self.config().recording.storage_path.clone();
        let label = context.to_string();
        let handle = ServerHandle::spawn(
            (**spec).clone(),
            generation,
            self.instances.events.clone(),
            &self.shutdown,
            &recordings,
            self.relay.clone(),
            Some(&label),
        );
        let (state, _) = watch::channel(ServerState::Starting);
        Arc::new(InstanceSlot {
            server: spec.name.clone(),
            context: context.clone(),
            handle,
            started: Instant::now(),
            started_at: SystemTime::now(),
            last_use: Mutex::new(Instant::now()),
            calls: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            orphan: AtomicBool::new(false),
            state,
        })
    }

    /// A reload applied `spec` (`None`: the entry is gone): restart every
    /// instance of the server with it, or stop them all when the server is
    /// no longer per-context.
    pub(in crate::hub) fn reconfigure_instances(&self, server: &str, spec: Option<&ServerSpec>) {
        let old = self.instances.drain(server);
        if old.is_empty() {
            return;
        }
        let keep = spec.filter(|s| s.scope == Scope::Context && !s.disabled);
        for slot in old {
            let context = slot.context.clone();
            self.instances
                .retire(slot, "its config entry changed".to_string());
            if let Some(spec) = keep {
                let fresh = self.spawn_instance(&Arc::new(spec.clone()), &context);
                {
                    let mut p = self.instances.lock();
                    p.by_gen.insert(fresh.handle.generation, fresh.clone());
                    p.slots.insert((server.to_string(), context), fresh.clone());
                }
                self.instances.announce(
                    &fresh,
                    ServerState::Starting,
                    Some("its config entry changed"),
                );
            }
        }
    }

    /// Stop every instance and wait for their process groups to be gone.
    pub(in crate::hub) async fn stop_all_instances(&self) {
        let all: Vec<Arc<InstanceSlot>> = {
            let mut p = self.instances.lock();
            std::mem::take(&mut p.slots).into_values().collect()
        };
        futures::future::join_all(all.iter().map(|s| s.handle.stop())).await;
    }
}
