//! Decoded client messages → hub actions. Each request is answered with
//! `replyTo`; slow work (tool calls, batches) runs in its own task so a
//! connection can have many requests in flight.

use std::time::Duration;

use serde_json::json;

use crate::app::App;
use crate::engine::Engine;
use crate::errors::{ErrorType, HubError};
use crate::hub::observe::Capture;
use crate::hub::{CallOutcome, CallRequest};
use crate::protocol::{self, ClientMsg, MsgId, Outbox};
use crate::retry::RetryOverride;

pub fn handle(app: &App, out: &Outbox, text: &str, max_bytes: usize) {
    let hub = &app.hub;
    let env = match protocol::decode_limited(text, max_bytes, hub.config().server.max_json_depth) {
        Ok(env) => env,
        Err(e) => {
            tracing::info!(session = %out.session, error = %e.error.message, "bad frame");
            out.send(protocol::error_msg(&e.id, &e.error));
            return;
        }
    };
    let id = env.id;
    match env.msg {
        ClientMsg::Ping => {
            out.send(protocol::reply("pong", &id, json!({})));
        }
        ClientMsg::ListTools => {
            let t = hub.tools();
            out.send(protocol::reply(
                "tools",
                &id,
                json!({"tools": t.tools(), "hash": t.hash()}),
            ));
        }
        ClientMsg::ToolCall(req) => {
            let retry = match RetryOverride::parse(req.retry.as_ref()) {
                Ok(r) => r,
                Err(m) => return reject(out, &id, format!("tool_call: {m}")),
            };
            let call = CallRequest {
                tool: req.tool,
                params: req.params,
                timeout: req.timeout.map(Duration::from_millis),
                session: out.session.clone(),
                retry,
                cancel: hub.shutdown.child_token(),
                on_retry: None,
                link: None,
            };
            let (app, out) = (app.clone(), out.clone());
            let running = out.call_started();
            tokio::spawn(single_call(app, out, id, call, req.save_images, running));
        }
        ClientMsg::HealthCheck => {
            let (app, out) = (app.clone(), out.clone());
            tokio::spawn(async move {
                let report = app.health().await;
                out.send(protocol::reply("health_status", &id, report));
            });
        }
        ClientMsg::ReloadTools(req) => {
            let (hub, out) = (hub.clone(), out.clone());
            tokio::spawn(async move {
                hub.reload_tools_and_wait(req.approve).await;
                let t = hub.tools();
                out.send(protocol::reply(
                    "tools",
                    &id,
                    json!({"tools": t.tools(), "hash": t.hash(), "reason": "reload_tools"}),
                ));
            });
        }
        ClientMsg::History(req) => {
            // Right after start-up this waits for the file's tail.
            let (history, out) = (hub.history.clone(), out.clone());
            tokio::spawn(async move {
                let entries = history.latest(req.limit.min(1000)).await;
                out.send(protocol::reply(
                    "history",
                    &id,
                    json!({ "entries": entries }),
                ));
            });
        }
        ClientMsg::Recording(m) => {
            crate::recording::handle(&app.recorder, &app.engine, out.clone(), id, m)
        }
        ClientMsg::Run(m) => crate::runs::handle(&app.runs, out, id, m),
        ClientMsg::Artifact(req) => super::artifact::handle(app, out, id, req),
        other => crate::engine::handle(&app.engine, out.clone(), id, other),
    }
}

fn reject(out: &Outbox, id: &MsgId, message: String) {
    out.send(protocol::error_msg(
        id,
        &HubError::new(ErrorType::InvalidMessage, message),
    ));
}

/// One `tool_call`: resolve (waiting for a restarting server), the safety
/// gate, the call with retries, then the recording (if any) and the reply.
async fn single_call(
    app: App,
    out: Outbox,
    id: MsgId,
    mut call: CallRequest,
    save_images: Option<crate::protocol::SaveImages>,
    running: crate::protocol::Running,
) {
    let hub = &app.hub;
    let started_at = std::time::SystemTime::now();
    // The gate's and the call's futures are boxed: inline, they made this
    // task's future 12.5 KB, copied whole on every spawn and every move
    // (memmove was 8 % of the hub's CPU at 16 calls in flight); boxed it
    // is about 1 KB and each is written once, where it runs.
    let outcome = match Box::pin(gate_single(&app.engine, &out, &call)).await {
        // A tool that cannot be resolved or is refused never runs unchecked.
        Err(e) => {
            let outcome = CallOutcome::failed(&call.tool, e, Duration::ZERO);
            hub.history.record(
                &call.session,
                &call.params,
                &outcome,
                &hub.config().security,
            );
            outcome
        }
        Ok(qualified) => {
            // Call exactly the tool that passed the gate, even if a reload
            // changed what the bare name means while a person was deciding.
            let asked = std::mem::replace(&mut call.tool, qualified);
            let mut o = Box::pin(hub.call(&call)).await;
            o.tool = asked;
            o
        }
    };
    let (session, params) = (&call.session, &call.params);
    if app.observer.watches(session) {
        let capture = Capture::single(
            "tool_call",
            params,
            &outcome,
            started_at,
            save_images.as_ref(),
        );
        if let Some(ev) = app.observer.finished(session, capture).await {
            out.send(ev);
        }
    }
    drop(running);
    match protocol::tool_result_text(&id, &outcome) {
        Some(text) => out.send_text(text),
        None => out.send(protocol::tool_result_msg(&id, outcome.to_json())),
    };
}

async fn gate_single(
    engine: &Engine,
    out: &Outbox,
    call: &CallRequest,
) -> Result<String, HubError> {
    let info = engine
        .hub()
        .resolve_settled(&call.tool, call.timeout, &call.retry, &call.cancel)
        .await?;
    let task_id = crate::util::call_id();
    let ask = crate::engine::confirm::Ask {
        task_id: &task_id,
        batch_id: None,
        step_index: 0,
        info: &info,
        params: &call.params,
        owner: Some(out.clone()),
    };
    crate::engine::confirm::gate(engine, ask, |_| {}).await?;
    Ok(info.qualified_name.clone())
}
