//! The layer rule, checked from the source: a module never imports one in a
//! layer above its own, and no files import each other in a loop.
//!
//! An import is any `crate::…`, `super::…` or `self::…` path (in `use` lines
//! and inline), outside comments and test code; a path is charged to the
//! deepest file it names. A parent naming its own child module (`mod x;`,
//! `pub use x::Y`) is the parent owning it, not an import. Run alone with
//! `cargo test --test layers -- --nocapture` to see every arrow.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first. A top-level module of `src/` belongs to exactly
/// one; a module may import its own layer and the ones below.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "ground",
        &[
            "access",
            "util",
            "b64",
            "callkeys",
            "caller",
            "session",
            "client_context",
            "errors",
            "suggest",
            "diff",
            "protocol",
            "config",
            "store",
            "lock",
            "process",
            "secrets",
            "shell",
            "trim",
        ],
    ),
    ("mcp", &["mcp"]),
    (
        "calls",
        &[
            "hub",
            "outcome",
            "history",
            "retry",
            "safety",
            "builtin",
            "assertions",
        ],
    ),
    ("engine", &["engine"]),
    ("recording", &["recording", "runs"]),
    ("app", &["app"]),
    ("server", &["server"]),
    ("root", &["lib"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn is_test_file(rel: &str) -> bool {
    rel.ends_with("tests.rs") || rel.split('/').any(|p| p == "tests")
}

/// Every source file of the library, as a path relative to `src/`.
fn files() -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![src()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read src").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p
                    .strip_prefix(src())
                    .expect("under src")
                    .to_string_lossy()
                    .replace('\\', "/");
                if !rel.starts_with("bin/") && rel != "main.rs" && !is_test_file(&rel) {
                    out.push(rel);
                }
            }
        }
    }
    out.sort();
    out
}

/// The module path of a file: `hub/call.rs` → [hub, call]; `hub/mod.rs` →
/// [hub]; `lib.rs` → [].
fn module_of(rel: &str) -> Vec<String> {
    let no_ext = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = no_ext.split('/').map(String::from).collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The file defining module `m`, if any.
fn file_of(m: &[String], all: &BTreeSet<String>) -> Option<String> {
    if m.is_empty() {
        return Some("lib.rs".into());
    }
    let base = m.join("/");
    [format!("{base}.rs"), format!("{base}/mod.rs")]
        .into_iter()
        .find(|c| all.contains(c))
}

/// The deepest file named by a module path.
fn resolve(path: &[String], all: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .find_map(|n| file_of(&path[..n], all))
}

/// Source without comments and without `#[cfg(test)]` items.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let l = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(l);
        out.push('\n');
    }
    // Cut each `#[cfg(test)]` item: up to its `;` or its matching `}`.
    let mut s = out;
    while let Some(at) = s.find("#[cfg(test)]") {
        let rest = &s[at..];
        let semi = rest.find(';');
        let brace = rest.find('{');
        let end = match (semi, brace) {
            (Some(sc), Some(b)) if sc < b => at + sc + 1,
            (_, Some(b)) => {
                let mut depth = 0usize;
                let mut end = s.len();
                for (i, ch) in s[at + b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + b + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (Some(sc), None) => at + sc + 1,
            (None, None) => s.len(),
        };
        s.replace_range(at..end, "");
    }
    s
}

fn ident_at(s: &str, i: usize) -> (&str, usize) {
    let bytes = s.as_bytes();
    let mut j = i;
    while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
        j += 1;
    }
    (&s[i..j], j)
}

