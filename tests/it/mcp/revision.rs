//! Raw 2026-07-28 requests, as a stateless client sends them, and the
//! shapes of what the hub answers, checked against the revision's JSON
//! schema (tests/mcp/schema-2026-07-28.json, trimmed from the spec
//! repository; tests/mcp/schema_check.mjs validates with ajv).

use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::direct::{message, post_with, Reply};
use super::{hub_with, wait_running};
use crate::support::{testserver_entry, TestHub};

/// A stateless 2026-07-28 request declaring `caps`: the version,
/// capabilities and client in `_meta`, the standard headers.
pub(super) async fn stateless_as(hub: &TestHub, body: Value, caps: Value) -> Reply {
    stateless_named(hub, body, caps, "raw").await
}

/// The same, from the client named `client` (`clientInfo.name`).
pub(super) async fn stateless_named(
    hub: &TestHub,
    mut body: Value,
    caps: Value,
    client: &str,
) -> Reply {
    let method = body["method"].as_str().unwrap_or("").to_string();
    let name = body["params"]["name"]
        .as_str()
        .or_else(|| body["params"]["uri"].as_str())
        .or_else(|| body["params"]["taskId"].as_str())
        .map(String::from);
    body["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "0"},
    });
    let mut headers = vec![
        ("Mcp-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method.as_str()),
    ];
    if let Some(n) = &name {
        headers.push(("Mcp-Name", n.as_str()));
    }
    post_with(hub, None, true, body, &headers).await
}

pub(super) fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Check each (definition, value) against the 2026-07-28 schema; panics
/// naming every value that does not conform and why.
pub(super) async fn conforms(checks: &[(&str, &Value)]) {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/schema_check.mjs");
    let mut node = tokio::process::Command::new("node")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node");
    let mut input = String::new();
    for (def, value) in checks {
        input.push_str(&json!({"def": def, "value": value}).to_string());
        input.push('\n');
    }
    let mut stdin = node.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).await.expect("write");
    drop(stdin);
    let out = tokio::time::timeout(crate::support::WAIT, node.wait_with_output())
        .await
        .expect("schema check in time")
        .expect("schema check ran");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(
        lines.len(),
        checks.len(),
        "one verdict per check: {lines:?}"
    );
    let bad: Vec<String> = lines
        .iter()
        .zip(checks)
        .filter(|(l, _)| l["ok"] != true)
        .map(|(l, (def, v))| format!("{def}: {v}\n  {}", l["errors"]))
        .collect();
    assert!(bad.is_empty(), "not valid 2026-07-28:\n{}", bad.join("\n"));
}

pub(super) async fn conformance_hub() -> TestHub {
    let hub = hub_with(
        |d| json!({"conf": testserver_entry(d, "conf", &["--conformance"])}),
        json!({}),
    )
    .await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["conf"]).await;
    hub
}

/// What a 2025-era server answers (no `resultType`) reaches a 2026-07-28
/// client as a valid 2026-07-28 result; an unknown resource is -32602.
#[tokio::test]
async fn relayed_results_are_valid_2026_07_28_results() {
    let hub = conformance_hub().await;
    let caps = json!({});
    let asks = [
        (
            "ReadResourceResult",
            request(1, "resources/read", json!({"uri": "test://static-text"})),
        ),
        (
            "ReadResourceResult",
            request(
                2,
                "resources/read",
                json!({"uri": "test://template/7/data"}),
            ),
        ),
        (
            "GetPromptResult",
            request(
                3,
                "prompts/get",
                json!({"name": "conf__test_simple_prompt"}),
            ),
        ),
        (
            "GetPromptResult",
            request(
                4,
                "prompts/get",
                json!({"name": "conf__test_prompt_with_image"}),
            ),
        ),
        (
            "CompleteResult",
            request(
                5,
                "completion/complete",
                json!({
            "ref": {"type": "ref/prompt", "name": "conf__test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "x"}}),
            ),
        ),
        (
            "CallToolResult",
            request(
                6,
                "tools/call",
                json!({"name": "conf__test_simple_text", "arguments": {}}),
            ),
        ),
        (
            "CallToolResult",
            request(
                7,
                "tools/call",
                json!({"name": "conf__test_error_handling", "arguments": {}}),
            ),
        ),
        ("ListToolsResult", request(8, "tools/list", json!({}))),
    ];
    let mut results = Vec::new();
    for (def, body) in asks {
        let r = stateless_as(&hub, body, caps.clone()).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let m = message(&r);
        assert_eq!(m["result"]["resultType"], "complete", "{def}: {m}");
        results.push((def, m["result"].clone()));
    }
    let checks: Vec<(&str, &Value)> = results.iter().map(|(d, v)| (*d, v)).collect();
    conforms(&checks).await;

    // A URI no server offers: the revision's resource-not-found, -32602.
    let r = stateless_as(
        &hub,
        request(9, "resources/read", json!({"uri": "test://nothing-here"})),
        caps,
    )
    .await;
    let m = message(&r);
    assert_eq!(m["error"]["code"], -32602, "{m}");
    conforms(&[("JSONRPCErrorResponse", &m)]).await;
}

/// A call whose server asks for sampling, from a request that did not
/// declare sampling: -32021 with HTTP 400, naming the capability as a
/// ClientCapabilities object; the server's call is cancelled, not left
/// waiting.
#[tokio::test]
async fn a_call_needing_an_undeclared_capability_is_32021() {
    let hub = conformance_hub().await;
    let call = request(
        1,
        "tools/call",
        json!({"name": "conf__test_missing_capability", "arguments": {}}),
    );
    let r = stateless_as(&hub, call.clone(), json!({})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let m = message(&r);
    assert_eq!(m["error"]["code"], -32021, "{m}");
    assert_eq!(
        m["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}}),
        "{m}"
    );
    assert!(
        m["error"]["message"]
            .as_str()
            .is_some_and(|t| t.contains("sampling") && t.contains("declare")),
        "{m}"
    );
    conforms(&[("MissingRequiredClientCapabilityError", &m)]).await;

    // Other tools of the same server still run for that client.
    let ok = stateless_as(
        &hub,
        request(
            2,
            "tools/call",
            json!({"name": "conf__test_simple_text", "arguments": {}}),
        ),
        json!({}),
    )
    .await;
    assert_ne!(message(&ok)["result"]["isError"], true, "{}", ok.body);
}
