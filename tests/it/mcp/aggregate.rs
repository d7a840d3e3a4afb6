//! What `/mcp` lists is the servers' own definitions: a tool's `title`,
//! `outputSchema`, `annotations`, `icons` and `_meta` are passed through
//! (also in `/ws` `list_tools`), and a tool with an `outputSchema` answers
//! what the official TypeScript SDK client accepts, failures included.
//! Lists come in pages of `server.mcpPageSize`, and the SDK client follows
//! their cursors.

use serde_json::{json, Value};

use super::driver::{text_of, Driver};
use super::{hub_with, wait_running};
use crate::support::testserver_entry;

fn find<'a>(tools: &'a Value, name: &str) -> &'a Value {
    tools
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == name || t["qualifiedName"] == name)
        .unwrap_or_else(|| panic!("{name} not listed in {tools}"))
}

#[tokio::test]
async fn tools_list_passes_title_output_schema_annotations_icons_and_meta_through() {
    let hub = hub_with(|d| json!({"t": testserver_entry(d, "t", &[])}), json!({})).await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;

    let (mut d, _) = Driver::connect(&hub, json!({})).await;
    let listed = d.ok(json!({"op": "listTools"})).await;
    let add = find(&listed["tools"], "t__add");
    assert_eq!(add["title"], "Add two numbers", "{add}");
    assert_eq!(
        add["outputSchema"],
        json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}),
        "{add}"
    );
    assert_eq!(
        add["icons"],
        json!([{"src": "https://example.com/add.png", "mimeType": "image/png", "sizes": ["48x48"]}]),
        "{add}"
    );
    assert_eq!(add["_meta"], json!({"example.com/arity": 2}), "{add}");
    let echo = find(&listed["tools"], "t__echo");
    assert_eq!(echo["annotations"]["readOnlyHint"], true, "{echo}");
    assert!(echo.get("outputSchema").is_none(), "{echo}");

    // The SDK client validates structuredContent against the outputSchema
    // it listed: the server's own result passes.
    let r = d.call("t__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["structuredContent"], json!({"sum": 5}), "{r}");

    // A failure of such a tool must not make the client throw it away: the
    // hub's error object is in _meta, not in structuredContent (where it
    // would fail the schema), and the text says what to do.
    let r = d.call("t__add", json!({"a": "two", "b": 3})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(r.get("structuredContent").is_none(), "{r}");
    let error = &r["_meta"]["toolhub/error"];
    assert_eq!(error["errorType"], "INVALID_PARAMS", "{r}");
    assert_eq!(error["server"], "t", "{r}");
    assert!(text_of(&r).contains("What to do:"), "{r}");
    // A tool without an outputSchema keeps the error in structuredContent.
    let r = d.call("t__fail", json!({"message": "boom"})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(r["structuredContent"]["errorType"].is_string(), "{r}");

    // /ws list_tools carries the same definitions.
    let tools = ws.request(json!({"type": "list_tools"})).await;
    let add = find(&tools["tools"], "t__add");
    assert_eq!(add["title"], "Add two numbers", "{add}");
    assert_eq!(add["outputSchema"]["required"], json!(["sum"]), "{add}");
    assert_eq!(
        add["icons"][0]["src"], "https://example.com/add.png",
        "{add}"
    );
    assert_eq!(add["_meta"]["example.com/arity"], 2, "{add}");
}

/// Every item of every page of a list, by name (or uri); asserts that no
/// page holds more than `size` items and that only the last has no cursor.
async fn paged(d: &mut Driver, list: &str, key: &str, size: usize) -> (usize, Vec<String>) {
    let r = d.ok(json!({"op": "listPaged", "list": list})).await;
    let pages = r["pages"].as_array().cloned().unwrap_or_default();
    let mut names = Vec::new();
    for (i, p) in pages.iter().enumerate() {
        let items = p[list].as_array().cloned().unwrap_or_default();
        assert!(items.len() <= size, "{list} page {i}: {p}");
        let last = i + 1 == pages.len();
        assert_eq!(p["nextCursor"].is_string(), !last, "{list} page {i}: {p}");
        names.extend(
            items
                .iter()
                .map(|t| t[key].as_str().unwrap_or("").to_string()),
        );
    }
    (pages.len(), names)
}

#[tokio::test]
async fn lists_are_paged_by_mcp_page_size_and_the_sdk_client_follows_the_cursors() {
    let hub = hub_with(
        |d| json!({"t": testserver_entry(d, "t", &["--conformance"])}),
        json!({"server": {"mcpPageSize": 2}}),
    )
    .await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["t"]).await;
    let (mut d, _) = Driver::connect(&hub, json!({})).await;

    // Tools: every tool once, in pages of two.
    let (pages, names) = paged(&mut d, "tools", "name", 2).await;
    let all = ws.request(json!({"type": "list_tools"})).await;
    let count = all["tools"].as_array().map_or(0, Vec::len);
    assert!(count > 4, "{all}");
    assert_eq!(names.len(), count, "{names:?}");
    assert_eq!(pages, count.div_ceil(2));
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "an item listed twice: {names:?}");
    assert!(names.iter().any(|n| n == "t__add"), "{names:?}");
    // A tool listed on any page is called like any other.
    let r = d.call("t__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["structuredContent"]["sum"], 3, "{r}");

    // Prompts, resources and templates page the same way.
    let (pages, prompts) = paged(&mut d, "prompts", "name", 2).await;
    assert!(prompts.len() >= 3 && pages >= 2, "{prompts:?}");
    assert!(
        prompts.iter().any(|p| p == "t__test_simple_prompt"),
        "{prompts:?}"
    );
    let (pages, uris) = paged(&mut d, "resources", "uri", 2).await;
    assert!(uris.len() >= 3 && pages >= 2, "{uris:?}");
    let (_, templates) = paged(&mut d, "resourceTemplates", "uriTemplate", 2).await;
    assert!(!templates.is_empty(), "{templates:?}");

    // A cursor the hub did not give is invalid params, saying what to do.
    let a = d
        .request(json!({"op": "listPaged", "list": "tools", "cursor": "bm90LWEtY3Vyc29y"}))
        .await;
    assert_eq!(a["ok"], false, "{a}");
    let message = a["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("without a cursor"), "{a}");
}
