//! Input requests of the 2026-07-28 revision (MRTR, SEP-2322): a server
//! that needs the client's sampling, elicitation or roots answers a call
//! with an `InputRequiredResult`, and the call is sent again with the
//! answers (`inputResponses`) and the server's `requestState` echoed.
//!
//! Two ways through the hub: a stateless client gets the question itself
//! ([`MrtrRelay`], sealed by the endpoint) and brings the answers on its
//! retry ([`UpstreamRetry`]); any other client is asked request by request
//! ([`answer_each`]) and the hub sends the call again.

#![allow(deprecated)] // sampling: deprecated by SEP-2577, still spoken

use std::future::Future;
use std::sync::Mutex;

use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, CreateTaskResult,
    ElicitRequestParams, ElicitResult, InputRequest, InputRequiredResult, InputResponses,
    ListRootsResult,
};
use rmcp::ErrorData;

/// A request an upstream server makes of the client whose call it serves
/// (mid-call for a session-era server, inside an `InputRequiredResult` for
/// a 2026-07-28 one).
#[derive(Debug)]
pub enum Ask {
    Sampling(CreateMessageRequestParams),
    Elicitation(ElicitRequestParams),
    Roots,
}

impl Ask {
    /// The client capability that answers it, by its name in
    /// `ClientCapabilities`.
    pub fn capability(&self) -> &'static str {
        match self {
            Ask::Sampling(_) => "sampling",
            Ask::Elicitation(_) => "elicitation",
            Ask::Roots => "roots",
        }
    }
}

/// The client's answer to an [`Ask`].
#[derive(Debug)]
pub enum Answer {
    Sampling(CreateMessageResult),
    Elicitation(ElicitResult),
    Roots(ListRootsResult),
}

/// What a stateless client's retry brings for the upstream (SEP-2322): the
/// upstream's `requestState` exactly as that server minted it, and the
/// client's answers.
#[derive(Debug, Clone, Default)]
pub struct UpstreamRetry {
    /// The server the state was minted by (the retry must reach it);
    /// `None` for answers sent without a state.
    pub server: Option<String>,
    pub request_state: Option<String>,
    pub input_responses: Option<InputResponses>,
}

/// MRTR for a stateless (2026-07-28) client's call: such a client cannot be
/// asked mid-call, so an upstream's `InputRequiredResult` is handed back to
/// it (sealed by the endpoint) instead of answered by the hub, and its
/// retry carries the answers up again.
#[derive(Debug, Default)]
pub struct MrtrRelay {
    /// What the client's request declared it can answer (a 2026-07-28
    /// server is told exactly this, and asks only for it).
    pub declared: ClientCapabilities,
    retry: Mutex<Option<UpstreamRetry>>,
    asked: Mutex<Option<InputRequiredResult>>,
    task: Mutex<Option<CreateTaskResult>>,
}

impl MrtrRelay {
    pub fn new(declared: ClientCapabilities, retry: Option<UpstreamRetry>) -> MrtrRelay {
        MrtrRelay {
            declared,
            retry: Mutex::new(retry),
            asked: Mutex::new(None),
            task: Mutex::new(None),
        }
    }

    /// The server a retry must reach, if this call is a retry of one.
    pub fn retry_server(&self) -> Option<String> {
        let r = self.retry.lock().ok()?;
        r.as_ref()?.server.clone()
    }

    /// The retry's state and answers, once (the first attempt sends them).
    pub fn take_retry(&self) -> Option<UpstreamRetry> {
        self.retry.lock().ok()?.take()
    }

    /// Keep the upstream's question for the client.
    pub fn hold(&self, irr: InputRequiredResult) {
        if let Ok(mut a) = self.asked.lock() {
            *a = Some(irr);
        }
    }

    /// The upstream's question, when the call ended with one.
    pub fn asked(&self) -> Option<InputRequiredResult> {
        self.asked.lock().ok()?.take()
    }

    /// Keep the upstream's own task for the client (it declared the
    /// tasks extension, and the server answered the call with a task).
    pub fn hold_task(&self, task: CreateTaskResult) {
        if let Ok(mut t) = self.task.lock() {
            *t = Some(task);
        }
    }

