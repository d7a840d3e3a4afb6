//! What travels between an MCP client at `/mcp` and the servers behind the
//! hub besides plain calls: progress, cancellation, sampling, elicitation,
//! logs, resources, prompts, completion; and the safety gate and recording
//! of MCP calls.

use serde_json::{json, Value};

use super::driver::{text_of, Driver};
use super::{hub_with, wait_running};
use crate::support::testserver_entry;

fn conf(d: &std::path::Path) -> Value {
    json!({"conf": testserver_entry(d, "conf", &["--conformance"]), "t": testserver_entry(d, "t", &[])})
}

#[tokio::test]
async fn mcp_progress_sampling_and_logs_reach_the_calling_client() {
    let hub = hub_with(conf, json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["conf"]).await;
    let (mut d, _) =
        Driver::connect(&hub, json!({"sampling": {"text": "hello from the client"}})).await;

    let id = d
        .send(json!({"op": "callTool", "name": "conf__test_tool_with_progress", "progress": true}))
        .await;
    let answer = d.answer(id).await;
    assert_eq!(answer["ok"], true, "{answer}");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let p = d
            .recv_where("progress", |v| {
                v["event"] == "progress" && v["target"] == json!(id)
            })
            .await;
        seen.push(p["progress"]["progress"].as_f64().unwrap_or(-1.0));
    }
    assert_eq!(seen, vec![0.0, 50.0, 100.0]);

    let r = d
        .call("conf__test_sampling", json!({"prompt": "what is 2+2?"}))
        .await;
    assert!(
        text_of(&r).contains("LLM response: hello from the client"),
        "{r}"
    );
    let asked = d
        .recv_where("sampling request", |v| {
            v["event"] == "request" && v["method"] == "sampling/createMessage"
        })
        .await;
    assert!(
        asked["params"].to_string().contains("what is 2+2?"),
        "{asked}"
    );

    d.ok(json!({"op": "setLevel", "level": "debug"})).await;
    d.call("conf__test_tool_with_logging", json!({})).await;
    for step in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ] {
        d.recv_where(step, |v| {
            v["method"] == "notifications/message" && v["params"]["data"] == step
        })
        .await;
    }
}

