//! The call layer (the hub core): one cheap-to-clone handle over the live
//! config, the supervised servers, the aggregated tool list, the call path,
//! the client event bus, health, history and tool pins. It knows nothing of
//! the task engine, recordings or the edges above it: in-process tools are
//! mounted behind [`local::LocalTools`] by the application.
//!
//! Ownership: each server belongs to its supervisor task; the tool snapshot
//! is an immutable `Arc` swapped by the event task alone; the call path only
//! clones `Arc`s and never holds a lock across `.await`.

pub mod aggregate;
pub mod budget;
mod call;
pub mod connected;
pub mod discovery;
mod events;
pub mod health;
pub mod instances;
pub mod local;
pub mod observe;
mod pins;
pub mod pipeline;
mod reload;
mod retrying;
pub mod views;
pub use reload::spawn_watcher as reload_watcher;

pub use crate::outcome::{Attempt, CallOutcome, CallRequest, RetryHook};
pub use call::AttemptFor;
pub use pipeline::{Approval, Confirmer, Decision, Question, Watch};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use dashmap::DashMap;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::history::History;
use crate::mcp::registry::{RawTool, ToolSnapshot};
use crate::mcp::relay::{Relay, RelaySlot};
use crate::mcp::supervisor::{ServerEvent, ServerHandle};

/// The name of the hub's own internal server (`hub__…` tools).
pub const BUILTIN_SERVER: &str = "hub";

/// Capacity of the client event bus; a lagging subscriber is told so.
const EVENT_BUS: usize = 1024;

#[derive(Clone)]
pub struct Hub(Arc<HubState>);

pub struct HubState {
    config: RwLock<Arc<Config>>,
    servers: DashMap<String, ServerHandle>,
    generation: AtomicU64,
    tools: RwLock<Arc<ToolSnapshot>>,
    /// Tools per server as last reported; only the event task writes it.
    server_tools: Mutex<BTreeMap<String, Vec<RawTool>>>,
    /// Serialises snapshot rebuilds (event task, reload, stop) so a stale
    /// snapshot never replaces a newer one. Never taken on the call path.
    rebuild: Mutex<()>,
    bus: broadcast::Sender<Arc<Value>>,
    sup_tx: mpsc::UnboundedSender<ServerEvent>,
    pub history: History,
    /// In-process tool providers per server name (the `hub` server's).
    local: RwLock<Arc<BTreeMap<String, local::Mounted>>>,
    pub shutdown: CancellationToken,
    /// The last refused config reload, shown by `health_status`.
    config_error: Mutex<Option<String>>,
    /// The config the hub started with: the keys a reload cannot apply keep
    /// its values (`config::reload::RESTART_KEYS`).
    started_config: Arc<Config>,
    /// The keys the file changed that only a restart applies.
    restart_needed: Mutex<Vec<&'static str>>,
    /// The config in force, for services above that take up a reload.
    config_tx: watch::Sender<Arc<Config>>,
    pub connections: AtomicUsize,
    /// One token per client the hub serves (each `server::slots::Slot`
    /// holds one): shutdown closes it and waits for the clients to go.
    pub clients: tokio_util::task::TaskTracker,
    started: std::time::Instant,
    /// Approved tool definitions and the ones changed since (rug pulls).
    pins: pins::Pins,
    /// Where servers' notices for the clients above go (the MCP endpoint).
    relay: RelaySlot,
    /// The current snapshot, for those who wait for it to change.
    tools_tx: watch::Sender<Arc<ToolSnapshot>>,
    /// Resource URI -> the server that listed it (see `aggregate`).
    resource_owner: aggregate::ResourceOwners,
    /// The per-context instances of `scope: "context"` servers.
    instances: Arc<instances::Instances>,
    /// The views projected over the tools and config in force.
    view_cache: views::ViewCache,
    /// Retries per server and per session, bounded (`budget`).
    pub retry_budget: budget::RetryBudget,
    /// The client sessions connected now, their clients and views.
    pub connected: connected::Connected,
}

impl std::ops::Deref for Hub {
    type Target = HubState;
    fn deref(&self) -> &HubState {
        &self.0
    }
}

