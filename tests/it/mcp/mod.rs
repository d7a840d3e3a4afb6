//! `/mcp`: the aggregate as one MCP server, driven by the official
//! TypeScript SDK client (`tests/mcp/driver.mjs`).

mod aggregate;
mod client_conformance;
mod conformance;
mod direct;
pub(crate) mod driver;
mod era;
mod gate;
mod in_view;
mod limit;
mod mrtr;
mod mrtr_relay;
mod polling;
mod relay;
mod revision;
mod starting;
mod stdio;
mod task_caps;
mod task_owners;
mod task_restart;
mod tasks;

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{npm_bin, testserver_entry, Client, TestHub};
use driver::{text_of, Driver};

/// Wait (on the /ws event stream) until every server in `names` runs.
pub async fn wait_running(c: &mut Client, names: &[&str]) {
    for name in names {
        let h = c.request(json!({"type": "health_check"})).await;
        let up = h["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["name"] == *name && s["state"] == "running");
        if !up {
            let n = name.to_string();
            c.recv_where("server_status running", move |v| {
                v["type"] == "server_status" && v["name"] == n.as_str() && v["state"] == "running"
            })
            .await;
        }
    }
}

fn everything_and_filesystem(dir: &Path) -> Value {
    json!({
        "everything": {"command": npm_bin("mcp-server-everything"), "args": ["stdio"]},
        "filesystem": {"command": npm_bin("mcp-server-filesystem"),
                       "args": [dir.join("workspace").display().to_string()]},
    })
}

async fn hub_with(servers: impl FnOnce(&Path) -> Value, extra: Value) -> TestHub {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("workspace")).expect("workspace");
    let mut config = json!({"mcpServers": servers(dir.path())});
    for (k, v) in extra.as_object().into_iter().flatten() {
        config[k] = v.clone();
    }
    TestHub::start_in(dir, config).await
}

/// Send one raw HTTP/1.1 request (it should say `Connection: close`) and
/// read the reply to its end (bounded by `WAIT`); the reply as text.
pub async fn raw_http(hub: &TestHub, req: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(&hub.addr)
        .await
        .expect("connect");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(crate::support::WAIT, s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

fn tool_names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect()
}

#[tokio::test]
async fn mcp_lists_and_calls_tools_of_two_real_servers() {
    let hub = hub_with(everything_and_filesystem, json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["everything", "filesystem"]).await;
    let file = hub.path().join("workspace/a.txt");
    std::fs::write(&file, "alpha from the workspace").expect("write");

    let (mut d, info) = Driver::connect(&hub, json!({})).await;
    assert_eq!(info["serverInfo"]["name"], "toolhub", "{info}");
    assert!(
        info["capabilities"]["tools"]["listChanged"] == true,
        "{info}"
    );
    let names = tool_names(&d.ok(json!({"op": "listTools"})).await);
    for want in [
        "everything__echo",
        "filesystem__read_text_file",
        "hub__health_check",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }

    let r = d
        .call("everything__echo", json!({"message": "hi over mcp"}))
        .await;
    assert!(text_of(&r).contains("hi over mcp"), "{r}");
    assert_ne!(r["isError"], true, "{r}");
    let r = d
        .call(
            "filesystem__read_text_file",
            json!({"path": file.display().to_string()}),
        )
        .await;
    assert!(text_of(&r).contains("alpha from the workspace"), "{r}");

    // The calls went through the hub's call path: they are in its history.
    let h = d.call("hub__history", json!({"limit": 10})).await;
    let h = h["structuredContent"].to_string();
    assert!(h.contains("everything__echo") || h.contains("echo"), "{h}");
    assert!(h.contains("read_text_file"), "{h}");
}

#[tokio::test]
async fn mcp_failed_call_is_error_with_the_hub_error_object() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let (mut d, _) = Driver::connect(&hub, json!({})).await;
    let r = d
        .call(
            "t__fail",
            json!({"message": "ENOENT: no such file or directory, open '/x'"}),
        )
        .await;
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["errorType"], "NOT_FOUND", "{r}");
    assert_eq!(r["structuredContent"]["server"], "t", "{r}");
    let text = text_of(&r);
    assert!(
        text.contains("ENOENT") && text.contains("What to do:"),
        "{text}"
    );
    // An unknown tool is a failure the model can read, with a suggestion.
    let r = d.call("t__no_such_tool", json!({})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["errorType"], "TOOL_NOT_FOUND", "{r}");
    assert!(!r["structuredContent"]["suggestion"]
        .as_str()
        .unwrap_or("")
        .is_empty());
}

#[tokio::test]
async fn mcp_sessions_get_list_changed_when_the_aggregate_changes() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let (mut a, _) = Driver::connect(&hub, json!({})).await;
    let (mut b, _) = Driver::connect(&hub, json!({})).await;

    // A server's own tools/list_changed reaches every session.
    a.call("t__add_tool", json!({"name": "fresh"})).await;
    a.notification("notifications/tools/list_changed").await;
    b.notification("notifications/tools/list_changed").await;
    let names = tool_names(&b.ok(json!({"op": "listTools"})).await);
    assert!(names.iter().any(|n| n == "t__fresh"), "{names:?}");

    // So does a config change that adds a server.
    let path = hub.path().join("config.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    config["mcpServers"]["u"] = testserver_entry(&hub.path(), "u", &[]);
    crate::support::write_config(&path, &config);
    wait_running(&mut ws, &["u"]).await;
    a.notification("notifications/tools/list_changed").await;
    b.notification("notifications/tools/list_changed").await;
    let names = tool_names(&a.ok(json!({"op": "listTools"})).await);
    assert!(names.iter().any(|n| n == "u__echo"), "{names:?}");
}
