//! `toolhub-testserver`: a small MCP server over stdio that produces faults on
//! demand for toolhub's integration tests (crash, hang, flaky, garbage on
//! stdout, list changes, a grandchild to reap, a SIGTERM it ignores).
//!
//! ```text
//! toolhub-testserver [--name NAME] [--log FILE] [--state-dir DIR] [--extra-tool NAME]...
//! toolhub-testserver --fast-echo   (a minimal echo server for the relay benchmark)
//! ```
//!
//! - `--log FILE`: one JSON line `{"tool","arguments","pid","ts","server"}` per
//!   `tools/call`, appended and fsynced *before* the tool runs, so a test can
//!   prove which calls reached the server even after a SIGKILL.
//! - `--state-dir DIR`: where `flaky` and `counter` keep their counts, so a
//!   count survives restarts. Without it the counts live in memory.
//! - `--extra-tool NAME`: an extra echo-like tool (two servers sharing a name).
//! - `--conformance`: also what the official MCP conformance suite's server
//!   scenarios call (`test_*` tools, `test://` resources, prompts, logging,
//!   completion); see `conformance.rs`.
//! - `--mrtr`: a 2026-07-28-only server with the suite's
//!   `test_input_required_result_*` fixtures (`mrtr.rs`).
//!   Without it the server speaks only the session era (2025-11-25 and
//!   older), so the hub's own tests meet the upstreams they always did.
//! - `TESTSERVER_IGNORE_TERM=1`: ignore SIGTERM so the hub must escalate.
//!
//! Bad arguments and unknown tools are JSON-RPC `-32602` errors, so the hub
//! sees them as invalid params rather than as a tool's own failure.

#![allow(deprecated)] // logging and resources/subscribe: legacy, still spoken

mod barrier;
mod cli;
mod conformance;
mod dispatch;
mod dynamic;
mod fast;
mod mrtr;
mod reply;
mod state;
mod tasks;
mod tools;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    ErrorCode, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use cli::{parse_cli, Cli};
use reply::{internal, invalid, text, write_garbage_line};
use state::{CallLog, Counters};
use tools::{builtin_tools, echo_like_tool, Args as ToolArgs, PNG_1X1_BASE64};

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--fast-echo") {
        return match fast::serve() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("toolhub-testserver --fast-echo: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let cli = match parse_cli(std::env::args().skip(1)) {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("toolhub-testserver: {e}");
            return ExitCode::from(2);
        }
    };
    if std::env::var("TESTSERVER_IGNORE_TERM").as_deref() == Ok("1") {
        // SAFETY: installs SIG_IGN for one signal; no handler code runs, and
        // tokio has not registered SIGTERM (we never ask it to).
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    let name = cli.name.clone();
    let delay = std::time::Duration::from_millis(cli.start_delay_ms);
    let server = match TestServer::new(cli) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("toolhub-testserver: {e}");
            return ExitCode::from(2);
        }
    };
    eprintln!("testserver {name} started pid={}", std::process::id());
    if !delay.is_zero() {
        // A slow starter: the hub's handshake waits.
        tokio::time::sleep(delay).await;
    }
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("testserver {name} handshake failed: {e}");
            return ExitCode::from(1);
        }
    };
    match running.waiting().await {
        Ok(reason) => eprintln!("testserver {name} stopped: {reason:?}"),
        Err(e) => eprintln!("testserver {name} stopped with a join error: {e}"),
    }
    ExitCode::SUCCESS
}

struct TestServer {
    name: String,
    log: Option<CallLog>,
    counters: Counters,
    /// Built-in tools plus `--extra-tool` ones, fixed at startup.
    fixed: Vec<Tool>,
    extra: Vec<String>,
    dynamic: Mutex<BTreeMap<String, dynamic::DynamicTool>>,
    /// Wakes `subscriptions/listen` streams (2026-07-28 clients); legacy
    /// sessions get the notification straight from the request's peer.
    list_changed: broadcast::Sender<()>,
    /// Serve the conformance suite's tools, resources and prompts.
    conformance: bool,
    /// `--mrtr`: the 2026-07-28 MRTR fixtures, and that revision only.
    mrtr: Option<mrtr::Mrtr>,
    /// What `memo` was last told, in this process only.
    memo: Mutex<Option<String>>,
    /// `barrier`, `await_waiting` and `release`.
    barriers: barrier::Barriers,
}

impl TestServer {
    /// `--mrtr`'s own tasks; other modes have none.
    fn own_tasks(&self) -> Result<&mrtr::OwnTasks, ErrorData> {
        self.mrtr.as_ref().map(|m| &m.own).ok_or_else(|| {
            invalid("this server runs no tasks of its own (only --mrtr does)".to_string())
        })
    }

