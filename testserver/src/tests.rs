//! Unit tests of the testserver's command line and dynamic tools.

use super::*;

fn argv(items: &[&str]) -> impl Iterator<Item = String> {
    items
        .iter()
        .map(|s| (*s).to_owned())
        .collect::<Vec<_>>()
        .into_iter()
}

#[test]
fn cli_parses_every_flag_and_repeats_extra_tool() {
    let cli = parse_cli(argv(&[
        "--name",
        "alpha",
        "--log",
        "/tmp/l",
        "--state-dir",
        "/tmp/s",
        "--extra-tool",
        "x",
        "--extra-tool",
        "y",
    ]))
    .unwrap();
    assert_eq!(cli.name, "alpha");
    assert_eq!(cli.log.as_deref(), Some(std::path::Path::new("/tmp/l")));
    assert_eq!(
        cli.state_dir.as_deref(),
        Some(std::path::Path::new("/tmp/s"))
    );
    assert_eq!(cli.extra_tools, vec!["x", "y"]);
}

#[test]
fn cli_rejects_missing_value_and_unknown_flag() {
    let e = parse_cli(argv(&["--name"])).unwrap_err();
    assert!(e.contains("--name needs a value"), "{e}");
    let e = parse_cli(argv(&["--bogus"])).unwrap_err();
    assert!(e.contains("unknown argument `--bogus`"), "{e}");
}

#[test]
fn extra_tool_clashing_with_builtin_is_refused() {
    let cli = Cli {
        name: "t".into(),
        extra_tools: vec!["echo".into()],
        ..Cli::default()
    };
    let e = TestServer::new(cli).err().unwrap();
    assert!(e.contains("clashes with a built-in tool"), "{e}");
}

#[test]
fn dynamic_tools_add_change_remove() {
    let server = TestServer::new(Cli {
        name: "t".into(),
        ..Cli::default()
    })
    .unwrap();
    let obj = |v: Value| v.as_object().cloned().unwrap();
    let add_args = obj(json!({"name": "dyn1"}));
    server
        .edit_dynamic("add_tool", &ToolArgs::new("add_tool", &add_args))
        .unwrap();
    assert!(server.get_tool("dyn1").is_some());
    assert!(server
        .edit_dynamic("add_tool", &ToolArgs::new("add_tool", &add_args))
        .is_err());
    let before = server.get_tool("dyn1").unwrap();
    let change = obj(json!({"name": "dyn1", "description": "new"}));
    server
        .edit_dynamic("change_tool", &ToolArgs::new("change_tool", &change))
        .unwrap();
    let after = server.get_tool("dyn1").unwrap();
    assert_eq!(after.description.as_deref(), Some("new"));
    assert_ne!(before.input_schema, after.input_schema);
    server
        .edit_dynamic("remove_tool", &ToolArgs::new("remove_tool", &add_args))
        .unwrap();
    assert!(server.get_tool("dyn1").is_none());
}
