//! Decoded client messages → hub actions. Each request is answered with
//! `replyTo`; slow work (tool calls, batches) runs in its own task so a
//! connection can have many requests in flight.

use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use rmcp::model::ElicitResult;
use rmcp::ErrorData;
use serde_json::json;
use tokio::sync::oneshot;

use super::session::Session;
use crate::app::App;
use crate::callkeys::{self, Claim, KeyGuard};
use crate::client_context::{self, ClientContext};
use crate::engine::confirm::{ask_form, FormQuestion, SingleCall};
use crate::errors::{ErrorType, HubError};
use crate::hub::{Approval, CallRequest, Watch};
use crate::mcp::input::{Answer, Ask};
use crate::mcp::relay::{CallLink, Forward};
use crate::protocol::{self, ClientMsg, MsgId, ResumeSessionReq, ToolCallReq};
use crate::retry::RetryOverride;
use crate::session::Outbox;
use crate::session::Place;

/// Handle one text frame of `session`'s socket. A `resume_session` is the
/// socket's business, not the session's: it is handed back.
pub fn handle(
    app: &App,
    session: &Session,
    text: &str,
    max_bytes: usize,
) -> Option<(MsgId, ResumeSessionReq)> {
    let hub = &app.hub;
    let out = &session.outbox;
    let env = match protocol::decode_limited(text, max_bytes, hub.config().server.max_json_depth) {
        Ok(env) => env,
        Err(e) => {
            tracing::info!(session = %out.session, error = %e.error.message, "bad frame");
            out.send(protocol::error_msg(&e.id, &e.error));
            return None;
        }
    };
    let id = env.id;
    // What is the person's alone is refused here, once, before any
    // handler (`surfaces`); the other rules apply where the state lives.
    let area = super::surfaces::of_ws(&env.msg);
    if area.rule() == super::surfaces::ClientRule::MainOnly {
        if let Err(e) = out.caller().main_only(area.name()) {
            out.send(protocol::error_msg(&id, &e));
            return None;
        }
    }
    // The one place the session's cap is applied: a message that starts
    // work (a task of its own, or a job on the blocking pool) takes a place
    // before anything runs, and its handler drops it right before the reply.
    let place = match work_of(&env.msg) {
        Some(what) => Some(take_place(app, out, &id, what)?),
        None => None,
    };
    match env.msg {
        ClientMsg::Ping => {
            out.send(protocol::reply("pong", &id, json!({})));
        }
        ClientMsg::ListTools => {
            // Right after start-up this waits for the servers still
            // starting; a list that is still partial says so.
            let (hub, out) = (hub.clone(), out.clone());
            tokio::spawn(async move {
                let starting = hub.settle_first_start().await;
                let mut msg = hub.listing(out.view.as_deref());
                if !starting.is_empty() {
                    msg["starting"] = json!(starting);
                }
                drop(place);
                out.send(protocol::reply("tools", &id, msg));
            });
        }
        ClientMsg::ToolCall(req) => tool_call(app, session, id, req, place),
        ClientMsg::HealthCheck => {
            let (app, out) = (app.clone(), out.clone());
            tokio::spawn(async move {
                let report = app.health(&out.caller()).await;
                drop(place);
                out.send(protocol::reply("health_status", &id, report));
            });
        }
        ClientMsg::ReloadTools(req) => {
            let (hub, out) = (hub.clone(), out.clone());
            tokio::spawn(async move {
                let done = hub.reload_tools_and_wait(&out.caller(), req.approve).await;
                drop(place);
                let reply = match done {
                    Ok(()) => {
                        let mut msg = hub.listing(out.view.as_deref());
                        msg["reason"] = json!("reload_tools");
                        protocol::reply("tools", &id, msg)
                    }
                    Err(e) => protocol::error_msg(&id, &e),
                };
                out.send(reply);
            });
        }
        ClientMsg::History(req) => {
            // Right after start-up this waits for the file's tail.
            let (history, out) = (hub.history.clone(), out.clone());
            tokio::spawn(async move {
                let entries = history.latest_for(req.limit.min(1000), &out.caller()).await;
                drop(place);
                out.send(protocol::reply(
                    "history",
                    &id,
                    json!({ "entries": entries }),
                ));
            });
        }
        ClientMsg::Recording(m) => {
            crate::recording::handle(&app.recorder, &app.engine, out.clone(), id, m, place)
        }
        ClientMsg::Run(m) => crate::runs::handle(&app.runs, out, id, m, place),
        ClientMsg::Artifact(req) => super::artifact::handle(app, out, id, req, place),
        ClientMsg::KeepResult(req) => super::keep::handle(app, out, id, req, place),
        ClientMsg::Ack(req) => out.ack(req.seq),
        ClientMsg::StopInstance(req) => {
            let context = ClientContext::parse(&req.context);
            let reply = match hub.stop_instance(&out.caller(), &req.server, &context) {
                Ok(()) => protocol::reply(
                    "instance_stopped",
                    &id,
                    json!({"server": req.server, "context": context}),
                ),
                Err(e) => protocol::error_msg(&id, &e),
            };
            out.send(reply);
        }
        ClientMsg::ResumeSession(req) => return Some((id, req)),
        other => crate::engine::handle(&app.engine, out.clone(), id, other, place),
    }
    None
}

