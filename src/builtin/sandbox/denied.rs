//! The paths a failed command was refused, read from its stderr: the
//! "Permission denied" and "Read-only file system" lines that shells,
//! coreutils, Python and Node print. Pure, apart from asking the kernel
//! whether the hub itself could write a path.

use std::path::{Component, Path, PathBuf};

/// At most this many refused paths are named.
const MAX_PATHS: usize = 5;

/// The error cues whose lines name a refused path.
const CUES: [&str; 2] = ["permission denied", "read-only file system"];

/// What tools put before the path on a refusal line, e.g. dash's
/// `sh: 1: cannot create /tmp/x: Permission denied`.
const PREFIXES: [&str; 8] = [
    "cannot create ",
    "can't create ",
    "cannot open ",
    "can't open ",
    "cannot touch ",
    "cannot remove ",
    "cannot access ",
    "directory nonexistent ",
];

/// Every path named on a refusal line of `stderr`, in order, without
/// repeats, at most [`MAX_PATHS`].
pub fn paths(stderr: &str) -> Vec<String> {
    refused(stderr).into_iter().map(|(p, _)| p).collect()
}

/// The path one refusal line names: the last quoted path ('…', "…", `…',
/// ‘…’), else the text between the previous `: ` and the cue, less the
/// tool's words ("cannot create").
pub fn path_of(line: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    let at = CUES.iter().filter_map(|c| lower.find(c)).min()?;
    let before = &line[..at];
    if let Some(q) = last_quoted(line) {
        return Some(q);
    }
    let before = before.trim_end().trim_end_matches([':', ',']).trim_end();
    let segment = before.rsplit(": ").next()?.trim();
    let lower_seg = segment.to_ascii_lowercase();
    let rest = PREFIXES
        .iter()
        .find_map(|p| lower_seg.find(p).map(|i| &segment[i + p.len()..]))
        .unwrap_or(segment)
        .trim();
    looks_like_path(rest).then(|| rest.to_string())
}

/// What a refusal line's tool was doing, from its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsAccess {
    /// `cannot read`, `cannot access`, `cannot open directory`, dash's
    /// `cannot open` (an input redirection), `… for reading`.
    Read,
    /// `cannot create`, `cannot touch`, `cannot remove`, `for writing`,
    /// `Read-only file system`, …
    Write,
    /// No verb: `cat: x: Permission denied`.
    Unknown,
}

const WRITE_WORDS: [&str; 8] = [
    "create",
    "touch",
    "remove",
    "writ",
    "read-only file system",
    "move",
    "overwrite",
    "make directory",
];
const READ_WORDS: [&str; 6] = [
    "cannot read",
    "cannot access",
    "cannot open",
    "can't open",
    "cannot stat",
    "for reading",
];

/// The [`FsAccess`] one refusal line reports.
pub fn access_of(line: &str) -> FsAccess {
    let lower = line.to_ascii_lowercase();
    if WRITE_WORDS.iter().any(|w| lower.contains(w)) {
        FsAccess::Write
    } else if READ_WORDS.iter().any(|w| lower.contains(w)) {
        FsAccess::Read
    } else {
        FsAccess::Unknown
    }
}

/// Every path of [`paths`] with the [`FsAccess`] its line reports.
pub fn refused(stderr: &str) -> Vec<(String, FsAccess)> {
    let mut out: Vec<(String, FsAccess)> = Vec::new();
    for line in stderr.lines() {
        let Some(p) = path_of(line) else { continue };
        if out.iter().any(|(q, _)| *q == p) {
            continue;
        }
        out.push((p, access_of(line)));
        if out.len() == MAX_PATHS {
            break;
        }
    }
    out
}

fn last_quoted(line: &str) -> Option<String> {
    let mut found = None;
    let mut rest = line;
    while let Some(open) = rest.find(['\'', '"', '`', '‘']) {
        let opener = rest[open..].chars().next()?;
        let after = &rest[open + opener.len_utf8()..];
        let closers: &[char] = match opener {
            '`' => &['\'', '`'],
            '‘' => &['’'],
            '"' => &['"'],
            _ => &['\''],
        };
        let Some(close) = after.find(closers) else {
            break;
        };
        let inner = &after[..close];
        if looks_like_path(inner) {
            found = Some(inner.to_string());
        }
        let closer_len = after[close..].chars().next().map_or(1, char::len_utf8);
        rest = &after[close + closer_len..];
    }
    found
}

fn looks_like_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 4096
        && (s.contains('/') || (!s.contains(' ') && s.contains('.')))
        && !s.contains('\n')
}

/// Lexical normalisation: `.` dropped, `..` pops (never above `/`).
pub fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` as the command meant it: `~/…` under `$HOME`, relative ones
/// under the command's folder.
pub fn absolute(path: &str, cwd: &Path) -> PathBuf {
    let p = match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    };
    normalise(&cwd.join(p))
}

/// True when `path` lies outside every writable folder (device files such
/// as /dev/null count as writable).
pub fn outside(path: &Path, writable: &[PathBuf], devices: &[&str]) -> bool {
    if devices.iter().any(|d| path == Path::new(d)) {
        return false;
    }
    !writable.iter().any(|w| path.starts_with(w))
}

/// Whether the hub's own user could write `path` (or create it in its
/// folder): if not, the refusal is the file's permissions, not the sandbox.
pub fn hub_could_write(path: &Path) -> bool {
    let target = if path.symlink_metadata().is_ok() {
        path
    } else {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => return false,
        }
    };
    let Ok(c) = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// True when `stderr` reports a TCP connect or bind refused with EACCES,
/// as Landlock refuses them (`connect EACCES 127.0.0.1:80` from Node,
/// `connect: Permission denied` from bash, curl's "Permission denied"
/// after "Failed to connect").
pub fn tcp_refused(stderr: &str) -> bool {
    stderr.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        let net = ["connect", "bind", "listen"].iter().any(|w| l.contains(w));
        net && (l.contains("eacces") || l.contains("permission denied"))
    })
}
