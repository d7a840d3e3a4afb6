//! `tools/call` of a stateless (2026-07-28) client. Nothing can be sent to
//! such a client mid-call, so every question reaches it as an
//! `InputRequiredResult` and its answer comes back on a retry of the call
//! (a new JSON-RPC id, the same tool and arguments, `inputResponses` and
//! the `requestState` echoed):
//!
//! - the hub's own `confirm` ([`mrtr::ByResult`]);
//! - a 2026-07-28 server's own `InputRequiredResult`, relayed around its
//!   `requestState` ([`MrtrRelay`]);
//! - a session-era server's `elicitation/create` or
//!   `sampling/createMessage` in the middle of the call: the call is held
//!   open ([`HeldCalls`]), the question goes back under [`HELD_KEY`], and the
//!   retry's answer is given to the server, which goes on (to its result,
//!   or its next question). A held call is bounded in number
//!   ([`MAX_HELD`] over the hub; per principal by the place it keeps under
//!   its token's cap, `caps`) and time ([`HOLD_FOR`]); a retry that never
//!   comes cancels the server's call.
//!
//! A request that did not declare the capability a question needs ends
//! with `-32021` instead (`stateless::refuse`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, InputRequest, InputRequests, InputRequiredResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{mrtr, tools_call, Endpoint};
use crate::hub::{Approval, CallOutcome, CallRequest, Watch};
use crate::mcp::input::{self, Answer, Ask, MrtrRelay, UpstreamRetry};
use crate::mcp::relay::{CallLink, Forward};

/// The `inputRequests` key of a held server's question.
pub const HELD_KEY: &str = "toolhub_input";
/// Held calls at most, over all clients; one more is refused.
pub const MAX_HELD: usize = 64;
/// How long a held call waits for its retry before it is cancelled.
pub const HOLD_FOR: Duration = Duration::from_secs(300);

/// What the call's task gives back: its outcome and the hub's own
/// question, if it asked one.
type Finished = (CallOutcome, Option<Result<String, ErrorData>>);

/// A call running in its own task, so it can outlive the request that
/// started it.
struct Running {
    task: JoinHandle<Finished>,
    forwards: mpsc::Receiver<Forward>,
    cancel: CancellationToken,
    relay: Arc<MrtrRelay>,
    tool: String,
    /// A `confirm` rule already had the person's yes for this call.
    confirmed: bool,
    /// Its place under its token's cap (`caps`), kept while it is held.
    _place: crate::session::Place,
}

/// A running call waiting for the client's answer to its server's question.
struct Parked {
    running: Running,
    ask: Ask,
    reply: oneshot::Sender<Result<Answer, ErrorData>>,
}

/// The held calls, by the nonce their `requestState` carries.
#[derive(Clone)]
pub struct HeldCalls {
    calls: Arc<Mutex<HashMap<String, Box<Parked>>>>,
    max: usize,
    hold_for: Duration,
}

impl Default for HeldCalls {
    fn default() -> Self {
        HeldCalls::with_limits(MAX_HELD, HOLD_FOR)
    }
}

impl HeldCalls {
    fn with_limits(max: usize, hold_for: Duration) -> HeldCalls {
        HeldCalls {
            calls: Arc::default(),
            max,
            hold_for,
        }
    }

    /// Keep `p` for its retry; after [`HOLD_FOR`] without one it is
    /// cancelled (its server is told its question was refused).
    fn park(&self, p: Box<Parked>) -> Result<String, Box<Parked>> {
        let Ok(mut calls) = self.calls.lock() else {
            return Err(p);
        };
        if calls.len() >= self.max {
            return Err(p);
        }
        let nonce = hex::encode(rand::random::<[u8; 16]>());
        calls.insert(nonce.clone(), p);
        let (me, key) = (self.clone(), nonce.clone());
        tokio::spawn(async move {
            tokio::time::sleep(me.hold_for).await;
            if let Some(p) = me.take(&key) {
                tracing::warn!(tool = %p.running.tool, "a held MCP call got no retry in time; cancelled");
                p.running.cancel.cancel();
            }
        });
        Ok(nonce)
    }

    fn take(&self, nonce: &str) -> Option<Box<Parked>> {
        self.calls.lock().ok()?.remove(nonce)
    }

    fn put_back(&self, nonce: String, p: Box<Parked>) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(nonce, p);
        }
    }
}

