//! One connection to one MCP server over rmcp: spawning a stdio child in its
//! own process group (or dialing a Streamable HTTP URL), draining its stderr,
//! listing its tools and calling them.
//!
//! The supervisor owns the [`Upstream`]; callers only ever see a cloned
//! [`rmcp::Peer`], so a call never waits on a lock held by another call.

#![allow(deprecated)] // sampling and logging: deprecated by SEP-2577, still spoken

use std::collections::{HashMap, HashSet, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, Implementation, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ResourceUpdatedNotificationParam, ServerNotification, SetLevelRequestParams,
    SubscriptionFilter,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, InboundStreamOrigin, NotificationContext,
    RequestContext, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::config::{ServerSpec, Transport};
use crate::mcp::input::{Answer, Ask};
use crate::mcp::ordered::{Logs, OrderedTransport, Seq};
use crate::mcp::pipes::ChildTransport;
use crate::mcp::registry::{RawTool, ToolExtra};
use crate::mcp::relay::{CallLink, Forward, Inflight, Notice, RelaySlot};

/// How many stderr lines of a child are kept for `health_status`.
pub const STDERR_TAIL: usize = 40;
/// A server that sends more tool pages than this is treated as broken.
const MAX_TOOL_PAGES: usize = 100;

/// Last lines a child wrote to stderr, shared with the health report.
#[derive(Debug, Default, Clone)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    pub fn push(&self, line: String) {
        if let Ok(mut q) = self.0.lock() {
            if q.len() >= STDERR_TAIL {
                q.pop_front();
            }
            q.push_back(line);
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Notifications from a server that the supervisor must act on.
#[derive(Debug)]
pub enum UpstreamEvent {
    ToolsChanged,
}

/// Receives notifications and requests from one server: tool list changes
/// go to its supervisor; progress, logs, sampling and elicitation go up
/// through [`relay`](crate::mcp::relay) to the client call that caused them.
#[derive(Clone)]
pub struct Handler {
    events: mpsc::UnboundedSender<UpstreamEvent>,
    server: Arc<str>,
    inflight: Inflight,
    relay: RelaySlot,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // Sampling and elicitation are relayed to the MCP client whose call
        // asked (see `relay`); roots are not offered.
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_sampling()
                .enable_elicitation()
                .build(),
            Implementation::new("toolhub", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        // The supervisor debounces bursts into one re-list.
        let _ = self.events.send(UpstreamEvent::ToolsChanged);
    }

    async fn on_progress(&self, p: ProgressNotificationParam, cx: NotificationContext<RoleClient>) {
        // To the linked call holding the token (kept briefly for one whose
        // request is still on its way); anything else is dropped, as the
        // spec asks.
        self.inflight.progress(p).await;
        self.inflight
            .order
            .handled(cx.extensions.get::<Seq>().copied());
    }

    async fn on_logging_message(
        &self,
        m: LoggingMessageNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        // `OrderedTransport` relays log messages itself, in order; this
        // sees none.
        self.notice(Notice::Log(m));
    }

    async fn on_resource_updated(
        &self,
        p: ResourceUpdatedNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.notice(Notice::ResourceUpdated(p));
    }

    async fn on_resource_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.notice(Notice::ResourcesChanged);
    }

    async fn on_prompt_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.notice(Notice::PromptsChanged);
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        cx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        match self.ask(Ask::Sampling(params), &cx).await? {
            Answer::Sampling(r) => Ok(r),
            _ => Err(ErrorData::internal_error("mismatched answer", None)),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match self.ask(Ask::Elicitation(params), &cx).await? {
            Answer::Elicitation(r) => Ok(r),
            _ => Err(ErrorData::internal_error("mismatched answer", None)),
        }
    }
}

impl Handler {
    fn notice(&self, n: Notice) {
        if let Some(r) = self.relay.get() {
            r.notice(&self.server, n);
        }
    }

    /// Hand a server's request to the client call it belongs to and wait for
    /// the answer (or for the server to give up, which drops it).
    async fn ask(&self, ask: Ask, cx: &RequestContext<RoleClient>) -> Result<Answer, ErrorData> {
        let link = self.route(&ask, cx)?;
        let (reply, answer) = oneshot::channel();
        if !link.send(Forward::Ask { ask, reply }).await {
            return Err(ErrorData::internal_error(
                "the client call this request belongs to has already returned",
                None,
            ));
        }
        tokio::select! {
            a = answer => a.unwrap_or_else(|_| Err(ErrorData::internal_error(
                "the client call ended before it answered", None))),
            _ = cx.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the server", None)),
        }
    }

    /// Which client call a server's request is for: over Streamable HTTP the
    /// stream it came on names the call; otherwise it must be the only
    /// client with calls in flight on this server.
    fn route(&self, ask: &Ask, cx: &RequestContext<RoleClient>) -> Result<CallLink, ErrorData> {
        let what = ask.capability();
        let by_stream = match cx.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => self.inflight.by_request(id),
            _ => None,
        };
        let link = match by_stream {
            Some(l) => l,
            None => {
                let sessions = self.inflight.sessions();
                match sessions.as_slice() {
                    [one] => one.clone(),
                    [] => {
                        return Err(ErrorData::internal_error(
                            format!(
                                "toolhub: server {} asked for {what}, but no MCP client call is in flight on it to answer",
                                self.server
                            ),
                            None,
                        ))
                    }
                    _ => {
                        return Err(ErrorData::internal_error(
                            format!(
                                "toolhub: server {} asked for {what} while {} MCP clients have calls in flight on it; the hub cannot tell which one asked",
                                self.server,
                                sessions.len()
                            ),
                            None,
                        ))
                    }
                }
            }
        };
        if link.can_answer(ask) {
            Ok(link)
        } else {
            Err(ErrorData::internal_error(
                format!(
                    "toolhub: server {} asked for {what}, but the MCP client whose call it serves does not support {what}",
                    self.server
                ),
                None,
            ))
        }
    }
}

