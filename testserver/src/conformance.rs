//! `--conformance`: what the official MCP conformance suite's server
//! scenarios call (its reference `everything-server`), so the suite can run
//! against the hub fronting this server: the `test_*` tools, the `test://`
//! resources and template, the `test_*` prompts, logging and completion.

#![allow(deprecated)] // sampling and logging: deprecated by SEP-2577, still spoken

use std::time::Duration;

use rmcp::model::{
    CallToolResult, CreateMessageRequestParams, ElicitRequestParams, GetPromptResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, Prompt, ReadResourceResult,
    Resource, ResourceTemplate, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use super::reply::text;

/// The suite's 1x1 red PNG and minimal WAV.
const IMAGE: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

fn from<T: DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn empty() -> Value {
    json!({"type": "object", "properties": {}})
}

fn string_arg(name: &str, description: &str) -> Value {
    json!({"type": "object", "properties": {name: {"type": "string", "description": description}}, "required": [name]})
}

/// The conformance tools, in the suite's order.
/// How long `test_reconnection` takes: well over the `server.mcpStreamPoll`
/// the hub's conformance test sets (200 ms).
const RECONNECTION_MS: u64 = 1500;

pub fn tools() -> Vec<Tool> {
    let defs = [
        (
            "test_simple_text",
            "Tests simple text content response",
            empty(),
        ),
        (
            "test_image_content",
            "Tests image content response",
            empty(),
        ),
        (
            "test_audio_content",
            "Tests audio content response",
            empty(),
        ),
        (
            "test_embedded_resource",
            "Tests embedded resource content response",
            empty(),
        ),
        (
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            empty(),
        ),
        (
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
            empty(),
        ),
        (
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
            empty(),
        ),
        (
            "test_error_handling",
            "Tests error response handling",
            empty(),
        ),
        (
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            string_arg("prompt", "The prompt to send to the LLM"),
        ),
        (
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            string_arg("message", "The message to show the user"),
        ),
        (
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
            empty(),
        ),
        (
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
            empty(),
        ),
        (
            "test_missing_capability",
            "Test tool requiring sampling",
            empty(),
        ),
        (
            "test_reconnection",
            "Answers after RECONNECTION_MS, so that a hub polling long calls (SEP-1699) ends the call's stream first",
            empty(),
        ),
        (
            "toolhub_elicit_twice",
            "Asks the client twice mid-call (name, then color); toolhub's own fixture",
            empty(),
        ),
        (
            "test_custom_headers",
            "A tool whose region parameter is mirrored into the Mcp-Param-Region header (SEP-2243)",
            json!({"type": "object", "properties": {"region": {"type": "string",
                "description": "Plain string value", "x-mcp-header": "Region"}}, "required": ["region"]}),
        ),
        (
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"}, "email": {"type": "string"}},
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }),
        ),
    ];
    defs.into_iter()
        .filter_map(|(name, description, schema)| {
            serde_json::from_value(
                json!({"name": name, "description": description, "inputSchema": schema}),
            )
            .ok()
        })
        .collect()
}

