//! The call pipeline. Every call goes through it: a `/ws` `tool_call`, an
//! `/mcp` `tools/call`, a batch step, and the calls the hub makes by itself
//! (a server's `recoveryTool`, `snapshotTool`, `screenshotTool`). It
//! resolves the tool once (waiting for a starting server), passes the
//! safety gate on what it resolved, calls exactly that tool (pins, attempts,
//! retries, history), and tells the observers when someone watches. The
//! callers differ only in how a `confirm` rule is answered ([`Approval`]).
//! A call that carries a view (`CallRequest::view`) is resolved among the
//! view's tools and refused in [`Hub::call_resolved`] when the tool it
//! reached is not in the view, whoever found the tool.

use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use serde_json::Value;

use super::observe::{CallObserver, Capture};
use super::Hub;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::ToolInfo;
use crate::outcome::{CallOutcome, CallRequest};
use crate::safety::{self, Verdict};

/// How a `confirm` safety rule is answered for a call.
#[derive(Clone, Copy)]
pub enum Approval<'a> {
    /// The hub's own call: nobody can be asked in the middle of a retry or
    /// a recording, so a rule that would ask refuses it.
    Helper,
    /// A caller with a person behind it (`need_user` over `/ws`, an
    /// elicitation over `/mcp`).
    Ask(&'a dyn Confirmer),
}

/// The seam through which a caller above the call layer asks its person,
/// and hears of the moments around the gate it acts on.
pub trait Confirmer: Send + Sync {
    /// A rule wants a person's yes: `Ok` runs the call, else the
    /// `SAFETY_BLOCKED` error says why not.
    fn confirm<'a>(&'a self, q: Question<'a>) -> Decision<'a>;

    /// Resolving the tool did not finish at once (its server is starting):
    /// the pipeline waits now.
    fn waiting(&self) {}

    /// The call passed the gate and runs now.
    fn admitted(&self) {}
}

/// What the gate asks a person about: the resolved tool, the params, and
/// the rule's reason.
pub struct Question<'a> {
    pub info: &'a ToolInfo,
    pub params: &'a Value,
    pub reason: String,
}

/// A person's answer, to wait for.
pub type Decision<'a> = BoxFuture<'a, Result<(), HubError>>;

/// Who watches a single client call's end, and how it is captured.
pub struct Watch<'a> {
    pub observer: &'a dyn CallObserver,
    /// The capture's source: `tool_call`, `mcp_call`.
    pub kind: &'static str,
    pub save_images: Option<&'a crate::protocol::SaveImages>,
}

impl Hub {
    /// [`Hub::call`] of a single client call, then its observers when one
    /// watches the session; the event they return goes to the client
    /// before the call's own answer.
    pub async fn call_watched(
        &self,
        req: &CallRequest,
        approval: Approval<'_>,
        watch: Watch<'_>,
    ) -> (CallOutcome, Option<Value>) {
        let started_at = SystemTime::now();
        let outcome = self.call(req, approval, |r| r).await;
        let session = &req.session;
        if !watch.observer.watches(session) {
            return (outcome, None);
        }
        let capture = Capture::single(
            watch.kind,
            &req.params,
            &outcome,
            started_at,
            watch.save_images,
        )
        .by(req.client.as_deref());
        let event = watch.observer.finished(session, capture).await;
        (outcome, event)
    }

