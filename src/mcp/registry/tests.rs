//! Tests of the registry (kept beside it: registry.rs is near the file-size
//! limit). Naming and hashing details are tested in names.rs.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;

fn tool(name: &str) -> RawTool {
    RawTool {
        name: name.to_string(),
        description: Some(format!("{name} does things")),
        input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}}),
        annotations: None,
        extra: Default::default(),
    }
}

fn server(name: &str, tools: &[&str]) -> (String, Vec<RawTool>) {
    (name.to_string(), tools.iter().map(|t| tool(t)).collect())
}

fn snap(servers: Vec<(String, Vec<RawTool>)>) -> ToolSnapshot {
    ToolSnapshot::build(servers, "hub")
}

fn qualified(s: &ToolSnapshot) -> Vec<&str> {
    s.tools()
        .iter()
        .map(|t| t.qualified_name.as_str())
        .collect()
}

#[test]
fn build_sorts_by_qualified_name_and_fills_fields() {
    let s = snap(vec![
        server("fs", &["write_file", "read_file"]),
        server("api", &["get"]),
    ]);
    assert_eq!(
        qualified(&s),
        vec!["api__get", "fs__read_file", "fs__write_file"]
    );
    let t = &s.tools()[1];
    assert_eq!((t.server.as_str(), t.name.as_str()), ("fs", "read_file"));
    assert_eq!(t.description, "read_file does things");
    assert_eq!(s.len(), 3);
    assert_eq!(s.by_server("fs").len(), 2);
    assert!(s.by_server("nope").is_empty());
}

