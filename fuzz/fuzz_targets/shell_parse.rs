#![no_main]
//! `run_command` scripts are attacker-controlled text (a prompt-injected
//! model writes them): any text parses or is marked unreadable, never a
//! panic or a runaway; every command found holds something; and the
//! safety gate that reads the parse (`safety::check`) never panics either.

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

use serde_json::json;
use toolhub::config::SafetyConfig;
use toolhub::mcp::registry::ToolInfo;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let script = toolhub::shell::parse(&text);
    for cmd in &script.commands {
        assert!(
            !cmd.words.is_empty() || !cmd.redirects.is_empty() || !cmd.here_strings.is_empty(),
            "an empty command from {text:?}"
        );
    }
    // The parse is a function of the text.
    assert_eq!(script, toolhub::shell::parse(&text), "{text:?}");

    // Loaded once: only the gate is under test.
    static SAFETY: OnceLock<SafetyConfig> = OnceLock::new();
    let safety = SAFETY.get_or_init(|| {
        let loaded = toolhub::config::parse(
            r#"{"safety": {"rules": []}}"#,
            std::path::Path::new("/nonexistent/toolhub/config.json"),
        );
        match loaded {
            Ok(l) => l.config.safety,
            Err(e) => panic!("the fixed config does not load: {e}"),
        }
    });
    let info = ToolInfo {
        name: "run_command".into(),
        server: "hub".into(),
        qualified_name: "hub__run_command".into(),
        description: String::new(),
        input_schema: json!({}),
        annotations: None,
        extra: Default::default(),
    };
    let _ = toolhub::safety::check(
        safety,
        &info,
        &json!({ "command": text, "env": { "X": text } }),
    );
});