/// Run (or continue) one stateless `tools/call` of `caller`.
pub async fn call_tool(
    ep: &Endpoint,
    caller: &crate::caller::Caller,
    tool: String,
    req: CallToolRequestParams,
    cx: RequestContext<RoleServer>,
) -> Result<mrtr::Reply, ErrorData> {
    let session = caller.session.as_str();
    let params = Value::Object(req.arguments.clone().unwrap_or_default());
    let bound = mrtr::binding(&req.name, &params, &tools_call::client_of(&cx));
    let opened = match &req.request_state {
        Some(state) => Some(ep.mrtr.open(state, req.input_responses.as_ref(), &bound)?),
        None => None,
    };
    let (answer, retry) = match opened {
        // The held call keeps the place it took.
        Some(mrtr::Opened::Held { nonce }) => {
            return resume(ep, &cx, &bound, nonce, req.input_responses.as_ref()).await
        }
        Some(mrtr::Opened::Confirm(a)) => (Some(a), None),
        Some(mrtr::Opened::Relay {
            server,
            upstream,
            confirmed,
        }) => {
            let retry = UpstreamRetry {
                server: Some(server),
                request_state: upstream,
                input_responses: req.input_responses.clone(),
            };
            (
                confirmed.then_some(mrtr::ConfirmAnswer::Approved),
                Some(retry),
            )
        }
        // Answers to a server that minted no state go up as they are.
        None => (
            None,
            req.input_responses.clone().map(|r| UpstreamRetry {
                input_responses: Some(r),
                ..UpstreamRetry::default()
            }),
        ),
    };
    let place = match super::caps::stateless_place(ep, caller) {
        Ok(p) => p,
        Err(e) => return Ok(mrtr::Reply::Done(super::caps::refused(&req.name, e))),
    };
    let caps = cx.client_capabilities().unwrap_or_default();
    let can_elicit = caps.elicitation.is_some();
    // The call hears every request its server makes, and this module
    // answers each (asks the client, or refuses).
    let (mut link, forwards) = CallLink::new(session.into(), true, true);
    let relay = Arc::new(MrtrRelay::new(caps, retry));
    link.mrtr = Some(relay.clone());
    let app = ep.app.clone();
    let mut call = CallRequest::new(
        tool.clone(),
        params,
        session.into(),
        app.hub.shutdown.child_token(),
    );
    call.link = Some(link);
    call.set_caller(caller);
    let cancel = call.cancel.clone();
    let security = app.hub.config().security.clone();
    let by_result = mrtr::ByResult::new(answer, can_elicit, move |info, params, reason| {
        tools_call::confirm_message(&security, info, params, reason)
    });
    let session_id = session.to_string();
    let task = tokio::spawn(async move {
        let watch = Watch {
            observer: app.observer.as_ref(),
            kind: "mcp_call",
            save_images: None,
        };
        let (outcome, event) = app
            .hub
            .call_watched(&call, Approval::Ask(&by_result), watch)
            .await;
        if let Some(ev) = event {
            tracing::info!(session = %session_id, event = %ev, "recording event for an MCP session");
        }
        (outcome, by_result.asked())
    });
    let running = Running {
        task,
        forwards,
        cancel,
        relay,
        tool,
        confirmed: answer == Some(mrtr::ConfirmAnswer::Approved),
        _place: place,
    };
    drive(ep, &cx, &bound, running).await
}

/// A held call's retry: give its server the answer, and go on.
async fn resume(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    bound: &[u8],
    nonce: String,
    responses: Option<&rmcp::model::InputResponses>,
) -> Result<mrtr::Reply, ErrorData> {
    let Some(parked) = ep.held.take(&nonce) else {
        return Err(ErrorData::invalid_params(
            "the call this requestState answers is no longer held (it was answered already, waited too long, or the hub restarted): send the call again without requestState and inputResponses",
            None,
        ));
    };
    let Some(given) = responses.and_then(|r| r.get(HELD_KEY)) else {
        // Not answered: ask again, with the same state.
        let question = input::request_of(&parked.ask);
        ep.held.put_back(nonce.clone(), parked);
        let state = ep.mrtr.mint_held(bound, &nonce)?;
        return ask_back(question?, state);
    };
    let answer = match input::read_answer(&parked.ask, given, HELD_KEY) {
        Ok(a) => a,
        Err(e) => {
            ep.held.put_back(nonce, parked);
            return Err(e);
        }
    };
    let Parked { running, reply, .. } = *parked;
    let _ = reply.send(Ok(answer));
    drive(ep, cx, bound, running).await
}

