//! `health_status`: what each server is doing and checks a person can act
//! on (each with an exact `fix`), plus the periodic prober that pings live
//! servers and, with `autoFix`, restarts wedged or crash-looped ones.
//!
//! A report is made for one caller ([`Sight`]): the main token's names
//! every server, client and session; a client's only the servers that
//! have a tool in its views, its own instances and sessions, and no other
//! client (docs/protocol.md, `health_status`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{ClientRequest, PingRequest};
use serde_json::{json, Value};

use super::Hub;
use crate::caller::Caller;
use crate::client_context::ClientContext;
use crate::config::Transport;
use crate::mcp::supervisor::ServerState;

/// Consecutive failed probes after which a server counts as wedged.
const WEDGED_AFTER: u32 = 2;
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// One health check: whether it passes, what it saw, and what to do.
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub message: String,
    pub fix: Option<String>,
}

/// What one caller's health report shows.
pub enum Sight {
    /// The main token: everything.
    All,
    /// A client of `clients`: what its views reach.
    Client(ClientSight),
}

/// A client's part of the hub, for its health report.
pub struct ClientSight {
    caller: Caller,
    /// The views its token opens (config `clients.<name>.views`).
    views: Vec<String>,
    /// The servers with a tool in one of those views.
    servers: BTreeSet<String>,
    /// The real qualified names of those views' tools.
    tools: BTreeSet<String>,
}

impl Sight {
    /// What `caller` may see of the hub now.
    pub fn of(hub: &Hub, caller: &Caller) -> Sight {
        let Some(name) = caller.client_name() else {
            return Sight::All;
        };
        let views = hub
            .config()
            .clients
            .get(name)
            .map(|c| c.views.clone())
            .unwrap_or_default();
        let (mut servers, mut tools) = (BTreeSet::new(), BTreeSet::new());
        let all = hub.tools();
        let projected = hub.views();
        for v in views.iter().filter_map(|v| projected.get(v)) {
            for t in all.tools() {
                if v.shown(&t.qualified_name).is_some() {
                    servers.insert(t.server.clone());
                    tools.insert(t.qualified_name.clone());
                }
            }
        }
        // A server of the view that is down lists no tools: the view's
        // globs still name it, so its client sees it restarting.
        for h in hub.server_handles() {
            if let Some(st) = h.status() {
                if views.iter().any(|v| hub.view_has_server(v, &st.name)) {
                    servers.insert(st.name);
                }
            }
        }
        Sight::Client(ClientSight {
            caller: caller.clone(),
            views,
            servers,
            tools,
        })
    }

    /// Whether the report may name `server` (and show its state).
    pub fn server(&self, server: &str) -> bool {
        match self {
            Sight::All => true,
            Sight::Client(c) => c.servers.contains(server),
        }
    }

    /// Whether the report may name the real tool `qualified`.
    pub fn tool(&self, qualified: &str) -> bool {
        match self {
            Sight::All => true,
            Sight::Client(c) => c.tools.contains(qualified),
        }
    }

    /// Whether the report may show the view `name`.
    fn view(&self, name: &str) -> bool {
        match self {
            Sight::All => true,
            Sight::Client(c) => c.views.iter().any(|v| v == name),
        }
    }

    /// Whether the report may show the instance in `context`.
    fn instance(&self, hub: &Hub, context: &str) -> bool {
        match self {
            Sight::All => true,
            Sight::Client(c) => hub.owns_context(&c.caller, &ClientContext::parse(context)),
        }
    }

    pub fn is_main(&self) -> bool {
        matches!(self, Sight::All)
    }
}

