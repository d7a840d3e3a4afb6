//! `read_file`, `write_file` and `list_directory`, confined to one workspace
//! folder (`builtin.workspace`).
//!
//! Confinement: [`resolve_under`] normalises the user's path lexically, then
//! canonicalises its longest existing prefix, so `..` and symlinks are judged
//! by where they really lead; only a result inside the canonical root is
//! accepted, and the operation is applied to that resolved path (never to the
//! user's spelling). What is left is the usual check-then-use window: a
//! component swapped for a symlink between the check and the open. The final
//! component is opened with `O_NOFOLLOW` and replaced by rename (which does not
//! follow symlinks), which closes that window for the file itself; directory
//! components are not re-checked (the hub runs as the user it protects, so
//! whoever can swap them can already write the files).
//!
//! The file work is blocking std IO run on tokio's blocking pool.

use crate::b64;
pub(crate) mod params;
mod schema;

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use crate::errors::{ErrorType, HubError};
use crate::store::offload::blocking;

pub use schema::tool_definitions;

/// Most entries `list_directory` returns; the rest are cut and `truncated` set.
const MAX_LIST_ENTRIES: usize = 10_000;

/// The confinement root plus the read limit. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    max_read_bytes: usize,
}

impl Workspace {
    /// Creates `root` if it is missing and keeps its canonical form, so later
    /// containment checks compare canonical paths with canonical paths.
    pub fn new(root: &Path, max_read_bytes: usize) -> std::io::Result<Workspace> {
        fs::create_dir_all(root)?;
        let root = fs::canonicalize(root)?;
        Ok(Workspace {
            root,
            max_read_bytes,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The real path a user path names, refused unless it is inside the root.
    pub fn resolve(&self, user_path: &str) -> Result<PathBuf, HubError> {
        resolve_under(&self.root, user_path, "path")
    }

    /// `{path, encoding?}` → the content as a JSON string.
    pub async fn read_file(&self, params: &Value) -> Result<Value, HubError> {
        let map = params::object(params)?;
        let user_path = params::req_str(map, "path")?.to_string();
        let base64 = params::base64_encoding(map)?;
        let ws = self.clone();
        blocking(move || ws.read_sync(&user_path, base64)).await
    }

    /// `{path, content, encoding?, append?, createDirs?}` → `{"path", "bytes"}`.
    pub async fn write_file(&self, params: &Value) -> Result<Value, HubError> {
        let map = params::object(params)?;
        let user_path = params::req_str(map, "path")?.to_string();
        let content = params::req_str(map, "content")?;
        let data = if params::base64_encoding(map)? {
            b64::decode(content).map_err(|e| {
                HubError::new(
                    ErrorType::InvalidParams,
                    format!("parameter 'content' is not valid base64: {e}"),
                )
                .with_suggestion("send standard base64, or drop \"encoding\" to write text")
            })?
        } else {
            content.as_bytes().to_vec()
        };
        let append = params::opt_bool(map, "append")?.unwrap_or(false);
        let create_dirs = params::opt_bool(map, "createDirs")?.unwrap_or(true);
        let ws = self.clone();
        blocking(move || ws.write_sync(&user_path, &data, append, create_dirs)).await
    }

    /// `{path?}` (default ".") → `{"path", "entries": [{name, type, size}], "truncated"}`.
    pub async fn list_directory(&self, params: &Value) -> Result<Value, HubError> {
        let map = params::object(params)?;
        let user_path = params::opt_str(map, "path")?.unwrap_or(".").to_string();
        let ws = self.clone();
        blocking(move || ws.list_sync(&user_path)).await
    }

    fn read_sync(&self, user_path: &str, base64: bool) -> Result<Value, HubError> {
        let path = self.resolve(user_path)?;
        // Refuse FIFOs and devices before opening: opening a FIFO blocks.
        let meta = fs::symlink_metadata(&path).map_err(|e| self.io_error(e, user_path, "read"))?;
        if meta.is_dir() {
            return Err(HubError::new(
                ErrorType::InvalidParams,
                format!("'{user_path}' is a directory, not a file"),
            )
            .with_suggestion("use list_directory to see what it contains"));
        }
        if !meta.is_file() {
            return Err(HubError::new(
                ErrorType::InvalidParams,
                format!("'{user_path}' is not a regular file"),
            )
            .with_suggestion("read_file reads regular files only"));
        }
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| self.io_error(e, user_path, "read"))?;
        let limit = self.max_read_bytes;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if size > limit as u64 {
            return Err(self.too_big(user_path, size));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        // One byte past the limit tells a file that grew since the stat.
        file.take(limit as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io_error(e, user_path, "read"))?;
        if bytes.len() > limit {
            return Err(self.too_big(user_path, bytes.len() as u64));
        }
        if base64 {
            return Ok(Value::String(b64::encode(&bytes)));
        }
        match String::from_utf8(bytes) {
            Ok(text) => Ok(Value::String(text)),
            Err(e) => Err(HubError::new(
                ErrorType::InvalidParams,
                format!(
                    "'{user_path}' is not UTF-8 text (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            )
            .with_suggestion("read binary files with \"encoding\": \"base64\"")),
        }
    }

    fn write_sync(
        &self,
        user_path: &str,
        data: &[u8],
        append: bool,
        create_dirs: bool,
    ) -> Result<Value, HubError> {
        let path = self.resolve(user_path)?;
        let parent_and_name = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) if path != self.root => Some((parent, name)),
            _ => None,
        };
        let Some((parent, name)) = parent_and_name else {
            return Err(HubError::new(
                ErrorType::InvalidParams,
                format!("'{user_path}' is the workspace folder itself, not a file"),
            )
            .with_suggestion("name a file inside the workspace, e.g. \"notes.txt\""));
        };
        if create_dirs {
            fs::create_dir_all(parent)
                .map_err(|e| self.io_error(e, user_path, "create the folder of"))?;
        } else if !parent.is_dir() {
            return Err(HubError::new(
                ErrorType::NotFound,
                format!(
                    "the folder of '{user_path}' does not exist in the workspace {}",
                    self.root.display()
                ),
            )
            .with_suggestion("create the folder first, or pass \"createDirs\": true"));
        }
        let existing = fs::symlink_metadata(&path).ok();
        if existing.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(HubError::new(
                ErrorType::InvalidParams,
                format!("'{user_path}' is a directory, not a file"),
            )
            .with_suggestion("pass the path of a file inside that directory"));
        }
        let io = |e| self.io_error(e, user_path, "write");
        if append {
            let mut file = OpenOptions::new()
                .append(true)
                .create(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(io)?;
            file.write_all(data).map_err(io)?;
        } else {
            atomic_replace(parent, name, &path, data, existing.as_ref()).map_err(io)?;
        }
        Ok(json!({"path": self.relative(&path), "bytes": data.len()}))
    }

    fn list_sync(&self, user_path: &str) -> Result<Value, HubError> {
        let path = self.resolve(user_path)?;
        let io = |e| self.io_error(e, user_path, "list");
        let mut found = Vec::new();
        for entry in fs::read_dir(&path).map_err(io)? {
            let entry = entry.map_err(io)?;
            // DirEntry::file_type does not follow symlinks.
            let kind = match entry.file_type() {
                Ok(t) if t.is_symlink() => "symlink",
                Ok(t) if t.is_dir() => "dir",
                Ok(t) if t.is_file() => "file",
                _ => "other",
            };
            found.push((
                entry.file_name().to_string_lossy().into_owned(),
                kind,
                entry,
            ));
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let truncated = found.len() > MAX_LIST_ENTRIES;
        found.truncate(MAX_LIST_ENTRIES);
        let entries: Vec<Value> = found
            .into_iter()
            .map(|(name, kind, entry)| {
                let size = match kind {
                    "file" => entry
                        .metadata()
                        .map(|m| json!(m.len()))
                        .unwrap_or(Value::Null),
                    _ => Value::Null,
                };
                json!({"name": name, "type": kind, "size": size})
            })
            .collect();
        Ok(json!({"path": self.relative(&path), "entries": entries, "truncated": truncated}))
    }

    /// Workspace-relative display form of a resolved path ("." for the root).
    fn relative(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    fn too_big(&self, user_path: &str, size: u64) -> HubError {
        HubError::new(
            ErrorType::LimitExceeded,
            format!(
                "'{user_path}' is {size} bytes, over the read limit of {} bytes",
                self.max_read_bytes
            ),
        )
        .with_suggestion(
            "read part of it with run_command (e.g. head -c), or raise builtin.maxReadBytes",
        )
    }

    fn io_error(&self, e: std::io::Error, user_path: &str, action: &str) -> HubError {
        let root = self.root.display();
        match e.kind() {
            ErrorKind::NotFound => HubError::new(
                ErrorType::NotFound,
                format!("cannot {action} '{user_path}': it does not exist in the workspace {root}"),
            )
            .with_suggestion("check the path with list_directory"),
            ErrorKind::NotADirectory => HubError::new(
                ErrorType::InvalidParams,
                format!("cannot {action} '{user_path}': a part of the path is not a directory"),
            )
            .with_suggestion("check the path with list_directory"),
            ErrorKind::PermissionDenied => HubError::new(
                ErrorType::Permission,
                format!("cannot {action} '{user_path}': permission denied"),
            )
            .with_suggestion("check the file's permissions in the workspace"),
            // O_NOFOLLOW met a symlink planted after the path was checked.
            _ if e.raw_os_error() == Some(libc::ELOOP) => HubError::new(
                ErrorType::Permission,
                format!("cannot {action} '{user_path}': it is a symlink"),
            )
            .with_suggestion(format!("use a path inside the workspace {root}")),
            _ => HubError::classified(format!("cannot {action} '{user_path}': {e}")),
        }
    }
}

/// Resolves `user_path` (relative to `root`, or absolute) to a real path
/// inside `root`, which must be canonical. `field` names the parameter in
/// errors. Missing trailing components are allowed (for writes).
pub(crate) fn resolve_under(
    root: &Path,
    user_path: &str,
    field: &str,
) -> Result<PathBuf, HubError> {
    if user_path.contains('\0') {
        return Err(HubError::new(
            ErrorType::InvalidParams,
            format!("parameter '{field}' contains a NUL byte"),
        )
        .with_suggestion("remove the NUL character from the path"));
    }
    if user_path.is_empty() {
        return Err(HubError::new(
            ErrorType::InvalidParams,
            format!("parameter '{field}' is empty, expected a path inside the workspace"),
        )
        .with_suggestion("use \".\" for the workspace folder itself"));
    }
    // The workspace is the tool's root: an absolute path that is not under
    // the real workspace folder is read as workspace-relative ("/a.json" is
    // <workspace>/a.json), so the extension's examples work and nothing
    // outside can be named.
    let p = Path::new(user_path);
    let joined = if p.is_absolute() && !p.starts_with(root) {
        root.join(user_path.trim_start_matches('/'))
    } else {
        root.join(user_path)
    };
    let mut lexical = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other.as_os_str()),
        }
    }
    // The longest prefix that exists (a dangling symlink counts as existing,
    // so it cannot be skipped over and then created through).
    let existing = lexical
        .ancestors()
        .find(|p| fs::symlink_metadata(p).is_ok())
        .unwrap_or(Path::new("/"));
    let outside = || {
        HubError::new(
            ErrorType::Permission,
            format!(
                "path '{user_path}' is outside the workspace {}",
                root.display()
            ),
        )
        .with_suggestion(format!(
            "use a path inside the workspace {} (relative paths are resolved against it)",
            root.display()
        ))
    };
    let real = match fs::canonicalize(existing) {
        Ok(real) => real,
        // A dangling or looping symlink: where it leads cannot be checked.
        Err(_) if existing.starts_with(root) => {
            return Err(HubError::new(
                ErrorType::Permission,
                format!(
                    "path '{user_path}' goes through a symlink whose target does not exist or loops"
                ),
            )
            .with_suggestion(format!(
                "use a path inside the workspace {} that does not pass through a broken symlink",
                root.display()
            )))
        }
        Err(_) => return Err(outside()),
    };
    let rest = lexical.strip_prefix(existing).unwrap_or(Path::new(""));
    let full = if rest.as_os_str().is_empty() {
        real
    } else {
        real.join(rest)
    };
    // Component-wise comparison: "/ws-other" does not start with "/ws".
    if full.starts_with(root) {
        Ok(full)
    } else {
        Err(outside())
    }
}

/// Writes `data` to a new temp file next to `path`, flushes it to disk and
/// renames it over `path`, so readers see the old or the new file, never a
/// mix. Keeps the permissions of the file it replaces.
fn atomic_replace(
    dir: &Path,
    name: &std::ffi::OsStr,
    path: &Path,
    data: &[u8],
    existing: Option<&fs::Metadata>,
) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{}.toolhub-{}-{n}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        file.write_all(data)?;
        if let Some(meta) = existing.filter(|m| m.is_file()) {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_data()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests;
