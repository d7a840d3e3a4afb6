//! ARCHITECTURE.md stays a true map: every code folder is named in its code
//! map, every path, test and module it names exists, its layer section
//! names every layer and module of `tests/layers.rs`, and it stays short.
//!
//! What counts as a name: an inline code span of the page's prose (fenced
//! blocks are pictures and are not read).
//! - A span starting with a code root (`src/`, `tests/`, …) is a path: it
//!   must exist (a trailing `/` asks for a folder; `*` matches within one
//!   name). `path::name` also asks that the file defines `fn name` (a test).
//! - A span like `hub::pipeline` or `mcp::relay::Relay`, whose first
//!   segment is a module of `src/`, is a module path: each segment must be
//!   a module, until the first that is not, which must appear as a word in
//!   the last module's file.
//!
//! A folder is code unless `.gitignore` leaves it out (a `/path` or
//! `/path/*` line) or it holds only unit tests (`tests.rs`, `*_tests.rs`,
//! `tests/`): those belong to their parent's entry.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The page may grow a little past the ~400 lines it aims at, not more.
const MAX_LINES: usize = 400;

/// Where a span must start to be read as a path.
const CODE_ROOTS: &[&str] = &[
    "src",
    "tests",
    "extension",
    "benches",
    "fuzz",
    "testserver",
    "scripts",
    "ui",
    "docs",
    ".ci",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn page() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md")
}

/// The page's prose: its lines outside fenced blocks.
fn prose(text: &str) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// The text under the `## {title}` heading, up to the next `## ` heading.
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let head = format!("\n## {title}\n");
    let Some(at) = text.find(&head) else {
        panic!("ARCHITECTURE.md has no `## {title}` section");
    };
    let body = &text[at + head.len()..];
    match body.find("\n## ") {
        Some(end) => &body[..end],
        None => body,
    }
}

/// Inline code spans, a span broken over lines read as one line.
fn spans(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// The folders `.gitignore` leaves out, as paths from the root: the root's
/// anchored entries (`/target`), and every entry of a top-level folder's own
/// `.gitignore` (`fuzz/.gitignore`'s `artifacts` is `fuzz/artifacts`).
fn ignored() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join(".gitignore")).unwrap_or_default();
    let mut out: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix('/'))
        .map(|l| l.trim_end_matches("/*").trim_end_matches('/').to_string())
        .collect();
    for dir in subfolders(&root()) {
        let Ok(text) = std::fs::read_to_string(dir.join(".gitignore")) else {
            continue;
        };
        let base = rel(&dir);
        for l in text.lines().map(str::trim) {
            if l.is_empty() || l.starts_with('#') || l.starts_with('!') {
                continue;
            }
            let l = l.trim_start_matches('/').trim_end_matches('/');
            out.insert(format!("{base}/{l}"));
        }
    }
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .expect("under the root")
        .to_string_lossy()
        .replace('\\', "/")
}

fn subfolders(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn is_test_file(name: &str) -> bool {
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// A folder of unit tests only: `tests/`, or nothing but test files and
/// such folders.
fn tests_only(dir: &Path) -> bool {
    if dir.file_name().is_some_and(|n| n == "tests") {
        return true;
    }
    std::fs::read_dir(dir)
        .expect("read a folder")
        .flatten()
        .all(|e| {
            let p = e.path();
            if p.is_dir() {
                tests_only(&p)
            } else {
                is_test_file(&e.file_name().to_string_lossy())
            }
        })
}

/// Every folder the code map must name, with a trailing `/`.
fn code_folders() -> Vec<String> {
    let ignored = ignored();
    let keep = |p: &Path| {
        let r = rel(p);
        let hidden = p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        !hidden && r != "target" && !r.ends_with("/target") && !ignored.contains(&r)
    };
    let mut out = Vec::new();
    for top in subfolders(&root()).into_iter().filter(|p| keep(p)) {
        out.push(format!("{}/", rel(&top)));
        let name = rel(&top);
        // Every folder of the code and the extension; the first level of
        // the test, bench and fuzz folders.
        let deep = name == "src" || name == "extension";
        let mut stack = subfolders(&top);
        while let Some(d) = stack.pop() {
            if !keep(&d) || (name == "src" && tests_only(&d)) {
                continue;
            }
            out.push(format!("{}/", rel(&d)));
            if deep {
                stack.extend(subfolders(&d));
            }
        }
    }
    out.sort();
    out
}

/// The modules at the top of `src/` (`lib` is the crate root).
fn top_modules() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(root().join("src"))
        .expect("read src")
        .flatten()
    {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_dir() && p.join("mod.rs").is_file() {
            out.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "main" {
                out.insert(stem.to_string());
            }
        }
    }
    out
}

/// The file of a module path (`["hub", "pipeline"]`), if it is a module.
fn module_file(path: &[&str]) -> Option<PathBuf> {
    if path == ["lib"] {
        return Some(root().join("src/lib.rs"));
    }
    let base = root().join("src").join(path.join("/"));
    [base.with_extension("rs"), base.join("mod.rs")]
        .into_iter()
        .find(|c| c.is_file())
}

fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// `*` matches any run of characters within one name.
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == name;
    }
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// What is wrong with a span read as a path, if anything.
fn check_path(span: &str) -> Option<String> {
    let (path, item) = match span.split_once("::") {
        Some((p, i)) => (p, Some(i)),
        None => (span, None),
    };
    let full = root().join(path.trim_end_matches('/'));
    if path.contains('*') {
        let dir = full.parent().expect("a parent");
        let pattern = full.file_name().expect("a name").to_string_lossy();
        let found = std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .any(|e| glob(&pattern, &e.file_name().to_string_lossy()))
            })
            .unwrap_or(false);
        return (!found).then(|| format!("`{span}`: nothing matches"));
    }
    if path.ends_with('/') && !full.is_dir() {
        return Some(format!("`{span}`: no such folder"));
    }
    if !full.exists() {
        return Some(format!("`{span}`: no such file"));
    }
    let item = item?;
    let text = std::fs::read_to_string(&full).unwrap_or_default();
    let head = format!("fn {item}");
    let defined = text.match_indices(&head).any(|(i, _)| {
        let after = text[i + head.len()..].chars().next();
        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    });
    (!defined).then(|| format!("`{span}`: `{path}` defines no `fn {item}`"))
}

