//! One meaning per name (ARCHITECTURE.md, glossary): no two public types in
//! `src/` share a name for different things, so a reader never has to look
//! up which `Slot` or `Index` a line means. A new type whose name is taken
//! fails the test: rename one of the two to a name that says which.
//!
//! Modules too: two modules may share a name only when they are one thing
//! seen at two layers (`protocol::artifact`, `store::artifact` and
//! `server::artifact` are all `get_artifact`), and [`SAME_THING`] says so
//! for each. A new shared module name fails until it is renamed or listed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `pub struct|enum|trait|type NAME` (any `pub(…)`) at the start of a line.
fn defined(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t.strip_prefix("pub")?;
    let rest = if let Some(r) = rest.strip_prefix('(') {
        r.split_once(')')?.1
    } else {
        rest
    };
    let rest = rest.trim_start();
    let rest = ["struct ", "enum ", "trait ", "type "]
        .iter()
        .find_map(|k| rest.strip_prefix(k))?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

#[test]
fn no_two_public_types_share_a_name() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for line in text.lines() {
            if let Some(name) = defined(line) {
                let rel = f.strip_prefix(&src).unwrap_or(f).display().to_string();
                let places = by_name.entry(name.to_string()).or_default();
                if !places.contains(&rel) {
                    places.push(rel);
                }
            }
        }
    }
    assert!(
        by_name.len() > 100,
        "the scan found too few types: {}",
        by_name.len()
    );
    let shared: Vec<String> = by_name
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(n, v)| format!("{n}: {}", v.join(", ")))
        .collect();
    assert!(
        shared.is_empty(),
        "these public type names mean two things; rename one (a name that says which):\n{}",
        shared.join("\n")
    );
}

/// Module names that several modules share because they are one thing at
/// several layers, each with what that thing is.
const SAME_THING: &[(&str, &str)] = &[
    ("artifact", "get_artifact: its body, its file, its handler"),
    ("assertions", "the assertion tools and their config section"),
    (
        "health",
        "health_status: the engine's part and the servers' part",
    ),
    (
        "index",
        "a line index (store::index_file) of runs, of recordings",
    ),
    ("keep", "keep_result: its body and its handler"),
    (
        "keyed",
        "a callKey: on a tool_call (server), on a tool_batch (engine)",
    ),
    (
        "mcp",
        "MCP: the hub as its servers' client, and as a server at /mcp",
    ),
    (
        "names",
        "tool names: qualified in the registry, as /mcp shows them",
    ),
    ("paging", "a listing's pages: on /ws (protocol), at /mcp"),
    ("recording", "recordings: their bodies and the service"),
    (
        "reload",
        "config.json's hot reload: watching the file, applying it",
    ),
    ("runs", "runs: their bodies and the service"),
    (
        "schema",
        "tools' JSON input schemas: the built-ins', a dry replay's check",
    ),
    (
        "session",
        "a /ws session: its outbox and calls, the sessions' registry",
    ),
    (
        "store",
        "what is kept on disk: the store layer, tasks, runs",
    ),
    (
        "validate",
        "checking input before it is used: a config, a batch",
    ),
    ("views", "tool views: their config, their projection"),
];

/// Every module of `src/` by name (a file's stem, a `mod.rs`'s folder),
/// leaving out unit tests (`tests.rs`, `tests/`) and the crate roots.
fn modules(src: &Path) -> BTreeMap<String, Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).unwrap_or(f);
        let unit_tests = rel.file_stem().is_some_and(|s| s == "tests")
            || rel.components().any(|c| c.as_os_str() == "tests");
        if unit_tests {
            continue;
        }
        let stem = rel.file_stem().map(|s| s.to_string_lossy().to_string());
        let name = match stem.as_deref() {
            Some("mod") => rel.parent().and_then(|p| p.file_name()),
            _ => rel.file_stem(),
        };
        let Some(name) = name.map(|n| n.to_string_lossy().to_string()) else {
            continue;
        };
        if rel.parent() == Some(Path::new("")) && (name == "lib" || name == "main") {
            continue;
        }
        by_name
            .entry(name)
            .or_default()
            .push(rel.display().to_string());
    }
    by_name
}

#[test]
fn modules_share_a_name_only_when_they_are_one_thing() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let by_name = modules(&src);
    assert!(
        by_name.len() > 100,
        "the scan found too few modules: {}",
        by_name.len()
    );
    let listed: BTreeMap<&str, &str> = SAME_THING.iter().copied().collect();
    let shared: Vec<String> = by_name
        .iter()
        .filter(|(n, v)| v.len() > 1 && !listed.contains_key(n.as_str()))
        .map(|(n, v)| format!("{n}: {}", v.join(", ")))
        .collect();
    assert!(
        shared.is_empty(),
        "these modules share a name for different things; rename one (a name that says which), \
         or, if they are one thing at two layers, add it to SAME_THING with what it is:\n{}",
        shared.join("\n")
    );
    let stale: Vec<&str> = listed
        .keys()
        .filter(|n| by_name.get(**n).is_none_or(|v| v.len() < 2))
        .copied()
        .collect();
    assert!(
        stale.is_empty(),
        "SAME_THING lists names no two modules share any more: {stale:?}"
    );
}

#[test]
fn the_scan_reads_definitions() {
    assert_eq!(defined("pub struct Slot {"), Some("Slot"));
    assert_eq!(defined("    pub(crate) enum Pick<'a> {"), Some("Pick"));
    assert_eq!(defined("pub type AnswerWatch = u8;"), Some("AnswerWatch"));
    assert_eq!(defined("pub fn slot() {}"), None);
    assert_eq!(defined("struct Private;"), None);
}
