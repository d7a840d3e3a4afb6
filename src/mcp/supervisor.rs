//! One task per configured server: start it, watch it, restart it with
//! exponential backoff and a crash-loop guard, and report every state change.
//!
//! The task is the only owner of the rmcp service. Callers get a cloned
//! [`Peer`] from the [`ServerHandle`]; when the child dies rmcp fails every
//! pending call with `TransportClosed` and the supervisor clears the peer, so
//! new calls fail at once with `SERVER_UNAVAILABLE` instead of hanging.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::{Peer, RoleClient};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::ServerSpec;
use crate::mcp::registry::RawTool;
use crate::mcp::relay::{Inflight, RelaySlot};
use crate::mcp::upstream::{self, StderrTail, UpstreamEvent};

mod liveness;
mod status;

pub use status::{ServerState, ServerStatus};

/// Backoff of the first restart; doubles per consecutive failure.
const BACKOFF_START: Duration = Duration::from_millis(250);
/// Longest wait between two restarts.
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// A server that stayed up this long is healthy again: backoff resets.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// This many consecutive failures mark the server `crash_loop`; it then waits
/// for an explicit restart (reload_tools, autoFix, a config change).
const CRASH_LOOP_LIMIT: u32 = 6;
/// Bursts of tools/list_changed within this window become one re-list.
const RELIST_DEBOUNCE: Duration = Duration::from_millis(100);
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// Time a child gets to exit after stdin closes and SIGTERM, before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(8);

/// Events from a supervisor to the hub.
#[derive(Debug)]
pub enum SupervisorEvent {
    Status(ServerStatus),
    /// The server's current tools (`None` while it is down).
    Tools {
        tools: Option<Vec<RawTool>>,
        reason: String,
    },
}

/// A supervisor's event, with the server it is about and its handle's
/// generation (the hub drops the events of a replaced handle).
#[derive(Debug)]
pub struct ServerEvent {
    pub server: String,
    pub generation: u64,
    pub event: SupervisorEvent,
}

#[derive(Debug)]
enum Control {
    Restart(String),
    /// Restart a wedged server: SIGKILL its group first, no graceful wait.
    Kill(String),
    /// Re-list tools; the sender (if any) is told when it is done.
    Relist(Option<oneshot::Sender<()>>),
}

/// A running server's connection: rmcp's peer.
#[derive(Clone)]
pub struct Live {
    pub peer: Peer<RoleClient>,
    /// The connection's number (`ServerStatus::life`).
    pub life: u64,
    /// Asks whether the stdio child's leader has exited.
    pub exit: Option<Arc<crate::process::ExitProbe>>,
}

/// A cheap handle to one supervised server.
#[derive(Clone)]
pub struct ServerHandle {
    pub name: String,
    pub spec: Arc<ServerSpec>,
    pub generation: u64,
    status: Arc<Mutex<ServerStatus>>,
    peer: Arc<RwLock<Option<Live>>>,
    pub stderr: StderrTail,
    control: mpsc::UnboundedSender<Control>,
    stop: CancellationToken,
    done: CancellationToken,
    /// A recording-backed virtual server (no process), or why it failed to load.
    pub offline: Option<Result<Arc<crate::mcp::offline::Offline>, String>>,
    /// Client calls now running on this server that want its progress,
    /// sampling and elicitation (see `relay`).
    pub inflight: Inflight,
}

