//! Runs on disk: `<storage>/<run_id>/{.metadata.json, logs/execution.jsonl,
//! screenshots/, scripts/, outputs/}`.
//!
//! Every path is built from an id that passed [`model::valid_id`] inside
//! [`dir_of`], which also refuses a symlinked run folder. Log lines are
//! appended whole (`util::append_whole`); metadata is rewritten through a
//! temp file and a rename, so a reader sees the old file or the new one.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use serde_json::json;

use super::model::{self, LogEntry, Metadata, ReadError, RunStatus, META_SCHEMA};
use crate::errors::{ErrorType, HubError};

pub const META: &str = ".metadata.json";
pub const LOG: &str = "logs/execution.jsonl";
pub const SUBDIRS: [&str; 4] = ["logs", "screenshots", "scripts", "outputs"];

fn io_err(what: &str, path: &Path, e: std::io::Error) -> HubError {
    HubError::new(
        ErrorType::Permission,
        format!("cannot {what} {}: {e}", path.display()),
    )
}

/// The ids of every run folder (unsorted), for listings and suggestions.
pub fn ids(storage: &Path) -> Vec<String> {
    let Ok(rd) = fs::read_dir(storage) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|id| model::valid_id(id))
        .collect()
}

pub fn not_found(storage: &Path, id: &str) -> HubError {
    let ids = ids(storage);
    let near = crate::suggest::did_you_mean(id, ids.iter().map(String::as_str));
    let hint = match near.first() {
        Some(n) => format!("did you mean {n:?}? list_runs shows every run"),
        None => "list_runs shows every run; create_run makes a new one".into(),
    };
    HubError::new(ErrorType::NotFound, format!("no run {id:?}")).with_suggestion(hint)
}

/// The folder of an existing run, refusing hostile ids and symlinks.
pub fn dir_of(storage: &Path, id: &str) -> Result<PathBuf, HubError> {
    let id = model::check_id(id)?;
    let dir = storage.join(id);
    match fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() => Err(HubError::new(
            ErrorType::Permission,
            format!(
                "run folder {} is a symlink; refusing to follow it",
                dir.display()
            ),
        )),
        Ok(m) if m.is_dir() => Ok(dir),
        _ => Err(not_found(storage, id)),
    }
}

pub fn exists(storage: &Path, id: &str) -> bool {
    dir_of(storage, id).is_ok()
}

pub fn write_meta(dir: &Path, meta: &Metadata) -> Result<(), HubError> {
    let path = dir.join(META);
    let text = serde_json::to_vec_pretty(meta).map_err(|e| io_err("encode", &path, e.into()))?;
    crate::util::write_atomic(&path, &text).map_err(|e| io_err("write", &path, e))
}

/// Create a run. Without an id, the theme's slug (or `run`), made unique
/// with `-2`, `-3`, …; `create_dir` claims the name, so two creators never
/// share a folder. `client` is who creates it (`None`: the main token).
pub fn create(
    storage: &Path,
    theme: &str,
    id: Option<&str>,
    client: Option<&str>,
) -> Result<Metadata, HubError> {
    model::check_theme(theme)?;
    fs::create_dir_all(storage).map_err(|e| io_err("create", storage, e))?;
    let (dir, run_id) = match id {
        Some(id) => {
            let id = model::check_id(id)?;
            let dir = storage.join(id);
            fs::create_dir(&dir).map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => HubError::new(
                    ErrorType::InvalidParams,
                    format!("run {id:?} already exists"),
                )
                .with_suggestion(format!(
                    "set_run {{\"runId\":\"{id}\"}} works in it; or omit runId for a fresh one"
                )),
                _ => io_err("create", &dir, e),
            })?;
            (dir, id.to_string())
        }
        None => claim(
            storage,
            &model::slugify(theme, 44).unwrap_or_else(|| "run".into()),
        )?,
    };
    for sub in SUBDIRS {
        let p = dir.join(sub);
        fs::create_dir_all(&p).map_err(|e| io_err("create", &p, e))?;
    }
    let now = crate::util::now_rfc3339();
    let meta = Metadata {
        run_id,
        theme_description: theme.to_string(),
        created_at: now.clone(),
        last_accessed: now,
        status: RunStatus::Active,
        schema_version: META_SCHEMA.into(),
        client: client.map(String::from),
    };
    write_meta(&dir, &meta)?;
    Ok(meta)
}

fn claim(storage: &Path, base: &str) -> Result<(PathBuf, String), HubError> {
    for n in 1..10_000u32 {
        let id = if n == 1 {
            base.to_string()
        } else {
            format!("{base}-{n}")
        };
        let dir = storage.join(&id);
        match fs::create_dir(&dir) {
            Ok(()) => return Ok((dir, id)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err("create", &dir, e)),
        }
    }
    Err(HubError::new(
        ErrorType::LimitExceeded,
        format!("too many runs named {base:?}"),
    ))
}

/// A run's metadata. A missing or unreadable `.metadata.json` is rebuilt
/// from the log (and written back); the second value says so.
pub fn read_meta(storage: &Path, id: &str) -> Result<(Metadata, Option<String>), HubError> {
    let (meta, problem) = peek_meta(storage, id)?;
    if let Some(p) = &problem {
        tracing::warn!(run = id, "{p}");
        write_meta(&dir_of(storage, id)?, &meta)?;
    }
    Ok((meta, problem))
}

