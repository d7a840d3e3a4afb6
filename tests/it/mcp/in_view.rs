//! `/mcp/<view>` serves resources, resource templates, prompts and
//! completion only from the servers that have a tool in the view (issue
//! 49.2): the client `ext`, whose view `chat` holds `conf`'s tools, lists
//! none of `everything`'s, and reading, subscribing to, getting or
//! completing one of them answers exactly as for one that does not exist.
//! The main token at `/mcp` still gets every server's.

use serde_json::{json, Value};

use super::driver::{mcp_url, Driver};
use super::{hub_with, wait_running};
use crate::support::{npm_bin, testserver_entry, TestHub};

const EXT: &str = "ext-token-0123456789abcdef";

async fn hub() -> TestHub {
    let hub = hub_with(
        |d| {
            json!({
                "conf": testserver_entry(d, "conf", &["--conformance"]),
                "everything": {"command": npm_bin("mcp-server-everything"), "args": ["stdio"]},
            })
        },
        json!({
            "views": {"chat": {"tools": ["hub__list_tools", "conf__*"]}},
            "clients": {"ext": {"token": EXT, "views": ["chat"]}},
        }),
    )
    .await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["conf", "everything"]).await;
    hub
}

fn items<'a>(list: &'a Value, key: &str) -> Vec<&'a Value> {
    list[key].as_array().into_iter().flatten().collect()
}

fn strings(list: &Value, key: &str, field: &str) -> Vec<String> {
    items(list, key)
        .iter()
        .filter_map(|i| i[field].as_str().map(String::from))
        .collect()
}

/// The error message of a refused command, with `name` put as `<it>`, so
/// the refusals of a real and of a made-up name compare equal.
fn refusal(answer: &Value, name: &str) -> String {
    assert_eq!(answer["ok"], false, "{answer}");
    answer["error"]["message"]
        .as_str()
        .unwrap_or("")
        .replace(name, "<it>")
}

#[tokio::test]
async fn a_view_serves_only_its_servers_resources_prompts_and_completion() {
    let hub = hub().await;
    let (mut main, _) = Driver::connect(&hub, json!({})).await;
    let mut ext = Driver::start().await;
    let url = format!("{}/chat", mcp_url(&hub));
    ext.ok(json!({"op": "connect", "url": url, "token": EXT}))
        .await;

    // The main token: both servers' items (what the view must not show).
    let all = main.ok(json!({"op": "listResources"})).await;
    let theirs: Vec<String> = strings(&all, "resources", "uri")
        .into_iter()
        .filter(|u| !u.starts_with("test://"))
        .collect();
    assert!(!theirs.is_empty(), "everything lists resources: {all}");
    let all_t = main.ok(json!({"op": "listResourceTemplates"})).await;
    let their_template = items(&all_t, "resourceTemplates")
        .into_iter()
        .find(|t| {
            !t["uriTemplate"]
                .as_str()
                .unwrap_or("")
                .starts_with("test://")
        })
        .cloned()
        .unwrap_or_else(|| panic!("everything lists a template: {all_t}"));
    let all_p = main.ok(json!({"op": "listPrompts"})).await;
    let their_prompt = items(&all_p, "prompts")
        .into_iter()
        .find(|p| {
            p["name"].as_str().unwrap_or("").starts_with("everything__")
                && p["arguments"].as_array().is_some_and(|a| !a.is_empty())
        })
        .cloned()
        .unwrap_or_else(|| panic!("everything lists a prompt with arguments: {all_p}"));
    let prompt_name = their_prompt["name"].as_str().unwrap_or("").to_string();
    let arg = their_prompt["arguments"][0]["name"].clone();
    let uri = theirs[0].clone();
    // ... and serves them.
    let r = main.ok(json!({"op": "readResource", "uri": uri})).await;
    assert!(
        r["contents"].as_array().is_some_and(|c| !c.is_empty()),
        "{r}"
    );
    let complete_theirs = json!({"op": "complete",
        "ref": {"type": "ref/prompt", "name": prompt_name},
        "argument": {"name": arg, "value": ""}});
    let c = main.ok(complete_theirs.clone()).await;
    assert!(c["completion"]["values"].is_array(), "{c}");

    // The view: conf's items only.
    let listed = ext.ok(json!({"op": "listResources"})).await;
    let uris = strings(&listed, "resources", "uri");
    assert!(uris.iter().any(|u| u == "test://static-text"), "{listed}");
    assert!(uris.iter().all(|u| u.starts_with("test://")), "{listed}");
    let listed = ext.ok(json!({"op": "listResourceTemplates"})).await;
    let templates = strings(&listed, "resourceTemplates", "uriTemplate");
    assert_eq!(templates, vec!["test://template/{id}/data"], "{listed}");
    let listed = ext.ok(json!({"op": "listPrompts"})).await;
    let prompts = strings(&listed, "prompts", "name");
    assert!(
        prompts.iter().any(|p| p == "conf__test_simple_prompt"),
        "{listed}"
    );
    assert!(prompts.iter().all(|p| p.starts_with("conf__")), "{listed}");
    let r = ext
        .ok(json!({"op": "readResource", "uri": "test://static-text"}))
        .await;
    assert_eq!(
        r["contents"][0]["text"], "This is the content of the static text resource.",
        "{r}"
    );

    // Another server's item answers as one that does not exist.
    let made_up = "nope://nothing-here";
    let unknown = refusal(
        &ext.request(json!({"op": "readResource", "uri": made_up}))
            .await,
        made_up,
    );
    assert!(
        unknown.contains("no server offers the resource"),
        "{unknown}"
    );
    let a = ext.request(json!({"op": "readResource", "uri": uri})).await;
    assert_eq!(refusal(&a, &uri), unknown, "{a}");
    let a = ext.request(json!({"op": "subscribe", "uri": uri})).await;
    assert_eq!(
        refusal(&a, &uri),
        refusal(
            &ext.request(json!({"op": "subscribe", "uri": made_up}))
                .await,
            made_up
        ),
        "{a}"
    );
    let unknown_prompt = refusal(
        &ext.request(json!({"op": "getPrompt", "name": "everything__made_up"}))
            .await,
        "everything__made_up",
    );
    assert!(
        unknown_prompt.contains("no prompt named"),
        "{unknown_prompt}"
    );
    let a = ext
        .request(json!({"op": "getPrompt", "name": prompt_name}))
        .await;
    assert_eq!(refusal(&a, &prompt_name), unknown_prompt, "{a}");
    let a = ext.request(complete_theirs).await;
    assert_eq!(refusal(&a, &prompt_name), unknown_prompt, "{a}");
    let template = their_template["uriTemplate"].as_str().unwrap_or("");
    let a = ext
        .request(json!({"op": "complete",
            "ref": {"type": "ref/resource", "uri": template},
            "argument": {"name": "id", "value": ""}}))
        .await;
    assert!(
        refusal(&a, template).contains("no server offers the resource"),
        "{a}"
    );
    // Its own server's prompt completes.
    let c = ext
        .ok(json!({"op": "complete",
            "ref": {"type": "ref/prompt", "name": "conf__test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "he"}}))
        .await;
    assert!(c["completion"]["values"].is_array(), "{c}");

    // The main token's aggregate is unchanged after all that.
    let again = main.ok(json!({"op": "listPrompts"})).await;
    assert!(
        strings(&again, "prompts", "name").contains(&prompt_name),
        "{again}"
    );
}
