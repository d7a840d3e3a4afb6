//! The hub as one MCP server: rmcp's `ServerHandler` over the aggregate.
//! rmcp makes one handler per session (per request for 2026-07-28 clients);
//! every instance shares the [`Endpoint`], and the instances of one session
//! share its [`SessionState`].

#![allow(deprecated)] // logging and resources/subscribe: legacy, still spoken

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, Reference, ResultType,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use super::in_view::ViewServers;
use super::limit::Ticket;
use super::paging::{self, List};
use super::sessions::{ListKind, SessionState};
use super::tasks::CallRoute;
use super::Endpoint;
use crate::server::slots::Slot;

const INSTRUCTIONS: &str = "toolhub: every tool of every MCP server behind this hub, named server__tool, plus the hub's own hub__… tools (health_check, history, tool_batch, record_start, …). A failed call says what went wrong and what to do; its error object (errorType, suggestion, recoverable) is in structuredContent.";

/// Ends the session's recording and forgets it when rmcp drops the last
/// handler instance of the session; gives back its `server.maxConnections`
/// slot (`limit`) then too.
struct SessionEnd {
    ep: Arc<Endpoint>,
    state: Arc<SessionState>,
    slot: std::sync::Mutex<Option<Slot>>,
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
        // The slot first: "MCP session closed" in the log means it is free.
        if let Ok(mut slot) = self.slot.lock() {
            slot.take();
        }
        self.ep.sessions.remove(&self.state.key);
        self.ep.app.connection_closed(&self.state.key);
    }
}

#[derive(Clone)]
pub struct HubServer {
    ep: Arc<Endpoint>,
    session: Arc<SessionEnd>,
}

impl HubServer {
    /// A list's first page waits for servers still in their first start
    /// (bounded); the names of those still starting after that.
    async fn settled(&self, request: &Option<PaginatedRequestParams>) -> Vec<String> {
        if request.as_ref().is_some_and(|r| r.cursor.is_some()) {
            return Vec::new();
        }
        self.ep.app.hub.settle_first_start().await
    }

    pub fn new(ep: Arc<Endpoint>) -> HubServer {
        let state = SessionState::new();
        HubServer {
            session: Arc::new(SessionEnd {
                ep: ep.clone(),
                state,
                slot: std::sync::Mutex::new(None),
            }),
            ep,
        }
    }

    fn state(&self) -> &Arc<SessionState> {
        &self.session.state
    }

    /// One page of a list (`paging`), `server.mcpPageSize` long.
    fn page<T>(
        &self,
        list: List,
        items: Vec<T>,
        request: Option<PaginatedRequestParams>,
    ) -> Result<(Vec<T>, Option<String>), ErrorData> {
        let size = self.ep.app.hub.config().server.mcp_page_size;
        let cursor = request.and_then(|r| r.cursor);
        paging::page(list, items, cursor.as_deref(), size)
    }

    /// The servers whose resources, templates, prompts and completion
    /// this request may reach (`in_view`).
    fn servers(&self, cx: &RequestContext<RoleServer>) -> ViewServers {
        let caller = super::view::caller_of(cx, &self.state().key);
        ViewServers::of(&self.ep.app.hub, &caller)
    }

    fn tool(&self, exposed: &str, qualified: &str) -> Option<Tool> {
        let snapshot = self.ep.app.hub.tools();
        let t = snapshot.get(qualified)?;
        super::view::mcp_tool(exposed, t)
    }
}