/// [`read_meta`] without writing anything: a missing or unreadable
/// `.metadata.json` is rebuilt from the log in memory only (the index
/// reads runs this way, so checking it never changes a run).
pub fn peek_meta(storage: &Path, id: &str) -> Result<(Metadata, Option<String>), HubError> {
    let dir = dir_of(storage, id)?;
    let path = dir.join(META);
    let problem = match fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice::<Metadata>(&bytes) {
            Ok(meta) => {
                model::check_meta_version(&meta)?;
                return Ok((meta, None));
            }
            Err(e) => format!(
                "{} was unreadable ({e}); rebuilt from the log",
                path.display()
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("{META} was missing; rebuilt from the log")
        }
        Err(e) => return Err(io_err("read", &path, e)),
    };
    Ok((rebuild(&dir, id), Some(problem)))
}

/// Metadata from the log: first and last timestamps, the first step as theme.
fn rebuild(dir: &Path, id: &str) -> Metadata {
    let text = fs::read_to_string(dir.join(LOG)).unwrap_or_default();
    let entries: Vec<LogEntry> = text
        .lines()
        .filter_map(|l| model::read_entry(l).ok())
        .collect();
    let now = crate::util::now_rfc3339();
    let first = entries.first();
    Metadata {
        run_id: id.to_string(),
        theme_description: first
            .map(|e| format!("(rebuilt) {}", e.step))
            .unwrap_or_else(|| format!("(rebuilt) {id}")),
        created_at: first.map(|e| e.timestamp.clone()).unwrap_or(now.clone()),
        last_accessed: entries.last().map(|e| e.timestamp.clone()).unwrap_or(now),
        status: RunStatus::Active,
        schema_version: META_SCHEMA.into(),
        // Who made it was in the lost metadata: the main token's now.
        client: None,
    }
}

/// Set `last_accessed` to now and the status to `status`.
pub fn touch(storage: &Path, id: &str, status: RunStatus) -> Result<Metadata, HubError> {
    let (mut meta, _) = read_meta(storage, id)?;
    meta.last_accessed = crate::util::now_rfc3339();
    meta.status = status;
    write_meta(&dir_of(storage, id)?, &meta)?;
    Ok(meta)
}

/// Append one validated entry as a whole line. Callers serialise appends to
/// one run (the service's per-run lock); `O_APPEND` keeps each line in one
/// `write`, so even another process never splits it.
pub fn append(storage: &Path, id: &str, entry: &LogEntry) -> Result<(), HubError> {
    entry.validate()?;
    let dir = dir_of(storage, id)?;
    let path = dir.join(LOG);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| io_err("create", parent, e))?;
    }
    let mut line = serde_json::to_vec(entry).map_err(|e| io_err("encode", &path, e.into()))?;
    line.push(b'\n');
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| io_err("open", &path, e))?;
    crate::util::append_whole(&mut f, &line).map_err(|e| io_err("append to", &path, e))
}

/// The last `n` entries, read from the end of the log; corrupt lines are
/// skipped and counted. A line written by a newer hub is refused.
pub struct Tail {
    pub entries: Vec<LogEntry>,
    pub skipped: usize,
}

pub fn tail(storage: &Path, id: &str, n: usize) -> Result<Tail, HubError> {
    let dir = dir_of(storage, id)?;
    let path = dir.join(LOG);
    let text = match crate::util::read_last_lines(&path, n) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_err("read", &path, e)),
    };
    let mut entries = Vec::new();
    let mut skipped = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match model::read_entry(line) {
            Ok(e) => entries.push(e),
            Err(ReadError::Corrupt(why)) => {
                skipped += 1;
                tracing::warn!(run = id, error = %why, "skipping a corrupt log line");
            }
            Err(ReadError::TooNew(v)) => return Err(too_new(id, &v)),
        }
    }
    let keep = entries.len().saturating_sub(n);
    entries.drain(..keep);
    Ok(Tail { entries, skipped })
}

fn too_new(id: &str, version: &str) -> HubError {
    let known = model::ENTRY_SCHEMA;
    HubError::new(
        ErrorType::InvalidParams,
        format!("run {id:?} has a log entry with schema_version {version:?}; this hub reads up to {known}"),
    )
    .with_suggestion("upgrade toolhub to read this run")
}

/// Delete a run's folder (never following a symlink).
pub fn delete(storage: &Path, id: &str) -> Result<(), HubError> {
    let dir = dir_of(storage, id)?;
    fs::remove_dir_all(&dir).map_err(|e| io_err("delete", &dir, e))
}

/// Claim `screenshots/NNN_<slug>.png` with NNN one above the highest
/// existing number; `create_new` makes two writers take different numbers.
pub fn claim_screenshot(storage: &Path, id: &str, slug: &str) -> Result<(PathBuf, File), HubError> {
    let dir = dir_of(storage, id)?.join("screenshots");
    fs::create_dir_all(&dir).map_err(|e| io_err("create", &dir, e))?;
    let highest = fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    name.get(..3)?.parse::<u32>().ok()
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    for n in highest + 1..=999 {
        let path = dir.join(format!("{n:03}_{slug}.png"));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err("create", &path, e)),
        }
    }
    Err(HubError::new(
        ErrorType::LimitExceeded,
        format!("run {id:?} has 999 screenshots already"),
    ))
}

/// The run metadata as it goes on the wire (camelCase).
pub fn meta_json(m: &Metadata) -> serde_json::Value {
    json!({
        "runId": m.run_id,
        "theme": m.theme_description,
        "createdAt": m.created_at,
        "lastAccessed": m.last_accessed,
        "status": m.status,
        "schemaVersion": m.schema_version,
        "client": m.client,
    })
}