#[test]
fn tool_info_serialises_as_the_wire_expects() {
    let mut raw = tool("t");
    raw.description = None;
    let s = snap(vec![("a".into(), vec![raw])]);
    let v = serde_json::to_value(&s.tools()[0]).unwrap();
    assert_eq!(
        v,
        json!({"name": "t", "server": "a", "qualifiedName": "a__t", "description": "",
               "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}})
    );
    let mut annotated = tool("t");
    annotated.annotations = Some(json!({"readOnlyHint": true}));
    let s = snap(vec![("a".into(), vec![annotated])]);
    let v = serde_json::to_value(&s.tools()[0]).unwrap();
    assert_eq!(v["annotations"], json!({"readOnlyHint": true}));
}

#[test]
fn duplicate_tool_in_one_server_keeps_the_first() {
    let mut second = tool("t");
    second.description = Some("second".into());
    let s = snap(vec![("a".into(), vec![tool("t"), second])]);
    assert_eq!(s.len(), 1);
    assert_eq!(s.tools()[0].description, "t does things");
}

#[test]
fn resolve_qualified_and_unique_bare_names() {
    let s = snap(vec![server("fs", &["read_file"]), server("api", &["get"])]);
    assert_eq!(
        s.resolve("fs__read_file").unwrap().qualified_name,
        "fs__read_file"
    );
    assert_eq!(
        s.resolve("read_file").unwrap().qualified_name,
        "fs__read_file"
    );
    assert_eq!(s.resolve("get").unwrap().server, "api");
}

#[test]
fn bare_name_on_two_external_servers_is_ambiguous() {
    let s = snap(vec![server("b", &["echo"]), server("a", &["echo"])]);
    let e = s.resolve("echo").unwrap_err();
    assert_eq!(e.error_type, ErrorType::AmbiguousTool);
    assert_eq!(
        e.message,
        "tool \"echo\" is offered by several servers: a__echo, b__echo; \
         call it by its qualified name"
    );
    assert!(e.suggestion.contains("a__echo"), "{}", e.suggestion);
    assert_eq!(e.tool.as_deref(), Some("echo"));
    assert!(!e.recoverable);
    // Qualified names still work.
    assert_eq!(s.resolve("b__echo").unwrap().server, "b");
}

#[test]
fn a_bare_name_shared_with_the_builtin_is_ambiguous() {
    let s = snap(vec![
        server("hub", &["read_file", "run"]),
        server("fs", &["read_file"]),
    ]);
    let e = s.resolve("read_file").unwrap_err();
    assert_eq!(e.error_type, ErrorType::AmbiguousTool);
    assert!(
        e.message.contains("fs__read_file, hub__read_file"),
        "{}",
        e.message
    );
    // Both stay reachable by their qualified names.
    assert_eq!(s.resolve("hub__read_file").unwrap().server, "hub");
    assert_eq!(s.resolve("fs__read_file").unwrap().server, "fs");
    // A built-in alone is found by its bare name.
    assert_eq!(s.resolve("run").unwrap().server, "hub");
    assert_eq!(
        s.ambiguous(),
        vec![Ambiguity {
            name: "read_file".into(),
            tools: vec!["fs__read_file".into(), "hub__read_file".into()],
        }]
    );
}

#[test]
fn a_server_arriving_with_a_builtin_name_is_reported_newly_ambiguous() {
    let before = snap(vec![server("hub", &["read_file", "run"])]);
    assert_eq!(before.resolve("read_file").unwrap().server, "hub");
    let after = snap(vec![
        server("hub", &["read_file", "run"]),
        server("fs", &["read_file", "read_text_file"]),
    ]);
    let newly = before.newly_ambiguous(&after);
    assert_eq!(newly.len(), 1, "{newly:?}");
    assert_eq!(newly[0].name, "read_file");
    assert_eq!(newly[0].tools, vec!["fs__read_file", "hub__read_file"]);
    // Already ambiguous before: not news.
    assert!(after.newly_ambiguous(&after).is_empty());
}

#[test]
fn two_externals_plus_builtin_is_ambiguous_and_lists_all() {
    let s = snap(vec![
        server("hub", &["echo"]),
        server("a", &["echo"]),
        server("b", &["echo"]),
    ]);
    let e = s.resolve("echo").unwrap_err();
    assert_eq!(e.error_type, ErrorType::AmbiguousTool);
    assert!(
        e.message.contains("a__echo, b__echo, hub__echo"),
        "{}",
        e.message
    );
}

#[test]
fn builtin_server_name_is_a_parameter() {
    let s = ToolSnapshot::build(vec![server("core", &["x"])], "core");
    assert_eq!(s.resolve("x").unwrap().server, "core");
    assert_eq!(s.builtin_server(), "core");
}

#[test]
fn not_found_suggests_near_names() {
    let s = snap(vec![
        server("fs", &["read_file", "write_file"]),
        server("a", &["echo"]),
    ]);
    let e = s.resolve("read_fil").unwrap_err();
    assert_eq!(e.error_type, ErrorType::ToolNotFound);
    assert_eq!(
        e.message,
        "no tool named \"read_fil\"; did you mean \"read_file\"?"
    );
    assert_eq!(e.suggestion, "call list_tools to see the 3 available tools");
    assert_eq!(e.tool.as_deref(), Some("read_fil"));

    let e = s.resolve("fs__raed_file").unwrap_err();
    assert!(
        e.message.contains("did you mean \"fs__read_file\""),
        "{}",
        e.message
    );

    let e = s.resolve("completely_different").unwrap_err();
    assert_eq!(e.message, "no tool named \"completely_different\"");
}

#[test]
fn not_found_hint_counts_tools() {
    let e = ToolSnapshot::empty("hub").resolve("x").unwrap_err();
    assert!(e.suggestion.contains("health_check"), "{}", e.suggestion);
    let e = snap(vec![server("a", &["one"])])
        .resolve("zzz")
        .unwrap_err();
    assert_eq!(e.suggestion, "call list_tools to see the 1 available tool");
}

#[test]
fn dotted_or_slashed_qualified_name_points_at_qualified_form() {
    let s = snap(vec![server("fs", &["read_file"])]);
    for typed in ["fs.read_file", "fs/read_file"] {
        let e = s.resolve(typed).unwrap_err();
        assert_eq!(e.error_type, ErrorType::ToolNotFound);
        assert!(
            e.message.contains("did you mean \"fs__read_file\"?"),
            "{}",
            e.message
        );
        assert_eq!(e.suggestion, "call it as \"fs__read_file\"");
        assert_eq!(e.server.as_deref(), Some("fs"));
    }
}

#[test]
fn a_tool_whose_own_name_has_a_dot_resolves_bare() {
    let s = snap(vec![server("fs", &["read.file"])]);
    let t = s.resolve("read.file").unwrap();
    assert_eq!(t.server, "fs");
    assert!(t.qualified_name.starts_with("fs__read_file_"));
    // And `server.tool` with a dotted tool suggests its (sanitised) name.
    let e = s.resolve("fs.read.file").unwrap_err();
    assert!(e.message.contains(&t.qualified_name), "{}", e.message);
}

fn unavailable(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(s, r)| (s.to_string(), r.to_string()))
        .collect()
}

#[test]
fn disabled_server_is_explained() {
    let s = snap(vec![server("fs", &["read_file"])])
        .with_unavailable(unavailable(&[("browser", "disabled")]));
    let e = s.resolve("browser__click").unwrap_err();
    assert_eq!(e.error_type, ErrorType::ToolNotFound);
    assert!(
        e.message.contains(
            "server \"browser\" is disabled in config.json (set \"disabled\": false to enable it)"
        ),
        "{}",
        e.message
    );
    assert_eq!(e.server.as_deref(), Some("browser"));
    assert_eq!(e.tool.as_deref(), Some("browser__click"));
    // `browser.click` is the same mistake plus the separator.
    let e = s.resolve("browser.click").unwrap_err();
    assert!(e.message.contains("is disabled"), "{}", e.message);
}

#[test]
fn down_server_gives_server_unavailable() {
    let s = snap(vec![server("fs", &["read_file"])])
        .with_unavailable(unavailable(&[("browser", "down: exited with code 1")]));
    let e = s.resolve("browser__click").unwrap_err();
    assert_eq!(e.error_type, ErrorType::ServerUnavailable);
    assert!(e.recoverable);
    assert_eq!(
        e.message,
        "cannot call \"browser__click\": server \"browser\" is down: exited with code 1"
    );
    assert_eq!(e.server.as_deref(), Some("browser"));
    // The unavailable list does not hide tools that are present, nor the hash.
    let plain = snap(vec![server("fs", &["read_file"])]);
    assert_eq!(s.hash(), plain.hash());
    assert!(s.resolve("fs__read_file").is_ok());
}

#[test]
fn longest_unavailable_server_prefix_wins() {
    let s = ToolSnapshot::empty("hub").with_unavailable(unavailable(&[
        ("a", "disabled"),
        ("a__b", "down: restarting"),
    ]));
    let e = s.resolve("a__b__c").unwrap_err();
    assert_eq!(e.server.as_deref(), Some("a__b"));
    assert_eq!(e.error_type, ErrorType::ServerUnavailable);
    // A name merely starting like a server is not that server's tool.
    let e = s.resolve("ab__c").unwrap_err();
    assert_eq!(e.server, None);
}

#[test]
fn sanitised_names_resolve_and_map_back_exactly() {
    let long = "x".repeat(100);
    let s = snap(vec![server("fs", &["read.file", "lire_fiché", &long])]);
    let re = regex::Regex::new("^[A-Za-z0-9_-]{1,64}$").unwrap();
    for t in s.tools() {
        assert!(re.is_match(&t.qualified_name), "{}", t.qualified_name);
        let back = s.resolve(&t.qualified_name).unwrap();
        assert_eq!(
            (back.server.as_str(), back.name.as_str()),
            (t.server.as_str(), t.name.as_str())
        );
        assert_eq!(
            s.lookup(&t.server, &t.name).unwrap().qualified_name,
            t.qualified_name
        );
    }
    let names: Vec<&str> = s.tools().iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"lire_fiché") && names.contains(&long.as_str()));
}

