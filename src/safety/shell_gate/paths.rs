//! What the gate's rules protect: the root, home and system directories,
//! and disk devices; paths compared after the spellings that hide them
//! are undone (`//usr`, `/./usr/`, `/tmp/../usr`, globs, braces).

use std::borrow::Cow;

use crate::shell::Word;

/// Directories whose recursive delete, chmod, chown or move breaks the
/// machine. `/tmp` is not one: a script may clear its own files there.
const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/srv",
    "/sys",
    "/usr",
    "/var",
    // macOS
    "/Applications",
    "/Library",
    "/System",
    "/Users",
    "/private",
];
/// System directories whose children are protected too: a home folder
/// (`/home/alice`), `/usr/lib`, `/var/lib`, `/etc/ssh`.
const PROTECTED_CHILDREN: &[&str] = &["/home", "/Users", "/usr", "/var", "/etc"];

/// Folders of a home directory whose recursive delete loses keys,
/// credentials or a person's documents: `~/.ssh`, `/home/u/Documents`.
const HOME_KEEPS: &[(&str, &str)] = &[
    (".ssh", "SSH keys in a home directory"),
    (".gnupg", "GnuPG keys in a home directory"),
    (".aws", "cloud credentials in a home directory"),
    (".azure", "cloud credentials in a home directory"),
    (".kube", "cluster credentials in a home directory"),
    (".password-store", "passwords in a home directory"),
    (".config", "settings in a home directory"),
    (".local", "data in a home directory"),
    ("Documents", "documents in a home directory"),
    ("Desktop", "the desktop of a home directory"),
    ("Downloads", "downloads in a home directory"),
    ("Pictures", "pictures in a home directory"),
    ("Music", "music in a home directory"),
    ("Videos", "videos in a home directory"),
    ("Movies", "movies in a home directory"),
    ("Library", "the Library of a macOS home directory"),
];

/// Device names (under `/dev/`) of disks and memory.
const DISKS: &[&str] = &[
    "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "rdisk", "mapper/", "md", "dm-", "loop",
    "sr", "mem", "kmem",
];

/// Is `path` a disk device (`/dev/sda`, `/dev//nvme0n1`, `/dev/disk/by-id/…`)?
pub fn is_disk_device(path: &str) -> bool {
    let Some(p) = normalize(path) else {
        return false;
    };
    p.strip_prefix("/dev/")
        .is_some_and(|d| DISKS.iter().any(|prefix| d.starts_with(prefix)))
}

/// What `path` is when it is a directory the gate protects: `/`, `~` (or
/// `~user`), a system directory or a protected child of one, or a glob or
/// brace that can reach one (`/*`, `/u*`, `/home/*`). `None` for anything
/// else, relative paths included.
pub fn protected(path: &str) -> Option<&'static str> {
    let p = normalize(path)?;
    // A glob stands for the children of the directory before it.
    let (dir, glob) = match p.find(['*', '?', '[']) {
        Some(i) => (p[..i].rsplit_once('/').map_or("", |(d, _)| d), true),
        None => (p.as_str(), false),
    };
    let dir = if dir.is_empty() && p.starts_with('/') {
        "/"
    } else {
        dir
    };
    if dir == "/" {
        return Some(if glob {
            "everything under the root directory"
        } else {
            "the root directory"
        });
    }
    if dir == "~" || (dir.starts_with('~') && !dir.contains('/')) {
        return Some("a home directory");
    }
    if SYSTEM_DIRS.contains(&dir) {
        return Some("a system directory");
    }
    let (parent, last) = dir.rsplit_once('/')?;
    if is_home(parent) {
        if let Some((_, what)) = HOME_KEEPS.iter().find(|(name, _)| *name == last) {
            return Some(what);
        }
    }
    PROTECTED_CHILDREN
        .contains(&parent)
        .then_some("a system or home directory")
}

/// Is the normalized `dir` a home directory: `~`, `~user`, `/root`,
/// `/home/user`, `/Users/user`?
fn is_home(dir: &str) -> bool {
    if dir.starts_with('~') {
        return !dir.contains('/');
    }
    if dir == "/root" {
        return true;
    }
    dir.rsplit_once('/')
        .is_some_and(|(parent, name)| !name.is_empty() && matches!(parent, "/home" | "/Users"))
}

/// `rel` as seen from the directory `cwd` (which a `cd` set): the path
/// the shell will use, for `protected`. Absolute and `~` paths are
/// themselves.
pub fn resolve(cwd: &str, rel: &str) -> String {
    if rel.starts_with('/') || rel.starts_with('~') {
        rel.to_string()
    } else {
        format!("{}/{rel}", cwd.trim_end_matches('/'))
    }
}

/// [`normalize`], for the other rules of the gate.
pub(super) fn normalized(path: &str) -> Option<String> {
    normalize(path)
}

/// `path` with `//`, `.` and `..` segments and a trailing `/` removed, for
/// an absolute or `~` path; `None` for a relative one.
fn normalize(path: &str) -> Option<String> {
    let (root, rest) = if let Some(r) = path.strip_prefix('/') {
        ("", r)
    } else if path.starts_with('~') {
        let (head, tail) = path.split_once('/').unwrap_or((path, ""));
        (head, tail)
    } else {
        return None;
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in rest.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    Some(match (root, joined.is_empty()) {
        ("", true) => "/".to_string(),
        ("", false) => format!("/{joined}"),
        (home, true) => home.to_string(),
        (home, false) => format!("{home}/{joined}"),
    })
}

/// The most words one word's braces may expand to before the gate stops
/// expanding (the rest of the word is then judged as written).
const MAX_EXPANSION: usize = 64;

/// Brace expansion, as the shell does it before running: `{rm,-rf,/}` is
/// the three words `rm -rf /`, `/{usr,etc}` is `/usr /etc`. Quoted braces
/// do not expand in the shell; expanding them here only asks more.
pub fn expand_braces(words: &[Word]) -> Cow<'_, [Word]> {
    if !words.iter().any(|w| w.text.contains('{')) {
        return Cow::Borrowed(words);
    }
    let mut out = Vec::with_capacity(words.len());
    for w in words {
        let mut texts = vec![w.text.clone()];
        while let Some(i) = texts.iter().position(|t| split_braces(t).is_some()) {
            let Some((pre, alts, post)) = split_braces(&texts[i]) else {
                break;
            };
            let expanded: Vec<String> = alts.iter().map(|a| format!("{pre}{a}{post}")).collect();
            if texts.len() + expanded.len() > MAX_EXPANSION {
                break;
            }
            texts.splice(i..=i, expanded);
        }
        out.extend(texts.into_iter().map(|text| Word { text, ..w.clone() }));
    }
    Cow::Owned(out)
}

/// The first `{a,b}` of `text` with a comma at its own level:
/// (before, alternatives, after).
fn split_braces(text: &str) -> Option<(&str, Vec<&str>, &str)> {
    let mut search = 0;
    while let Some(rel) = text[search..].find('{') {
        let open = search + rel;
        let mut depth = 0usize;
        let mut commas = Vec::new();
        for (i, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                ',' if depth == 1 => commas.push(open + i),
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        let close = open + i;
                        if commas.is_empty() {
                            break;
                        }
                        let mut alts = Vec::new();
                        let mut from = open + 1;
                        for c in commas {
                            alts.push(&text[from..c]);
                            from = c + 1;
                        }
                        alts.push(&text[from..close]);
                        return Some((&text[..open], alts, &text[close + 1..]));
                    }
                }
                _ => {}
            }
        }
        search = open + 1;
    }
    None
}
