//! MCP Tasks (`io.modelcontextprotocol/tasks`, SEP-2663) backed by the
//! engine: a `tools/call` that becomes a task is an engine task started
//! unattended (`engine::unattended`), so it is journaled before the
//! `CreateTaskResult` goes out, survives the hub's own crash (the hub
//! resumes it at start) and runs each finished step once. `tasks/get`,
//! `tasks/update` and `tasks/cancel` act on that task; its id is the
//! engine's task id.
//!
//! Which calls become tasks, for a request that declared the extension:
//! `hub__tool_batch` (the batch is the task), `hub__resume_task` (the
//! resumed task), `hub__record_replay`, a tool whose server lists it
//! with `_meta["io.modelcontextprotocol/tasks"].taskSupport` `optional`
//! or `required`, and any call the client marks with
//! `_meta["toolhub/task"]: true`. A `required` tool without the extension
//! is `-32021`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CancelTaskParams, CancelTaskRequest, ClientCapabilities, ClientRequest,
    CreateTaskResult, DetailedTask, GetTaskParams, GetTaskRequest, GetTaskResult, InputRequests,
    InputResponses, ServerResult, Task as McpTask, TaskPayload, TaskStatus, UpdateTaskParams,
    UpdateTaskRequest,
};
use rmcp::service::{RequestContext, ServiceError};
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Map, Value};

use super::Endpoint;
use crate::engine::questions::{Answerable, TaskQuestions};
use crate::engine::state::TaskState;
use crate::engine::task::Task;
use crate::engine::unattended::{self, Kind};
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::ToolInfo;

/// The `_meta` key by which a server behind the hub says a tool is long.
pub const SUPPORT_META: &str = "io.modelcontextprotocol/tasks";
/// The request `_meta` key by which a client asks for any call as a task.
pub const ASK_META: &str = "toolhub/task";
/// How often a client should poll, in ms.
const POLL_MS: u64 = 1000;

/// What a `tools/call` becomes.
pub enum CallRoute {
    /// Run it as a call.
    Call,
    /// Run it as a task of this kind.
    Task(Kind),
    /// `hub__resume_task`: resume that task and answer with it.
    Resume(String),
}

/// What the request's client declared it can answer, for its task's
/// servers' questions.
fn answerable(cx: &RequestContext<RoleServer>) -> Answerable {
    let caps = cx.client_capabilities().unwrap_or_default();
    Answerable {
        sampling: caps.sampling.is_some(),
        elicitation: caps.elicitation.is_some(),
    }
}

/// Whether the request declared the tasks extension.
pub fn declared(cx: &RequestContext<RoleServer>) -> bool {
    cx.client_capabilities().is_some_and(|c| c.supports_tasks())
}

