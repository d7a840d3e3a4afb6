//! The tool registry, built-in tools and live tool-list sync.

use serde_json::json;

use crate::servers::wait_running;
use crate::support::{testserver_entry, TestHub};

#[tokio::test]
async fn shared_names_are_ambiguous_and_qualified_names_route_exactly() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {
            "a": testserver_entry(&p, "a", &["--extra-tool", "shared"]),
            "b": testserver_entry(&p, "b", &["--extra-tool", "shared"]),
        }}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "a").await;
    wait_running(&mut c, "b").await;
    let r = c.call("shared", json!({"message": "x"})).await;
    assert_eq!(r["error"]["errorType"], "AMBIGUOUS_TOOL", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("a__shared") && msg.contains("b__shared"),
        "{msg}"
    );
    let r = c.call("b__shared", json!({"message": "x"})).await;
    assert_eq!(r["result"]["server"], "b", "{r}");
    let r = c.call("a__shared", json!({"message": "x"})).await;
    assert_eq!(r["result"]["server"], "a", "{r}");
}

#[tokio::test]
async fn unknown_tool_gets_did_you_mean_and_disabled_servers_are_not_callable() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut off = testserver_entry(&p, "off", &[]);
    off["disabled"] = json!(true);
    let hub = TestHub::start_in(dir, json!({"mcpServers": {"off": off}})).await;
    let mut c = hub.connect().await;
    let r = c.call("reed_file", json!({})).await;
    assert_eq!(r["error"]["errorType"], "TOOL_NOT_FOUND");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("read_file"),
        "{r}"
    );
    let r = c.call("off__echo", json!({"message": "x"})).await;
    assert_eq!(r["success"], false);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("disabled"),
        "{r}"
    );
}

#[tokio::test]
async fn list_tools_has_qualified_names_and_a_stable_hash() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    let a = c.request(json!({"type": "list_tools"})).await;
    let b = c.request(json!({"type": "list_tools"})).await;
    assert_eq!(a["hash"], b["hash"]);
    let tools = a["tools"].as_array().expect("tools");
    let rf = tools
        .iter()
        .find(|t| t["qualifiedName"] == "hub__read_file")
        .expect("read_file");
    assert_eq!(rf["name"], "read_file");
    assert_eq!(rf["server"], "hub");
    assert!(rf["inputSchema"]["properties"].is_object());
    assert!(tools
        .iter()
        .any(|t| t["qualifiedName"] == "hub__health_check"));
    // The workspace tools say honestly what they do (the extension runs a
    // read-only tool without asking).
    let annotations = |name: &str| {
        tools
            .iter()
            .find(|t| t["qualifiedName"] == format!("hub__{name}"))
            .map(|t| t["annotations"].clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let read = json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false});
    assert_eq!(annotations("read_file"), read);
    assert_eq!(annotations("list_directory"), read);
    assert_eq!(
        annotations("write_file"),
        json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false})
    );
    assert_eq!(
        annotations("run_command"),
        json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
    );
}

#[tokio::test]
async fn builtin_workspace_tools_and_confinement() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    let r = c
        .call(
            "write_file",
            json!({"path": "notes/a.txt", "content": "hello"}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    let r = c.call("read_file", json!({"path": "notes/a.txt"})).await;
    assert!(r["result"].to_string().contains("hello"), "{r}");
    let r = c.call("list_directory", json!({"path": "notes"})).await;
    assert!(r["result"].to_string().contains("a.txt"), "{r}");
    let r = c
        .call("read_file", json!({"path": "../../etc/passwd"}))
        .await;
    assert_eq!(r["error"]["errorType"], "PERMISSION", "{r}");
    let r = c
        .call(
            "run_command",
            json!({"command": "echo hi && echo oops >&2"}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"]["stdout"], "hi\n");
    let r = c.call("run_command", json!({"command": "exit 3"})).await;
    assert_eq!(r["success"], false, "{r}");
    let r = c.request(json!({"type": "tool_call", "tool": "run_command", "params": {"command": "sleep 30"}, "timeout": 300, "retry": false})).await;
    assert_eq!(r["error"]["errorType"], "TIMEOUT", "{r}");
    let r = c.call("hub__health_check", json!({})).await;
    assert!(r["result"]["status"].is_string(), "{r}");
}

#[tokio::test]
async fn list_changed_and_schema_changes_reach_every_client() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])}}),
    )
    .await;
    let mut c = hub.connect().await;
    let mut other = hub.connect().await;
    wait_running(&mut c, "t").await;
    let r = c.call("t__add_tool", json!({"name": "fresh"})).await;
    assert_eq!(r["success"], true, "{r}");
    for client in [&mut c, &mut other] {
        let u = client
            .recv_where("tools_updated adding t__fresh", |v| {
                v["type"] == "tools_updated"
                    && v["added"]
                        .as_array()
                        .is_some_and(|a| a.contains(&json!("t__fresh")))
            })
            .await;
        assert!(u["hash"].is_string() && u["reason"].is_string(), "{u}");
    }
    c.call(
        "t__change_tool",
        json!({"name": "fresh", "description": "now different"}),
    )
    .await;
    c.recv_where("tools_updated changing t__fresh", |v| {
        v["type"] == "tools_updated"
            && v["changed"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("t__fresh")))
    })
    .await;
    let r = c.call("fresh", json!({"message": "m"})).await;
    assert_eq!(r["success"], true, "{r}");
    let r = c.request(json!({"type": "reload_tools"})).await;
    assert_eq!(r["type"], "tools");
    assert!(r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .any(|t| t["qualifiedName"] == "t__fresh"));
}
