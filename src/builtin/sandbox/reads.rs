//! What a confined command may read: everything but the denied paths
//! (`builtin.sandboxDenyRead`, and always the hub's own config file and
//! state dir), granted by allowance because Landlock only grants.
//!
//! Landlock rules are hierarchical: a right granted on a folder reaches
//! everything beneath it. So the hub grants around each denied path: a
//! folder with a denied path beneath it (an *ancestor*: `/`, `/home`,
//! `~`, `~/.config` for `~/.config/gcloud`) gets only the rights that do
//! not read file contents (listing it, and writing when it lies in a
//! writable folder), and each of its entries but the denied one is granted
//! in full, recursively (files with file rights only). Listing reaches the
//! denied folders too: `ls ~/.ssh` shows names, `cat ~/.ssh/id_ed25519` is
//! refused. Symbolic links get no rule: the kernel checks the path they
//! lead to.
//!
//! [`plan`] lists the rules (it reads the few ancestor folders; pure
//! otherwise, so it is tested without Landlock); the sandbox turns them
//! into a ruleset per call, so an entry created since the last call is
//! granted too.

use std::path::{Path, PathBuf};

/// The read policy of one sandbox.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadPolicy {
    /// `builtin.sandboxDenyRead`.
    pub deny: Vec<PathBuf>,
    /// `builtin.sandboxAllowRead`: granted again beneath a denied path.
    pub allow: Vec<PathBuf>,
    /// The hub's config file and state dir: denied whatever the config
    /// says; `sandboxAllowRead` cannot reach into them.
    pub private: Vec<PathBuf>,
}

/// How much a rule grants; [`Level::Ancestor`] variants withhold reading
/// file contents beneath the folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Read (files and folders).
    Read,
    /// Read and every write right (a writable folder).
    Write,
    /// A folder on the way to a denied path: list it.
    ReadAncestor,
    /// A writable folder on the way to a denied path: list and write, not
    /// read file contents.
    WriteAncestor,
}

impl Level {
    fn ancestor(self) -> Level {
        match self {
            Level::Read | Level::ReadAncestor => Level::ReadAncestor,
            Level::Write | Level::WriteAncestor => Level::WriteAncestor,
        }
    }
}

/// One Landlock rule to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub path: PathBuf,
    pub dir: bool,
    pub level: Level,
}

/// Why a path is denied: the configured entry or the hub's own file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// Beneath this `builtin.sandboxDenyRead` entry.
    Listed(PathBuf),
    /// The hub's config file or state dir.
    Private(PathBuf),
}

impl ReadPolicy {
    /// The denied paths that exist now, resolved (a denied folder reached
    /// through a symbolic link is denied where it really is).
    pub fn denied_now(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .deny
            .iter()
            .chain(&self.private)
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The allowed paths that exist now, resolved, less any in the hub's
    /// own files.
    fn allowed_now(&self) -> Vec<PathBuf> {
        let private: Vec<PathBuf> = self.private.iter().map(|p| resolved(p)).collect();
        self.allow
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .filter(|p| !private.iter().any(|q| p.starts_with(q)))
            .collect()
    }

    /// Why `path` (absolute; resolved here when it exists) is not
    /// readable, or `None` when the policy lets it be read.
    pub fn denial(&self, path: &Path) -> Option<Denial> {
        let path = resolved(path);
        if let Some(p) = self.private.iter().find(|p| path.starts_with(resolved(p))) {
            return Some(Denial::Private(p.clone()));
        }
        if self.allow.iter().any(|a| path.starts_with(resolved(a))) {
            return None;
        }
        self.deny
            .iter()
            .find(|d| path.starts_with(resolved(d)))
            .map(|d| Denial::Listed(d.clone()))
    }
}

/// `p` for people: beneath the hub's `HOME` as `~/…`.
pub fn tilde(p: &Path) -> String {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty() && h != "/");
    match home.and_then(|h| p.strip_prefix(h).ok().map(Path::to_path_buf)) {
        Some(rest) if rest.as_os_str().is_empty() => "~".to_string(),
        Some(rest) => format!("~/{}", rest.display()),
        None => p.display().to_string(),
    }
}

/// `p` with its links resolved when it exists, else as given.
fn resolved(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The rules of one call: read everywhere but the denied paths, the
/// writable folders in full (around denied paths too), the allowed paths
/// again. A writable folder or an allowed path is granted even where it
/// lies beneath a denied one (the private temp dir is in the state dir).
pub fn plan(policy: &ReadPolicy, writable: &[PathBuf]) -> Vec<Rule> {
    let denied = policy.denied_now();
    let mut out = Vec::new();
    let mut grant = |path: &Path, level: Level| {
        let (Ok(path), Ok(meta)) = (std::fs::canonicalize(path), std::fs::metadata(path)) else {
            return;
        };
        expand(&path, meta.is_dir(), level, &denied, &mut out);
    };
    grant(Path::new("/"), Level::Read);
    for w in writable {
        grant(w, Level::Write);
    }
    for a in policy.allowed_now() {
        grant(&a, Level::Read);
    }
    out
}

fn expand(path: &Path, dir: bool, level: Level, denied: &[PathBuf], out: &mut Vec<Rule>) {
    let around = dir && denied.iter().any(|d| d != path && d.starts_with(path));
    if !around {
        out.push(Rule {
            path: path.to_path_buf(),
            dir,
            level,
        });
        return;
    }
    out.push(Rule {
        path: path.to_path_buf(),
        dir,
        level: level.ancestor(),
    });
    let Ok(entries) = std::fs::read_dir(path) else {
        tracing::debug!(path = %path.display(), "sandbox: cannot list a folder above a denied path; its entries stay unreadable");
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        let child = entry.path();
        if denied.contains(&child) {
            continue;
        }
        expand(&child, kind.is_dir(), level, denied, out);
    }
}

/// Whether the hub's own user could read `path`: if not, a refusal is the
/// file's permissions, not the sandbox.
pub fn hub_could_read(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::R_OK) == 0 }
}

#[cfg(test)]
mod tests;
