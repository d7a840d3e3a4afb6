//! toolhub: many MCP servers behind one WebSocket.
//!
//! Layers, bottom first; a module imports only its own layer and the ones
//! below (checked by `tests/layers.rs`, which holds the list):
//!
//! - ground: `access` (the token and origins in force), `caller` (who
//!   is calling: principal, view, session; the ownership rules), `errors`, `protocol` (wire types), `session` (a session's id, send queue and
//!   cap on work in flight), `config`, `store`
//!   (task journals, the recording format and store), `diff`, `util`,
//!   `suggest`, `b64`, `lock`, `process` (the spawner thread, pidfd watch),
//!   `secrets` (secret values masked wherever the hub writes), `trim`
//!   (heap given back after bulk frees), `shell` (the
//!   shell-subset parser the safety gate reads scripts with)
//! - mcp: `mcp` (rmcp upstreams, supervisors, registry, offline servers,
//!   the relay seam for what servers send to clients)
//! - calls: `hub` (servers, tool snapshot, call path, events, health, pins,
//!   the `LocalTools` and `CallObserver` seams), `outcome` (a call's request
//!   and outcome types), `history`, `retry`,
//!   `safety`, `builtin` (the workspace tools), `assertions` (the browser
//!   assertion tools)
//! - engine: `engine` (tool_batch → durable tasks, approvals)
//! - recording: `recording` (recorder, replay, exports), `runs` (topic
//!   workspaces: metadata, execution logs, screenshots; the `hub__run_*` tools)
//! - app: `app` (the composition root; the `hub__…` control tools)
//! - server: `server` (the gate, `/ws`, `/mcp`, `/health`, dispatch,
//!   `toolhub stdio`)
//!
//! See ARCHITECTURE.md for the map and the invariants.

pub mod access;
pub mod app;
pub mod assertions;
pub mod b64;
pub mod builtin;
pub mod caller;
pub mod callkeys;
pub mod client_context;
pub mod config;
pub mod diff;
pub mod engine;
pub mod errors;
pub mod history;
pub mod hub;

pub mod lock;
pub mod mcp;
pub mod outcome;
pub mod process;
pub mod protocol;
pub mod recording;
pub mod retry;
pub mod runs;
pub mod safety;
pub mod secrets;
pub mod server;
pub mod session;
pub mod shell;
pub mod store;
pub mod suggest;
pub mod trim;
pub mod util;

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Run the hub on an already bound listener until `shutdown` fires, then
/// stop every server (and its whole process group) before returning.
pub async fn run(
    listener: TcpListener,
    config: config::Config,
    shutdown: CancellationToken,
) -> Result<(), String> {
    // Before anything else touches the state dir: a second hub on it must
    // leave the first one's token, journals and history alone.
    let _lock = lock::acquire(&config.task_engine.state_dir)?;
    // Call data is private (0600 files, 0700 folders), also what an older
    // version left with the umask's modes.
    match store::private::tighten(&config.task_engine.state_dir) {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            dir = %config.task_engine.state_dir.display(),
            "made {n} files and folders of the state dir private (0600 files, 0700 folders)"
        ),
        Err(e) => tracing::warn!(
            dir = %config.task_engine.state_dir.display(), error = %e,
            "cannot make every file of the state dir private; some may be readable by other users"
        ),
    }
    // Process groups a SIGKILLed previous run left behind.
    mcp::children::install(&config.task_engine.state_dir);
    let bound: SocketAddr = listener
        .local_addr()
        .map_err(|e| format!("listener: {e}"))?;
    let access = access::Access::resolve(&config)?;
    for w in access.warnings() {
        tracing::warn!("{w}");
    }
    for t in access
        .token
        .iter()
        .chain(access.clients.iter().map(|c| &c.token))
    {
        config.security.secrets.add(t);
    }
    secrets::mask_logs_with(&config.security.secrets);
    let access = access::SharedAccess::new(access);
    let gate = server::gate::Gate::new(access.clone(), bound);
    let app = app::App::start(config, access, shutdown.clone())
        .map_err(|e| format!("cannot start the hub: {e}"))?;
    let hub = app.hub.clone();
    tracing::info!("listening on ws://{bound}/ws");
    if app.hub.config().server.mcp_endpoint {
        tracing::info!("MCP endpoint at http://{bound}/mcp (Streamable HTTP)");
    }
    let state = server::AppState {
        app,
        gate,
        sessions: server::session::Sessions::default(),
    };
    let served = server::serve(listener, state, shutdown.clone()).await;
    shutdown.cancel();
    tracing::info!("shutting down: stopping servers");
    // Let each connection's writer send its close frame (1001) before the
    // process ends; bounded, so a stuck client never holds the exit.
    hub.clients.close();
    let drained = tokio::time::timeout(std::time::Duration::from_secs(2), hub.clients.wait()).await;
    if drained.is_err() {
        tracing::warn!("some connections did not close within 2 s of shutdown");
    }
    hub.shutdown_servers().await;
    tracing::info!("stopped");
    served.map_err(|e| format!("server error: {e}"))
}