    /// The upstream's task, when the call ended with one.
    pub fn task(&self) -> Option<CreateTaskResult> {
        self.task.lock().ok()?.take()
    }
}

/// The request to put to the client; `None` for a kind this build does
/// not know.
pub fn ask_of(r: &InputRequest) -> Option<Ask> {
    match r {
        InputRequest::CreateMessage(m) => Some(Ask::Sampling(m.params.clone())),
        InputRequest::Elicitation(e) => Some(Ask::Elicitation(e.params.clone())),
        InputRequest::ListRoots(_) => Some(Ask::Roots),
        _ => None,
    }
}

/// A server's request as an input request (an `InputRequiredResult`'s or a
/// task's `inputRequests` entry).
pub fn request_of(ask: &Ask) -> Result<InputRequest, ErrorData> {
    let (method, params) = match ask {
        Ask::Sampling(p) => ("sampling/createMessage", serde_json::to_value(p)),
        Ask::Elicitation(p) => ("elicitation/create", serde_json::to_value(p)),
        Ask::Roots => ("roots/list", Ok(serde_json::json!({}))),
    };
    let params =
        params.map_err(|e| ErrorData::internal_error(format!("input request: {e}"), None))?;
    serde_json::from_value(serde_json::json!({"method": method, "params": params}))
        .map_err(|e| ErrorData::internal_error(format!("input request: {e}"), None))
}

/// The client's answer under `key`, read as what `ask` asked for; `-32602`
/// saying what was expected when it is not.
pub fn read_answer(ask: &Ask, given: &serde_json::Value, key: &str) -> Result<Answer, ErrorData> {
    fn parse<T: serde::de::DeserializeOwned>(
        v: &serde_json::Value,
        key: &str,
        what: &str,
    ) -> Result<T, ErrorData> {
        serde_json::from_value(v.clone()).map_err(|e| {
            ErrorData::invalid_params(format!("inputResponses.{key} is not {what}: {e}"), None)
        })
    }
    Ok(match ask {
        Ask::Sampling(_) => Answer::Sampling(parse(
            given,
            key,
            "a sampling result (CreateMessageResult)",
        )?),
        Ask::Elicitation(_) => {
            Answer::Elicitation(parse(given, key, "an elicitation result (ElicitResult)")?)
        }
        Ask::Roots => Answer::Roots(parse(given, key, "a roots result (ListRootsResult)")?),
    })
}

/// What an `InputRequiredResult` asks, in words: "sampling (key), …".
pub fn asked(irr: &InputRequiredResult) -> String {
    let methods: Vec<String> = irr
        .input_requests
        .iter()
        .flatten()
        .map(|(key, r)| match ask_of(r) {
            Some(a) => format!("{} ({key})", a.capability()),
            None => format!("an unknown request ({key})"),
        })
        .collect();
    if methods.is_empty() {
        "input".into()
    } else {
        methods.join(", ")
    }
}

/// Put each of the server's input requests to the client through `ask`,
/// in order, and collect the answers under the server's keys.
pub async fn answer_each<F, Fut>(
    irr: &InputRequiredResult,
    mut ask: F,
) -> Result<InputResponses, ErrorData>
where
    F: FnMut(Ask) -> Fut,
    Fut: Future<Output = Result<Answer, ErrorData>>,
{
    let mut out = InputResponses::new();
    for (key, request) in irr.input_requests.iter().flatten() {
        let Some(question) = ask_of(request) else {
            return Err(ErrorData::internal_error(
                format!("the server asked for input ({key}) of a kind the hub does not know"),
                None,
            ));
        };
        let value = match ask(question).await? {
            Answer::Sampling(r) => serde_json::to_value(r),
            Answer::Elicitation(r) => serde_json::to_value(r),
            Answer::Roots(r) => serde_json::to_value(r),
        }
        .map_err(|e| ErrorData::internal_error(format!("answer to {key}: {e}"), None))?;
        out.insert(key.clone(), value);
    }
    Ok(out)
}