    fn new(cli: Cli) -> Result<Self, String> {
        let log = cli.log.as_deref().map(CallLog::open).transpose()?;
        let counters = Counters::new(cli.state_dir)?;
        let mut fixed = builtin_tools();
        for extra in &cli.extra_tools {
            if fixed.iter().any(|t| t.name == extra.as_str()) {
                return Err(format!(
                    "--extra-tool `{extra}` clashes with a built-in tool, expected a new name"
                ));
            }
            fixed.push(echo_like_tool(extra, "An extra echo-like tool.", 0));
        }
        if cli.conformance {
            fixed.extend(conformance::tools());
            fixed.extend(tasks::tools());
        }
        if cli.mrtr {
            fixed.extend(mrtr::tools());
        }
        let (list_changed, _) = broadcast::channel(16);
        Ok(Self {
            name: cli.name,
            log,
            counters,
            fixed,
            extra: cli.extra_tools,
            dynamic: Mutex::new(BTreeMap::new()),
            list_changed,
            conformance: cli.conformance,
            mrtr: cli.mrtr.then(mrtr::Mrtr::default),
            memo: Mutex::new(None),
            barriers: barrier::Barriers::default(),
        })
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let caps = if self.conformance {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_logging()
                .enable_completions()
                .build()
        } else if self.mrtr.is_some() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts()
                .enable_tasks()
                .build()
        } else {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        };
        ServerConfig::new(caps)
            .with_server_info(Implementation::new(
                self.name.clone(),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("fault-injection MCP server for toolhub's integration tests")
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.mrtr.is_some() {
            return std::borrow::Cow::Owned(vec![ProtocolVersion::V_2026_07_28]);
        }
        let session_era = ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .filter(|v| v.has_initialize());
        std::borrow::Cow::Owned(session_era.cloned().collect())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.all_tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.all_tools().into_iter().find(|t| t.name == name)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.own_tasks()?.get(&request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.own_tasks()?.update(&request.task_id)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.own_tasks()?.cancel(&request.task_id)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        if let Some(log) = &self.log {
            // Durable before the tool runs: a crash or SIGKILL mid-call
            // must still leave the record behind.
            log.record(&self.name, &request.name, &arguments)
                .map_err(internal)?;
        }
        // Tests wait on this line (through the hub's stderr log) to know a
        // call has reached the server.
        eprintln!("testserver {} call {}", self.name, request.name);
        if let Some(m) = &self.mrtr {
            let (responses, state) = (
                request.input_responses.as_ref(),
                request.request_state.as_deref(),
            );
            if let Some(r) = m.call(&request.name, responses, state, &cx) {
                return r;
            }
        }
        if self.conformance {
            if let Some(r) = conformance::call(&request.name, &arguments, &cx).await {
                return r.map(CallToolResponse::from);
            }
        }
        let args = ToolArgs::new(&request.name, &arguments);
        self.dispatch(&request.name, &args, &cx)
            .await
            .map(CallToolResponse::from)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let all = if self.conformance {
            conformance::resources()
        } else {
            Vec::new()
        };
        Ok(ListResourcesResult::with_all_items(all))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let all = if self.conformance {
            conformance::templates()
        } else {
            Vec::new()
        };
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        conformance::read(&request.uri).map(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        eprintln!("testserver {} subscribed {}", self.name, request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        eprintln!("testserver {} unsubscribed {}", self.name, request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut all = if self.conformance {
            conformance::prompts()
        } else {
            Vec::new()
        };
        if self.mrtr.is_some() {
            all.extend(mrtr::prompts());
        }
        Ok(ListPromptsResult::with_all_items(all))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if let Some(m) = &self.mrtr {
            return m.get_prompt(&request.name, request.input_responses.as_ref());
        }
        let args = request.arguments.unwrap_or_default();
        conformance::get_prompt(&request.name, &args).map(Into::into)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        eprintln!("testserver {} log level {:?}", self.name, request.level);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, cx: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changed = self.list_changed.subscribe();
        loop {
            tokio::select! {
                _ = cx.cancelled() => {
                    eprintln!("testserver {} listen cancelled", self.name);
                    return Ok(());
                }
                event = changed.recv() => {
                    if matches!(event, Err(broadcast::error::RecvError::Closed)) {
                        return Ok(());
                    }
                    if let Err(e) = cx.sink().notify_tool_list_changed().await {
                        eprintln!("testserver {} listen could not send: {e}", self.name);
                        return Ok(());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
