//! Every relative link in the README, ARCHITECTURE.md and docs/ resolves:
//! the file exists and, for a `#fragment` into a Markdown file, one of its
//! headings has that anchor (GitHub's slug rules).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but
/// `-` and `_`), spaces to `-`; a repeat gets `-1`, `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for l in prose(text) {
        let Some(h) = l.strip_prefix('#') else {
            continue;
        };
        let title = h.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every `](target)` of the page's prose, inline code spans skipped.
fn links(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    for l in prose(text) {
        let mut in_code = false;
        let b = l.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'`' {
                in_code = !in_code;
            } else if !in_code && b[i] == b']' && b.get(i + 1) == Some(&b'(') {
                if let Some(end) = l[i + 2..].find(')') {
                    v.push(l[i + 2..i + 2 + end].to_string());
                    i += 2 + end;
                }
            }
            i += 1;
        }
    }
    v
}

#[test]
fn every_relative_link_resolves() {
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        let dir = page.parent().unwrap_or(Path::new("."));
        for target in links(&text) {
            let target = target.split_whitespace().next().unwrap_or("").to_string();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, frag) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                dir.join(path)
            };
            if !file.exists() {
                bad.push(format!("{}: {target}: no such file", page.display()));
                continue;
            }
            if let (Some(f), true) = (frag, file.extension().is_some_and(|x| x == "md")) {
                let t = std::fs::read_to_string(&file).expect("target");
                if !anchors(&t).contains(f) {
                    bad.push(format!(
                        "{}: {target}: no heading with that anchor",
                        page.display()
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn the_readme_is_short() {
    let n = std::fs::read_to_string(root().join("README.md"))
        .expect("README")
        .lines()
        .count();
    assert!(
        n <= 300,
        "README.md has {n} lines; reference material goes in docs/"
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    let a = anchors("# A `b` c\n## Sessions, `seq` and resuming\n## A `b` c\n```\n# not\n```\n");
    assert!(a.contains("a-b-c"));
    assert!(a.contains("a-b-c-1"));
    assert!(a.contains("sessions-seq-and-resuming"));
    assert!(!a.contains("not"));
}