impl ServerHandle {
    /// Start supervising `spec` (a disabled server only reports `disabled`).
    pub fn spawn(
        spec: ServerSpec,
        generation: u64,
        events: mpsc::UnboundedSender<ServerEvent>,
        shutdown: &CancellationToken,
        recordings: &std::path::Path,
        relay: RelaySlot,
        context: Option<&str>,
    ) -> ServerHandle {
        let offline = match &spec.transport {
            crate::config::Transport::Recording { source } => {
                Some(crate::mcp::offline::Offline::load(source, recordings).map(Arc::new))
            }
            _ => None,
        };
        let transport = match spec.transport {
            crate::config::Transport::Stdio { .. } => "stdio",
            crate::config::Transport::Http { .. } => "http",
            crate::config::Transport::Recording { .. } => "recording",
        };
        let status = ServerStatus {
            name: spec.name.clone(),
            state: if spec.disabled {
                ServerState::Disabled
            } else {
                ServerState::Starting
            },
            tool_count: 0,
            restarts: 0,
            last_error: None,
            pid: None,
            up_since: None,
            life: 0,
            gone: true,
            transport,
        };
        let (control, control_rx) = mpsc::unbounded_channel();
        let handle = ServerHandle {
            name: spec.name.clone(),
            spec: Arc::new(spec),
            generation,
            status: Arc::new(Mutex::new(status)),
            peer: Arc::new(RwLock::new(None)),
            stderr: StderrTail::default(),
            control,
            stop: shutdown.child_token(),
            done: CancellationToken::new(),
            offline,
            inflight: Inflight::default(),
        };
        let sup = Supervisor {
            h: handle.clone(),
            events,
            control: control_rx,
            relay,
        };
        // Every log line of the supervisor carries `server{name}` (and
        // the client context of a per-context instance).
        let span = match context {
            Some(c) => tracing::info_span!("server", name = %handle.name, context = %c),
            None => tracing::info_span!("server", name = %handle.name),
        };
        tokio::spawn(tracing::Instrument::instrument(sup.run(), span));
        handle
    }

    pub fn status(&self) -> Option<ServerStatus> {
        self.status.lock().ok().map(|s| s.clone())
    }

    /// The live peer, or `None` while the server is down.
    pub fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer
            .read()
            .ok()
            .and_then(|p| p.as_ref().map(|l| l.peer.clone()))
    }

    /// The live connection (peer, its number, its exit probe), or `None`
    /// while the server is down.
    pub fn live(&self) -> Option<Live> {
        self.peer.read().ok().and_then(|p| p.clone())
    }

    pub fn restart(&self, reason: impl Into<String>) {
        let _ = self.control.send(Control::Restart(reason.into()));
    }

    /// Restart a server that stopped answering: kill it at once.
    pub fn kill_and_restart(&self, reason: impl Into<String>) {
        let _ = self.control.send(Control::Kill(reason.into()));
    }

    /// Re-list the server's tools; resolves once done (or at once when the
    /// server is not running).
    pub async fn relist(&self) {
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::Relist(Some(tx))).is_ok() {
            let _ = tokio::time::timeout(LIST_TIMEOUT, rx).await;
        }
    }

    /// Stop the server and wait until its process group is gone.
    pub async fn stop(&self) {
        self.stop.cancel();
        self.done.cancelled().await;
    }
}

struct Supervisor {
    h: ServerHandle,
    events: mpsc::UnboundedSender<ServerEvent>,
    control: mpsc::UnboundedReceiver<Control>,
    relay: RelaySlot,
}

enum Exit {
    Stopped,
    Restart(String),
    Crashed(String),
}

