//! The hub's own `confirm` question to a stateless 2026-07-28 client, by
//! MRTR: the call is answered with an `InputRequiredResult` (an
//! `elicitation/create` under `toolhub_confirm`, an opaque
//! `requestState`); the client retries the same call, with a new JSON-RPC
//! id, carrying its answer and the state. Decline refuses, accept runs
//! (once), a tampered, replayed or misapplied state is refused.

use serde_json::{json, Value};

use super::direct::message;
use super::revision::{conforms, request, stateless_as};
use super::task_caps::{send, Asker, EXT};
use super::{hub_with, wait_running};
use crate::support::{call_log, testserver_entry, TestHub};

async fn hub_with_confirm() -> TestHub {
    let rules = json!({"safety": {"rules": [
        {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}]}});
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), rules).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    hub
}

fn echo(id: u64, message: &str, answer: Option<(&str, Value)>) -> Value {
    let mut params = json!({"name": "t__echo", "arguments": {"message": message}});
    if let Some((state, response)) = answer {
        params["requestState"] = json!(state);
        params["inputResponses"] = json!({"toolhub_confirm": response});
    }
    request(id, "tools/call", params)
}

fn elicits() -> Value {
    json!({"elicitation": {}})
}

/// Ask: the first round's `InputRequiredResult`, checked; its state.
async fn ask(hub: &TestHub, id: u64) -> String {
    let m = message(&stateless_as(hub, echo(id, "danger", None), elicits()).await);
    let r = &m["result"];
    assert_eq!(r["resultType"], "input_required", "{m}");
    let q = &r["inputRequests"]["toolhub_confirm"];
    assert_eq!(q["method"], "elicitation/create", "{m}");
    let text = q["params"]["message"].as_str().unwrap_or("");
    assert!(
        text.contains("t__echo") && text.contains("dangerous echo"),
        "{m}"
    );
    conforms(&[("InputRequiredResult", r)]).await;
    r["requestState"]
        .as_str()
        .expect("requestState")
        .to_string()
}

fn echoes(hub: &TestHub) -> usize {
    call_log(&hub.path(), "t")
        .iter()
        .filter(|c| c["tool"] == "echo")
        .count()
}

#[tokio::test]
async fn a_confirm_rule_asks_a_stateless_client_by_input_required_result() {
    let hub = hub_with_confirm().await;
    let accept = json!({"action": "accept", "content": {"approve": true}});

    // Decline refuses, and the server never sees the call.
    let state = ask(&hub, 1).await;
    let no = echo(2, "danger", Some((&state, json!({"action": "decline"}))));
    let m = message(&stateless_as(&hub, no, elicits()).await);
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert_eq!(
        m["result"]["structuredContent"]["errorType"], "SAFETY_BLOCKED",
        "{m}"
    );
    assert!(m["result"].to_string().contains("declined"), "{m}");
    assert_eq!(echoes(&hub), 0);

    // Accept runs it, once.
    let state = ask(&hub, 3).await;
    let yes = echo(4, "danger", Some((&state, accept.clone())));
    let m = message(&stateless_as(&hub, yes.clone(), elicits()).await);
    assert_eq!(m["result"]["resultType"], "complete", "{m}");
    assert_eq!(m["result"]["content"][0]["text"], "danger", "{m}");
    assert_eq!(echoes(&hub), 1);

    // The same state again (a replay) is refused, and runs nothing.
    let mut replay = yes.clone();
    replay["id"] = json!(5);
    let m = message(&stateless_as(&hub, replay, elicits()).await);
    assert_eq!(m["error"]["code"], -32602, "{m}");
    assert!(
        m["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("requestState"),
        "{m}"
    );
    assert_eq!(echoes(&hub), 1);

    // A tampered state is refused.
    let state = ask(&hub, 6).await;
    let mut bad = state.clone().into_bytes();
    let i = bad.len() / 2;
    bad[i] = if bad[i] == b'x' { b'y' } else { b'x' };
    let bad = String::from_utf8(bad).expect("utf8");
    let m = message(
        &stateless_as(
            &hub,
            echo(7, "danger", Some((&bad, accept.clone()))),
            elicits(),
        )
        .await,
    );
    assert_eq!(m["error"]["code"], -32602, "{m}");
    // A state for other arguments is refused too (it is bound to the call).
    let other = echo(8, "danger!", Some((&state, accept.clone())));
    let m = message(&stateless_as(&hub, other, elicits()).await);
    assert_eq!(m["error"]["code"], -32602, "{m}");
    assert_eq!(echoes(&hub), 1);

    // A request that declared no elicitation cannot be asked: -32021.
    let r = stateless_as(&hub, echo(9, "danger", None), json!({})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let m = message(&r);
    assert_eq!(m["error"]["code"], -32021, "{m}");
    assert_eq!(
        m["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}}),
        "{m}"
    );

    // Calls the rule does not match run at once.
    let m = message(&stateless_as(&hub, echo(10, "harmless", None), json!({})).await);
    assert_eq!(m["result"]["content"][0]["text"], "harmless", "{m}");
}

/// A `requestState` is bound to the token's client and the view of the
/// request's path, not only to the `clientInfo` a request says (review
/// S11): a state minted for the main token at `/mcp` does not redeem for
/// the client `ext` at `/mcp/chat` nor for the main token at `/mcp/chat`,
/// though both send the same call and the same `clientInfo`; the person's
/// own retry still runs it, once.
#[tokio::test]
async fn a_request_state_redeems_only_for_the_token_and_view_it_was_minted_for() {
    let config = json!({
        "safety": {"rules": [{"tool": "echo", "match": {"message": "danger"},
            "action": "confirm", "reason": "dangerous echo"}]},
        "views": {"chat": {"tools": ["t__*"]}},
        "clients": {"ext": {"token": EXT, "views": ["chat"]}},
    });
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), config).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let token = hub.token.clone().expect("token");
    let person = Asker {
        token: &token,
        path: "/mcp",
        session: None,
    };
    let call = json!({"name": "t__echo", "arguments": {"message": "danger"}});
    let m = send(&hub, &person, 1, "tools/call", call.clone()).await;
    assert_eq!(m["result"]["resultType"], "input_required", "{m}");
    let state = m["result"]["requestState"].as_str().expect("state");
    let mut retry = call;
    retry["requestState"] = json!(state);
    retry["inputResponses"] =
        json!({"toolhub_confirm": {"action": "accept", "content": {"approve": true}}});
    let ext = Asker {
        token: EXT,
        path: "/mcp/chat",
        session: None,
    };
    let in_view = Asker {
        path: "/mcp/chat",
        ..person
    };
    for (who, other) in [("ext", &ext), ("the main token in view chat", &in_view)] {
        let m = send(&hub, other, 2, "tools/call", retry.clone()).await;
        assert_eq!(m["error"]["code"], -32602, "{who}: {m}");
        assert!(
            m["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("requestState"),
            "{who}: {m}"
        );
    }
    assert_eq!(echoes(&hub), 0, "a leaked state ran the call");
    let m = send(&hub, &person, 3, "tools/call", retry).await;
    assert_eq!(m["result"]["content"][0]["text"], "danger", "{m}");
    assert_eq!(echoes(&hub), 1);
}
