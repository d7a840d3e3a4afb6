use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::config::views::Rename;
use crate::mcp::registry::RawTool;

fn raw(name: &str, description: &str) -> RawTool {
    RawTool {
        name: name.into(),
        description: Some(description.into()),
        input_schema: json!({"type": "object"}),
        annotations: Some(json!({"readOnlyHint": true})),
        ..Default::default()
    }
}

fn all() -> ToolSnapshot {
    ToolSnapshot::build(
        vec![
            (
                "hub".to_string(),
                vec![raw("read_file", "Read."), raw("write_file", "Write.")],
            ),
            (
                "pw".to_string(),
                vec![
                    raw("navigate", "Go to a URL."),
                    raw("install", "Install a browser."),
                    raw("read_file", "Another read."),
                ],
            ),
        ],
        "hub",
    )
}

fn chat() -> ViewSpec {
    let mut rename = BTreeMap::new();
    rename.insert(
        "pw__navigate".to_string(),
        Rename {
            name: Some("open_page".into()),
            description: Some("Open a page.".into()),
            annotations: Some(
                json!({"destructiveHint": false})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        },
    );
    ViewSpec {
        name: "chat".into(),
        tools: Some(vec!["hub__read_file".into(), "pw__*".into()]),
        hide: vec!["pw__install".into()],
        rename,
        discovery: false,
    }
}

#[test]
fn a_view_holds_its_tools_under_its_names() {
    let v = ViewTools::project(&chat(), &all());
    let names: Vec<&str> = v
        .tools()
        .iter()
        .map(|t| t.qualified_name.as_str())
        .collect();
    assert_eq!(names, ["hub__read_file", "open_page", "pw__read_file"]);
    let open = v.presented("open_page").expect("renamed");
    assert_eq!(open.description, "Open a page.");
    assert_eq!(
        open.annotations,
        Some(json!({"readOnlyHint": true, "destructiveHint": false}))
    );
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    // The renamed tool maps back; the real name of a member works too.
    assert_eq!(
        v.resolve("open_page").expect("ok").qualified_name,
        "pw__navigate"
    );
    assert_eq!(
        v.resolve("pw__navigate").expect("ok").qualified_name,
        "pw__navigate"
    );
    assert_eq!(v.shown("pw__navigate"), Some("open_page"));
}

#[test]
fn outside_the_view_is_unknown_and_bare_names_are_judged_within_it() {
    let v = ViewTools::project(&chat(), &all());
    for hidden in ["pw__install", "hub__write_file", "write_file", "install"] {
        let e = v.resolve(hidden).expect_err(hidden);
        assert_eq!(e.error_type, ErrorType::ToolNotFound, "{hidden}");
        assert!(e.message.contains("in view \"chat\""), "{}", e.message);
    }
    // read_file is offered by two servers in the view: ambiguous there.
    let e = v.resolve("read_file").expect_err("ambiguous");
    assert_eq!(e.error_type, ErrorType::AmbiguousTool);
    // did-you-mean only among the view's tools.
    let e = v.resolve("write_fil").expect_err("unknown");
    assert!(!e.message.contains("write_file"), "{}", e.message);
    let e = v.resolve("open_pag").expect_err("unknown");
    assert!(e.message.contains("open_page"), "{}", e.message);
    assert_eq!(v.shown("pw__install"), None);
}

#[test]
fn a_rename_onto_a_taken_name_is_reported_not_applied() {
    let mut spec = chat();
    spec.rename.insert(
        "pw__read_file".into(),
        Rename {
            name: Some("hub__read_file".into()),
            ..Default::default()
        },
    );
    let v = ViewTools::project(&spec, &all());
    assert_eq!(v.tools().len(), 3);
    assert!(v.problems[0].contains("not renamed"), "{:?}", v.problems);
}

#[test]
fn discovery_lists_the_meta_tools() {
    let mut snap_tools = vec![raw("read_file", "Read.")];
    for t in DISCOVERY_TOOLS {
        snap_tools.push(raw(t.trim_start_matches("hub__"), "meta"));
    }
    let all = ToolSnapshot::build(vec![("hub".to_string(), snap_tools)], "hub");
    let spec = ViewSpec {
        name: "agent".into(),
        tools: Some(vec!["hub__read_file".into()]),
        discovery: true,
        ..Default::default()
    };
    let v = ViewTools::project(&spec, &all);
    let listed: Vec<String> = v
        .listed()
        .iter()
        .map(|t| t.qualified_name.clone())
        .collect();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(v.resolve("hub__read_file").is_ok());
}