/// Follow the call to its end or to its server's next question.
async fn drive(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    bound: &[u8],
    mut running: Running,
) -> Result<mrtr::Reply, ErrorData> {
    let token = cx.meta.get_progress_token();
    let caps = cx.client_capabilities().unwrap_or_default();
    let (can_sample, can_elicit) = (caps.sampling.is_some(), caps.elicitation.is_some());
    let mut refused: Option<ErrorData> = None;
    let mut client_gone = false;
    let finished = loop {
        tokio::select! {
            r = &mut running.task => break r.map_err(|e| ErrorData::internal_error(format!("the call's task failed: {e}"), None))?,
            Some(f) = running.forwards.recv() => {
                let (ask, reply) = match f {
                    Forward::Ask { ask, reply } => (ask, reply),
                    other => {
                        // Progress and logs: only an ask makes a future.
                        let _ = tools_call::forward(cx, &token, other).await;
                        continue;
                    }
                };
                let declared = match &ask {
                    Ask::Sampling(_) => can_sample,
                    Ask::Elicitation(_) => can_elicit,
                    Ask::Roots => false,
                };
                if !declared || refused.is_some() {
                    let err = super::stateless::refuse(&ask, can_sample, can_elicit);
                    let _ = reply.send(Err(err.upstream));
                    if let Some(e) = err.client {
                        refused.get_or_insert(e);
                        running.cancel.cancel();
                    }
                    continue;
                }
                let question = input::request_of(&ask)?;
                match ep.held.park(Box::new(Parked { running, ask, reply })) {
                    Ok(nonce) => {
                        tracing::info!(nonce = %nonce, "holding an MCP call for a stateless client's answer (InputRequiredResult)");
                        let state = ep.mrtr.mint_held(bound, &nonce)?;
                        return ask_back(question, state);
                    }
                    Err(p) => {
                        let _ = p.reply.send(Err(ErrorData::internal_error("toolhub: too many calls are waiting for their clients' answers", None)));
                        p.running.cancel.cancel();
                        return Err(ErrorData::internal_error(
                            format!("the hub already holds {MAX_HELD} calls waiting for their clients' answers: answer or abandon those, then send this call again"),
                            None,
                        ));
                    }
                }
            }
            _ = cx.ct.cancelled(), if !client_gone => {
                client_gone = true;
                running.cancel.cancel();
            }
        }
    };
    let (outcome, asked) = finished;
    while let Ok(f) = running.forwards.try_recv() {
        if !matches!(f, Forward::Ask { .. }) {
            let _ = tools_call::forward(cx, &token, f).await;
        }
    }
    if let Some(e) = refused {
        return Err(e);
    }
    if let Some(asked) = asked {
        let state = ep.mrtr.mint(bound)?;
        return Ok(mrtr::Reply::Ask(mrtr::confirm_request(&asked?, state)?));
    }
    // A 2026-07-28 server's own question, for the client's retry.
    if let (Some(irr), Some(server)) = (running.relay.asked(), &outcome.server) {
        let state = ep
            .mrtr
            .mint_relay(bound, server, irr.request_state, running.confirmed)?;
        return Ok(mrtr::Reply::Ask(InputRequiredResult::new(
            irr.input_requests,
            Some(state),
        )));
    }
    // A 2026-07-28 server's own task, under the hub's id.
    if let (Some(mut t), Some(server)) = (running.relay.task(), &outcome.server) {
        let upstream = std::mem::take(&mut t.task.task_id);
        t.task.task_id = ep
            .mrtr
            .mint_task(&tools_call::client_of(cx), server, &upstream)?;
        tracing::info!(%server, task = %upstream, "a server answered an MCP call with its own task; relayed under the hub's id");
        return Ok(mrtr::Reply::Task(t));
    }
    Ok(mrtr::Reply::Done(tools_call::finish(
        ep,
        &running.tool,
        &outcome,
    )))
}

fn ask_back(question: InputRequest, state: String) -> Result<mrtr::Reply, ErrorData> {
    let mut requests = InputRequests::new();
    requests.insert(HELD_KEY.to_string(), question);
    Ok(mrtr::Reply::Ask(InputRequiredResult::new(
        Some(requests),
        Some(state),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{ErrorType, HubError};

    /// A parked call whose task ends (cancelled) when its token fires,
    /// and the way to see what its server was told.
    fn parked() -> (
        Box<Parked>,
        CancellationToken,
        oneshot::Receiver<Result<Answer, ErrorData>>,
    ) {
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let task = tokio::spawn(async move {
            stop.cancelled().await;
            let e = HubError::new(ErrorType::Cancelled, "cancelled");
            (CallOutcome::failed("t", e, Duration::ZERO), None)
        });
        let (_tx, forwards) = mpsc::channel(1);
        let (reply, told) = oneshot::channel();
        let running = Running {
            task,
            forwards,
            cancel: cancel.clone(),
            relay: Arc::new(MrtrRelay::default()),
            tool: "t".into(),
            confirmed: false,
            _place: crate::session::InFlight::default().enter(),
        };
        let ask = Ask::Roots;
        (
            Box::new(Parked {
                running,
                ask,
                reply,
            }),
            cancel,
            told,
        )
    }

    #[tokio::test]
    async fn a_held_call_without_its_retry_is_cancelled_and_its_server_refused() {
        let held = HeldCalls::with_limits(4, Duration::from_millis(20));
        let (p, cancel, told) = parked();
        let nonce = held.park(p).ok().expect("parked");
        // The hold ends: the call is cancelled, the server's request refused.
        tokio::time::timeout(Duration::from_secs(5), cancel.cancelled())
            .await
            .expect("cancelled when the hold ran out");
        assert!(
            told.await.is_err(),
            "the server's request was dropped, not answered"
        );
        assert!(held.take(&nonce).is_none(), "no longer held");
    }

    #[tokio::test]
    async fn one_call_more_than_the_cap_is_refused_and_the_rest_stay_held() {
        let held = HeldCalls::with_limits(2, Duration::from_secs(60));
        let a = held.park(parked().0).ok().expect("first");
        let b = held.park(parked().0).ok().expect("second");
        assert!(held.park(parked().0).is_err(), "a third is refused");
        assert!(held.take(&a).is_some() && held.take(&b).is_some());
        // Room again once one is answered.
        assert!(held.park(parked().0).is_ok());
    }
}