/// Run a conformance tool; `None` when `name` is not one.
pub async fn call(
    name: &str,
    args: &Map<String, Value>,
    cx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResult, ErrorData>> {
    let r = match name {
        "test_simple_text" => Ok(text("This is a simple text response for testing.")),
        "test_reconnection" => {
            tokio::time::sleep(std::time::Duration::from_millis(RECONNECTION_MS)).await;
            Ok(text("Reconnection test completed"))
        }
        "test_image_content" => from(json!({"content": [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]})),
        "test_audio_content" => from(json!({"content": [{"type": "audio", "data": AUDIO, "mimeType": "audio/wav"}]})),
        "test_embedded_resource" => from(json!({"content": [{"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content."}}]})),
        "test_multiple_content_types" => from(json!({"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": IMAGE, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}]})),
        "test_tool_with_logging" => logging(cx).await,
        "test_tool_with_progress" => progress(cx).await,
        "test_error_handling" => Ok(CallToolResult::error(vec![rmcp::model::ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )])),
        "test_sampling" => sampling(args, cx).await,
        // Needs sampling: a 2025-era server asks for it mid-call.
        "test_missing_capability" => {
            let params: CreateMessageRequestParams = match from(json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": "ping"}}],
                "maxTokens": 10
            })) {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            match cx.peer.create_message(params).await {
                Ok(_) => Ok(text("Success")),
                Err(e) => Err(ErrorData::internal_error(format!("sampling failed: {e}"), None)),
            }
        }
        "toolhub_elicit_twice" => {
            let ask = |step: &str, field: &str| {
                json!({"message": format!("{step}: your {field}?"), "requestedSchema": {
                    "type": "object", "properties": {field: {"type": "string"}}, "required": [field]}})
            };
            let mut said = Vec::new();
            for (step, field) in [("Step 1", "name"), ("Step 2", "color")] {
                match elicit(cx, step, ask(step, field)).await {
                    Ok(r) => said.extend(
                        r.content
                            .iter()
                            .filter_map(|c| c.as_text().map(|t| t.text.clone())),
                    ),
                    Err(e) => return Some(Err(e)),
                }
            }
            Ok(text(said.join(" | ")))
        }
        "test_elicitation" => {
            let message = args.get("message").and_then(Value::as_str).unwrap_or("");
            elicit(cx, "User response", json!({"message": message, "requestedSchema": {
                "type": "object",
                "properties": {"response": {"type": "string", "description": "User's response"}},
                "required": ["response"]}})).await
        }
        "test_elicitation_sep1034_defaults" => elicit(cx, "Elicitation completed", json!({
            "message": "Please review and update the form fields with defaults",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "description": "Verification status", "default": true}},
                "required": []}})).await,
        "test_elicitation_sep1330_enums" => elicit(cx, "Elicitation completed", json!({
            "message": "Please select options from the enum fields",
            "requestedSchema": {"type": "object", "properties": {
                "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                    {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3,
                    "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}},
                "required": []}})).await,
        "test_custom_headers" => Ok(text(format!(
            "region: {}",
            args.get("region").and_then(Value::as_str).unwrap_or("")
        ))),
        "json_schema_2020_12_tool" => Ok(text(format!(
            "JSON Schema 2020-12 tool called with: {}",
            Value::Object(args.clone())
        ))),
        // The Tasks extension's fixtures.
        _ => return super::tasks::call(name, args, cx).await,
    };
    Some(r)
}

/// Three info logs, ~50 ms apart (the suite checks that all arrive).
async fn logging(cx: &RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
    let steps = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let m = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(step))
            .with_logger("conformance-test-server");
        let _ = cx.peer.notify_logging_message(m).await;
    }
    Ok(text("Tool with logging executed successfully"))
}

/// Progress 0, 50, 100 of 100, ~50 ms apart, on the request's token.
async fn progress(cx: &RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
    let token = cx.meta.get_progress_token();
    for (i, p) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(t) = &token {
            let mut n = ProgressNotificationParam::new(t.clone(), p);
            n.total = Some(100.0);
            n.message = Some(format!("Completed step {p} of 100"));
            let _ = cx.peer.notify_progress(n).await;
        }
    }
    let shown = token.map(|t| json!(t).to_string()).unwrap_or_default();
    Ok(text(&shown))
}

async fn sampling(
    args: &Map<String, Value>,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let prompt = args.get("prompt").and_then(Value::as_str).unwrap_or("");
    let params: CreateMessageRequestParams = from(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    }))?;
    let reply = match cx.peer.create_message(params).await {
        Ok(r) => {
            let v = serde_json::to_value(&r).unwrap_or_default();
            let said = v["content"]["text"]
                .as_str()
                .unwrap_or("No response")
                .to_string();
            format!("LLM response: {said}")
        }
        Err(e) => format!("Sampling not supported or error: {e}"),
    };
    Ok(text(&reply))
}

