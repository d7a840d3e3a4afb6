//! The official MCP conformance suite (`@modelcontextprotocol/conformance`
//! 0.2.0-alpha.12, pinned in tests/package.json) against the hub fronting
//! the project's test server in `--conformance` mode, with bare names (the
//! suite calls `test_simple_text`, not `conf__test_simple_text`). It runs
//! each revision's requirement set (`--requirements 2025-11-25` and
//! `2026-07-28`, frozen at the revision's release and run at its wire),
//! which also runs that revision's pending and extension scenarios
//! (reported, never scored).
//!
//! The suite needs Node 22 (`fs.globSync`): the pinned npm package `node`
//! puts one at tests/node_modules/.bin/node; the rest of the tests keep
//! the machine's node. The suite's client sends no token, so this hub runs
//! with `server.token: false` (loopback only). Scenarios that do not pass
//! are listed in docs/protocol.md with the reason; this test holds that
//! list.

use std::path::Path;
use std::process::Stdio;

use serde_json::json;

use super::wait_running;
use crate::support::{testserver_entry, TestHub};

/// Scenarios the hub does not pass, per requirement set, and why
/// (docs/protocol.md → Conformance).
const KNOWN_FAILING: &[(&str, &[&str])] = &[
    (
        "2025-11-25",
        // SEP-1699 (pending): needs a `test_reconnection` tool whose
        // server closes the request's SSE stream mid-call; rmcp's handler
        // API cannot do that.
        &["server-sse-polling"],
    ),
    (
        "2026-07-28",
        &[
            // The Tasks extension (SEP-2663, not scored): the hub's tasks
            // pass the rest. These two need an upstream's own questions
            // inside a task (confirm_delete, multi_input elicit mid-call)
            // and an upstream's InputRequiredResult before the task
            // (test_tool_with_task), neither relayed in this build.
            "tasks-mrtr-input",
            "tasks-mrtr-composition",
        ],
    ),
];

/// The Node 22 the pinned `node` package installs.
fn node22() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node_modules/.bin/node")
}

/// Run one requirement set; (scenario, passed) per scenario of the
/// summary (scored and unscored alike), and the whole output.
async fn run_requirements(hub: &TestHub, revision: &str) -> (Vec<(String, bool)>, String) {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        bin.exists() && node22().exists(),
        "the conformance suite or its Node 22 is missing: run `npm ci --prefix tests`"
    );
    let url = format!("http://{}/mcp", hub.addr);
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        tokio::process::Command::new(node22())
            .arg(&bin)
            .args(["server", "--url", &url, "--requirements", revision])
            .current_dir(hub.path())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the conformance suite did not finish in 300 s")
    .expect("run node");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (summary(&text), text)
}

/// `✓ name: …` / `✗ name: …` lines between `=== SUMMARY ===` and `Total:`.
fn summary(text: &str) -> Vec<(String, bool)> {
    let part = text.split("=== SUMMARY ===").nth(1).unwrap_or("");
    part.lines()
        .take_while(|l| !l.starts_with("Total:"))
        .filter_map(|l| {
            let (mark, rest) = l.trim().split_once(' ')?;
            let name = rest.split(':').next()?.trim().to_string();
            match mark {
                "✓" => Some((name, true)),
                "✗" => Some((name, false)),
                _ => None,
            }
        })
        .collect()
}

#[tokio::test]
async fn official_conformance_suite_passes_against_the_hub() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = testserver_entry(dir.path(), "conf", &["--conformance"]);
    // A 2026-07-28-only server with the MRTR fixtures: the hub meets it by
    // `server/discover` and relays its InputRequiredResults.
    let mrtr = testserver_entry(dir.path(), "mrtr", &["--mrtr"]);
    let hub = TestHub::start_in(
        dir,
        json!({
            "server": {"token": false, "mcpBareNames": true},
            "mcpServers": {"conf": conf, "mrtr": mrtr},
        }),
    )
    .await;
    let mut ws = hub.connect().await;
    wait_running(&mut ws, &["conf", "mrtr"]).await;

    for (revision, known) in KNOWN_FAILING {
        let (results, text) = run_requirements(&hub, revision).await;
        let failed: Vec<&str> = results
            .iter()
            .filter(|(name, ok)| !ok && !known.contains(&name.as_str()))
            .map(|(n, _)| n.as_str())
            .collect();
        assert!(
            failed.is_empty(),
            "{revision}: scenarios failed: {failed:?}\n{text}"
        );
        // A scenario listed as failing that passes now: update the docs.
        let fixed: Vec<&str> = results
            .iter()
            .filter(|(name, ok)| *ok && known.contains(&name.as_str()))
            .map(|(n, _)| n.as_str())
            .collect();
        assert!(
            fixed.is_empty(),
            "{revision}: now passing, remove from KNOWN_FAILING and docs/protocol.md: {fixed:?}"
        );
        let least = if *revision == "2025-11-25" { 33 } else { 49 };
        assert!(
            results.len() >= least,
            "{revision}: only {} scenarios ran\n{text}",
            results.len()
        );
    }
}
