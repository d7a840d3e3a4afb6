//! The first lists after start-up: a client that connects while a server
//! is still starting gets the whole aggregate (its list waits for the
//! server), never a partial one passed off as whole.

use serde_json::{json, Value};

use super::hub_with;
use crate::mcp::driver::Driver;
use crate::support::{testserver_entry, Client};

async fn state_of(c: &mut Client, server: &str) -> Value {
    let h = c.request(json!({"type": "health_check"})).await;
    h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == server)
        .map(|s| s["state"].clone())
        .unwrap_or(Value::Null)
}

fn names(tools: &Value, key: &str) -> Vec<String> {
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t[key].as_str().map(String::from))
        .collect()
}

#[tokio::test]
async fn the_first_lists_wait_for_a_server_still_starting() {
    let hub = hub_with(
        |d| {
            json!({
                "t": testserver_entry(d, "t", &[]),
                "late": testserver_entry(d, "late", &["--start-delay-ms", "6000"]),
            })
        },
        json!({}),
    )
    .await;
    // /ws: asked while `late` is starting, the list has its tools.
    let mut ws = hub.connect().await;
    assert_eq!(state_of(&mut ws, "late").await, "starting");
    let listed = ws.request(json!({"type": "list_tools"})).await;
    let q = names(&listed["tools"], "qualifiedName");
    assert!(q.iter().any(|n| n == "late__echo"), "{q:?}");
    assert!(listed.get("starting").is_none(), "{listed}");

    // /mcp: a second hub, its first tools/list from the official SDK client.
    let hub = hub_with(
        |d| {
            json!({
                "t": testserver_entry(d, "t", &[]),
                "late": testserver_entry(d, "late", &["--start-delay-ms", "6000"]),
            })
        },
        json!({}),
    )
    .await;
    let mut ws = hub.connect().await;
    let (mut d, _) = Driver::connect(&hub, json!({})).await;
    assert_eq!(state_of(&mut ws, "late").await, "starting");
    let listed = d.ok(json!({"op": "listTools"})).await;
    let n = names(&listed["tools"], "name");
    assert!(n.iter().any(|n| n == "late__echo"), "{n:?}");
    assert!(n.iter().any(|n| n == "t__echo"), "{n:?}");
    assert!(
        listed["_meta"].get("toolhub/starting").is_none(),
        "{}",
        listed["_meta"]
    );
}
