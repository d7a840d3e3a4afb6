//! A view over a real npm server (@modelcontextprotocol/server-filesystem):
//! `/ws/<view>` and `/mcp/<view>` list exactly the view's tools, renamed
//! where asked; the renamed tool runs and history names both names; a tool
//! outside the view is TOOL_NOT_FOUND on a single call, a batch step and
//! an MCP `tools/call`, and never runs (its file is never written).

use serde_json::{json, Value};

use crate::mcp::driver::{mcp_url, Driver};
use crate::support::{npm_bin, TestHub};

const TOKEN: &str = "reader-token-0123456789abcdef";

fn names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["qualifiedName"].as_str().or(t["name"].as_str()))
        .map(String::from)
        .collect();
    n.sort();
    n
}

#[tokio::test]
async fn a_view_over_the_filesystem_server_holds_on_every_path() {
    let dir = tempfile::tempdir().expect("dir");
    let ws = dir.path().join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    std::fs::write(ws.join("a.txt"), "alpha").expect("a.txt");
    let cfg = json!({
        "mcpServers": {"filesystem": {"command": npm_bin("mcp-server-filesystem"),
            "args": [ws.display().to_string()]}},
        "views": {"reader": {
            "tools": ["filesystem__read_text_file", "filesystem__list_directory"],
            "rename": {"filesystem__read_text_file": {"name": "read", "description": "Read a text file."}}
        }},
        "clients": {"reader": {"token": TOKEN, "views": ["reader"]}}
    });
    let hub = TestHub::start_in(dir, cfg).await;
    let mut main = hub.connect().await;
    crate::mcp::wait_running(&mut main, &["filesystem"]).await;
    let mut c = hub.connect_at("/ws/reader", TOKEN).await.expect("reader");

    let list = c.request(json!({"type": "list_tools"})).await;
    assert_eq!(
        names(&list),
        ["filesystem__list_directory", "read"],
        "{list}"
    );
    let read = list["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["qualifiedName"] == "read")
        .cloned()
        .unwrap_or_default();
    assert_eq!(read["description"], "Read a text file.");

    let file = ws.join("a.txt").display().to_string();
    let r = c.call("read", json!({"path": file})).await;
    assert_eq!(r["success"], true, "{r}");
    assert!(r.to_string().contains("alpha"), "{r}");
    assert_eq!(r["realTool"], "filesystem__read_text_file", "{r}");

    // Outside the view, by any path: unknown, and nothing is written.
    let target = ws.join("b.txt");
    let write = json!({"path": target.display().to_string(), "content": "x"});
    for name in [
        "filesystem__write_file",
        "write_file",
        "filesystem__read_text_file__x",
    ] {
        let r = c.call(name, write.clone()).await;
        assert_eq!(r["error"]["errorType"], "TOOL_NOT_FOUND", "{name}: {r}");
    }
    let b = c
        .request(json!({"type": "tool_batch", "steps": [
            {"tool": "read", "params": {"path": file}},
            {"tool": "filesystem__write_file", "params": write}]}))
        .await;
    assert_eq!(b["type"], "error", "{b}");
    let mut d = Driver::start().await;
    let url = format!("{}/reader", mcp_url(&hub));
    d.ok(json!({"op": "connect", "url": url, "token": TOKEN}))
        .await;
    let listed = d.ok(json!({"op": "listTools"})).await;
    assert_eq!(
        names(&listed),
        ["filesystem__list_directory", "read"],
        "{listed}"
    );
    let r = d.call("filesystem__write_file", write.clone()).await;
    assert_eq!(r["isError"], true, "{r}");
    let r = d.call("read", json!({"path": file})).await;
    assert!(r.to_string().contains("alpha"), "{r}");
    assert!(!target.exists(), "a tool outside the view wrote its file");

    // History names the view's name, the real tool and the client.
    let h = main.request(json!({"type": "history", "limit": 50})).await;
    let reads: Vec<&Value> = h["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["tool"] == "read")
        .collect();
    assert!(reads.len() >= 2, "{h}");
    for e in reads {
        assert_eq!(e["realTool"], "filesystem__read_text_file", "{e}");
        assert_eq!(e["client"], "reader", "{e}");
        assert_eq!(e["view"], "reader", "{e}");
    }
}