/// Build the `health_status` object (without `type`/`replyTo`) for what
/// `sight` may see. `extra`: checks of the services above this layer (the
/// task engine's), placed after the state dir's.
pub async fn report(hub: &Hub, extra: Vec<Check>, sight: &Sight) -> Value {
    let cfg = hub.config();
    let mut checks = Vec::new();
    let mut servers = Vec::new();
    let mut enabled = 0usize;
    let mut running = 0usize;
    let mut instances = hub.instances().list();
    instances.retain(|i| sight.instance(hub, &i.context));
    for h in hub.server_handles() {
        if !sight.server(&h.name) {
            continue;
        }
        // A server that died a moment ago is reported down, not running.
        h.observe_exit();
        let Some(st) = h.status() else { continue };
        if st.state != ServerState::Disabled {
            enabled += 1;
        }
        if st.state == ServerState::Running {
            running += 1;
        }
        let uptime_ms = st
            .up_since
            .and_then(|t| t.elapsed().ok())
            .map(|d| d.as_millis() as u64);
        let mut v = serde_json::to_value(&st).unwrap_or(Value::Null);
        if let Some(obj) = v.as_object_mut() {
            obj.insert("uptimeMs".into(), json!(uptime_ms));
            obj.insert("stderrTail".into(), json!(h.stderr.lines()));
            if h.spec.scope == crate::config::Scope::Context {
                // One process per client context; the entry itself lists
                // the tools (the template) and serves no calls.
                let (mine, rest): (Vec<_>, Vec<_>) =
                    instances.into_iter().partition(|i| i.server == st.name);
                instances = rest;
                // A reload applies the limits without a restart.
                let limits = cfg
                    .mcp_servers
                    .get(&st.name)
                    .map(|s| s.instances)
                    .unwrap_or(h.spec.instances);
                obj.insert("scope".into(), json!("context"));
                obj.insert("maxInstances".into(), json!(limits.max));
                obj.insert(
                    "instanceIdleMs".into(),
                    json!(limits.idle.as_millis() as u64),
                );
                obj.insert("instances".into(), json!(mine));
            }
        }
        servers.push(v);
        if !matches!(st.state, ServerState::Running | ServerState::Disabled) {
            checks.push(Check {
                name: format!("server:{}", st.name),
                ok: false,
                message: format!(
                    "server {} is {}: {}",
                    st.name,
                    st.state,
                    st.last_error
                        .clone()
                        .unwrap_or_else(|| "no error recorded".into())
                ),
                fix: Some(server_fix(&h.spec.transport, st.state)),
            });
        }
        if st.state != ServerState::Disabled {
            if let Some(c) = playwright_check(&st.name, &h.spec.transport) {
                checks.push(c);
            }
        }
    }
    // The config file, its restart-only keys and the state dir are the
    // person's: a client's report leaves them out.
    let mut restart = Vec::new();
    if sight.is_main() {
        checks.push(match hub.config_error() {
            None => Check {
                name: "config".into(),
                ok: true,
                message: format!("{} is in force", cfg.path.display()),
                fix: None,
            },
            Some(e) => Check {
                name: "config".into(),
                ok: false,
                message: format!(
                    "the last edit of the config was refused, the previous config stays in force: {e}"
                ),
                fix: Some(format!(
                    "correct {} at the line and column named; the hub reloads it on save",
                    cfg.path.display()
                )),
            },
        });
        restart = hub.restart_needed();
        if !restart.is_empty() {
            checks.push(Check {
                name: "restartNeeded".into(),
                ok: false,
                message: format!(
                    "{} changed in {}: restart needed, the hub runs with the value it started with until then",
                    restart.join(", "),
                    cfg.path.display()
                ),
                fix: Some("restart the hub (every other change in the file is already applied)".into()),
            });
        }
        checks.push(dir_check("stateDir", &cfg.task_engine.state_dir));
    }
    checks.extend(extra);
    let mut changed_tools = hub.changed_tools();
    changed_tools.retain(|t| sight.tool(t));
    if !changed_tools.is_empty() {
        let pinned = cfg.security.pin_tools;
        checks.push(Check {
            name: "toolPins".into(),
            ok: !pinned,
            message: format!(
                "tool definitions changed since first seen or last approved: {}; {}",
                changed_tools.join(", "),
                if pinned {
                    "calls to them are refused (security.pinTools)"
                } else {
                    "they are still callable (security.pinTools is off)"
                }
            ),
            fix: Some(if sight.is_main() {
                format!(
                    "review their new description and schema (list_tools), then send {}",
                    super::pins::APPROVE_MSG
                )
            } else {
                "ask the person to review and approve them: approving changed tools is for the hub's main token".into()
            }),
        });
    }
    let tools = hub.tools();
    // A client calls in its views, where bare names are judged among the
    // view's tools: the aggregate's ambiguity is not its business.
    let ambiguous = if sight.is_main() {
        tools.ambiguous()
    } else {
        Vec::new()
    };
    if !ambiguous.is_empty() {
        // Informational: the person enabled both servers; nothing is broken,
        // but a bare name they may rely on no longer picks one tool.
        let list: Vec<String> = ambiguous.iter().map(ToString::to_string).collect();
        checks.push(Check {
            name: "ambiguousTools".into(),
            ok: true,
            message: format!(
                "bare names offered by several servers (calling them bare fails with \
                 AMBIGUOUS_TOOL): {}",
                list.join("; ")
            ),
            fix: Some(format!(
                "call these tools by their qualified name, e.g. \"{}\"",
                ambiguous
                    .first()
                    .and_then(|a| a.tools.first())
                    .map(String::as_str)
                    .unwrap_or_default()
            )),
        });
    }
    let all_ok = checks.iter().all(|c| c.ok);
    let status = if enabled > 0 && running == 0 && !cfg.builtin.enabled {
        "down"
    } else if all_ok && running == enabled {
        "ok"
    } else {
        "degraded"
    };
    let mine = |p: &crate::hub::connected::Presence| match sight {
        Sight::All => true,
        Sight::Client(c) => p.client == c.caller.client,
    };
    let connected = hub.connected.summary_where(mine);
    let (connections, tool_count, tools_hash) = match sight {
        Sight::All => (
            hub.connections.load(std::sync::atomic::Ordering::Relaxed),
            tools.tools().len(),
            Some(tools.hash().to_string()),
        ),
        // Its own sessions; its views' tools; the hash of what its view lists.
        Sight::Client(c) => (
            hub.connected
                .sessions_of(c.caller.client_name().unwrap_or_default()),
            c.tools.len(),
            c.caller
                .view
                .as_deref()
                .and_then(|v| hub.views().get(v).map(|v| v.hash())),
        ),
    };
    json!({
        "status": status,
        "version": env!("CARGO_PKG_VERSION"),
        "uptimeMs": hub.uptime().as_millis() as u64,
        "connections": connections,
        "toolCount": tool_count,
        "toolsHash": tools_hash,
        "servers": servers,
        "changedTools": changed_tools,
        "restartNeeded": restart,
        "ambiguousTools": ambiguous,
        "views": hub.views().values().filter(|v| sight.view(&v.name)).map(|v| {
            let mut s = v.summary();
            s["connected"] = connected.get(v.name.as_str()).cloned().unwrap_or_else(
                || json!({"sessions": 0, "ws": 0, "mcp": 0, "clients": []}),
            );
            s
        }).collect::<Vec<_>>(),
        // Who is connected where: per view ("" is the aggregate).
        "connected": connected,
        // Names and views only: a client's token is never shown; a client
        // sees only itself.
        "clients": hub.config().clients.values()
            .filter(|c| match sight {
                Sight::All => true,
                Sight::Client(me) => me.caller.client_name() == Some(c.name.as_str()),
            })
            .map(|c| json!({
                "name": c.name, "views": c.views,
                "sessions": hub.connected.sessions_of(&c.name),
            })).collect::<Vec<_>>(),
        "checks": checks.iter().map(|c| json!({
            "name": c.name, "ok": c.ok, "message": c.message, "fix": c.fix,
        })).collect::<Vec<_>>(),
    })
}