impl Hub {
    /// Build the call layer; no server runs until [`Hub::start_servers`],
    /// so in-process tools can be mounted first.
    pub fn new(config: Config, shutdown: CancellationToken) -> std::io::Result<Hub> {
        let (bus, _) = broadcast::channel(EVENT_BUS);
        let (sup_tx, sup_rx) = mpsc::unbounded_channel();
        let history = History::open(&config.task_engine.state_dir)?;
        let pins_file = config.task_engine.state_dir.join("tool_pins.json");
        let empty = Arc::new(ToolSnapshot::build(
            Vec::<(String, Vec<RawTool>)>::new(),
            BUILTIN_SERVER,
        ));
        let (tools_tx, _) = watch::channel(empty.clone());
        let config = Arc::new(config);
        let (config_tx, _) = watch::channel(config.clone());
        let (instances, instance_events) = instances::Instances::new(bus.clone());
        let hub = Hub(Arc::new(HubState {
            started_config: config.clone(),
            restart_needed: Mutex::new(Vec::new()),
            config_tx,
            config: RwLock::new(config),
            servers: DashMap::new(),
            generation: AtomicU64::new(0),
            tools: RwLock::new(empty),
            server_tools: Mutex::new(BTreeMap::new()),
            rebuild: Mutex::new(()),
            bus,
            sup_tx,
            history,
            local: RwLock::new(Arc::new(BTreeMap::new())),
            shutdown,
            config_error: Mutex::new(None),
            connections: AtomicUsize::new(0),
            clients: tokio_util::task::TaskTracker::new(),
            started: std::time::Instant::now(),
            pins: pins::Pins::load(&pins_file),
            relay: RelaySlot::default(),
            tools_tx,
            resource_owner: aggregate::ResourceOwners::default(),
            view_cache: views::ViewCache::default(),
            instances: instances.clone(),
            retry_budget: budget::RetryBudget::default(),
            connected: connected::Connected::default(),
        }));
        tokio::spawn(events::run(hub.clone(), sup_rx));
        tokio::spawn(instances::run_events(instances, instance_events));
        tokio::spawn(instances::run_reaper(hub.clone()));
        Ok(hub)
    }

    /// Publish the tool list and start every configured server concurrently.
    pub fn start_servers(&self) {
        let specs: Vec<_> = self.config().mcp_servers.values().cloned().collect();
        for spec in specs {
            self.spawn_server(spec);
        }
        // After the handles exist: a starting server's tools resolve to
        // "starting" (calls wait for it), a disabled one's to "disabled".
        self.rebuild_tools("hub started");
    }

    /// Mount in-process tools under `server` (after the ones already there).
    /// The tool list is rebuilt by the next `start_servers` or reload.
    pub fn mount(&self, server: &str, tools: Arc<dyn local::LocalTools>) {
        let mut slot = match self.0.local.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut next = (**slot).clone();
        next.entry(server.to_string()).or_default().push(tools);
        *slot = Arc::new(next);
    }

    /// The in-process providers of `server`, if it has any.
    pub fn mounted(&self, server: &str) -> Option<local::Mounted> {
        let map = match self.0.local.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        map.get(server).cloned()
    }

    pub fn config(&self) -> Arc<Config> {
        match self.0.config.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set_config(&self, mut config: Config) {
        // Values added while the hub ran (secret variables, the generated
        // token) stay masked under the new config.
        config
            .security
            .secrets
            .adopt(&self.config().security.secrets);
        crate::secrets::mask_logs_with(&config.security.secrets);
        let config = Arc::new(config);
        match self.0.config.write() {
            Ok(mut c) => *c = config.clone(),
            Err(poisoned) => *poisoned.into_inner() = config.clone(),
        }
        self.config_tx.send_replace(config);
    }

    /// Wakes whenever a config reload is applied (the value is the config
    /// now in force).
    pub fn watch_config(&self) -> watch::Receiver<Arc<Config>> {
        self.config_tx.subscribe()
    }

    /// The keys changed in the file that take effect only after a restart.
    pub fn restart_needed(&self) -> Vec<&'static str> {
        self.0
            .restart_needed
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default()
    }

