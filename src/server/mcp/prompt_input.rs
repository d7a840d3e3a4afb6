//! `prompts/get` of a prompt whose 2026-07-28 server asks for input first
//! (an `InputRequiredResult`, SEP-2322): a stateless client gets the
//! question with a `requestState` the hub seals around the server's
//! (bound to the prompt, its arguments and the client), and its retry
//! reaches that server with the server's state exactly as minted; a
//! session client is asked request by request and the hub sends the
//! prompt again, up to [`MAX_ROUNDS`] times.

use rmcp::model::{GetPromptRequestParams, GetPromptResponse, InputRequiredResult, ResultType};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::{mrtr, stateless, tools_call, Endpoint};
use crate::mcp::input::answer_each;
use crate::mcp::send::MAX_ROUNDS;

/// Get `request` (named `name` at `server`) to its result.
pub async fn get_prompt(
    ep: &Endpoint,
    cx: &RequestContext<RoleServer>,
    server: String,
    name: String,
    request: GetPromptRequestParams,
) -> Result<GetPromptResponse, ErrorData> {
    let args = Value::Object(request.arguments.clone().unwrap_or_default());
    let bound = mrtr::binding(
        &format!("prompts/get {}", request.name),
        &args,
        &tools_call::client_of(cx),
    );
    let is_stateless = stateless::is_stateless(cx);
    let mut up = request;
    up.name = name;
    if let Some(state) = up.request_state.take().filter(|_| is_stateless) {
        match ep.mrtr.open(&state, None, &bound)? {
            mrtr::Opened::Relay {
                server: minted,
                upstream,
                ..
            } if minted == server => up.request_state = upstream,
            _ => {
                return Err(ErrorData::invalid_params(
                    "requestState is not one this hub issued for this prompt: send prompts/get again without requestState and inputResponses",
                    None,
                ))
            }
        }
    }
    for _ in 0..MAX_ROUNDS {
        let irr = match ep.app.hub.get_prompt(&server, up.clone()).await? {
            GetPromptResponse::Complete(mut r) => {
                r.result_type.get_or_insert(ResultType::COMPLETE);
                return Ok(r.into());
            }
            GetPromptResponse::InputRequired(irr) => irr,
            _ => {
                return Err(ErrorData::internal_error(
                    format!("server {server} answered prompts/get with something other than a prompt or a question"),
                    None,
                ))
            }
        };
        if is_stateless {
            let state = ep
                .mrtr
                .mint_relay(&bound, &server, irr.request_state, false)?;
            return Ok(InputRequiredResult::new(irr.input_requests, Some(state)).into());
        }
        let peer = &cx.peer;
        up.input_responses = Some(answer_each(&irr, |ask| tools_call::ask_peer(peer, ask)).await?);
        up.request_state = irr.request_state;
    }
    Err(ErrorData::internal_error(
        format!("server {server} asked for input {MAX_ROUNDS} times in a row without giving the prompt; the hub stopped asking"),
        None,
    ))
}