/// A live connection: the running rmcp service and, for a child, its group.
pub struct Upstream {
    pub running: RunningService<RoleClient, Handler>,
    pub pgid: Option<i32>,
    /// Fires when a stdio child's group leader exits, even while other
    /// members of its group (an `npm exec` wrapper's `node`) keep the pipes
    /// open.
    pub leader_exit: Option<crate::process::ExitWatch>,
}

impl Upstream {
    pub fn peer(&self) -> Peer<RoleClient> {
        self.running.peer().clone()
    }
}

/// Start one server and complete the MCP handshake within `init_timeout`.
pub async fn connect(
    spec: &ServerSpec,
    stderr: StderrTail,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    links: (Inflight, RelaySlot),
    init_timeout: Duration,
) -> Result<Upstream, String> {
    let (inflight, relay) = links;
    inflight.order.reset();
    let order = inflight.order.clone();
    let logs = |server: Arc<str>, relay: RelaySlot| -> Logs {
        Box::new(move |m| {
            if let Some(r) = relay.get() {
                r.notice(&server, Notice::Log(m));
            }
        })
    };
    let logs = logs(spec.name.as_str().into(), relay.clone());
    let handler = Handler {
        events,
        server: spec.name.as_str().into(),
        inflight,
        relay,
    };
    let listener = handler.clone();
    match &spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            // Inherited by the child's own children: lets a later start-up
            // sweep prove a leftover group is ours (`children.rs`).
            let tag = crate::mcp::children::new_tag();
            let (program, argv, envs, dir) =
                (command.clone(), args.clone(), env.clone(), cwd.clone());
            let child_tag = tag.clone();
            // Forked on the process-long spawner thread: the parent-death
            // signal must follow the hub process, not a tokio worker thread.
            let spawned = crate::process::on_spawner(move || {
                let mut cmd = tokio::process::Command::new(&program);
                // argv, never a shell: an argument is never interpreted.
                cmd.args(&argv).envs(&envs).kill_on_drop(true);
                cmd.env(crate::mcp::children::TAG_ENV, &child_tag);
                if let Some(dir) = dir {
                    cmd.current_dir(dir);
                }
                crate::process::set_parent_death_signal(&mut cmd);
                cmd.stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let mut wrapped = CommandWrap::from(cmd);
                wrapped.wrap(ProcessGroup::leader());
                let mut child = wrapped.spawn()?;
                let child_stderr = child.inner_mut().stderr().take();
                let watch = child
                    .id()
                    .and_then(|p| crate::process::ExitWatch::open(p as i32));
                let proc = ChildTransport::new(child)?;
                Ok::<_, std::io::Error>((proc, child_stderr, watch))
            })
            .await
            .and_then(|r| r)
            .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            let (proc, child_stderr, leader_exit) = spawned;
            let pid = proc.id().map(|p| p as i32);
            if let Some(pid) = pid {
                let argv = std::iter::once(command.clone()).chain(args.iter().cloned());
                crate::mcp::children::started(&spec.name, pid, &tag, argv.collect());
            }
            if let Some(err) = child_stderr {
                drain_stderr(spec.name.clone(), err, stderr);
            }
            let proc = OrderedTransport::new(proc, order, logs);
            match tokio::time::timeout(
                init_timeout,
                handler.serve_with_lifecycle(proc, lifecycle()),
            )
            .await
            {
                Ok(Ok(running)) => {
                    disable_cache(&running).await;
                    listen_changes(running.peer().clone(), listener);
                    Ok(Upstream {
                        running,
                        pgid: pid,
                        leader_exit,
                    })
                }
                Ok(Err(e)) => {
                    kill_group(pid);
                    Err(format!("MCP handshake failed: {e}"))
                }
                Err(_) => {
                    kill_group(pid);
                    Err(format!(
                        "MCP handshake did not finish within {} ms",
                        init_timeout.as_millis()
                    ))
                }
            }
        }
        Transport::Http { url, headers } => {
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            tls_provider();
            let mut map = HashMap::new();
            for (k, v) in headers {
                let name = http::HeaderName::try_from(k.as_str())
                    .map_err(|e| format!("header name {k:?}: {e}"))?;
                let value = http::HeaderValue::try_from(v.as_str())
                    .map_err(|e| format!("header {k:?} value: {e}"))?;
                map.insert(name, value);
            }
            let cfg = StreamableHttpClientTransportConfig::with_uri(url.clone())
                .custom_headers(map)
                .max_concurrent_requests(64);
            let transport =
                OrderedTransport::new(StreamableHttpClientTransport::from_config(cfg), order, logs);
            let start = handler.serve_with_lifecycle(transport, lifecycle());
            match tokio::time::timeout(init_timeout, start).await {
                Ok(Ok(running)) => {
                    disable_cache(&running).await;
                    listen_changes(running.peer().clone(), listener);
                    Ok(Upstream {
                        running,
                        pgid: None,
                        leader_exit: None,
                    })
                }
                Ok(Err(e)) => Err(format!(
                    "MCP handshake with {url} failed: {e}{}",
                    causes(&e)
                )),
                Err(_) => Err(format!(
                    "MCP handshake with {url} did not finish within {} ms",
                    init_timeout.as_millis()
                )),
            }
        }
        Transport::Recording { source } => Err(format!(
            "recording-backed servers are not available in this build (recording {source:?})"
        )),
    }
}

