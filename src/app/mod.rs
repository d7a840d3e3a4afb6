//! The application: the composition root and the only module that knows
//! every service. It builds the call layer (`hub`), the recorder, the runs
//! service and the task engine (told of finished calls through one
//! fan-out observer, [`Observers`]), mounts the in-process tools (the workspace tools, the hub's
//! control tools, which drive the engine and the recorder, and the browser
//! assertion tools), recovers task
//! journals, and starts the background services (servers, config watcher,
//! health prober, task retention). The server edges receive an [`App`] and
//! reach each service by name; no service holds another's handle unless it
//! is built on it.

pub mod controls;
mod observers;

pub use observers::Observers;

use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::access::{Access, SharedAccess};
use crate::assertions::Assertions;
use crate::builtin::sandbox::RunFolder;
use crate::builtin::Builtin;
use crate::config::Config;
use crate::engine::Engine;
use crate::hub::observe::CallObserver;
use crate::hub::{Hub, BUILTIN_SERVER};
use crate::recording::Recorder;
use crate::runs::Runs;

/// The services of one running hub.
#[derive(Clone)]
pub struct App {
    /// The call layer: servers, tools, the call path, events, health.
    pub hub: Hub,
    /// Batches as durable tasks.
    pub engine: Engine,
    /// Recordings of connections' calls.
    pub recorder: Arc<Recorder>,
    /// Topic workspaces and their execution logs.
    pub runs: Arc<Runs>,
    /// Everyone told of a finished call: the recorder, then runs.
    pub observer: Arc<dyn CallObserver>,
    /// The workspace tools (and `run_command`'s sandbox, for
    /// `health_status`); reconfigured on a config reload.
    pub builtin: Arc<Builtin>,
    /// The token and origins the gate checks; replaced on a config reload.
    pub access: SharedAccess,
}

impl App {
    /// Build every service and start the servers and background work.
    pub fn start(
        config: Config,
        access: SharedAccess,
        shutdown: CancellationToken,
    ) -> std::io::Result<App> {
        let builtin_cfg = config.builtin.clone();
        let state_dir = config.task_engine.state_dir.clone();
        let hub = Hub::new(config, shutdown)?;
        let recorder = Arc::new(Recorder::new(hub.clone()));
        let runs = Arc::new(Runs::new(hub.clone()));
        let builtin = Arc::new(Builtin::new(
            &builtin_cfg,
            &state_dir,
            Some(runs.clone() as Arc<dyn RunFolder>),
        )?);
        let observer: Arc<dyn CallObserver> = Arc::new(Observers(vec![
            recorder.clone() as Arc<dyn CallObserver>,
            runs.clone(),
        ]));
        let engine = Engine::new(hub.clone(), observer.clone());
        let app = App {
            hub: hub.clone(),
            engine: engine.clone(),
            recorder,
            runs: runs.clone(),
            observer,
            builtin: builtin.clone(),
            access: access.clone(),
        };
        hub.mount(BUILTIN_SERVER, builtin);
        hub.mount(BUILTIN_SERVER, controls::Controls::new(app.clone()));
        hub.mount(BUILTIN_SERVER, Assertions::new(hub.clone()));
        hub.mount(
            BUILTIN_SERVER,
            crate::hub::discovery::Discovery::new(hub.clone()),
        );
        runs.spawn_index_checks();
        hub.mount(BUILTIN_SERVER, crate::runs::tools::RunTools::new(runs));
        hub.start_servers();
        engine.recover();
        // MCP tasks nobody else would resume: the hub does.
        crate::engine::unattended::resume_all(&engine);
        app.recorder.spawn_index_checks();
        crate::engine::durable::spawn_retention(engine);
        crate::hub::reload_watcher(hub.clone());
        spawn_access_reload(hub.clone(), access);
        crate::hub::health::spawn_prober(hub);
        Ok(app)
    }

