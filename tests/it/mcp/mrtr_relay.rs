//! A 2026-07-28 server's own questions (MRTR, SEP-2322) through the hub
//! (issue 39.2, 39.5): the hub meets the test server's `--mrtr` mode by
//! `server/discover`, and the server answers calls with
//! `InputRequiredResult`s.
//!
//! - A stateless client gets the question, with a `requestState` the hub
//!   seals around the server's; its retry reaches the server with the
//!   server's state exactly as minted (the fixture says `state-ok` only
//!   then). A replayed, tampered or misapplied state is refused.
//! - A session client (the TypeScript SDK, 2025-11-25) is asked by the hub
//!   request by request (elicitation, sampling, roots), once per round.
//! - A `/ws` client, which nobody can ask, gets a clear error.

use serde_json::{json, Value};

use super::direct::message;
use super::driver::{text_of, Driver};
use super::revision::{conformance_hub, conforms, request, stateless_as, stateless_named};
use super::{hub_with, wait_running};
use crate::support::{testserver_entry, TestHub};

async fn hub() -> TestHub {
    let hub = hub_with(
        |d| json!({"m": testserver_entry(d, "m", &["--mrtr"])}),
        json!({}),
    )
    .await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["m"]).await;
    hub
}

fn call(id: u64, tool: &str, retry: Option<(&str, Value)>) -> Value {
    let mut params =
        json!({"name": format!("m__test_input_required_result_{tool}"), "arguments": {}});
    if let Some((state, responses)) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = responses;
    }
    request(id, "tools/call", params)
}

fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

/// The first round: an `InputRequiredResult` asking under `key`; its state.
async fn asked(hub: &TestHub, id: u64, tool: &str, key: &str) -> String {
    let m = message(&stateless_as(hub, call(id, tool, None), all_caps()).await);
    let r = &m["result"];
    assert_eq!(r["resultType"], "input_required", "{m}");
    assert!(r["inputRequests"][key].is_object(), "{m}");
    conforms(&[("InputRequiredResult", r)]).await;
    r["requestState"]
        .as_str()
        .expect("requestState")
        .to_string()
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test]
async fn a_stateless_client_answers_a_2026_servers_questions_through_the_hub() {
    let hub = hub().await;

    // The server's own state comes back to it exactly (`state-ok`), inside
    // the hub's sealed one.
    let state = asked(&hub, 1, "request_state", "confirm").await;
    let answers = json!({"confirm": accept(json!({"ok": true}))});
    let retry = call(2, "request_state", Some((&state, answers.clone())));
    let m = message(&stateless_as(&hub, retry.clone(), all_caps()).await);
    assert_eq!(m["result"]["resultType"], "complete", "{m}");
    assert!(text_of(&m["result"]).contains("state-ok"), "{m}");

    // Replayed: refused, and the server is not called with it.
    let mut replay = retry;
    replay["id"] = json!(3);
    let m = message(&stateless_as(&hub, replay, all_caps()).await);
    assert_eq!(m["error"]["code"], -32602, "{m}");

    // Tampered: refused.
    let state = asked(&hub, 4, "request_state", "confirm").await;
    let tampered = format!("{state}-TAMPERED");
    let m = message(
        &stateless_as(
            &hub,
            call(5, "request_state", Some((&tampered, answers.clone()))),
            all_caps(),
        )
        .await,
    );
    assert_eq!(m["error"]["code"], -32602, "{m}");
    // Minted for another tool: refused (bound to the call).
    let m = message(
        &stateless_as(
            &hub,
            call(6, "multi_round", Some((&state, answers))),
            all_caps(),
        )
        .await,
    );
    assert_eq!(m["error"]["code"], -32602, "{m}");

    // A server that asks twice needs two retries, each with the state of
    // its round.
    let s1 = asked(&hub, 7, "multi_round", "step1").await;
    let one = json!({"step1": accept(json!({"name": "Ada"}))});
    let m =
        message(&stateless_as(&hub, call(8, "multi_round", Some((&s1, one))), all_caps()).await);
    let r = &m["result"];
    assert_eq!(r["resultType"], "input_required", "{m}");
    assert!(r["inputRequests"]["step2"].is_object(), "{m}");
    let s2 = r["requestState"].as_str().expect("requestState");
    let two = json!({"step2": accept(json!({"color": "teal"}))});
    let m = message(&stateless_as(&hub, call(9, "multi_round", Some((s2, two))), all_caps()).await);
    assert_eq!(m["result"]["resultType"], "complete", "{m}");
    assert!(text_of(&m["result"]).contains("both rounds"), "{m}");

    // The server hears what this request declared, and asks only for that.
    let only_sampling = json!({"sampling": {}});
    let m = message(&stateless_as(&hub, call(10, "capabilities", None), only_sampling).await);
    let keys: Vec<&String> = m["result"]["inputRequests"]
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["greeting"], "{m}");
}