impl Supervisor {
    async fn run(mut self) {
        if self.h.spec.disabled {
            self.emit_status();
            self.h.stop.cancelled().await;
            self.set_state(ServerState::Stopped, None);
            self.h.done.cancel();
            return;
        }
        if let Some(offline) = self.h.offline.clone() {
            self.run_offline(offline).await;
            return;
        }
        let mut failures: u32 = 0;
        let mut backoff = BACKOFF_START;
        loop {
            self.set_state(ServerState::Starting, None);
            let (ev_tx, ev_rx) = mpsc::unbounded_channel();
            let started = tokio::time::Instant::now();
            let conn = tokio::select! {
                c = upstream::connect(
                    &self.h.spec,
                    self.h.stderr.clone(),
                    ev_tx,
                    (self.h.inflight.clone(), self.relay.clone()),
                    INIT_TIMEOUT,
                ) => c,
                _ = self.h.stop.cancelled() => break,
            };
            let exit = match conn {
                Ok(up) => self.serve(up, ev_rx).await,
                Err(e) => Exit::Crashed(e),
            };
            match exit {
                Exit::Stopped => break,
                Exit::Restart(reason) => {
                    tracing::info!(server = %self.h.name, %reason, "restarting server");
                    self.bump_restarts();
                    failures = 0;
                    backoff = BACKOFF_START;
                    continue;
                }
                Exit::Crashed(err) => {
                    tracing::warn!(server = %self.h.name, error = %err, "server is down");
                    if started.elapsed() >= STABLE_AFTER {
                        failures = 0;
                        backoff = BACKOFF_START;
                    }
                    failures += 1;
                    self.bump_restarts();
                    if failures >= CRASH_LOOP_LIMIT {
                        self.set_state(ServerState::CrashLoop, Some(format!(
                            "{err} ({failures} failures in a row; waiting for reload_tools or a config change)"
                        )));
                        if !self.wait_for_restart_order().await {
                            break;
                        }
                        failures = 0;
                        backoff = BACKOFF_START;
                        continue;
                    }
                    self.set_state(ServerState::Restarting, Some(err));
                    let delay = jittered(backoff);
                    backoff = (backoff * 2).min(BACKOFF_CAP);
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.h.stop.cancelled() => break,
                        c = self.control.recv() => match c {
                            Some(Control::Restart(_) | Control::Kill(_)) => { failures = 0; backoff = BACKOFF_START; }
                            Some(Control::Relist(_)) => {}
                            None => break,
                        },
                    }
                }
            }
        }
        self.set_state(ServerState::Stopped, None);
        self.h.done.cancel();
    }

    /// While the server is up: publish tools, re-list on change, obey
    /// control orders, and notice the moment the transport closes.
    async fn serve(
        &mut self,
        up: upstream::Upstream,
        mut ev_rx: mpsc::UnboundedReceiver<UpstreamEvent>,
    ) -> Exit {
        let peer = up.peer();
        let pgid = up.pgid;
        let running = up.running;
        // A wrapper (`npm exec`, `sh -c`) that dies while its real server
        // keeps the pipes open: the transport never closes, so the leader's
        // own exit must end the server (its group is killed below).
        let exit = up
            .leader_exit
            .as_ref()
            .and_then(|w| w.probe())
            .map(Arc::new);
        let mut leader_exit: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            match up.leader_exit {
                Some(w) => Box::pin(w.exited()),
                None => Box::pin(std::future::pending()),
            };
        let ct = running.cancellation_token();
        let mut waiting = Box::pin(running.waiting());
        let life = self.h.begin_life(pgid);
        if let Ok(mut p) = self.h.peer.write() {
            *p = Some(Live {
                peer: peer.clone(),
                life,
                exit,
            });
        }
        let first = upstream::list_tools(&peer, LIST_TIMEOUT).await;
        let exit = match first {
            Err(e) => Some(Exit::Crashed(e)),
            Ok(tools) => {
                self.publish_tools(tools, format!("server {} started", self.h.name));
                self.set_state(ServerState::Running, None);
                // A client asked for logs before this server (re)started.
                if let Some(level) = self.relay.get().and_then(|r| r.log_level()) {
                    let peer = peer.clone();
                    tokio::spawn(async move {
                        upstream::apply_log_level(&peer, level, LIST_TIMEOUT).await;
                    });
                }
                None
            }
        };
        let exit = match exit {
            Some(e) => e,
            None => loop {
                tokio::select! {
                    quit = &mut waiting => {
                        let why = liveness::describe_quit(&quit);
                        self.h.went_down(life, &why);
                        break Exit::Crashed(why);
                    }
                    _ = &mut leader_exit => {
                        let why = format!(
                            "the server's process {} exited; its process group was killed",
                            pgid.unwrap_or_default()
                        );
                        self.h.went_down(life, &why);
                        break Exit::Crashed(why);
                    }
                    _ = self.h.stop.cancelled() => break Exit::Stopped,
                    ev = ev_rx.recv() => {
                        if ev.is_some() {
                            // Debounce: drain a burst, then re-list once.
                            let _ = tokio::time::timeout(RELIST_DEBOUNCE, async {
                                while ev_rx.recv().await.is_some() {}
                            }).await;
                            self.relist(&peer, "tools/list_changed").await;
                        }
                    }
                    c = self.control.recv() => match c {
                        Some(Control::Relist(done)) => {
                            self.relist(&peer, "reload_tools").await;
                            if let Some(d) = done { let _ = d.send(()); }
                        }
                        Some(Control::Restart(r)) => break Exit::Restart(r),
                        Some(Control::Kill(r)) => {
                            upstream::kill_group(pgid);
                            break Exit::Restart(r);
                        }
                        None => break Exit::Stopped,
                    },
                }
            },
        };
        // Down: new calls must fail fast from here on.
        if let Ok(mut p) = self.h.peer.write() {
            *p = None;
        }
        self.send(SupervisorEvent::Tools {
            tools: None,
            reason: format!("server {} stopped", self.h.name),
        });
        if !matches!(exit, Exit::Crashed(_)) {
            // Graceful: close stdin, SIGTERM, then SIGKILL (rmcp), bounded.
            ct.cancel();
            let _ = tokio::time::timeout(STOP_TIMEOUT, &mut waiting).await;
        }
        // The leader may have exited and left group members behind.
        upstream::kill_group(pgid);
        if let Ok(mut s) = self.h.status.lock() {
            s.pid = None;
            s.up_since = None;
            s.tool_count = 0;
            s.gone = true;
        }
        exit
    }

    /// A recording-backed server has no process: it is up as soon as its
    /// recording loads, and stays up until stopped.
    async fn run_offline(&mut self, offline: Result<Arc<crate::mcp::offline::Offline>, String>) {
        match offline {
            Ok(o) => {
                self.h.begin_life(None);
                self.publish_tools(
                    o.tools(),
                    format!(
                        "server {} started (from recording {})",
                        self.h.name, o.recording_id
                    ),
                );
                self.set_state(ServerState::Running, None);
            }
            Err(e) => self.set_state(
                ServerState::CrashLoop,
                Some(format!("cannot load its recording: {e}")),
            ),
        }
        // Control orders have nothing to do here but must be answered, so
        // reload_tools never waits on an offline server.
        loop {
            tokio::select! {
                _ = self.h.stop.cancelled() => break,
                c = self.control.recv() => match c {
                    Some(Control::Relist(Some(done))) => { let _ = done.send(()); }
                    Some(_) => {}
                    None => break,
                },
            }
        }
        self.send(SupervisorEvent::Tools {
            tools: None,
            reason: format!("server {} stopped", self.h.name),
        });
        self.set_state(ServerState::Stopped, None);
        self.h.done.cancel();
    }

    async fn relist(&mut self, peer: &Peer<RoleClient>, why: &str) {
        match upstream::list_tools(peer, LIST_TIMEOUT).await {
            Ok(tools) => self.publish_tools(tools, format!("{why} from server {}", self.h.name)),
            Err(e) => {
                tracing::warn!(server = %self.h.name, error = %e, "re-listing tools failed");
                if let Ok(mut s) = self.h.status.lock() {
                    s.last_error = Some(e);
                }
            }
        }
    }

    fn publish_tools(&mut self, tools: Vec<RawTool>, reason: String) {
        if let Ok(mut s) = self.h.status.lock() {
            s.tool_count = tools.len();
        }
        self.send(SupervisorEvent::Tools {
            tools: Some(tools),
            reason,
        });
    }

    async fn wait_for_restart_order(&mut self) -> bool {
        tokio::select! {
            _ = self.h.stop.cancelled() => false,
            c = self.control.recv() => c.is_some(),
        }
    }

    fn bump_restarts(&self) {
        if let Ok(mut s) = self.h.status.lock() {
            s.restarts += 1;
        }
    }

    /// Record an error and announce a new state. The hub's event task applies
    /// the state to the handle after it has processed earlier events (the
    /// server's tools), so nobody sees `running` before its tools exist.
    fn set_state(&self, state: ServerState, error: Option<String>) {
        if let Ok(mut s) = self.h.status.lock() {
            if error.is_some() {
                s.last_error = error;
            }
        }
        if let Some(mut s) = self.h.status() {
            s.state = state;
            self.send(SupervisorEvent::Status(s));
        }
    }

    fn emit_status(&self) {
        if let Some(s) = self.h.status() {
            self.send(SupervisorEvent::Status(s));
        }
    }

    fn send(&self, event: SupervisorEvent) {
        let _ = self.events.send(ServerEvent {
            server: self.h.name.clone(),
            generation: self.h.generation,
            event,
        });
    }
}

/// Up to 25% random jitter so restarting servers do not move in lockstep.
fn jittered(d: Duration) -> Duration {
    let ms = d.as_millis() as u64;
    let extra = rand::random_range(0..=ms / 4);
    Duration::from_millis(ms + extra)
}
