//! The extension's instructions for the AI, measured on the shipped
//! config.json with its two servers (filesystem and playwright) turned on:
//! the whole aggregate against a discovery view (issue 40.4), built by the
//! extension's own `instructions.js` from what the hub lists.

use serde_json::{json, Value};

use crate::playwright::playwright_entry;
use crate::support::{npm_bin, TestHub};

/// The shipped config.json, its servers on and run from the test's npm
/// packages, with a discovery view `agent` added.
fn shipped(dir: &std::path::Path) -> Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("config.json")).expect("config.json");
    let mut cfg: Value = serde_json::from_str(&text).expect("config.json is JSON");
    let fs = &mut cfg["mcpServers"]["filesystem"];
    fs["command"] = json!(npm_bin("mcp-server-filesystem"));
    fs["args"] = json!([dir.join("workspace").display().to_string()]);
    fs["disabled"] = json!(false);
    let pw = &mut cfg["mcpServers"]["playwright"];
    let entry = playwright_entry(&dir.join("pw-out"), "/usr/bin/chromium");
    pw["command"] = entry["command"].clone();
    pw["args"] = entry["args"].clone();
    pw["disabled"] = json!(false);
    cfg["views"] = json!({"agent": {"discovery": true}});
    for k in ["server", "builtin", "taskEngine", "recording"] {
        if let Some(o) = cfg.as_object_mut() {
            o.remove(k);
        }
    }
    cfg
}

/// The instructions `instructions.js` builds from a `list_tools` reply.
async fn instructions(list: &Value) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = format!(
        "const I = require({:?}); let s = ''; process.stdin.on('data', d => s += d); \
         process.stdin.on('end', () => {{ const l = JSON.parse(s); \
         process.stdout.write(I.build(l.tools, {{}}, () => 'ask', l.catalog || null)); }});",
        root.join("extension/instructions.js").display().to_string()
    );
    let mut child = tokio::process::Command::new("node")
        .arg("-e")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("node");
    let mut stdin = child.stdin.take().expect("stdin");
    let body = list.to_string();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, body.as_bytes())
        .await
        .expect("write");
    drop(stdin);
    let out = child.wait_with_output().await.expect("node ran");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test]
async fn a_discovery_views_instructions_stay_small_on_the_shipped_config() {
    let dir = tempfile::tempdir().expect("dir");
    let cfg = shipped(dir.path());
    std::fs::create_dir_all(dir.path().join("workspace")).expect("workspace");
    let hub = TestHub::start_in(dir, cfg).await;
    let mut c = hub.connect().await;
    crate::mcp::wait_running(&mut c, &["filesystem", "playwright"]).await;
    let whole = c.request(json!({"type": "list_tools"})).await;
    let token = hub.token.clone().expect("token");
    let mut a = hub.connect_at("/ws/agent", &token).await.expect("agent");
    let view = a.request(json!({"type": "list_tools"})).await;
    let catalog = view["catalog"].as_array().cloned().unwrap_or_default();
    let all = whole["tools"].as_array().map_or(0, Vec::len);
    // Every tool but the three meta-tools is in the catalog, by name.
    assert_eq!(catalog.len() + 3, all, "{view}");
    let (full, small) = (instructions(&whole).await, instructions(&view).await);
    for entry in &catalog {
        let name = entry["name"].as_str().unwrap_or_default();
        assert!(
            small.lines().any(|l| l.starts_with(name)),
            "{name} is not named in the discovery instructions"
        );
    }
    assert!(small.contains("hub__describe_tool") && small.contains("hub__call_tool("));
    let (f, s) = (full.chars().count(), small.chars().count());
    println!(
        "instructions for the shipped config with filesystem and playwright ({all} tools): \
         {f} characters (~{} tokens) whole, {s} characters (~{} tokens) with discovery",
        f.div_ceil(4),
        s.div_ceil(4)
    );
    // 3,876 against 13,447 characters when this was written (70 tools).
    assert!(
        s * 3 < f,
        "discovery instructions {s} vs whole {f} characters"
    );
}