    pub fn tools(&self) -> Arc<ToolSnapshot> {
        match self.0.tools.read() {
            Ok(t) => t.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn server(&self, name: &str) -> Option<ServerHandle> {
        self.servers.get(name).map(|h| h.clone())
    }

    pub fn server_handles(&self) -> Vec<ServerHandle> {
        let mut v: Vec<_> = self.servers.iter().map(|h| h.clone()).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Install the receiver of servers' notices for clients (list changes,
    /// resource updates, logs); see `mcp::relay`.
    pub fn set_relay(&self, relay: Arc<dyn Relay>) {
        self.relay.set(relay);
    }

    /// Wakes whenever the aggregated tool list changes.
    pub fn watch_tools(&self) -> watch::Receiver<Arc<ToolSnapshot>> {
        self.tools_tx.subscribe()
    }

    /// A new receiver on the event bus (tools_updated, server_status, …).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Value>> {
        self.bus.subscribe()
    }

    /// Send an event to every connected client.
    pub fn broadcast(&self, msg: Value) {
        let _ = self.bus.send(Arc::new(msg));
    }

    pub fn config_error(&self) -> Option<String> {
        self.0.config_error.lock().ok().and_then(|e| e.clone())
    }

    fn set_config_error(&self, e: Option<String>) {
        if let Ok(mut slot) = self.0.config_error.lock() {
            *slot = e;
        }
    }

    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    fn spawn_server(&self, spec: crate::config::ServerSpec) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let name = spec.name.clone();
        let recordings = self.config().recording.storage_path.clone();
        let handle = ServerHandle::spawn(
            spec,
            generation,
            self.sup_tx.clone(),
            &self.shutdown,
            &recordings,
            self.relay.clone(),
            None,
        );
        self.servers.insert(name, handle);
    }

    /// Stop a server, wait for its process group to be gone, drop its tools.
    async fn stop_server(&self, name: &str, reason: &str) {
        if let Some((_, handle)) = self.servers.remove(name) {
            handle.stop().await;
        }
        if let Ok(mut st) = self.server_tools.lock() {
            st.remove(name);
        }
        self.rebuild_tools(reason);
    }

    /// `reload_tools`: every running server re-lists (concurrently);
    /// crash-looped ones get another chance. Resolves when the lists are in.
    /// With `approve`, the definitions now listed become the approved pins
    /// (`security.pinTools`): the main token's alone, so a client's
    /// `approve` is refused (`PERMISSION`) before anything is re-listed.
    pub async fn reload_tools_and_wait(
        &self,
        caller: &crate::caller::Caller,
        approve: bool,
    ) -> Result<(), crate::errors::HubError> {
        if approve {
            caller.main_only("approving changed tool definitions (reload_tools with approve)")?;
        }
        let handles = self.server_handles();
        let relists = handles.iter().map(|h| async move {
            match h.status().map(|s| s.state) {
                Some(crate::mcp::supervisor::ServerState::CrashLoop) => h.restart("reload_tools"),
                _ => h.relist().await,
            }
        });
        futures::future::join_all(relists).await;
        self.rebuild_tools("reload_tools");
        if approve {
            let _serial = self.rebuild.lock();
            let approved = self.pins.approve(&self.tools());
            tracing::info!(tools = ?approved, "tool definitions approved (reload_tools approve)");
        }
        Ok(())
    }

    /// Tools whose definition changed since first seen or last approved.
    pub fn changed_tools(&self) -> Vec<String> {
        self.pins.changed()
    }

    /// Recompute the aggregate from the per-server lists; broadcast
    /// `tools_updated` when anything changed.
    pub(crate) fn rebuild_tools(&self, reason: &str) {
        let _serial = self.rebuild.lock();
        let per_server: Vec<(String, Vec<RawTool>)> = match self.server_tools.lock() {
            Ok(st) => st.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Err(_) => Vec::new(),
        };
        let mut all = Vec::with_capacity(per_server.len() + 1);
        let mounted = match self.0.local.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let builtin = mounted.get(BUILTIN_SERVER).map(|m| m.tools());
        all.push((BUILTIN_SERVER.to_string(), builtin.unwrap_or_default()));
        all.extend(
            mounted
                .iter()
                .filter(|(name, _)| name.as_str() != BUILTIN_SERVER)
                .map(|(name, m)| (name.clone(), m.tools())),
        );
        all.extend(per_server);
        let mut unavailable = BTreeMap::new();
        for h in self.server_handles() {
            if let Some(st) = h.status() {
                use crate::mcp::supervisor::ServerState as S;
                match st.state {
                    S::Running => {}
                    S::Disabled => {
                        unavailable.insert(h.name.clone(), "disabled".to_string());
                    }
                    other => {
                        let why = match &st.last_error {
                            Some(e) => format!(": {e}"),
                            None => String::new(),
                        };
                        unavailable.insert(h.name.clone(), format!("{other}{why}"));
                    }
                }
            }
        }
        let next = Arc::new(ToolSnapshot::build(all, BUILTIN_SERVER).with_unavailable(unavailable));
        let prev = self.tools();
        let diff = prev.diff(&next);
        let ambiguous = prev.newly_ambiguous(&next);
        for a in &ambiguous {
            tracing::warn!(
                reason,
                name = %a.name,
                tools = %a.tools.join(", "),
                "bare tool name is now offered by several servers; calling it bare fails with \
                 AMBIGUOUS_TOOL, call it by one of the qualified names"
            );
        }
        let rug = self.pins.observe(&next);
        if !rug.is_empty() {
            let pinned = self.config().security.pin_tools;
            tracing::warn!(tools = ?rug, refused = pinned,
                "tool definitions changed since approved; review them, then send {}", pins::APPROVE_MSG);
        }
        match self.0.tools.write() {
            Ok(mut t) => *t = next.clone(),
            Err(poisoned) => *poisoned.into_inner() = next.clone(),
        }
        if !(diff.added.is_empty() && diff.removed.is_empty() && diff.changed.is_empty()) {
            self.tools_tx.send_replace(next.clone());
            tracing::info!(
                reason,
                added = diff.added.len(),
                removed = diff.removed.len(),
                changed = diff.changed.len(),
                hash = next.hash(),
                "tool list changed"
            );
            self.broadcast(serde_json::json!({
                "type": "tools_updated",
                "tools": next.tools(),
                "hash": next.hash(),
                "trustedServers": self.trusted_servers(next.tools()),
                "added": diff.added,
                "removed": diff.removed,
                "changed": diff.changed,
                "ambiguous": ambiguous,
                "reason": reason,
            }));
        }
    }

    /// Stop every server (each kills its whole process group).
    pub async fn shutdown_servers(&self) {
        let handles = self.server_handles();
        let templates = futures::future::join_all(handles.iter().map(|h| h.stop()));
        futures::future::join(templates, self.stop_all_instances()).await;
    }

    /// The per-context instances of `scope: "context"` servers.
    pub fn instances(&self) -> &Arc<instances::Instances> {
        &self.instances
    }

    /// `hello.servers`: name and state of each server.
    /// Every server's name, state and tool count; in a view (`Some`), only
    /// the servers that have a tool in it: a view's session hears of no
    /// other server.
    pub fn server_summaries(&self, view: Option<&str>) -> Value {
        Value::Array(
            self.server_handles()
                .iter()
                .filter_map(|h| h.status())
                .filter(|s| view.is_none_or(|v| self.view_has_server(v, &s.name)))
                .map(|s| serde_json::json!({"name": s.name, "state": s.state, "toolCount": s.tool_count}))
                .collect(),
        )
    }

    /// Whether `view` reaches `server`: the server has a tool in it now, or
    /// the view's globs name it (so a server that is down, and so has no
    /// tools listed, stays in its views' sight). An unknown view reaches
    /// none.
    pub fn view_has_server(&self, view: &str, server: &str) -> bool {
        let named = self
            .config()
            .views
            .get(view)
            .is_some_and(|spec| spec.names_server(server));
        named
            || self
                .view(view)
                .is_ok_and(|v| v.tools().iter().any(|t| t.server == server))
    }
}
