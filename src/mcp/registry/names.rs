//! Qualified names (`server__tool`, kept within what LLM front-ends accept)
//! and the hash of a tool list.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ToolInfo;

/// The longest qualified name: several LLM front-ends reject longer ones,
/// although MCP allows 128.
pub const MAX_QUALIFIED_LEN: usize = 64;

/// Between server and tool in a qualified name.
pub(super) const SEPARATOR: &str = "__";

/// Hex chars in the suffix of a shortened or sanitised name.
const SUFFIX_HEX_BYTES: usize = 4;

/// True if `name` matches `^[A-Za-z0-9_-]{1,64}$`.
pub fn is_valid_qualified_name(name: &str) -> bool {
    (1..=MAX_QUALIFIED_LEN).contains(&name.len()) && name.chars().all(is_name_char)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// One unique qualified name per `(server, tool)` pair, in the pairs' order.
/// `pairs` must not repeat a pair. A name depends only on the set of pairs,
/// not on their order.
pub fn assign_qualified_names(pairs: &[(&str, &str)]) -> Vec<String> {
    let mut names: Vec<String> = pairs.iter().map(|(s, t)| qualify(s, t)).collect();

    // Two pairs can still meet on one name: `a__b`+`c` and `a`+`b__c` both
    // give `a__b__c` (server names may contain `__`), or, with negligible
    // odds, a plain name equals a hashed one. Every member of such a group is
    // renamed, not all but one, so the result does not depend on order.
    let mut owners: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        owners.entry(n.as_str()).or_default().push(i);
    }
    let clashing: Vec<usize> = owners
        .values()
        .filter(|ix| ix.len() > 1)
        .flatten()
        .copied()
        .collect();
    if clashing.is_empty() {
        return names;
    }
    let mut taken: BTreeSet<String> = owners
        .iter()
        .filter(|(_, ix)| ix.len() == 1)
        .map(|(n, _)| n.to_string())
        .collect();
    let mut clashing = clashing;
    // Pair order, so renaming is deterministic.
    clashing.sort_by_key(|&i| pairs.get(i).copied());
    for i in clashing {
        let Some(&(server, tool)) = pairs.get(i) else {
            continue;
        };
        let raw = format!("{server}{SEPARATOR}{tool}");
        // A hash over server and tool apart tells the two sides of a `__`
        // clash apart. A counter after it cannot run out: among
        // `taken.len() + 1` distinct counter values one is always free.
        let pair_hash = short_hash(format!("{server}\u{0}{tool}").as_bytes());
        let counters = (0..=taken.len()).map(|n| format!("{n:08x}"));
        let name = std::iter::once(pair_hash)
            .chain(counters)
            .map(|suffix| with_suffix(&raw, &suffix))
            .find(|n| !taken.contains(n));
        if let (Some(name), Some(slot)) = (name, names.get_mut(i)) {
            taken.insert(name.clone());
            *slot = name;
        }
    }
    names
}

/// `server__tool` when that is a valid name; otherwise its sanitised,
/// shortened form plus `_` and 8 hex chars of sha256(`server__tool`), so two
/// names that sanitise alike still differ.
fn qualify(server: &str, tool: &str) -> String {
    let raw = format!("{server}{SEPARATOR}{tool}");
    if is_valid_qualified_name(&raw) {
        return raw;
    }
    let suffix = short_hash(raw.as_bytes());
    with_suffix(&raw, &suffix)
}

/// Invalid chars (one per char, not per byte) become `_`; the result is cut
/// so that `_` + `suffix` fits within [`MAX_QUALIFIED_LEN`].
fn with_suffix(raw: &str, suffix: &str) -> String {
    let keep = MAX_QUALIFIED_LEN.saturating_sub(suffix.len() + 1);
    let mut name: String = raw
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .take(keep)
        .collect();
    name.push('_');
    name.push_str(suffix);
    name
}

fn short_hash(bytes: &[u8]) -> String {
    hex_prefix(bytes, SUFFIX_HEX_BYTES)
}

/// Hex of the first `n` bytes of sha256(`bytes`).
fn hex_prefix(bytes: &[u8], n: usize) -> String {
    let digest = Sha256::digest(bytes);
    hex::encode(digest.iter().take(n).copied().collect::<Vec<u8>>())
}