/// The work a message starts, by the name its refusal gives it; `None`
/// for a message answered at once or one that ends or answers work
/// (`ping`, `ack`, `cancel_task`, `confirm`, `list_tasks`,
/// `stop_instance`, `resume_session`): those are never refused, so a
/// session at its cap can still cancel its work and answer its questions.
fn work_of(msg: &ClientMsg) -> Option<&'static str> {
    Some(match msg {
        ClientMsg::ListTools => "list_tools",
        ClientMsg::ToolCall(_) => "call",
        ClientMsg::ToolBatch(_) => "tool_batch",
        ClientMsg::ResumeTask(_) => "resume_task",
        ClientMsg::TaskStatus(_) => "task_status",
        ClientMsg::HealthCheck => "health_check",
        ClientMsg::ReloadTools(_) => "reload_tools",
        ClientMsg::History(_) => "history",
        ClientMsg::Recording(_) => "recording request",
        ClientMsg::Run(_) => "run request",
        ClientMsg::Artifact(_) => "get_artifact",
        ClientMsg::KeepResult(_) => "keep_result",
        ClientMsg::Ping
        | ClientMsg::CancelTask(_)
        | ClientMsg::ListTasks(_)
        | ClientMsg::Confirm(_)
        | ClientMsg::ResumeSession(_)
        | ClientMsg::Ack(_)
        | ClientMsg::StopInstance(_) => return None,
    })
}

/// A place under the session's cap (`server.maxInFlightPerSession`) for
/// `what`; `None` when the session is at its cap, after telling the client
/// `LIMIT_EXCEEDED`.
fn take_place(app: &App, out: &Outbox, id: &MsgId, what: &str) -> Option<Place> {
    let cap = app.hub.config().server.max_in_flight_per_session;
    match out.in_flight().take(cap, what) {
        Ok(place) => Some(place),
        Err(e) => {
            out.send(protocol::error_msg(id, &e));
            None
        }
    }
}

fn reject(out: &Outbox, id: &MsgId, message: String) {
    out.send(protocol::error_msg(
        id,
        &HubError::new(ErrorType::InvalidMessage, message),
    ));
}

/// A `tool_call`: checked, held to the session's in-flight cap, then run
/// in its own task (once per `callKey`), cancelled if the session ends.
fn tool_call(app: &App, session: &Session, id: MsgId, req: ToolCallReq, place: Option<Place>) {
    let out = &session.outbox;
    let retry = match RetryOverride::parse(req.retry.as_ref()) {
        Ok(r) => r,
        Err(m) => return reject(out, &id, format!("tool_call: {m}")),
    };
    if let Some(Err(m)) = req.call_key.as_deref().map(callkeys::check_key) {
        return reject(out, &id, format!("tool_call: {m}"));
    }
    if let Some(Err(m)) = req.context.as_deref().map(client_context::check_label) {
        return reject(out, &id, format!("tool_call: {m}"));
    }
    // Taken in `handle` (a tool_call always has one).
    let Some(running) = place else {
        return;
    };
    let mut call = CallRequest::new(
        req.tool,
        req.params,
        out.session.clone(),
        session.cancel.child_token(),
    );
    call.timeout = req.timeout.map(Duration::from_millis);
    call.context = ClientContext::session(&out.session, req.context.as_deref());
    call.retry = retry;
    call.call_key = req.call_key.clone();
    call.view = out.view.clone();
    call.client = out.client.clone();
    let (app, out) = (app.clone(), out.clone());
    let job = Job {
        app,
        out,
        id,
        call,
        save_images: req.save_images,
        running,
    };
    match req.call_key {
        None => tokio::spawn(single_call(job, None)),
        Some(key) => tokio::spawn(keyed_call(job, key)),
    };
}

/// A started `tool_call` and where its answer goes.
struct Job {
    app: App,
    out: Outbox,
    id: MsgId,
    call: CallRequest,
    save_images: Option<crate::protocol::SaveImages>,
    running: Place,
}