#[test]
fn hash_ignores_server_order_and_catches_schema_changes() {
    let a = snap(vec![
        server("fs", &["read_file", "write_file"]),
        server("api", &["get"]),
    ]);
    let b = snap(vec![
        server("api", &["get"]),
        server("fs", &["write_file", "read_file"]),
    ]);
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.hash().len(), 16);
    assert!(a.hash().chars().all(|c| c.is_ascii_hexdigit()));

    let mut changed = server("fs", &["read_file", "write_file"]);
    changed.1[0].input_schema = json!({"type": "object", "properties": {"y": {"type": "string"}}});
    let c = snap(vec![changed, server("api", &["get"])]);
    assert_ne!(a.hash(), c.hash());
}

#[test]
fn hash_ignores_key_order_inside_schemas() {
    let mut x = tool("t");
    x.input_schema =
        serde_json::from_str(r#"{"type":"object","required":[],"properties":{}}"#).unwrap();
    let mut y = tool("t");
    y.input_schema =
        serde_json::from_str(r#"{"properties":{},"required":[],"type":"object"}"#).unwrap();
    let hx = snap(vec![("a".into(), vec![x])]).hash().to_string();
    let hy = snap(vec![("a".into(), vec![y])]).hash().to_string();
    assert_eq!(hx, hy);
}

#[test]
fn diff_reports_added_removed_changed() {
    let old = snap(vec![
        server("fs", &["read_file", "write_file"]),
        server("a", &["echo"]),
    ]);
    let mut fs = server("fs", &["read_file", "list_dir"]);
    fs.1[0].description = Some("now different".into());
    let mut a = server("a", &["echo"]);
    a.1[0].annotations = Some(json!({"readOnlyHint": true}));
    let new = snap(vec![fs, a, server("b", &["ping"])]);
    let d = old.diff(&new);
    assert_eq!(d.added, vec!["b__ping", "fs__list_dir"]);
    assert_eq!(d.removed, vec!["fs__write_file"]);
    assert_eq!(d.changed, vec!["a__echo", "fs__read_file"]);
    assert!(!d.is_empty());
    assert!(old.diff(&old.clone()).is_empty());
    assert_eq!(
        serde_json::to_value(&d).unwrap()["removed"],
        Value::from(vec!["fs__write_file"])
    );
}
