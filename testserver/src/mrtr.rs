//! `--mrtr`: a server of the 2026-07-28 revision only, with the fixtures of
//! the conformance suite's `input-required-result-*` scenarios (SEP-2322):
//! each tool answers its first call with an `InputRequiredResult` (its own
//! `inputRequests` keys, and for some a `requestState`) and completes when
//! the retry brings the answers. The hub fronts it to relay MRTR, and its
//! own tests use it as a 2026-era upstream.
//!
//! And `test_tool_with_task` ([`OwnTasks`]): a server that declares the
//! Tasks extension and runs that tool's task itself.
//!
//! The `requestState`s are sealed with rmcp's codec under a key drawn at
//! start, so a tampered one is refused with `-32602`, as the suite asks.

use rmcp::model::{
    CallToolResponse, CallToolResult, GetPromptResponse, GetPromptResult, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, Prompt, RequestStateCodec, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Value};

use super::reply::text;

/// The tools, each taking no arguments.
pub fn tools() -> Vec<Tool> {
    [
        (
            "test_input_required_result_elicitation",
            "Asks the user's name by InputRequiredResult",
        ),
        (
            "test_input_required_result_sampling",
            "Asks for a sampled answer by InputRequiredResult",
        ),
        (
            "test_input_required_result_list_roots",
            "Asks for the client's roots by InputRequiredResult",
        ),
        (
            "test_input_required_result_request_state",
            "Asks to confirm, with a requestState to echo",
        ),
        (
            "test_input_required_result_multiple_inputs",
            "Asks for a name, a greeting and the roots at once",
        ),
        (
            "test_input_required_result_multi_round",
            "Asks twice, with a requestState that changes",
        ),
        (
            "test_input_required_result_tampered_state",
            "Refuses a requestState that was altered",
        ),
        (
            "test_input_required_result_capabilities",
            "Asks only for what the client declared",
        ),
    ]
    .into_iter()
    .filter_map(|(name, description)| {
        serde_json::from_value(json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": {}},
        }))
        .ok()
    })
    .chain(task_tool())
    .collect()
}

/// The one prompt that asks before it answers.
pub fn prompts() -> Vec<Prompt> {
    serde_json::from_value(json!([{
        "name": "test_input_required_result_prompt",
        "description": "A prompt that asks for context by InputRequiredResult",
    }]))
    .unwrap_or_default()
}

/// Sealed `requestState`s, under a key drawn at start.
pub struct Mrtr {
    codec: RequestStateCodec,
    /// `test_tool_with_task`'s tasks.
    pub own: OwnTasks,
}

impl Default for Mrtr {
    fn default() -> Self {
        let key: [u8; 32] = rand::random();
        Mrtr {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            own: OwnTasks::default(),
        }
    }
}

fn invalid(message: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(message.into(), None)
}

fn request(method: &str, params: Value) -> Result<InputRequest, ErrorData> {
    serde_json::from_value(json!({"method": method, "params": params}))
        .map_err(|e| ErrorData::internal_error(format!("input request: {e}"), None))
}

fn elicit(message: &str, field: &str, kind: &str) -> Result<InputRequest, ErrorData> {
    request(
        "elicitation/create",
        json!({"message": message, "requestedSchema": {
            "type": "object", "properties": {field: {"type": kind}}, "required": [field]}}),
    )
}

fn sample(prompt: &str, max: u32) -> Result<InputRequest, ErrorData> {
    request(
        "sampling/createMessage",
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
               "maxTokens": max}),
    )
}

fn roots() -> Result<InputRequest, ErrorData> {
    request("roots/list", json!({}))
}

fn ask(
    pairs: Vec<(&str, Result<InputRequest, ErrorData>)>,
    state: Option<String>,
) -> Result<InputRequiredResult, ErrorData> {
    let mut requests = InputRequests::new();
    for (key, r) in pairs {
        requests.insert(key.to_string(), r?);
    }
    Ok(InputRequiredResult::new(Some(requests), state))
}

/// An answer the client gave under `key`: an object, or `-32602`.
fn answer<'a>(responses: &'a InputResponses, key: &str) -> Result<&'a Value, ErrorData> {
    match responses.get(key) {
        Some(v @ Value::Object(_)) => Ok(v),
        Some(other) => Err(invalid(format!(
            "inputResponses.{key} must be an object (the result of the request), got {other}"
        ))),
        None => Err(invalid(format!("inputResponses has no {key}"))),
    }
}

impl Mrtr {
    fn seal(&self, what: &str) -> Result<String, ErrorData> {
        self.codec
            .seal_json(&json!({"step": what}))
            .map_err(|e| ErrorData::internal_error(format!("requestState: {e}"), None))
    }