#[tokio::test]
async fn a_session_client_is_asked_by_the_hub_round_by_round() {
    let hub = hub().await;
    let (mut d, _) = Driver::connect(
        &hub,
        json!({
            "sampling": {"text": "Bonjour"},
            "elicitation": {"action": "accept", "content": {"name": "Ada", "color": "teal", "ok": true, "context": "tests"}},
            "roots": [{"uri": "file:///work/project", "name": "project"}],
        }),
    )
    .await;

    let r = d
        .call("m__test_input_required_result_multi_round", json!({}))
        .await;
    assert!(text_of(&r).contains("both rounds"), "{r}");
    for step in ["Step 1", "Step 2"] {
        d.recv_where(step, |v| {
            v["event"] == "request"
                && v["method"] == "elicitation/create"
                && v["params"]["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(step))
        })
        .await;
    }

    let r = d
        .call("m__test_input_required_result_multiple_inputs", json!({}))
        .await;
    assert!(text_of(&r).contains("all three"), "{r}");
    d.recv_where("sampling", |v| v["method"] == "sampling/createMessage")
        .await;
    d.recv_where("roots", |v| v["method"] == "roots/list").await;

    let r = d
        .call("m__test_input_required_result_list_roots", json!({}))
        .await;
    assert!(text_of(&r).contains("file:///work/project"), "{r}");

    let p = d
        .ok(json!({"op": "getPrompt", "name": "m__test_input_required_result_prompt"}))
        .await;
    assert!(p.to_string().contains("Use this context: tests"), "{p}");
}

/// A `/ws` call whose server asks a form (issue 39.5, "by the person
/// through need_user"): the person gets a `need_user` carrying the form
/// (`input`), and `confirm` with `content` answers it, for a 2026-07-28
/// server (its InputRequiredResult) and a 2025 one (mid-call) alike;
/// declining declines; sampling, which a person cannot answer, fails
/// saying so.
#[tokio::test]
async fn a_ws_callers_person_answers_a_servers_form_by_need_user() {
    let hub = hub_with(
        |d| {
            json!({"m": testserver_entry(d, "m", &["--mrtr"]),
                   "conf": testserver_entry(d, "conf", &["--conformance"])})
        },
        json!({}),
    )
    .await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["m", "conf"]).await;

    for (n, tool, params, answer, expect) in [
        (
            1,
            "m__test_input_required_result_elicitation",
            json!({}),
            json!({"name": "Ada"}),
            "Hello, Ada!",
        ),
        (
            2,
            "conf__test_elicitation",
            json!({"message": "Your name?"}),
            json!({"response": "Eve"}),
            "Eve",
        ),
    ] {
        let id = format!("form{n}");
        ws.send(json!({"type": "tool_call", "id": id, "tool": tool, "params": params}))
            .await;
        let ask = ws.recv_type("need_user").await;
        assert_eq!(ask["input"]["method"], "elicitation/create", "{ask}");
        assert_eq!(ask["requestId"], json!(id), "{ask}");
        assert_eq!(ask["tool"], tool, "{ask}");
        let confirm =
            json!({"type": "confirm", "taskId": ask["taskId"], "approve": true, "content": answer});
        let ok = ws.request(confirm).await;
        assert_eq!(ok["type"], "confirmed", "{ok}");
        let r = ws
            .recv_where("the call's result", |v| v["replyTo"] == json!(id))
            .await;
        assert_eq!(r["success"], true, "{r}");
        assert!(r.to_string().contains(expect), "{r}");
    }

    // Declined: the server hears a decline.
    ws.send(json!({"type": "tool_call", "id": "no", "tool": "conf__test_elicitation", "params": {"message": "Sure?"}}))
        .await;
    let ask = ws.recv_type("need_user").await;
    ws.request(json!({"type": "confirm", "taskId": ask["taskId"], "approve": false}))
        .await;
    let r = ws
        .recv_where("the declined call", |v| v["replyTo"] == "no")
        .await;
    assert!(r.to_string().contains("action=decline"), "{r}");

    // Sampling has nobody to answer it.
    let r = ws
        .call("m__test_input_required_result_sampling", json!({}))
        .await;
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"]["message"].to_string().contains("sampling"),
        "{r}"
    );
    // The hub's own refusal: not retried as if the server had failed.
    assert_eq!(r["error"]["errorType"], "PERMISSION", "{r}");
    assert_eq!(r["attempts"], 1, "{r}");
}

