//! `tools/call` at `/mcp`: the call pipeline of every call
//! (`hub::pipeline`), with the MCP client's own means: a `confirm` rule
//! asks by elicitation, and the server's progress, logs, sampling and
//! elicitation requests come back on this call's stream.

#![allow(deprecated)] // sampling and logging: deprecated by SEP-2577, still spoken

use futures::stream::{FuturesUnordered, StreamExt};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ElicitRequestParams, ElicitationAction,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::Value;

use super::{mrtr, Endpoint};
use crate::app::App;
use crate::errors::HubError;
use crate::hub::{Approval, CallOutcome, CallRequest, Confirmer, Decision, Question, Watch};
use crate::mcp::input::{Answer, Ask};
use crate::mcp::registry::ToolInfo;
use crate::mcp::relay::{CallLink, Forward};
use crate::safety::blocked;

/// Run one `tools/call` of a session client to its result (a failure is
/// `isError: true`); it is asked mid-call, on the call's stream. (A
/// stateless client's call is `stateless_call`'s.)
pub async fn call_tool(
    ep: &Endpoint,
    session: &str,
    tool: String,
    req: CallToolRequestParams,
    cx: RequestContext<RoleServer>,
) -> Result<mrtr::Reply, ErrorData> {
    let app = &ep.app;
    let _poll = ep.polls.arm(&cx, app.hub.config().server.mcp_stream_poll);
    let caller = super::view::caller_of(&cx, session);
    let params = Value::Object(req.arguments.clone().unwrap_or_default());
    let caps = cx.client_capabilities();
    let can_sample = caps.as_ref().is_some_and(|c| c.sampling.is_some());
    let can_elicit = caps.as_ref().is_some_and(|c| c.elicitation.is_some());
    let (mut link, mut forwards) = CallLink::new(session.into(), can_sample, can_elicit);
    link.can_list_roots = caps.as_ref().is_some_and(|c| c.roots.is_some());
    let mut call = CallRequest::new(
        tool.clone(),
        params,
        session.into(),
        app.hub.shutdown.child_token(),
    );
    call.set_caller(&caller);
    call.link = Some(link);
    let cancel = call.cancel.clone();
    let token = cx.meta.get_progress_token();
    let elicit = Elicit {
        app,
        peer: &cx.peer,
        can_elicit,
    };
    let watch = Watch {
        observer: app.observer.as_ref(),
        kind: "mcp_call",
        save_images: None,
    };
    // Boxed: the pipeline's future is several KB, moved whole each time
    // this one moves.
    let mut work = Box::pin(app.hub.call_watched(&call, Approval::Ask(&elicit), watch));
    // Answers to the server's requests run here, inside this handler's
    // task, so rmcp sends them on this call's stream.
    let mut asks = FuturesUnordered::new();
    let mut client_gone = false;
    let outcome = loop {
        tokio::select! {
            (outcome, event) = &mut work => {
                if let Some(ev) = event {
                    tracing::info!(%session, event = %ev, "recording event for an MCP session");
                }
                break outcome;
            }
            Some(f) = forwards.recv() => {
                if let Some(ask) = forward(&cx, &token, f).await {
                    asks.push(ask);
                }
            }
            Some(()) = asks.next(), if !asks.is_empty() => {}
            _ = cx.ct.cancelled(), if !client_gone => {
                // notifications/cancelled from the client (or its session
                // ended): cancel the call, which cancels it upstream.
                client_gone = true;
                cancel.cancel();
            }
        }
    };
    // What the server sent before its answer is already queued (the call
    // path waits for it, see `mcp::ordered`): pass it on before answering.
    while let Ok(f) = forwards.try_recv() {
        let _ = forward(&cx, &token, f).await;
    }
    // rmcp drops `resultType` for a peer of a session era.
    Ok(mrtr::Reply::Done(finish(ep, &tool, &outcome)))
}

/// Who a stateless request is, for binding a `requestState` or a relayed
/// task id to it: the client of its token and the view the gate let it in
/// for, then the `clientInfo` it gives. The first two are the hub's own
/// knowledge, so a leaked state or id does not open for another token's
/// client or another view whatever `clientInfo` that one sends.
pub fn client_of(cx: &RequestContext<RoleServer>) -> String {
    let info = cx
        .client_info()
        .and_then(|i| serde_json::to_string(&i).ok())
        .unwrap_or_default();
    serde_json::json!([
        super::view::token_client(cx).as_deref(),
        super::view::of(cx).as_deref(),
        info
    ])
    .to_string()
}

/// The question a `confirm` rule asks: the tool, its redacted params and
/// the rule's reason.
pub(super) fn confirm_message(
    security: &crate::config::SecurityConfig,
    info: &ToolInfo,
    params: &Value,
    reason: &str,
) -> String {
    let shown = crate::history::redact(params, security);
    format!(
        "toolhub: allow {} with {}? ({reason})",
        info.qualified_name,
        crate::util::truncate(&shown.to_string(), 400)
    )
}

/// Pass one forward to the client; an ask becomes a future to drive.
pub(super) async fn forward<'a>(
    cx: &'a RequestContext<RoleServer>,
    token: &Option<rmcp::model::ProgressToken>,
    f: Forward,
) -> Option<impl std::future::Future<Output = ()> + 'a> {
    match f {
        Forward::Progress(mut p) => {
            if let Some(t) = token {
                p.progress_token = t.clone();
                let _ = cx.peer.notify_progress(p).await;
            }
            None
        }
        Forward::Log(m) => {
            let _ = cx.peer.notify_logging_message(m).await;
            None
        }
        Forward::Ask { ask, reply } => Some(answer(cx, ask, reply)),
    }
}