    /// The step a state was sealed at; a state this server did not seal
    /// (or one altered) is `-32602`.
    fn step(&self, state: Option<&str>) -> Result<Option<String>, ErrorData> {
        let Some(state) = state else {
            return Ok(None);
        };
        let v: Value = self.codec.open_json(state).map_err(|_| {
            invalid("requestState failed its integrity check: it was altered or not issued by this server")
        })?;
        Ok(v["step"].as_str().map(str::to_string))
    }

    /// Run a tool; `None` when `name` is not one of these.
    pub fn call(
        &self,
        name: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
        cx: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let r = match name {
            "test_input_required_result_elicitation" => self.single(
                responses,
                "user_name",
                || elicit("What is your name?", "name", "string"),
                |a| {
                    format!(
                        "Hello, {}!",
                        a["content"]["name"].as_str().unwrap_or("stranger")
                    )
                },
            ),
            "test_input_required_result_sampling" => self.single(
                responses,
                "capital_question",
                || sample("What is the capital of France?", 100),
                |a| {
                    format!(
                        "The model said: {}",
                        a["content"]["text"].as_str().unwrap_or("")
                    )
                },
            ),
            "test_input_required_result_list_roots" => {
                self.single(responses, "client_roots", roots, |a| {
                    let uris: Vec<&str> = a["roots"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r["uri"].as_str())
                        .collect();
                    format!("roots: {}", uris.join(", "))
                })
            }
            "test_input_required_result_request_state" => {
                self.stateful(responses, state, "confirm")
            }
            "test_input_required_result_tampered_state" => {
                self.stateful(responses, state, "confirm")
            }
            "test_input_required_result_multiple_inputs" => self.multiple(responses, state),
            "test_input_required_result_multi_round" => self.rounds(responses, state),
            "test_input_required_result_capabilities" => capabilities(responses, cx),
            "test_tool_with_task" => self.own.call(responses),
            _ => return None,
        };
        Some(r)
    }

    /// One request under `key`; done when its answer comes.
    fn single(
        &self,
        responses: Option<&InputResponses>,
        key: &str,
        make: impl Fn() -> Result<InputRequest, ErrorData>,
        done: impl Fn(&Value) -> String,
    ) -> Result<CallToolResponse, ErrorData> {
        match responses {
            Some(r) if r.contains_key(key) => Ok(text(done(answer(r, key)?)).into()),
            // Nothing, or not what was asked: ask (again).
            _ => Ok(ask(vec![(key, make())], None)?.into()),
        }
    }

    /// A confirmation whose retry must bring back the state it was sent.
    fn stateful(
        &self,
        responses: Option<&InputResponses>,
        state: Option<&str>,
        key: &str,
    ) -> Result<CallToolResponse, ErrorData> {
        let step = self.step(state)?;
        match (responses, step.as_deref()) {
            (Some(r), Some("confirm")) if r.contains_key(key) => {
                answer(r, key)?;
                Ok(text("state-ok: the requestState came back as it was sent").into())
            }
            _ => Ok(ask(
                vec![(key, elicit("Please confirm", "ok", "boolean"))],
                Some(self.seal("confirm")?),
            )?
            .into()),
        }
    }

    fn multiple(
        &self,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        let keys = ["user_name", "greeting", "client_roots"];
        let step = self.step(state)?;
        if let (Some(r), Some("multiple")) = (responses, step.as_deref()) {
            if keys.iter().all(|k| r.contains_key(*k)) {
                for k in keys {
                    answer(r, k)?;
                }
                return Ok(text("all three answers arrived").into());
            }
        }
        Ok(ask(
            vec![
                ("user_name", elicit("What is your name?", "name", "string")),
                ("greeting", sample("Generate a greeting", 50)),
                ("client_roots", roots()),
            ],
            Some(self.seal("multiple")?),
        )?
        .into())
    }

    fn rounds(
        &self,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        let step = self.step(state)?;
        let has = |k: &str| responses.is_some_and(|r| r.contains_key(k));
        match step.as_deref() {
            Some("round-2") if has("step2") => {
                Ok(text("both rounds answered: name and favourite color").into())
            }
            Some("round-1") if has("step1") => Ok(ask(
                vec![(
                    "step2",
                    elicit("Step 2: What is your favorite color?", "color", "string"),
                )],
                Some(self.seal("round-2")?),
            )?
            .into()),
            _ => Ok(ask(
                vec![(
                    "step1",
                    elicit("Step 1: What is your name?", "name", "string"),
                )],
                Some(self.seal("round-1")?),
            )?
            .into()),
        }
    }