impl ServerHandler for HubServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
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
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("toolhub", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // The slot `limit` took for this session: held until it ends.
        let ticket = cx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Ticket>());
        if let (Some(slot), Ok(mut held)) =
            (ticket.and_then(Ticket::take), self.session.slot.lock())
        {
            *held = Some(slot);
        }
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        // Its `Mcp-Session-Id` (a legacy HTTP session), for `limit`.
        let http_id = cx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.headers.get(super::SESSION_HEADER))
            .and_then(|v| v.to_str().ok());
        if let Some(id) = http_id {
            self.state().set_http_id(id.into());
        }
        let parts = cx.extensions.get::<axum::http::request::Parts>();
        self.ep.app.hub.connected.enter(
            (&*self.state().key).into(),
            crate::hub::connected::Presence {
                surface: "mcp",
                client: parts.and_then(super::view::client_of),
                view: parts
                    .and_then(|p| p.extensions.get::<super::view::McpView>())
                    .map(|v| v.0.clone()),
            },
        );
        self.ep.sessions.add(self.state().clone(), cx.peer.clone());
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let starting = self.settled(&request).await;
        if let Some(view) = super::view::of(&cx) {
            let tools = super::view::tools(&self.ep.app.hub, &view);
            let (tools, next) = self.page(List::Tools, tools, request)?;
            let mut r = ListToolsResult::with_all_items(tools);
            r.next_cursor = next;
            (r.meta, r.ttl_ms) = partial(starting);
            return Ok(r);
        }
        let names = self.ep.tool_names();
        let pairs: Vec<(&String, &String)> = names.by_exposed.iter().collect();
        let (pairs, next) = self.page(List::Tools, pairs, request)?;
        let tools = pairs
            .into_iter()
            .filter_map(|(e, q)| self.tool(e, q))
            .collect();
        let mut r = ListToolsResult::with_all_items(tools);
        r.next_cursor = next;
        (r.meta, r.ttl_ms) = partial(starting);
        Ok(r)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let names = self.ep.tool_names();
        let q = names.by_exposed.get(name)?;
        self.tool(name, q)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let key = self.state().key.clone();
        let caller = super::view::caller_of(&cx, &key);
        let stateless = super::stateless::is_stateless(&cx);
        let in_flight = &self.state().in_flight;
        let tool = match super::view::of(&cx) {
            Some(_) => request.name.to_string(),
            None => self.ep.tool_names().to_call(&request.name),
        };
        // A place under the caller's cap (`caps`), held until the call's
        // result, a task's until the task ends; at a cap the call fails at
        // once.
        let refused = |e| Ok(super::caps::refused(&request.name, e).into());
        let task_place = || super::caps::task_place(&self.ep, &caller, in_flight, stateless);
        match super::tasks::plan(&self.ep, &cx, &request, &tool)? {
            CallRoute::Call => {}
            CallRoute::Task(kind) => {
                let place = match task_place() {
                    Ok(p) => p,
                    Err(e) => return refused(e),
                };
                let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
                return super::tasks::create(&self.ep, &cx, &key, kind, &tool, &args, place)
                    .map(Into::into);
            }
            CallRoute::Resume(id) => {
                let place = match task_place() {
                    Ok(p) => p,
                    Err(e) => return refused(e),
                };
                return super::tasks::resume(&self.ep, &cx, &key, &id, place)
                    .await
                    .map(Into::into);
            }
        }
        let tool = self.ep.call_name(&request.name, &cx);
        if stateless {
            // Its place is taken there: a retry that answers a held call
            // goes on under the place the call holds.
            return super::stateless_call::call_tool(&self.ep, &caller, tool, request, cx)
                .await
                .map(Into::into);
        }
        let _place = match super::caps::place(&self.ep, &caller, in_flight, false) {
            Ok(p) => p,
            Err(e) => return refused(e),
        };
        super::tools_call::call_tool(&self.ep, &key, tool, request, cx)
            .await
            .map(Into::into)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        super::tasks::get(&self.ep, &cx, &request.task_id).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        super::tasks::update(&self.ep, &cx, &request.task_id, &request.input_responses).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        super::tasks::cancel(&self.ep, &cx, &request.task_id).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let starting = self.settled(&request).await;
        let all = self.ep.app.hub.list_resources().await;
        let all = self.servers(&cx).keep(all);
        let (items, next) = self.page(List::Resources, all, request)?;
        let mut r = ListResourcesResult::with_all_items(items);
        r.next_cursor = next;
        (r.meta, r.ttl_ms) = partial(starting);
        Ok(r)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let all = self.ep.app.hub.list_resource_templates().await;
        let all = self.servers(&cx).keep(all);
        let (items, next) = self.page(List::Templates, all, request)?;
        let mut r = ListResourceTemplatesResult::with_all_items(items);
        r.next_cursor = next;
        Ok(r)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let hub = &self.ep.app.hub;
        self.servers(&cx).resource_server(hub, &request.uri).await?;
        let mut r = hub.read_resource(&request.uri).await?;
        // A session-era server's result has no `resultType`, which
        // 2026-07-28 requires (rmcp strips it again for older peers).
        r.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(r.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let hub = &self.ep.app.hub;
        self.servers(&cx).resource_server(hub, &request.uri).await?;
        hub.subscribe_resource(&request.uri, true).await?;
        self.state().subscribe(&request.uri, true);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.state().subscribe(&request.uri, false);
        let hub = &self.ep.app.hub;
        self.servers(&cx).resource_server(hub, &request.uri).await?;
        hub.subscribe_resource(&request.uri, false).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let starting = self.settled(&request).await;
        let prompts = self.servers(&cx).keep(self.ep.prompts().await);
        let (items, next) = self.page(List::Prompts, prompts, request)?;
        let mut r = ListPromptsResult::with_all_items(items);
        r.next_cursor = next;
        (r.meta, r.ttl_ms) = partial(starting);
        Ok(r)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let route = self.ep.prompt_route(&request.name).await?;
        let (server, name) = self.servers(&cx).prompt(&request.name, route)?;
        super::prompt_input::get_prompt(&self.ep, &cx, server, name, request).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let hub = &self.ep.app.hub;
        let servers = self.servers(&cx);
        let mut up = request;
        let server = match &mut up.r#ref {
            Reference::Prompt(p) => {
                let route = self.ep.prompt_route(&p.name).await?;
                let (server, name) = servers.prompt(&p.name, route)?;
                p.name = name;
                server
            }
            Reference::Resource(r) => servers.resource_server(hub, &r.uri).await?,
            _ => return Ok(CompleteResult::default()),
        };
        let offers = hub
            .peers_offering(crate::hub::aggregate::Offer::Completions)
            .iter()
            .any(|(n, _)| *n == server);
        if !offers {
            // Nothing to suggest from a server without completion support.
            return Ok(CompleteResult::default());
        }
        let mut r = hub.complete(&server, up).await?;
        r.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(r)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        session_only(&cx, "logging/setLevel", "log messages")?;
        self.state().set_level(request.level);
        self.ep.sessions.apply_levels().await;
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .build(),
        )
    }

    async fn listen(&self, cx: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.ep.sessions.changes.subscribe();
        loop {
            tokio::select! {
                _ = cx.cancelled() => return Ok(()),
                kind = changes.recv() => {
                    let sent = match kind {
                        Ok(ListKind::Tools) => cx.sink().notify_tool_list_changed().await,
                        Ok(ListKind::Prompts) => cx.sink().notify_prompt_list_changed().await,
                        Ok(ListKind::Resources) => cx.sink().notify_resource_list_changed().await,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            cx.sink().notify_tool_list_changed().await
                        }
                        Err(_) => return Ok(()),
                    };
                    if sent.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// 2026-07-28 removed `logging/setLevel` (rmcp itself refuses its removed
/// `ping` and `resources/subscribe`), and a stateless request has no
/// session to keep a level in: such a request is `-32601` saying so (done
/// anyway, it would be a silent no-op).
/// A list that is still partial says so: `_meta["toolhub/starting"]`
/// names the servers not up yet (their items come with
/// `notifications/*/list_changed`), and `ttlMs` 0 tells a caching client
/// not to keep it.
fn partial(starting: Vec<String>) -> (Option<rmcp::model::MetaObject>, Option<u64>) {
    if starting.is_empty() {
        return (None, None);
    }
    let mut m = serde_json::Map::new();
    m.insert("toolhub/starting".into(), json!(starting));
    (Some(rmcp::model::MetaObject(m)), Some(0))
}

fn session_only(
    cx: &RequestContext<RoleServer>,
    method: &str,
    what: &str,
) -> Result<(), ErrorData> {
    if cx.protocol_version().is_none_or(|v| v.has_initialize()) {
        return Ok(());
    }
    Err(ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!(
            "{method} is not part of MCP 2026-07-28, the version of this request, and the hub sends no {what} to stateless clients; open a session (initialize with 2025-11-25) and send {method} there"
        ),
        None,
    ))
}