async fn elicit(
    cx: &RequestContext<RoleServer>,
    label: &str,
    mut request: Value,
) -> Result<CallToolResult, ErrorData> {
    request["mode"] = json!("form");
    let params: ElicitRequestParams = match from(request) {
        Ok(p) => p,
        Err(e) => {
            return Ok(text(format!(
                "Elicitation not supported or error: {}",
                e.message
            )))
        }
    };
    let reply = match cx.peer.create_elicitation(params).await {
        Ok(r) => {
            let v = serde_json::to_value(&r).unwrap_or_default();
            format!(
                "{label}: action={}, content={}",
                v["action"].as_str().unwrap_or(""),
                v.get("content").cloned().unwrap_or(json!({}))
            )
        }
        Err(e) => format!("Elicitation not supported or error: {e}"),
    };
    Ok(text(&reply))
}

pub fn resources() -> Vec<Resource> {
    let defs = json!([
        {"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
         "description": "A static text resource for testing", "mimeType": "text/plain"},
        {"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
         "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
        {"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
         "description": "A resource that auto-updates every 3 seconds", "mimeType": "text/plain"}
    ]);
    serde_json::from_value(defs).unwrap_or_default()
}

pub fn templates() -> Vec<ResourceTemplate> {
    serde_json::from_value(json!([{"uriTemplate": "test://template/{id}/data", "name": "template",
        "title": "Resource Template", "description": "A resource template with parameter substitution",
        "mimeType": "application/json"}]))
    .unwrap_or_default()
}

pub fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let content = match uri {
        "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
            "text": "This is the content of the static text resource."}),
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": IMAGE}),
        "test://watched-resource" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"})
        }
        _ => match uri
            .strip_prefix("test://template/")
            .and_then(|r| r.strip_suffix("/data"))
            .filter(|id| !id.is_empty() && !id.contains('/'))
        {
            Some(id) => json!({"uri": uri, "mimeType": "application/json", "text":
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()}),
            None => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {uri}"),
                    None,
                ))
            }
        },
    };
    from(json!({"contents": [content]}))
}

pub fn prompts() -> Vec<Prompt> {
    let arg = |n: &str, d: &str| json!({"name": n, "description": d, "required": true});
    serde_json::from_value(json!([
        {"name": "test_simple_prompt", "title": "Simple Test Prompt", "description": "A simple prompt without arguments"},
        {"name": "test_prompt_with_arguments", "title": "Prompt With Arguments", "description": "A prompt with required arguments",
         "arguments": [arg("arg1", "First test argument"), arg("arg2", "Second test argument")]},
        {"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
         "description": "A prompt that includes an embedded resource", "arguments": [arg("resourceUri", "URI of the resource to embed")]},
        {"name": "test_prompt_with_image", "title": "Prompt With Image", "description": "A prompt that includes image content"}
    ]))
    .unwrap_or_default()
}

pub fn get_prompt(name: &str, args: &Map<String, Value>) -> Result<GetPromptResult, ErrorData> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let user = |content: Value| json!({"role": "user", "content": content});
    let messages = match name {
        "test_simple_prompt" => json!([user(
            json!({"type": "text", "text": "This is a simple prompt for testing."})
        )]),
        "test_prompt_with_arguments" => json!([user(json!({"type": "text",
            "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}))]),
        "test_prompt_with_embedded_resource" => json!([
            user(
                json!({"type": "resource", "resource": {"uri": arg("resourceUri"), "mimeType": "text/plain",
                "text": "Embedded resource content for testing."}})
            ),
            user(json!({"type": "text", "text": "Please process the embedded resource above."}))
        ]),
        "test_prompt_with_image" => json!([
            user(json!({"type": "image", "data": IMAGE, "mimeType": "image/png"})),
            user(json!({"type": "text", "text": "Please analyze the image above."}))
        ]),
        _ => {
            return Err(ErrorData::invalid_params(
                format!("no prompt named {name}"),
                None,
            ))
        }
    };
    from(json!({"messages": messages}))
}