/// How the hub meets a server: `server/discover` for 2026-07-28 (then
/// every request carries its `_meta`, and MRTR replaces server-to-client
/// requests), falling back to the `initialize` handshake of 2025-11-25
/// for a server that answers the probe with an error (rmcp's `Auto`).
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Whether the server speaks a stateless revision (2026-07-28 on).
pub fn is_stateless(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|i| !i.protocol_version.has_initialize())
}

/// A 2026-07-28 server says its lists changed only on a
/// `subscriptions/listen` stream: one is kept open for the connection's
/// life, and what it says goes where a session's notifications go.
fn listen_changes(peer: Peer<RoleClient>, h: Handler) {
    if !is_stateless(&peer) {
        return;
    }
    tokio::spawn(async move {
        let filter = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed()
            .build();
        let mut sub = match peer.listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(server = %h.server, error = %e, "subscriptions/listen refused: this server's list changes are not heard");
                return;
            }
        };
        tracing::debug!(server = %h.server, "listening for list changes (subscriptions/listen)");
        loop {
            let n = match sub.next().await {
                Ok(Some(n)) => n,
                other => {
                    tracing::info!(server = %h.server, end = ?other, how = ?sub.end(), "subscriptions/listen ended: this server's list changes are heard again after its next connect");
                    break;
                }
            };
            tracing::debug!(server = %h.server, notification = ?n, "heard on subscriptions/listen");
            match n {
                ServerNotification::ToolListChangedNotification(_) => {
                    let _ = h.events.send(UpstreamEvent::ToolsChanged);
                }
                ServerNotification::PromptListChangedNotification(_) => {
                    h.notice(Notice::PromptsChanged)
                }
                ServerNotification::ResourceListChangedNotification(_) => {
                    h.notice(Notice::ResourcesChanged)
                }
                _ => {}
            }
        }
    });
}