/// Decide what `req` (resolved to `tool`, the name the pipeline takes)
/// becomes; a `required` tool for a request without the extension is
/// `-32021`.
pub fn plan(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    req: &CallToolRequestParams,
    tool: &str,
) -> Result<CallRoute, ErrorData> {
    let info = resolve(ep, cx, tool);
    let support = info.as_deref().and_then(support_of);
    if !declared(cx) {
        if support == Some("required") {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        return Ok(CallRoute::Call);
    }
    let own = info
        .as_deref()
        .filter(|t| t.server == crate::hub::BUILTIN_SERVER)
        .map(|t| t.name.as_str());
    match own {
        Some("tool_batch") => return Ok(CallRoute::Task(Kind::Batch)),
        Some("resume_task") => {
            let id = req
                .arguments
                .as_ref()
                .and_then(|a| a.get("taskId"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Ok(CallRoute::Resume(id.to_string()));
        }
        Some("record_replay") => return Ok(CallRoute::Task(Kind::Call)),
        _ => {}
    }
    // rmcp moves a request's `_meta` into its context.
    let asked = req
        .meta
        .as_ref()
        .and_then(|m| m.0.get(ASK_META))
        .or_else(|| cx.meta.0.get(ASK_META))
        .is_some_and(|v| v == &Value::Bool(true));
    if asked {
        return Ok(CallRoute::Task(Kind::Call));
    }
    if matches!(support, Some("optional" | "required")) {
        // A 2026-07-28 server with tasks of its own decides (asks first by
        // InputRequiredResult, or answers with its task): relayed.
        let own_tasks = super::stateless::is_stateless(cx)
            && info.as_deref().is_some_and(|t| {
                ep.app
                    .hub
                    .peer_of(&t.server, crate::hub::aggregate::Offer::Tasks)
                    .is_ok()
            });
        if own_tasks {
            return Ok(CallRoute::Call);
        }
        return Ok(CallRoute::Task(Kind::Call));
    }
    Ok(CallRoute::Call)
}

/// A relayed task's id (`up-…`): its server's peer and the server's own
/// id; `None` for the hub's own task ids.
fn relayed(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    id: &str,
) -> Option<Result<(rmcp::Peer<rmcp::RoleClient>, String), ErrorData>> {
    if !id.starts_with(super::mrtr::RELAYED_TASK) {
        return None;
    }
    Some(match ep.mrtr.open_task(id, &super::tools_call::client_of(cx)) {
        Some((server, upstream)) => ep
            .app
            .hub
            .peer_of(&server, crate::hub::aggregate::Offer::Tasks)
            .map(|peer| (peer, upstream))
            .map_err(|e| {
                ErrorData::internal_error(
                    format!("task {id} is server {server}'s, which cannot be reached now ({}); try again when it runs", e.message),
                    None,
                )
            }),
        None => Err(unknown(id)),
    })
}

/// Send a relayed `tasks/*` request to its server, with the client's own
/// capabilities (the tasks extension among them) in `_meta`, as its calls
/// carry; the server's answer.
async fn relay_request(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    request: ClientRequest,
    cx: &RequestContext<RoleServer>,
) -> Result<ServerResult, ErrorData> {
    let mut meta = rmcp::model::RequestMetaObject::new();
    meta.set_client_capabilities(cx.client_capabilities().unwrap_or_default());
    let mut options = rmcp::service::PeerRequestOptions::no_options();
    options.meta = Some(meta);
    let handle = peer
        .send_request_with_option(request, options)
        .await
        .map_err(upstream_failed)?;
    handle.await_response().await.map_err(upstream_failed)
}

/// The error for a task id nobody knows (`-32602`).
fn unknown(id: &str) -> ErrorData {
    let e = crate::engine::unknown_task(id);
    let data = serde_json::to_value(&e).ok();
    ErrorData::invalid_params(e.message, data)
}

/// A relayed request's failure at its server, as the client's error.
fn upstream_failed(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        other => ErrorData::internal_error(format!("the task's server failed: {other}"), None),
    }
}

/// The tool a name finds, in the request's view.
fn resolve(ep: &Endpoint, cx: &RequestContext<RoleServer>, tool: &str) -> Option<Arc<ToolInfo>> {
    let hub = &ep.app.hub;
    match super::view::of(cx) {
        Some(v) => hub.view(&v).ok()?.resolve(tool).ok(),
        None => hub.tools().resolve(tool).ok().cloned(),
    }
}

fn support_of(t: &ToolInfo) -> Option<&str> {
    t.extra
        .meta
        .as_ref()?
        .get(SUPPORT_META)?
        .get("taskSupport")?
        .as_str()
}

/// Start the call as a task: journaled and synced, then running, holding
/// `place` (`caps::task_place`) until it ends; the `CreateTaskResult` for
/// it.
pub fn create(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    session: &str,
    kind: Kind,
    tool: &str,
    args: &Value,
    place: crate::session::Place,
) -> Result<CreateTaskResult, ErrorData> {
    let batch = match kind {
        Kind::Batch => args.clone(),
        Kind::Call => json!({"steps": [{"tool": tool, "params": args}]}),
    };
    let req: crate::protocol::BatchReq = serde_path_to_error::deserialize(batch).map_err(|e| {
        ErrorData::invalid_params(
            format!(
                "tool_batch params: {} at {}; expected {{\"steps\": [...], \"options\"?: {{...}}}}",
                e.inner(),
                e.path()
            ),
            None,
        )
    })?;
    let caller = super::view::caller_of(cx, session);
    let questions = TaskQuestions::new(answerable(cx));
    let task = unattended::start(&ep.app.engine, &req, kind, &caller, questions, place)
        .map_err(refused)?;
    tracing::info!(task = %task.id, %tool, %session, "an MCP tools/call runs as a task");
    Ok(CreateTaskResult::new(base(&task, TaskStatus::Working)))
}

/// `hub__resume_task` as a task: resume it (in the caller's view), holding
/// `place` until it ends, and answer with it.
pub async fn resume(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    session: &str,
    id: &str,
    place: crate::session::Place,
) -> Result<CreateTaskResult, ErrorData> {
    let engine = &ep.app.engine;
    let caller = super::view::caller_of(cx, session);
    let t = find(ep, &caller, id).await?;
    t.set_caller(session);
    // Read back from its journal after a restart: its questions go to
    // whoever resumes it.
    let _ = t.questions.set(TaskQuestions::new(answerable(cx)));
    let handle = crate::engine::resume(
        engine,
        id,
        None,
        None,
        (Some(&caller), None),
        None,
        Some(place),
    )
    .map_err(refused)?;
    drop(handle);
    Ok(CreateTaskResult::new(base(&t, TaskStatus::Working)))
}

/// `tasks/get`: the task's status, and its result, error or questions.
pub async fn get(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    id: &str,
) -> Result<GetTaskResult, ErrorData> {
    if let Some(r) = relayed(ep, cx, id) {
        let (peer, upstream) = r?;
        let request =
            ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(upstream)));
        let ServerResult::GetTaskResult(mut got) = relay_request(&peer, request, cx).await? else {
            return Err(upstream_failed(ServiceError::UnexpectedResponse));
        };
        got.task.task.task_id = id.to_string();
        return Ok(got);
    }
    let t = find(ep, &super::view::caller_of(cx, ""), id).await?;
    Ok(GetTaskResult::new(detailed(ep, &t)?))
}