/// A session-era server that elicits in the middle of a call, called by a
/// stateless client (issue 39.2): the hub holds the server's call open,
/// answers the client with an `InputRequiredResult` carrying the request,
/// and gives the retry's answer to the server, which finishes. Two
/// questions take two retries; a used or tampered state is refused, and
/// the call ran once.
#[tokio::test]
async fn a_session_era_servers_mid_call_question_reaches_a_stateless_client() {
    let hub = conformance_hub().await;
    let caps = json!({"elicitation": {}});
    let twice = |id: u64, retry: Option<(&str, Value)>| {
        let mut params = json!({"name": "conf__toolhub_elicit_twice", "arguments": {}});
        if let Some((state, answer)) = retry {
            params["requestState"] = json!(state);
            params["inputResponses"] = json!({"toolhub_input": answer});
        }
        request(id, "tools/call", params)
    };
    let question = |m: &Value, step: &str| -> String {
        let r = &m["result"];
        assert_eq!(r["resultType"], "input_required", "{m}");
        let q = &r["inputRequests"]["toolhub_input"];
        assert_eq!(q["method"], "elicitation/create", "{m}");
        assert!(
            q["params"]["message"]
                .as_str()
                .is_some_and(|t| t.starts_with(step)),
            "{m}"
        );
        r["requestState"]
            .as_str()
            .expect("requestState")
            .to_string()
    };

    let m = message(&stateless_as(&hub, twice(1, None), caps.clone()).await);
    conforms(&[("InputRequiredResult", &m["result"])]).await;
    let s1 = question(&m, "Step 1");
    // A tampered state is refused, and the call stays held.
    let bad = format!("{s1}x");
    let m = message(
        &stateless_as(
            &hub,
            twice(2, Some((&bad, accept(json!({"name": "Ada"}))))),
            caps.clone(),
        )
        .await,
    );
    assert_eq!(m["error"]["code"], -32602, "{m}");
    // An answer of the wrong shape says what was expected; still held.
    let m = message(&stateless_as(&hub, twice(3, Some((&s1, json!(42)))), caps.clone()).await);
    assert_eq!(m["error"]["code"], -32602, "{m}");
    assert!(
        m["error"]["message"].to_string().contains("ElicitResult"),
        "{m}"
    );

    let m = message(
        &stateless_as(
            &hub,
            twice(4, Some((&s1, accept(json!({"name": "Ada"}))))),
            caps.clone(),
        )
        .await,
    );
    let s2 = question(&m, "Step 2");
    let m = message(
        &stateless_as(
            &hub,
            twice(5, Some((&s2, accept(json!({"color": "teal"}))))),
            caps.clone(),
        )
        .await,
    );
    assert_eq!(m["result"]["resultType"], "complete", "{m}");
    let text = text_of(&m["result"]);
    assert!(text.contains("Ada") && text.contains("teal"), "{m}");

    // The first state again: that call is no longer held.
    let m = message(
        &stateless_as(
            &hub,
            twice(6, Some((&s1, accept(json!({"name": "Eve"}))))),
            caps.clone(),
        )
        .await,
    );
    assert_eq!(m["error"]["code"], -32602, "{m}");
    let runs = crate::support::call_log(&hub.path(), "conf")
        .iter()
        .filter(|c| c["tool"] == "toolhub_elicit_twice")
        .count();
    assert_eq!(runs, 1, "the held call ran once");
}