async fn disable_cache(running: &RunningService<RoleClient, Handler>) {
    // rmcp's response cache can serve a stale tools/list; the hub owns caching.
    running
        .peer()
        .set_response_cache_config(rmcp::ClientCacheConfig::disabled())
        .await;
}

/// Log every stderr line under the server's name and keep the tail.
fn drain_stderr(server: String, err: tokio::process::ChildStderr, tail: StderrTail) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(err).lines();
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    let line: String = line.chars().take(2000).collect();
                    tracing::info!(target: "toolhub::child", server = %server, "{line}");
                    tail.push(line);
                }
                Ok(None) => break,
                Err(e) => {
                    // Non-UTF-8 output: keep draining so the child never blocks.
                    tracing::debug!(server = %server, error = %e, "stderr read error");
                    break;
                }
            }
        }
    });
}

/// SIGKILL the whole process group; a group that is already gone is fine.
pub fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid.filter(|p| *p > 1) {
        // SAFETY: plain syscall; ESRCH (no such group) is the expected outcome.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
        crate::mcp::children::stopped(pgid);
    }
}

/// List every tool, following cursors with a repeat guard and a page cap.
pub async fn list_tools(
    peer: &Peer<RoleClient>,
    timeout: Duration,
) -> Result<Vec<RawTool>, String> {
    let work = async {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = cursor
                .clone()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = peer
                .list_tools(params)
                .await
                .map_err(|e| format!("tools/list failed: {e}"))?;
            for t in page.tools {
                out.push(RawTool {
                    name: t.name.to_string(),
                    description: t.description.map(|d| d.to_string()),
                    input_schema: Value::Object((*t.input_schema).clone()),
                    annotations: t.annotations.and_then(|a| serde_json::to_value(a).ok()),
                    extra: ToolExtra {
                        title: t.title,
                        output_schema: t.output_schema.map(|s| Value::Object((*s).clone())),
                        icons: t.icons.and_then(|i| serde_json::to_value(i).ok()),
                        meta: t.meta.and_then(|m| serde_json::to_value(m).ok()),
                    },
                });
            }
            match page.next_cursor {
                Some(c) if !c.is_empty() && seen.insert(c.clone()) => cursor = Some(c),
                _ => return Ok(out),
            }
        }
        Err(format!(
            "tools/list returned more than {MAX_TOOL_PAGES} pages"
        ))
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        format!(
            "tools/list did not answer within {} ms",
            timeout.as_millis()
        )
    })?
}

/// Set a server's log level (when it offers logging), bounded by `timeout`.
pub async fn apply_log_level(peer: &Peer<RoleClient>, level: LoggingLevel, timeout: Duration) {
    let offers = peer
        .peer_info()
        .is_some_and(|i| i.capabilities.logging.is_some());
    if !offers {
        return;
    }
    let set = peer.set_level(SetLevelRequestParams::new(level));
    match tokio::time::timeout(timeout, set).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "logging/setLevel refused"),
        Err(_) => tracing::debug!("logging/setLevel did not answer in time"),
    }
}

/// Install rustls's ring provider as the process default, once, before the
/// first HTTPS client is built (reqwest is built without a provider of its
/// own, so the hub links ring, not aws-lc). Harmless when one is installed.
pub fn tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The causes under an error, as ": cause: deeper cause" (a refused TLS
/// certificate sits several levels under rmcp's transport error, and is
/// what a person needs to read).
fn causes(e: &dyn std::error::Error) -> String {
    let mut out = String::new();
    let mut next = e.source();
    let mut seen = e.to_string();
    while let Some(c) = next {
        let text = c.to_string();
        if !seen.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
            seen.push_str(&text);
        }
        next = c.source();
    }
    out
}