    /// Resolve `req.tool` once (waiting for a starting server, bounded by
    /// the call's timeout), then [`Hub::call_resolved`]. `post` judges each
    /// attempt's result (a batch step's `expect`).
    pub async fn call<F>(&self, req: &CallRequest, approval: Approval<'_>, post: F) -> CallOutcome
    where
        F: Fn(Result<Value, HubError>) -> Result<Value, HubError>,
    {
        let resolve = self.resolve_settled_in(
            req.view.as_deref(),
            &req.tool,
            req.timeout,
            &req.retry,
            &req.cancel,
        );
        let resolved = crate::util::on_pending(resolve, || {
            if let Approval::Ask(c) = approval {
                c.waiting();
            }
        })
        .await;
        match resolved {
            // A tool that cannot be resolved is never called unchecked.
            Err(e) => self.refused(req, e),
            Ok(info) => self.call_resolved(&info, req, approval, post).await,
        }
    }

    /// The gate, then exactly the tool that passed it, even if a reload
    /// changed what the asked name means while a person was deciding: the
    /// pins, the attempts with retries, history. The hub's own helper
    /// calls come in here with the tool they found.
    pub async fn call_resolved<F>(
        &self,
        info: &ToolInfo,
        req: &CallRequest,
        approval: Approval<'_>,
        post: F,
    ) -> CallOutcome
    where
        F: Fn(Result<Value, HubError>) -> Result<Value, HubError>,
    {
        // A call made in a view reaches only the view's tools, however the
        // caller found `info` (a name, a batch step, a replay, a helper).
        let shown = match req.view.as_deref().map(|v| in_view(self, v, info)) {
            Some(Err(e)) => return self.refused(req, e),
            Some(Ok(name)) => Some(name),
            None => None,
        };
        // A session that ends withdraws its call's pending confirmation.
        let gated = tokio::select! {
            r = gate(self, info, &req.params, approval) => r,
            _ = req.cancel.cancelled() => {
                tracing::info!(session = %req.session, tool = %info.qualified_name, "call cancelled at the safety gate; a question it waited on is withdrawn");
                Err(HubError::new(
                    ErrorType::Cancelled,
                    "the call was cancelled while waiting for a confirmation",
                ))
            }
        };
        if let Err(e) = gated {
            return self.refused(req, e);
        }
        if let Approval::Ask(c) = approval {
            c.admitted();
        }
        let started = tokio::time::Instant::now();
        let mut out = match self.pin_check(info, req.client.is_some()) {
            Err(e) => {
                let mut out = CallOutcome::failed(&req.tool, e, Duration::ZERO);
                out.qualified_name = Some(info.qualified_name.clone());
                out.server = Some(info.server.clone());
                out.call_key = req.call_key.clone();
                out.context = Some(req.context.clone());
                out
            }
            // Boxed: the attempt loop's future is several KB.
            Ok(()) => Box::pin(self.run_with(info, req, post)).await,
        };
        out.duration_ms = started.elapsed().as_millis() as u64;
        if let (Some(view), Some(name)) = (&req.view, shown) {
            out.view = Some(view.to_string());
            if name != info.qualified_name {
                out.real_tool = Some(info.qualified_name.clone());
                out.qualified_name = Some(name);
            }
        }
        self.remember(req, &out);
        out
    }

    /// Write the call to history, naming its client: the request's, else
    /// its session's (a batch step's request may not carry one).
    fn remember(&self, req: &CallRequest, out: &CallOutcome) {
        let client = req
            .client
            .clone()
            .or_else(|| self.connected.client_of(&req.session));
        let who = (req.session.as_str(), client.as_deref());
        self.history
            .record(who, &req.params, out, &self.config().security);
    }

    /// A call that never ran: not resolved, refused by the gate, or
    /// cancelled while it waited. History keeps it too.
    fn refused(&self, req: &CallRequest, e: HubError) -> CallOutcome {
        let mut out = CallOutcome::failed(&req.tool, e, Duration::ZERO);
        out.call_key = req.call_key.clone();
        out.context = Some(req.context.clone());
        out.view = req.view.as_deref().map(str::to_string);
        self.remember(req, &out);
        out
    }
}

/// The view's name of `info`, or the view's UNKNOWN error when the view
/// does not hold it (as the view is now: a reload may have taken it out).
fn in_view(hub: &Hub, view: &str, info: &ToolInfo) -> Result<String, HubError> {
    let v = hub.view(view)?;
    match v.shown(&info.qualified_name) {
        Some(name) => Ok(name.to_string()),
        None => Err(v.unknown(&info.qualified_name)),
    }
}

/// The safety gate on the resolved tool: `deny` fails at once; `confirm`
/// asks the caller's person, or refuses a helper call.
async fn gate(
    hub: &Hub,
    info: &ToolInfo,
    params: &Value,
    approval: Approval<'_>,
) -> Result<(), HubError> {
    match safety::check(&hub.config().safety, info, params) {
        Verdict::Allow => Ok(()),
        Verdict::Deny(reason) => Err(safety::blocked(
            info,
            format!("denied by a safety rule: {reason}"),
        )),
        Verdict::Confirm(reason) => match approval {
            Approval::Ask(c) => {
                c.confirm(Question {
                    info,
                    params,
                    reason,
                })
                .await
            }
            Approval::Helper => Err(safety::blocked(
                info,
                format!(
                    "a safety rule asks for confirmation, which a helper call cannot get: {reason}"
                ),
            )),
        },
    }
}