/// Every path a `{…}` group after `prefix::` names, recursively.
fn expand(s: &str, mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let bytes = s.as_bytes();
    let mut path = prefix.clone();
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            out.push(path);
            return i;
        }
        if bytes[i] == b'{' {
            i += 1;
            loop {
                while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b',') {
                    i += 1;
                }
                if i >= bytes.len() {
                    return i;
                }
                if bytes[i] == b'}' {
                    return i + 1;
                }
                i = expand(s, i, path.clone(), out);
            }
        }
        let (id, j) = ident_at(s, i);
        if id.is_empty() {
            out.push(path);
            return i;
        }
        path.push(id.to_string());
        i = j;
        if s[i..].starts_with("::") {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// The files `rel` imports.
fn imports(rel: &str, text: &str, all: &BTreeSet<String>) -> BTreeSet<String> {
    let me = module_of(rel);
    let code = code(text);
    let mut paths: Vec<Vec<String>> = Vec::new();
    let bytes = code.as_bytes();
    for anchor in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(k) = code[from..].find(anchor) {
            let at = from + k;
            from = at + anchor.len();
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric()
                    || bytes[at - 1] == b'_'
                    || bytes[at - 1] == b':')
            {
                continue;
            }
            let base: Vec<String> = match anchor {
                "crate::" => Vec::new(),
                "super::" => {
                    let mut m = me.clone();
                    // `super` of a `mod.rs` file is its folder's parent.
                    m.pop();
                    let mut i = from;
                    while code[i..].starts_with("super::") {
                        m.pop();
                        i += "super::".len();
                    }
                    from = i;
                    m
                }
                _ => me.clone(),
            };
            let mut found = Vec::new();
            expand(&code, from, base, &mut found);
            paths.extend(found);
        }
    }
    paths
        .iter()
        .filter_map(|p| resolve(p, all))
        .filter(|f| f != rel)
        .collect()
}

fn layer_of(rel: &str) -> Option<(usize, &'static str)> {
    let top = module_of(rel)
        .first()
        .cloned()
        .unwrap_or_else(|| "lib".into());
    LAYERS
        .iter()
        .enumerate()
        .find(|(_, (_, mods))| mods.contains(&top.as_str()))
        .map(|(i, (name, _))| (i, *name))
}

/// Strongly connected components with more than one file (Tarjan).
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(lw));
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let list = files();
    let all: BTreeSet<String> = list.iter().cloned().collect();
    list.iter()
        .map(|rel| {
            let text = std::fs::read_to_string(src().join(rel)).expect("read");
            (rel.clone(), imports(rel, &text, &all))
        })
        .collect()
}

#[test]
fn every_module_has_a_layer() {
    let missing: Vec<String> = files()
        .into_iter()
        .filter(|f| layer_of(f).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "files whose top-level module is in no layer of tests/layers.rs: {missing:?}"
    );
}

#[test]
fn imports_point_down_and_never_loop() {
    let g = graph();
    let mut upward = Vec::new();
    for (from, tos) in &g {
        for to in tos {
            println!("{from} -> {to}");
            if let (Some((lf, nf)), Some((lt, nt))) = (layer_of(from), layer_of(to)) {
                if lt > lf {
                    upward.push(format!("{from} ({nf}) imports {to} ({nt})"));
                }
            }
        }
    }
    let circles = loops(&g);
    let files_in_loops: usize = circles.iter().map(Vec::len).sum();
    println!(
        "{} upward imports; {} files in {} import loops",
        upward.len(),
        files_in_loops,
        circles.len()
    );
    let mut report = String::new();
    for u in &upward {
        report.push_str(&format!("upward: {u}\n"));
    }
    for c in &circles {
        report.push_str(&format!("loop: {}\n", c.join(", ")));
    }
    assert!(
        report.is_empty(),
        "the layer rule (ARCHITECTURE.md, layers in tests/layers.rs) is broken:\n{report}"
    );
}

#[test]
fn the_checker_sees_a_loop_and_an_upward_import() {
    let all: BTreeSet<String> = ["a.rs", "a/b.rs", "c.rs", "hub/mod.rs", "hub/x.rs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let a = imports(
        "a.rs",
        "use crate::c::{self, Thing};\nfn f() { crate::a::b::g(); }",
        &all,
    );
    assert_eq!(
        a,
        ["a/b.rs", "c.rs"].iter().map(|s| s.to_string()).collect()
    );
    let b = imports("a/b.rs", "// crate::c::nope\nuse super::Y;", &all);
    assert_eq!(b, ["a.rs"].iter().map(|s| s.to_string()).collect());
    let h = imports(
        "hub/mod.rs",
        "use self::x::Z;\n#[cfg(test)]\nmod tests { use crate::c::T; }",
        &all,
    );
    assert_eq!(h, ["hub/x.rs"].iter().map(|s| s.to_string()).collect());
    let mut g = BTreeMap::new();
    g.insert("a.rs".to_string(), a);
    g.insert("a/b.rs".to_string(), b);
    g.insert("c.rs".to_string(), BTreeSet::new());
    assert_eq!(
        loops(&g),
        vec![vec!["a.rs".to_string(), "a/b.rs".to_string()]]
    );
    assert!(
        layer_of("engine/runner.rs").expect("layer").0 > layer_of("hub/call.rs").expect("layer").0
    );
}
