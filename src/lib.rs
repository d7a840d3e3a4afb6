//! toolhub: many MCP servers behind one WebSocket.
//!
//! - `config`   config.json: raw serde mirror → validated `Config`; the watcher
//! - `protocol` the wire messages; the only place client JSON is parsed
//! - `server`   axum: the gate (Host/Origin/token), `/ws` connections, `/health`
//! - `hub`      the live state: servers, tool snapshot, event bus, call path, health
//! - `mcp`      rmcp upstreams, one supervisor task per server, the tool registry
//! - `builtin`  the internal `hub` server: workspace tools and hub controls
//! - `engine`   tool_batch: templates, conditions, expectations, tasks
//! - `retry`    strategies and backoff; decisions by `ErrorType` only
//! - `errors`   `ErrorType` + `classify`: the one place that reads error text
//! - `history`  the redacted JSONL call history
//! - `lock`     one hub per state dir (`<stateDir>/toolhub.lock`)
//!
//! See ARCHITECTURE.md for the invariants.

pub mod b64;
pub mod builtin;
pub mod config;
pub mod engine;
pub mod errors;
pub mod history;
pub mod hub;
pub mod lock;
pub mod mcp;
pub mod process;
pub mod protocol;
pub mod recording;
pub mod retry;
pub mod safety;
pub mod server;
pub mod store;
pub mod suggest;
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
    // Process groups a SIGKILLed previous run left behind.
    mcp::children::install(&config.task_engine.state_dir);
    let bound: SocketAddr = listener
        .local_addr()
        .map_err(|e| format!("listener: {e}"))?;
    let token = server::gate::resolve_token(&config)?;
    if config
        .server
        .allowed_origins
        .iter()
        .any(|o| o == "chrome-extension://*")
    {
        tracing::warn!("server.allowedOrigins contains the wildcard chrome-extension://*: any installed extension may connect; pin your extension's id (chrome-extension://<id>)");
    }
    let gate = server::gate::Gate::new(&config, token, bound);
    let hub = hub::Hub::start(config, shutdown.clone())
        .map_err(|e| format!("cannot start the hub: {e}"))?;
    hub::reload_watcher(hub.clone());
    hub::health::spawn_prober(hub.clone());
    tracing::info!("listening on ws://{bound}/ws");
    let state = server::AppState {
        hub: hub.clone(),
        gate,
    };
    let served = server::serve(listener, state, shutdown.clone()).await;
    shutdown.cancel();
    tracing::info!("shutting down: stopping servers");
    hub.shutdown_servers().await;
    tracing::info!("stopped");
    served.map_err(|e| format!("server error: {e}"))
}