/// A 2026-07-28 server tells its list changes on `subscriptions/listen`
/// only: the hub keeps one open and re-lists on what it says.
#[tokio::test]
async fn a_2026_servers_tool_list_change_reaches_the_hub() {
    let hub = hub().await;
    let mut ws = hub.connect().await;
    let r = ws.call("m__add_tool", json!({"name": "fresh"})).await;
    assert_eq!(r["success"], true, "{r}");
    ws.recv_where("tools_updated adding m__fresh", |v| {
        v["type"] == "tools_updated"
            && v["added"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("m__fresh")))
    })
    .await;
}

/// A 2026-07-28 server's own task (the Tasks extension, SEP-2663): its
/// question comes first, by `InputRequiredResult`; the retry's answer is
/// its task, under an id of the hub's (`up-…`) that `tasks/get` and
/// `tasks/cancel` route back to it. Another client, and an id the hub did
/// not mint, get `-32602`.
#[tokio::test]
async fn a_2026_servers_own_task_is_relayed_under_the_hubs_id() {
    let hub = hub().await;
    let caps = json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let tool = "m__test_tool_with_task";
    let first = request(1, "tools/call", json!({"name": tool, "arguments": {}}));
    let m = message(&stateless_as(&hub, first, caps.clone()).await);
    let r = &m["result"];
    assert_eq!(r["resultType"], "input_required", "{m}");
    assert!(r.get("taskId").is_none(), "{m}");
    let state = r["requestState"].as_str().expect("requestState");
    let retry = request(
        2,
        "tools/call",
        json!({"name": tool, "arguments": {}, "requestState": state,
            "inputResponses": {"user_name": accept(json!({"name": "Alice"}))}}),
    );
    let m = message(&stateless_as(&hub, retry, caps.clone()).await);
    let r = &m["result"];
    assert_eq!(r["resultType"], "task", "{m}");
    assert!(r.get("requestState").is_none(), "{m}");
    let id = r["taskId"].as_str().expect("taskId").to_string();
    assert!(id.starts_with("up-") && !id.contains("own-"), "{m}");

    let get = |n: u64, id: &str| request(n, "tasks/get", json!({"taskId": id}));
    let m = message(&stateless_as(&hub, get(3, &id), caps.clone()).await);
    assert_eq!(m["result"]["status"], "completed", "{m}");
    assert_eq!(m["result"]["taskId"], id.as_str(), "{m}");
    assert!(
        text_of(&m["result"]["result"]).contains("Hello, Alice!"),
        "{m}"
    );

    let m = message(&stateless_named(&hub, get(4, &id), caps.clone(), "other").await);
    assert_eq!(m["error"]["code"], -32602, "another client's task: {m}");
    let m = message(&stateless_as(&hub, get(5, "up-forged"), caps.clone()).await);
    assert_eq!(m["error"]["code"], -32602, "a forged id: {m}");

    let cancel = request(6, "tasks/cancel", json!({"taskId": id}));
    let m = message(&stateless_as(&hub, cancel, caps.clone()).await);
    assert!(m.get("error").is_none(), "{m}");
    let m = message(&stateless_as(&hub, get(7, &id), caps).await);
    assert_eq!(
        m["result"]["status"], "cancelled",
        "the server heard the cancel: {m}"
    );
}
