//! One meaning per name (ARCHITECTURE.md, glossary): no two public types in
//! `src/` share a name for different things, so a reader never has to look
//! up which `Slot` or `Index` a line means. A new type whose name is taken
//! fails the test: rename one of the two to a name that says which.

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

#[test]
fn the_scan_reads_definitions() {
    assert_eq!(defined("pub struct Slot {"), Some("Slot"));
    assert_eq!(defined("    pub(crate) enum Pick<'a> {"), Some("Pick"));
    assert_eq!(defined("pub type AnswerWatch = u8;"), Some("AnswerWatch"));
    assert_eq!(defined("pub fn slot() {}"), None);
    assert_eq!(defined("struct Private;"), None);
}