fn server_fix(t: &Transport, state: ServerState) -> String {
    let base = match t {
        Transport::Stdio { command, .. } => format!(
            "check that `{command}` runs by hand and see stderrTail above; then send {{\"type\":\"reload_tools\"}}"
        ),
        Transport::Http { url, .. } => format!("check that {url} is reachable; then send {{\"type\":\"reload_tools\"}}"),
        Transport::Recording { source } => format!("check that recording {source} exists"),
    };
    if state == ServerState::CrashLoop {
        format!("{base} (restarts are paused after repeated crashes)")
    } else {
        base
    }
}

/// A Playwright-based server needs a browser; say exactly how to get one.
fn playwright_check(name: &str, t: &Transport) -> Option<Check> {
    let Transport::Stdio { command, args, .. } = t else {
        return None;
    };
    let is_playwright = std::iter::once(command)
        .chain(args.iter())
        .any(|a| a.contains("playwright"));
    if !is_playwright {
        return None;
    }
    let exe = args
        .iter()
        .position(|a| a == "--executable-path")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--executable-path=").map(PathBuf::from))
        });
    let (ok, message) = match &exe {
        Some(p) if p.exists() => (true, format!("browser found at {}", p.display())),
        Some(p) => (
            false,
            format!("--executable-path {} does not exist", p.display()),
        ),
        None => match playwright_cache_browser() {
            Some(p) => (true, format!("Playwright browser found at {}", p.display())),
            None => (
                false,
                "no Playwright browser is installed (looked in ~/.cache/ms-playwright)".to_string(),
            ),
        },
    };
    Some(Check {
        name: format!("browser:{name}"),
        ok,
        message,
        fix: (!ok).then(|| {
            "run `npx playwright install chromium`, or install Debian's chromium (`apt-get install -y chromium`) and add \"--executable-path\", \"/usr/bin/chromium\" to this server's args".to_string()
        }),
    })
}