/// `tasks/update`: answers to the task's questions (a step's `need_user`,
/// keyed `step-<index>`; a server's question, keyed `input-<n>`); an
/// answer to no open question is ignored.
pub async fn update(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    id: &str,
    answers: &InputResponses,
) -> Result<(), ErrorData> {
    if let Some(r) = relayed(ep, cx, id) {
        let (peer, upstream) = r?;
        let params = UpdateTaskParams::new(upstream, answers.clone());
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(params));
        return relay_request(&peer, request, cx).await.map(drop);
    }
    let caller = super::view::caller_of(cx, "");
    let t = find(ep, &caller, id).await?;
    let approvals = &ep.app.engine.approvals;
    if let Some((step, hash)) = approvals.waiting(&t.id) {
        if let Some(a) = answers.get(&question_key(step)) {
            let approve = a.get("action").and_then(Value::as_str) == Some("accept")
                && a.get("content").and_then(|c| c.get("approve")) == Some(&Value::Bool(true));
            if let Err(e) = approvals.decide(&caller, &t.id, approve, Some(step), Some(&hash), None)
            {
                tracing::warn!(task = %t.id, step, reason = %e.message, "a tasks/update answer was not taken");
            }
        }
    }
    if let Some(q) = t.questions.get() {
        for (key, why) in q.answer(answers) {
            tracing::warn!(task = %t.id, %key, reason = %why, "a tasks/update answer was refused; the question stays open");
        }
    }
    Ok(())
}

/// `tasks/cancel`: stop the task if it runs; the same empty answer if it
/// already ended.
pub async fn cancel(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    id: &str,
) -> Result<(), ErrorData> {
    if let Some(r) = relayed(ep, cx, id) {
        let (peer, upstream) = r?;
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
            CancelTaskParams::new(upstream),
        ));
        return relay_request(&peer, request, cx).await.map(drop);
    }
    let t = find(ep, &super::view::caller_of(cx, ""), id).await?;
    if unattended::cancel(&t) {
        tracing::info!(task = %t.id, "an MCP client cancelled its task");
    }
    Ok(())
}

/// The task by id, in memory or read back from its journal; another
/// view's task, or another client's, is as unknown as none (`-32602`).
async fn find(
    ep: &Endpoint,
    caller: &crate::caller::Caller,
    id: &str,
) -> Result<Arc<Task>, ErrorData> {
    let engine = &ep.app.engine;
    if !crate::store::valid_id(id) {
        return Err(unknown(id));
    }
    match engine.load(id).await {
        Some(t) if crate::engine::visible(&t, caller) => Ok(t),
        _ => Err(unknown(id)),
    }
}

fn refused(e: HubError) -> ErrorData {
    let data = serde_json::to_value(&e).ok();
    match e.error_type {
        ErrorType::InvalidMessage | ErrorType::InvalidParams | ErrorType::NotFound => {
            ErrorData::invalid_params(e.message, data)
        }
        _ => ErrorData::internal_error(e.message, data),
    }
}

/// The task's base fields.
fn base(t: &Task, status: TaskStatus) -> McpTask {
    let (created, updated) = t.with(|d| (d.created_ms, d.updated_ms));
    let at = |ms: u64| {
        crate::util::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    };
    McpTask::new(t.id.clone(), status, at(created), at(updated)).with_poll_interval_ms(POLL_MS)
}

fn question_key(step: usize) -> String {
    format!("step-{step}")
}