    /// `prompts/get` of the asking prompt.
    pub fn get_prompt(
        &self,
        name: &str,
        responses: Option<&InputResponses>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if name != "test_input_required_result_prompt" {
            return Err(invalid(format!("no prompt named {name}")));
        }
        match responses {
            Some(r) if r.contains_key("user_context") => {
                let a = answer(r, "user_context")?;
                let context = a["content"]["context"].as_str().unwrap_or("");
                let result: GetPromptResult = serde_json::from_value(json!({"messages": [
                    {"role": "user", "content": {"type": "text", "text": format!("Use this context: {context}")}}
                ]}))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok(result.into())
            }
            _ => Ok(ask(
                vec![(
                    "user_context",
                    elicit("What context should the prompt use?", "context", "string"),
                )],
                None,
            )?
            .into()),
        }
    }
}

/// Asks only for what the request declared (sampling, elicitation, roots).
fn capabilities(
    responses: Option<&InputResponses>,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if responses.is_some_and(|r| !r.is_empty()) {
        return Ok(
            CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                "answered what was asked",
            )])
            .into(),
        );
    }
    let caps = cx.client_capabilities().unwrap_or_default();
    let mut pairs = Vec::new();
    if caps.sampling.is_some() {
        pairs.push(("greeting", sample("Generate a greeting", 50)));
    }
    if caps.elicitation.is_some() {
        pairs.push(("user_name", elicit("What is your name?", "name", "string")));
    }
    if caps.roots.is_some() {
        pairs.push(("client_roots", roots()));
    }
    if pairs.is_empty() {
        return Ok(text("the client declared nothing to ask with").into());
    }
    Ok(ask(pairs, None)?.into())
}

/// `test_tool_with_task` (the Tasks extension's `tasks-mrtr-composition`):
/// listed with task support `required`; the first call asks the user's
/// name by `InputRequiredResult`, the retry that brings it answers with a
/// task of this server's own (`CreateTaskResult`), which `tasks/get`
/// shows completed with the greeting. The hub relays both.
#[derive(Default)]
pub struct OwnTasks {
    /// Task id -> its greeting (`None` once cancelled).
    tasks: std::sync::Mutex<std::collections::HashMap<String, Option<String>>>,
    next: std::sync::atomic::AtomicU64,
}

pub fn task_tool() -> Option<Tool> {
    serde_json::from_value(json!({
        "name": "test_tool_with_task",
        "description": "Asks the user's name by InputRequiredResult, then answers with a task of its own",
        "inputSchema": {"type": "object", "properties": {}},
        "_meta": {"io.modelcontextprotocol/tasks": {"taskSupport": "required"}},
    }))
    .ok()
}

fn now() -> String {
    chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn no_task(id: &str) -> ErrorData {
    invalid(format!("no task {id} on this server"))
}

impl OwnTasks {
    pub fn call(&self, responses: Option<&InputResponses>) -> Result<CallToolResponse, ErrorData> {
        let Some(responses) = responses.filter(|r| r.contains_key("user_name")) else {
            return Ok(ask(
                vec![("user_name", elicit("What is your name?", "name", "string"))],
                None,
            )?
            .into());
        };
        let given = answer(responses, "user_name")?;
        let name = given["content"]["name"].as_str().unwrap_or("stranger");
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("own-{n}");
        if let Ok(mut t) = self.tasks.lock() {
            t.insert(id.clone(), Some(format!("Hello, {name}!")));
        }
        let at = now();
        let task = rmcp::model::Task::new(id, rmcp::model::TaskStatus::Working, at.clone(), at);
        Ok(rmcp::model::CreateTaskResult::new(task).into())
    }

    pub fn get(&self, id: &str) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        use rmcp::model::{DetailedTask, GetTaskResult, Task, TaskPayload, TaskStatus};
        let greeting = self
            .tasks
            .lock()
            .ok()
            .and_then(|t| t.get(id).cloned())
            .ok_or_else(|| no_task(id))?;
        let payload = match greeting {
            Some(text) => TaskPayload::Completed {
                result: match serde_json::to_value(CallToolResult::success(vec![
                    rmcp::model::ContentBlock::text(text),
                ])) {
                    Ok(Value::Object(m)) => m,
                    _ => serde_json::Map::new(),
                },
            },
            None => TaskPayload::Cancelled,
        };
        let at = now();
        Ok(GetTaskResult::new(DetailedTask::new(
            Task::new(id.to_string(), TaskStatus::Working, at.clone(), at),
            payload,
        )))
    }

    /// `tasks/cancel`: a known task reads `cancelled` from then on.
    pub fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let mut t = self.tasks.lock().map_err(|_| no_task(id))?;
        match t.get_mut(id) {
            Some(greeting) => {
                *greeting = None;
                Ok(())
            }
            None => Err(no_task(id)),
        }
    }

    /// `tasks/update`: these tasks never ask; a known id is acknowledged.
    pub fn update(&self, id: &str) -> Result<(), ErrorData> {
        let t = self.tasks.lock().map_err(|_| no_task(id))?;
        t.contains_key(id).then_some(()).ok_or_else(|| no_task(id))
    }
}