fn playwright_cache_browser() -> Option<PathBuf> {
    let root = std::env::var_os("PLAYWRIGHT_BROWSERS_PATH")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/ms-playwright")))?;
    std::fs::read_dir(&root)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("chromium"))
        })
}

fn dir_check(name: &str, dir: &Path) -> Check {
    let probe = dir.join(".toolhub-write-probe");
    // Private like every file of the state dir, however short its life.
    let ok = crate::store::private::write(&probe, b"ok").is_ok();
    let _ = std::fs::remove_file(&probe);
    Check {
        name: name.into(),
        ok,
        message: if ok {
            format!("{} is writable", dir.display())
        } else {
            format!("{} is not writable", dir.display())
        },
        fix: (!ok).then(|| {
            format!(
                "create {0} and make it writable: mkdir -p {0}",
                dir.display()
            )
        }),
    }
}

/// Every `healthCheck.interval`: probe running servers; with autoFix,
/// restart wedged ones and give crash-looped ones another chance.
pub fn spawn_prober(hub: Hub) {
    tokio::spawn(async move {
        let mut misses: std::collections::HashMap<String, u32> = Default::default();
        loop {
            let cfg = hub.config();
            let interval = cfg.health_check.interval.max(Duration::from_millis(100));
            tokio::select! {
                _ = hub.shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let cfg = hub.config();
            if !cfg.health_check.enabled {
                continue;
            }
            // Every server, and every per-context instance on its own.
            let mut probes: Vec<(String, crate::mcp::supervisor::ServerHandle)> = hub
                .server_handles()
                .into_iter()
                .map(|h| (h.name.clone(), h))
                .collect();
            probes.extend(hub.instances().handles());
            misses.retain(|k, _| probes.iter().any(|(p, _)| p == k));
            for (key, h) in probes {
                let Some(st) = h.status() else { continue };
                match st.state {
                    ServerState::Running => {
                        let Some(peer) = h.peer() else { continue };
                        let ping =
                            peer.send_request(ClientRequest::PingRequest(PingRequest::default()));
                        let ok = matches!(
                            tokio::time::timeout(PROBE_TIMEOUT.min(interval), ping).await,
                            Ok(Ok(_))
                        );
                        let n = misses.entry(key.clone()).or_default();
                        if ok {
                            *n = 0;
                            continue;
                        }
                        *n += 1;
                        tracing::warn!(server = %key, misses = *n, "health probe failed");
                        if *n >= WEDGED_AFTER && cfg.health_check.auto_fix {
                            *n = 0;
                            h.kill_and_restart("health check: server stopped answering");
                        }
                    }
                    ServerState::CrashLoop if cfg.health_check.auto_fix => {
                        h.restart("health check autoFix");
                    }
                    _ => {}
                }
            }
        }
    });
}