/// A `tool_call` with a `callKey`: the first with the key runs; a repeat
/// gets the first one's `tool_result` (waiting for it while it runs),
/// marked `"deduplicated": true`, also when the first was cancelled after
/// the tool had it. Only a first call that never reached the tool leaves
/// no answer: the repeat then runs.
async fn keyed_call(job: Job, key: String) {
    let hash = callkeys::hash_of(&json!({"tool": job.call.tool, "params": job.call.params}));
    loop {
        match crate::engine::keyed::claim(&job.app.engine, &job.out, &key, &hash) {
            Claim::New(guard) => return single_call(job, Some(guard)).await,
            Claim::Conflict => {
                let e = crate::engine::keyed::conflict(&key);
                drop(job.running);
                job.out.send(protocol::error_msg(&job.id, &e));
                return;
            }
            Claim::Repeat(first) => {
                let answer = tokio::select! {
                    a = first.answer() => a,
                    _ = job.call.cancel.cancelled() => return,
                };
                if let Some(outcome) = answer {
                    let mut msg =
                        protocol::tool_result_msg(&job.id, super::keyed::answer(&outcome));
                    msg["deduplicated"] = json!(true);
                    drop(job.running);
                    job.out.send(msg);
                    return;
                }
            }
        }
    }
}

/// One `tool_call` through the call pipeline (resolve, the safety gate
/// with `need_user`, the call, the observers), then the reply. A server's
/// form (elicitation) mid-call goes to the call's person as a `need_user`
/// with `input` (`engine::confirm::ask_form`).
async fn single_call(job: Job, key: Option<KeyGuard>) {
    let Job {
        app,
        out,
        id,
        mut call,
        save_images,
        running,
    } = job;
    let (mut link, mut forwards) = CallLink::new(out.session.as_str().into(), false, true);
    // Only questions: a /ws call's progress is not relayed.
    link.hears_progress = false;
    call.link = Some(link);
    let confirmer = SingleCall {
        engine: &app.engine,
        owner: &out,
        request_id: id.as_ref(),
        call_key: call.call_key.as_deref(),
    };
    let watch = Watch {
        observer: app.observer.as_ref(),
        kind: "tool_call",
        save_images: save_images.as_ref(),
    };
    // Boxed: inline, the pipeline made this task's future several KB,
    // copied whole on every spawn and every move (memmove was 8 % of the
    // hub's CPU at 16 calls in flight); boxed it is written once, where it
    // runs.
    let piped = app
        .hub
        .call_watched(&call, Approval::Ask(&confirmer), watch);
    let mut piped = Box::pin(piped);
    let mut asks = FuturesUnordered::new();
    let (outcome, event) = loop {
        tokio::select! {
            r = &mut piped => break r,
            Some(f) = forwards.recv() => {
                if let Forward::Ask { ask, reply } = f {
                    let form = FormCall { app: &app, out: &out, request_id: id.as_ref(), call: &call };
                    asks.push(form.answer(ask, reply));
                }
            }
            Some(()) = asks.next(), if !asks.is_empty() => {}
        }
    };
    if let Some(ev) = event {
        out.send(ev);
    }
    // The key holds whatever happened once the tool may have had the call
    // (a repeat gets this answer, even "cancelled"); only a call cancelled
    // before it reached the tool frees it: nothing ran.
    if let Some(g) = key {
        super::keyed::settle(g, &outcome);
    }
    // A large result is serialised off the async worker.
    let bytes = crate::util::json_bytes(&outcome.result)
        + outcome.raw.as_ref().map_or(0, crate::util::json_bytes);
    let text = crate::util::heavy(bytes, || protocol::tool_result_text(&id, &outcome));
    drop(running);
    match text {
        Some(text) => out.send_text(text),
        None => out.send(protocol::tool_result_msg(&id, outcome.to_json())),
    };
}

/// What a `tool_call`'s server asks its person goes through: the call and
/// the connection it came on.
struct FormCall<'a> {
    app: &'a App,
    out: &'a Outbox,
    request_id: Option<&'a serde_json::Value>,
    call: &'a CallRequest,
}

impl FormCall<'_> {
    /// Answer a server's request: a form is put to the person; anything
    /// else (sampling, roots) a person at a `/ws` client cannot answer.
    async fn answer(self, ask: Ask, mut reply: oneshot::Sender<Result<Answer, ErrorData>>) {
        let Ask::Elicitation(p) = &ask else {
            let what = ask.capability();
            let _ = reply.send(Err(ErrorData::internal_error(
                format!("toolhub: the /ws client whose call this serves answers forms (elicitation), not {what}"),
                None,
            )));
            return;
        };
        let Ok(form) = serde_json::to_value(p) else {
            let _ = reply.send(Err(ErrorData::internal_error(
                "toolhub: the form could not be read",
                None,
            )));
            return;
        };
        let q = FormQuestion {
            owner: self.out,
            request_id: self.request_id,
            call_key: self.call.call_key.as_deref(),
            tool: &self.call.tool,
            params: &self.call.params,
            form: &form,
        };
        tokio::select! {
            v = ask_form(&self.app.engine, q) => {
                let r = serde_json::from_value::<ElicitResult>(v)
                    .map(Answer::Elicitation)
                    .map_err(|e| ErrorData::internal_error(format!("toolhub: the person's answer: {e}"), None));
                let _ = reply.send(r);
            }
            _ = reply.closed() => {}
        }
    }
}