    /// The `health_status` object for `caller`: the call layer's report
    /// with the task engine's part (recoverable tasks, confirmations,
    /// journal problems). A client's (`hub::health::Sight`) shows its
    /// views' servers and leaves out the engine's tasks, which name other
    /// principals' work, and the sandbox unless its views hold
    /// `run_command`.
    pub async fn health(&self, caller: &crate::caller::Caller) -> Value {
        let sight = crate::hub::health::Sight::of(&self.hub, caller);
        let (tasks, mut checks) = match sight.is_main() {
            true => {
                let t = self.engine.health();
                (Some(t.summary), t.checks)
            }
            false => (None, Vec::new()),
        };
        let run_command = format!("{}__run_command", crate::hub::BUILTIN_SERVER);
        if sight.tool(&run_command) {
            checks.extend(self.builtin.sandbox().map(|s| s.check()));
        }
        let mut report = crate::hub::health::report(&self.hub, checks, &sight).await;
        if let Some(obj) = report.as_object_mut() {
            if let Some(t) = tasks {
                obj.insert("tasks".into(), t);
            }
            // The threads running the hub's tasks (`server.workerThreads`).
            let workers = tokio::runtime::Handle::current().metrics().num_workers();
            obj.insert("runtime".into(), json!({ "workerThreads": workers }));
        }
        report
    }

    /// A connection ended: its recording (if any) is finished (the `end`
    /// line written and synced on the blocking pool, after the session's
    /// recording messages still queued) and its own current run forgotten.
    pub fn connection_closed(&self, session: &str) {
        self.hub.connected.leave(session);
        // Its per-context server instances go with it.
        self.hub.instances().end_owner(session);
        if self.recorder.is_recording(session) {
            let (r, s) = (self.recorder.clone(), session.to_string());
            // An /mcp session's handler can be dropped as the runtime ends:
            // then there is no runtime to queue on, and nobody to stall.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    let close = self.recorder.io.run(&[session], move || {
                        r.connection_closed(&s);
                        Ok(())
                    });
                    rt.spawn(close);
                }
                Err(_) => r.connection_closed(&s),
            }
        }
        self.runs.connection_closed(session);
    }
}

/// On every applied config reload, give the gate the token and origins now
/// configured. New connections are checked against them; connections
/// already open stay (they presented the token in force when they
/// connected; restart the hub to drop every client at once).
fn spawn_access_reload(hub: Hub, access: SharedAccess) {
    let mut rx = hub.watch_config();
    let gate_of = |cfg: &crate::config::Config| {
        let views: Vec<String> = cfg.views.keys().cloned().collect();
        (
            cfg.server.token.clone(),
            cfg.server.allowed_origins.clone(),
            cfg.clients.clone(),
            views,
        )
    };
    let mut applied = gate_of(&hub.config());
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = hub.shutdown.cancelled() => break,
                changed = rx.changed() => if changed.is_err() { break },
            }
            let cfg = rx.borrow_and_update().clone();
            let now = gate_of(&cfg);
            if now == applied {
                continue;
            }
            match Access::resolve(&cfg) {
                Ok(a) => {
                    for t in a.token.iter().chain(a.clients.iter().map(|c| &c.token)) {
                        cfg.security.secrets.add(t);
                    }
                    crate::secrets::mask_logs_with(&cfg.security.secrets);
                    for w in a.warnings() {
                        tracing::warn!("{w}");
                    }
                    let token_changed = now.0 != applied.0;
                    access.replace(a);
                    let clients: Vec<&String> = now.2.keys().collect();
                    tracing::info!(
                        token_changed,
                        origins = ?now.1,
                        ?clients,
                        views = ?now.3,
                        "gate updated from the config: new connections are checked against the new token and origins; open connections stay"
                    );
                    applied = now;
                }
                Err(e) => tracing::error!(error = %e,
                    "server.token/allowedOrigins/clients not applied; the gate keeps the previous values"),
            }
        }
    });
}