/// The task as `tasks/get` shows it.
fn detailed(ep: &Endpoint, t: &Task) -> Result<DetailedTask, ErrorData> {
    let state = t.state();
    let payload = match state {
        TaskState::NeedUser => match ep.app.engine.approvals.waiting(&t.id) {
            Some((step, _)) => TaskPayload::InputRequired {
                input_requests: question(t, step)?,
            },
            None => TaskPayload::Working,
        },
        TaskState::Pending | TaskState::Running | TaskState::Retrying => {
            match t.questions.get().and_then(|q| q.pending()) {
                Some(input_requests) => TaskPayload::InputRequired { input_requests },
                None => TaskPayload::Working,
            }
        }
        // Stopped under by a restart: resumed at start, so working while
        // it is driven; else it needs hub__resume_task.
        TaskState::Recoverable if t.driving.try_lock().is_err() => TaskPayload::Working,
        TaskState::Recoverable => TaskPayload::Failed {
            error: error_object(
                -32603,
                &format!("task {} stopped before it finished and was not resumed; call hub__resume_task with its taskId to continue it", t.id),
            ),
        },
        TaskState::Cancelled => TaskPayload::Cancelled,
        TaskState::Success | TaskState::Failed => ended(t),
    };
    Ok(DetailedTask::new(base(t, payload.status()), payload))
}

/// A finished task's result: a call's own result (a JSON-RPC error the
/// server raised is `failed`), or a batch's summary.
fn ended(t: &Task) -> TaskPayload {
    if t.unattended.get() != Some(&Kind::Call) {
        let mut summary = t.to_json(true);
        summary["success"] = json!(t.state() == TaskState::Success);
        let mut r = rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
            summary.to_string(),
        )]);
        r.structured_content = Some(summary);
        return TaskPayload::Completed {
            result: object(serde_json::to_value(r).unwrap_or_default()),
        };
    }
    let outcome = t
        .with(|d| d.steps.first().and_then(|s| s.outcome.clone()))
        .unwrap_or(Value::Null);
    let error: Option<HubError> = outcome
        .get("error")
        .and_then(|e| serde_json::from_value(e.clone()).ok());
    match error {
        Some(e) if e.error_type == ErrorType::UpstreamError => TaskPayload::Failed {
            error: error_object(-32603, &e.message),
        },
        _ => TaskPayload::Completed {
            result: object(call_result(&outcome, error)),
        },
    }
}

/// A step's outcome as the `CallToolResult` the call would have answered.
fn call_result(outcome: &Value, error: Option<HubError>) -> Value {
    let success = outcome.get("success") == Some(&Value::Bool(true));
    let result = outcome.get("result").cloned().unwrap_or(Value::Null);
    let mut o = crate::hub::CallOutcome::failed(
        outcome.get("tool").and_then(Value::as_str).unwrap_or(""),
        error.unwrap_or_else(|| HubError::new(ErrorType::Unknown, "the call failed")),
        std::time::Duration::ZERO,
    );
    if success {
        o.success = true;
        o.error = None;
        o.result = result;
    }
    let mut r = serde_json::to_value(super::tools_call::to_result(&o)).unwrap_or_default();
    // A task's result is read through tasks/get, not sent as a tools/call
    // answer: no discriminator of its own.
    if let Some(m) = r.as_object_mut() {
        m.remove("resultType");
    }
    // A durable task's result is what its journal holds, redacted (the
    // same before a restart and after): said in the result.
    if outcome.get("redacted") == Some(&Value::Bool(true)) {
        r["_meta"]["toolhub/redacted"] = json!(true);
        if let Some(Value::Array(content)) = r.get_mut("content") {
            content.push(json!({"type": "text", "text": REDACTED_NOTE}));
        }
    }
    r
}

/// What a redacted task result says of itself.
const REDACTED_NOTE: &str = "toolhub: values under secret keys (security.redactKeys) and known secret values in this result are redacted: a task's result is kept on disk, and secrets never reach a file. Call the tool without a task to get them.";

fn error_object(code: i64, message: &str) -> Map<String, Value> {
    object(json!({"code": code, "message": message}))
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The question a step waits on, as an `elicitation/create` form under
/// `step-<index>`: approve to run the step.
fn question(t: &Task, step: usize) -> Result<InputRequests, ErrorData> {
    let tool = t
        .plan
        .steps
        .get(step)
        .map(|p| p.step.tool.clone())
        .unwrap_or_default();
    let reason = t
        .with(|d| d.waiting_reason.clone())
        .unwrap_or_else(|| "a safety rule asks for a person's confirmation".into());
    let message = format!(
        "toolhub: task {} step {step} calls {tool}: run it? ({reason})",
        t.id
    );
    serde_json::from_value(json!({
        question_key(step): {"method": "elicitation/create", "params": super::mrtr::confirm_form(&message)}
    }))
    .map_err(|e| ErrorData::internal_error(format!("the question could not be built: {e}"), None))
}