/// Issue 32: a server's log messages reach every session in the order the
/// server sent them: the calling session on its call's stream, another
/// session through its one ordered sender (its standalone stream).
#[tokio::test]
async fn mcp_log_messages_arrive_in_the_order_the_server_sent_them() {
    let hub = hub_with(conf, json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let (mut caller, _) = Driver::connect(&hub, json!({})).await;
    let (mut other, _) = Driver::connect(&hub, json!({})).await;
    caller.ok(json!({"op": "setLevel", "level": "debug"})).await;
    other.ok(json!({"op": "setLevel", "level": "debug"})).await;
    const N: u64 = 100;
    let r = caller.call("t__log_burst", json!({"count": N})).await;
    assert_eq!(text_of(&r), "sent");
    for d in [&mut caller, &mut other] {
        let mut seen = Vec::new();
        while seen.len() < N as usize {
            let m = d
                .recv_where("a log message of t", |v| {
                    v["method"] == "notifications/message" && v["params"]["logger"] == "t"
                })
                .await;
            seen.push(m["params"]["data"].as_u64().unwrap_or(u64::MAX));
        }
        assert_eq!(seen, (0..N).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn mcp_cancel_reaches_the_upstream_server() {
    let hub = hub_with(conf, json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let (mut d, _) = Driver::connect(&hub, json!({})).await;
    let id = d.send(json!({"op": "callTool", "name": "t__hang"})).await;
    hub.wait_log("testserver t call hang").await;
    d.ok(json!({"op": "abort", "target": id})).await;
    // The server sees notifications/cancelled for its hanging call.
    hub.wait_log("testserver t cancelled hang").await;
    let a = d.answer(id).await;
    assert_eq!(a["ok"], false, "{a}");
    // The session goes on working.
    let r = d.call("t__echo", json!({"message": "still here"})).await;
    assert_eq!(text_of(&r), "still here");
}

#[tokio::test]
async fn mcp_resources_prompts_and_completion_are_aggregated() {
    let hub = hub_with(conf, json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["conf"]).await;
    let (mut d, _) = Driver::connect(&hub, json!({})).await;

    let list = d.ok(json!({"op": "listResources"})).await;
    assert!(list.to_string().contains("test://static-text"), "{list}");
    let r = d
        .ok(json!({"op": "readResource", "uri": "test://static-text"}))
        .await;
    assert_eq!(
        r["contents"][0]["text"],
        "This is the content of the static text resource."
    );
    // A URI no server listed finds its server through a template.
    let r = d
        .ok(json!({"op": "readResource", "uri": "test://template/42/data"}))
        .await;
    assert!(
        r["contents"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("42"),
        "{r}"
    );
    let missing = d
        .request(json!({"op": "readResource", "uri": "nope://x"}))
        .await;
    assert_eq!(missing["ok"], false, "{missing}");

    let prompts = d.ok(json!({"op": "listPrompts"})).await;
    assert!(
        prompts
            .to_string()
            .contains("conf__test_prompt_with_arguments"),
        "{prompts}"
    );
    let p = d
        .ok(
            json!({"op": "getPrompt", "name": "conf__test_prompt_with_arguments",
                   "arguments": {"arg1": "hello", "arg2": "world"}}),
        )
        .await;
    assert_eq!(
        p["messages"][0]["content"]["text"],
        "Prompt with arguments: arg1='hello', arg2='world'"
    );
    let c = d
        .ok(json!({"op": "complete",
                   "ref": {"type": "ref/prompt", "name": "conf__test_prompt_with_arguments"},
                   "argument": {"name": "arg1", "value": "he"}}))
        .await;
    assert!(c["completion"]["values"].is_array(), "{c}");
}

#[tokio::test]
async fn mcp_confirm_rule_asks_by_elicitation_or_blocks() {
    let rules = json!({"safety": {"rules": [
        {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}]}});
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), rules).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;

    let yes = json!({"elicitation": {"action": "accept", "content": {"approve": true}}});
    let (mut d, _) = Driver::connect(&hub, yes).await;
    let r = d.call("t__echo", json!({"message": "danger"})).await;
    assert_eq!(text_of(&r), "danger", "{r}");
    let asked = d
        .recv_where("elicitation", |v| {
            v["event"] == "request" && v["method"] == "elicitation/create"
        })
        .await;
    assert!(
        asked["params"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("dangerous echo"),
        "{asked}"
    );

    let no = json!({"elicitation": {"action": "decline"}});
    let (mut d, _) = Driver::connect(&hub, no).await;
    let r = d.call("t__echo", json!({"message": "danger"})).await;
    assert_eq!(r["structuredContent"]["errorType"], "SAFETY_BLOCKED", "{r}");
    assert!(text_of(&r).contains("declined"), "{r}");

    // A client that cannot be asked is refused with a way forward.
    let (mut d, _) = Driver::connect(&hub, json!({})).await;
    let r = d.call("t__echo", json!({"message": "danger"})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["errorType"], "SAFETY_BLOCKED", "{r}");
    assert!(
        r["structuredContent"]["suggestion"]
            .as_str()
            .unwrap_or("")
            .contains("elicitation"),
        "{r}"
    );
    // Calls the rule does not match run as usual.
    let r = d.call("t__echo", json!({"message": "harmless"})).await;
    assert_eq!(text_of(&r), "harmless");
}

#[tokio::test]
async fn mcp_session_records_its_own_calls() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let (mut d, _) = Driver::connect(&hub, json!({})).await;
    let started = d
        .call("hub__record_start", json!({"name": "mcp-session"}))
        .await;
    assert_ne!(started["isError"], true, "{started}");
    d.call("t__echo", json!({"message": "one"})).await;
    d.call("t__add", json!({"a": 1, "b": 2})).await;
    let stopped = d.call("hub__record_stop", json!({})).await;
    assert_eq!(stopped["structuredContent"]["stepCount"], 2, "{stopped}");
    let id = stopped["structuredContent"]["recordingId"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let got = d.call("hub__record_get", json!({"recordingId": id})).await;
    let steps = got["structuredContent"]["steps"].to_string();
    assert!(
        steps.contains("t__echo") && steps.contains("t__add"),
        "{got}"
    );
}

#[tokio::test]
async fn mcp_delete_ends_the_session_and_saves_its_recording() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let (mut d, info) = Driver::connect(&hub, json!({})).await;
    assert!(info["sessionId"].is_string(), "{info}");
    d.call("hub__record_start", json!({"name": "left-open"}))
        .await;
    d.call("t__echo", json!({"message": "one"})).await;
    d.ok(json!({"op": "close"})).await;
    hub.wait_log("MCP session closed").await;
    let (mut e, _) = Driver::connect(&hub, json!({})).await;
    let list = e.call("hub__record_list", json!({})).await;
    assert!(
        list["structuredContent"].to_string().contains("left-open"),
        "{list}"
    );
}