fn is_module_path(span: &str, tops: &BTreeSet<String>) -> bool {
    let segs: Vec<&str> = span.split("::").collect();
    segs.len() > 1
        && tops.contains(segs[0])
        && segs.iter().all(|s| {
            !s.is_empty()
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !s.starts_with(|c: char| c.is_ascii_digit())
        })
}

/// What is wrong with a module path, if anything.
fn check_module(span: &str) -> Option<String> {
    let segs: Vec<&str> = span.split("::").collect();
    let mut file = module_file(&segs[..1])?;
    for n in 2..=segs.len() {
        match module_file(&segs[..n]) {
            Some(f) => file = f,
            None => {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                let item = segs[n - 1];
                return (!has_word(&text, item))
                    .then(|| format!("`{span}`: `{}` has no `{item}`", rel(&file)));
            }
        }
    }
    None
}

#[test]
fn the_page_stays_short() {
    let n = page().lines().count();
    assert!(
        n < MAX_LINES,
        "ARCHITECTURE.md has {n} lines (at most {MAX_LINES}): it is a map; \
         move a file's detail into that file's //! doc"
    );
}

#[test]
fn every_code_folder_is_named_in_the_code_map() {
    let text = page();
    let prose = prose(&text);
    let named: BTreeSet<String> = spans(section(&prose, "Code map")).into_iter().collect();
    let missing: Vec<String> = code_folders()
        .into_iter()
        .filter(|f| !named.contains(f))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map does not name these folders (as `path/` in \
         an entry: say what each owns):\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_path_and_module_the_page_names_exists() {
    let text = page();
    let tops = top_modules();
    let mut problems = BTreeSet::new();
    for span in spans(&prose(&text)) {
        let first = span.split('/').next().unwrap_or("");
        let problem = if span.contains('/') && CODE_ROOTS.contains(&first) {
            check_path(&span)
        } else if is_module_path(&span, &tops) {
            check_module(&span)
        } else {
            None
        };
        problems.extend(problem);
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md names what does not exist (renamed or removed? fix \
         the page):\n  {}",
        problems.into_iter().collect::<Vec<_>>().join("\n  ")
    );
}

#[test]
fn the_layer_section_names_every_layer_and_module_of_tests_layers() {
    let layers = std::fs::read_to_string(root().join("tests/layers.rs")).expect("tests/layers.rs");
    let start = layers
        .find("const LAYERS")
        .expect("LAYERS in tests/layers.rs");
    let end = start + layers[start..].find("];").expect("the end of LAYERS");
    let names: Vec<&str> = layers[start..end].split('"').skip(1).step_by(2).collect();
    assert!(!names.is_empty(), "no names read from LAYERS");
    let text = page();
    let section = section(&text, "Layers");
    let missing: Vec<&str> = names
        .into_iter()
        .filter(|n| !has_word(section, n))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's Layers section does not name these layers or modules \
         of tests/layers.rs: {missing:?}"
    );
}

#[test]
fn the_checks_read_what_they_should() {
    assert_eq!(
        spans("a `b` c `d\n e` f"),
        vec!["b".to_string(), "d e".to_string()]
    );
    assert!(glob("panel.*", "panel.js") && !glob("panel.*", "popup.js"));
    assert!(glob("*.rs", "x.rs") && glob("a*b*c", "aXbYc") && !glob("a*b", "ab_"));
    assert!(has_word("fn run(", "run") && !has_word("fn runner(", "run"));
    let tops = top_modules();
    assert!(is_module_path("hub::pipeline", &tops));
    assert!(!is_module_path("serde_json::Value", &tops));
    assert!(check_module("hub::pipeline::Confirmer").is_none());
    assert!(check_module("hub::pipeline::NoSuchThing").is_some());
    assert!(check_path("src/hub/").is_none());
    assert!(check_path("src/no_such_folder/").is_some());
    assert!(check_path("tests/layers.rs::no_such_test").is_some());
    let folders = code_folders();
    assert!(folders.contains(&"src/hub/instances/".to_string()));
    assert!(!folders.iter().any(|f| f.starts_with("tests/node_modules")));
    assert!(!folders.contains(&"src/engine/condition/".to_string()));
}