/// sha256 (first 16 hex chars) of the canonical JSON of the tool list.
pub(super) fn list_hash(tools: &[std::sync::Arc<ToolInfo>]) -> String {
    // Serialising a struct of strings and Values cannot fail; Null would
    // still give a stable (if useless) hash rather than a panic.
    let value = serde_json::to_value(tools).unwrap_or_default();
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    hex_prefix(canonical.as_bytes(), 8)
}

/// JSON with object keys sorted at every level and no whitespace. Done by
/// hand because serde_json keeps insertion order when any crate in the build
/// turns on its `preserve_order` feature (schemars, via rmcp, can).
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid(name: &str) -> bool {
        regex::Regex::new("^[A-Za-z0-9_-]{1,64}$")
            .unwrap()
            .is_match(name)
    }

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(qualify("fs", "read_file"), "fs__read_file");
        assert_eq!(qualify("my-srv", "Get-Item2"), "my-srv__Get-Item2");
    }

    #[test]
    fn dotted_and_unicode_names_are_sanitised_with_suffix() {
        let dotted = qualify("fs", "read.file");
        assert!(dotted.starts_with("fs__read_file_"), "{dotted}");
        assert_eq!(dotted.len(), "fs__read_file_".len() + 8);
        assert!(valid(&dotted));

        // One `_` per char, not per UTF-8 byte.
        let unicode = qualify("fs", "lire_fiché");
        assert!(unicode.starts_with("fs__lire_fich__"), "{unicode}");
        assert!(valid(&unicode));
        let cjk = qualify("日本", "道具");
        assert!(cjk.starts_with("_____"), "{cjk}");
        assert!(valid(&cjk));
    }

    #[test]
    fn long_names_are_cut_to_64_with_suffix() {
        let tool = "t".repeat(100);
        let q = qualify("server", &tool);
        assert_eq!(q.len(), MAX_QUALIFIED_LEN);
        assert!(valid(&q));
        assert!(q.starts_with("server__ttt"));
        // Exactly 64 is fine as it is; 65 is not.
        let fits = "x".repeat(64 - "s__".len());
        assert_eq!(qualify("s", &fits), format!("s__{fits}"));
        let q65 = qualify("s", &format!("{fits}x"));
        assert_eq!(q65.len(), 64);
        assert_ne!(q65, format!("s__{fits}"));
    }

    #[test]
    fn suffix_is_stable_and_from_the_original_name() {
        let expected = hex::encode(&Sha256::digest(b"fs__read.file")[..4]);
        assert_eq!(
            qualify("fs", "read.file"),
            format!("fs__read_file_{expected}")
        );
        assert_eq!(qualify("fs", "read.file"), qualify("fs", "read.file"));
    }

    #[test]
    fn names_that_sanitise_alike_stay_distinct() {
        let long_a = format!("{}a", "p".repeat(99));
        let long_b = format!("{}b", "p".repeat(99));
        let pairs = [
            ("fs", "read.file"),
            ("fs", "read file"),
            ("fs", "read_file"),
            ("fs", long_a.as_str()),
            ("fs", long_b.as_str()),
        ];
        let names = assign_qualified_names(&pairs);
        let unique: BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert!(names.iter().all(|n| valid(n)), "{names:?}");
        assert_eq!(names[2], "fs__read_file");
        // The long pair share their first 55 chars and differ only in the hash.
        assert_eq!(names[3][..55], names[4][..55]);
    }

    #[test]
    fn separator_clash_renames_both_sides_in_any_order() {
        let pairs = [("a__b", "c"), ("a", "b__c"), ("x", "y")];
        let names = assign_qualified_names(&pairs);
        assert_ne!(names[0], names[1]);
        assert_ne!(names[0], "a__b__c");
        assert_ne!(names[1], "a__b__c");
        assert_eq!(names[2], "x__y");
        assert!(names.iter().all(|n| valid(n)), "{names:?}");
        let reversed = assign_qualified_names(&[("x", "y"), ("a", "b__c"), ("a__b", "c")]);
        assert_eq!(
            reversed,
            vec![names[2].clone(), names[1].clone(), names[0].clone()]
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let mut s = String::new();
        write_canonical(
            &json!({"b": 1, "a": {"d": [3, {"z": 0, "y": "é"}], "c": null}}),
            &mut s,
        );
        assert_eq!(s, r#"{"a":{"c":null,"d":[3,{"y":"é","z":0}]},"b":1}"#);
    }
}