/// Ask the client on the server's behalf; a server that gives up first
/// (closing `reply`) abandons the client request.
async fn answer(
    cx: &RequestContext<RoleServer>,
    ask: Ask,
    mut reply: tokio::sync::oneshot::Sender<Result<Answer, ErrorData>>,
) {
    tokio::select! {
        r = ask_peer(&cx.peer, ask) => {
            let _ = reply.send(r);
        }
        _ = reply.closed() => {}
    }
}

/// Put a server's request to a session client and wait for its answer.
pub async fn ask_peer(peer: &Peer<RoleServer>, ask: Ask) -> Result<Answer, ErrorData> {
    let r = match ask {
        Ask::Sampling(p) => peer.create_message(p).await.map(Answer::Sampling),
        Ask::Elicitation(p) => peer.create_elicitation(p).await.map(Answer::Elicitation),
        Ask::Roots => peer.list_roots().await.map(Answer::Roots),
    };
    r.map_err(|e| match e {
        rmcp::service::ServiceError::McpError(d) => d,
        other => ErrorData::internal_error(format!("the MCP client did not answer: {other}"), None),
    })
}

/// A `confirm` rule asks the MCP client's user by elicitation.
struct Elicit<'a> {
    app: &'a App,
    peer: &'a Peer<RoleServer>,
    can_elicit: bool,
}

impl Confirmer for Elicit<'_> {
    fn confirm<'a>(&'a self, q: Question<'a>) -> Decision<'a> {
        Box::pin(async move {
            let (info, params, reason) = (q.info, q.params, q.reason);
            tracing::warn!(tool = %info.qualified_name, %reason, "asking the MCP client's user to confirm");
            match self.ask(info, params, &reason).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(blocked(info, format!("the user declined: {reason}"))),
                Err(why) => Err(blocked(
                    info,
                    format!("this call needs a person's confirmation ({reason}), but {why}"),
                )
                .with_suggestion(
                    "use an MCP client that supports elicitation, send the call over /ws where need_user/confirm applies, or change safety.rules in config.json",
                )),
            }
        })
    }
}

impl Elicit<'_> {
    /// `Ok(approved)`, or why nobody could be asked.
    async fn ask(&self, info: &ToolInfo, params: &Value, reason: &str) -> Result<bool, String> {
        if !self.can_elicit {
            return Err("this MCP client does not support elicitation".into());
        }
        let message = confirm_message(&self.app.hub.config().security, info, params, reason);
        let request: ElicitRequestParams = serde_json::from_value(mrtr::confirm_form(&message))
            .map_err(|e| format!("the confirmation request could not be built: {e}"))?;
        match self.peer.create_elicitation(request).await {
            Ok(r) => Ok(r.action == ElicitationAction::Accept
                && r.content.as_ref().and_then(|c| c.get("approve")) == Some(&Value::Bool(true))),
            Err(e) => Err(format!("asking the MCP client failed: {e}")),
        }
    }
}

/// Where a failure's error object goes for a tool with an `outputSchema`.
pub const ERROR_META_KEY: &str = "toolhub/error";

/// [`to_result`], then for a tool that declares an `outputSchema` the
/// failure's error object moves from `structuredContent` to
/// `_meta["toolhub/error"]`: clients check `structuredContent` against the
/// schema even on `isError` (the official TypeScript SDK does, and throws),
/// so the error object there would make the client discard the failure.
pub(super) fn finish(ep: &Endpoint, tool: &str, o: &CallOutcome) -> CallToolResult {
    let mut r = to_result(o);
    if o.success || !declares_output_schema(ep, tool) {
        return r;
    }
    if let Some(error) = r.structured_content.take() {
        let mut meta = r.meta.take().unwrap_or_default();
        meta.0.insert(ERROR_META_KEY.to_string(), error);
        r.meta = Some(meta);
    }
    r
}

fn declares_output_schema(ep: &Endpoint, tool: &str) -> bool {
    ep.app
        .hub
        .tools()
        .resolve(tool)
        .is_ok_and(|t| t.extra.output_schema.is_some())
}

/// The MCP result of a call: the server's own result when it succeeded,
/// else `isError` with a sentence saying what went wrong and what to do,
/// and the hub's error object as `structuredContent`.
pub fn to_result(o: &CallOutcome) -> CallToolResult {
    if o.success {
        if let Some(mut r) = o
            .raw
            .as_ref()
            .and_then(|raw| serde_json::from_value::<CallToolResult>(raw.clone()).ok())
        {
            // The server's own result, from a session-era server: a
            // 2026-07-28 client needs `resultType` (rmcp strips it again
            // for older peers).
            r.result_type
                .get_or_insert(rmcp::model::ResultType::COMPLETE);
            return r;
        }
        let text = match &o.result {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
        if o.result.is_object() {
            r.structured_content = Some(o.result.clone());
        }
        return r;
    }
    let error = o
        .error
        .clone()
        .unwrap_or_else(|| HubError::new(crate::errors::ErrorType::Unknown, "the call failed"));
    let text = format!(
        "{}: {}\nWhat to do: {}",
        error.error_type.as_str(),
        error.message,
        error.suggestion
    );
    let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
    r.structured_content = serde_json::to_value(&error).ok();
    r
}
