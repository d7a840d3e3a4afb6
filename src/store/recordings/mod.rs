//! Recordings on disk: id validation (before any filesystem call), reading,
//! deleting and rewriting; the tool-list snapshots (`tools`) and the index
//! that listings read (`index`).

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

pub mod format;
pub mod index;
pub mod tool_lists;

use self::format::{Header, Line, Recording, SCHEMA_VERSION};
use crate::errors::{ErrorType, HubError};

pub const FILE: &str = "recording.jsonl";

/// `^[a-z0-9][a-z0-9_-]{0,63}$`, checked by hand (no path can pass).
pub fn valid_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

pub fn new_id() -> String {
    format!("rec-{}", uuid::Uuid::new_v4().simple())
}

/// The folder of a recording, refusing hostile ids and symlinks.
pub fn dir_of(storage: &Path, id: &str) -> Result<PathBuf, HubError> {
    if !valid_id(id) {
        return Err(HubError::new(
            ErrorType::InvalidMessage,
            format!(
                "{:?} is not a recording id: recording ids are 1-64 lowercase letters, \
                 digits, '-' and '_' (the hub's own look like \"rec-3f2a…\"), see list_recordings",
                crate::util::truncate(id, 80)
            ),
        )
        .with_suggestion(
            "use a recordingId from recording_started or send {\"type\":\"list_recordings\"}",
        ));
    }
    let dir = storage.join(id);
    match fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() => Err(HubError::new(
            ErrorType::Permission,
            format!(
                "recording folder {} is a symlink; refusing to follow it",
                dir.display()
            ),
        )),
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(not_found(id)),
        Err(_) => Err(not_found(id)),
    }
}

/// The answer for a recording that does not exist, and (the same, word
/// for word) for one a client token may not see.
pub fn not_found(id: &str) -> HubError {
    HubError::new(ErrorType::NotFound, format!("no recording {id:?}"))
        .with_suggestion("send {\"type\":\"list_recordings\"} to see the recordings")
}

fn corrupt(path: &Path, line: usize, e: impl std::fmt::Display) -> HubError {
    HubError::new(
        ErrorType::InvalidMessage,
        format!("{}:{line}: {e}", path.display()),
    )
}

fn check_version(path: &Path, h: &Header) -> Result<(), HubError> {
    if h.schema_version > SCHEMA_VERSION {
        return Err(HubError::new(
            ErrorType::InvalidMessage,
            format!(
                "{}: recording schemaVersion {} is newer than this hub supports ({SCHEMA_VERSION})",
                path.display(),
                h.schema_version
            ),
        )
        .with_suggestion("upgrade toolhub to read this recording"));
    }
    Ok(())
}

/// The client of `clients` that made recording `id` (its header's
/// `client`; `None`: the main token), reading only the header line.
pub fn client_of(storage: &Path, id: &str) -> Result<Option<String>, HubError> {
    let path = dir_of(storage, id)?.join(FILE);
    let f = File::open(&path).map_err(|_| not_found(id))?;
    let mut first = String::new();
    BufReader::new(f)
        .read_line(&mut first)
        .map_err(|e| corrupt(&path, 1, e))?;
    match serde_json::from_str::<Line>(&first) {
        Ok(Line::Header(h)) => Ok(h.client),
        _ => Err(corrupt(&path, 1, "not a recording header")),
    }
}

/// Read a whole recording. A torn last line (crash mid-write) is ignored
/// and the recording is marked incomplete.
pub fn load(storage: &Path, id: &str) -> Result<Recording, HubError> {
    let dir = dir_of(storage, id)?;
    let path = dir.join(FILE);
    let f = File::open(&path)
        .map_err(|e| HubError::new(ErrorType::NotFound, format!("{}: {e}", path.display())))?;
    let lines: Vec<String> = BufReader::new(f).lines().map_while(Result::ok).collect();
    let mut header = None;
    let mut steps = Vec::new();
    let mut end = None;
    let n = lines.len();
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let parsed: Result<Line, _> = serde_json::from_str(l);
        match parsed {
            Ok(Line::Header(h)) if i == 0 => {
                check_version(&path, &h)?;
                header = Some(h);
            }
            Ok(Line::Step(s)) => steps.push(s),
            Ok(Line::End(e)) => end = Some(e),
            Ok(Line::Header(_)) => return Err(corrupt(&path, i + 1, "a second header line")),
            Err(e) if i + 1 == n && header.is_some() => {
                tracing::warn!(path = %path.display(), error = %e, "torn last line ignored");
            }
            Err(e) => {
                // A newer schema may add kinds we do not know: say so.
                if let Ok(v) = serde_json::from_str::<Value>(l) {
                    if let Some(sv) = v.get("schemaVersion").and_then(Value::as_u64) {
                        if sv > SCHEMA_VERSION as u64 {
                            return Err(HubError::new(
                                ErrorType::InvalidMessage,
                                format!("{}: recording schemaVersion {sv} is newer than this hub supports ({SCHEMA_VERSION})", path.display()),
                            ));
                        }
                    }
                }
                return Err(corrupt(&path, i + 1, e));
            }
        }
    }
    let mut header = header.ok_or_else(|| corrupt(&path, 1, "no header line"))?;
    resolve_tools(storage, &mut header);
    Ok(Recording {
        incomplete: end.is_none(),
        header,
        steps,
        end,
    })
}

/// Fill in a schema-2 header's tool list from its stored snapshot (a
/// schema-1 header carries it inline). A missing snapshot leaves the list
/// empty: the recording still lists, replays and exports; a `dry` replay
/// then cannot check schemas.
fn resolve_tools(storage: &Path, h: &mut Header) {
    let Some(hash) = h.tools_hash.as_deref().filter(|_| h.tools.is_empty()) else {
        return;
    };
    match tool_lists::load(storage, hash) {
        Ok(list) => h.tools = list,
        Err(e) => {
            tracing::warn!(recording = %h.recording_id, error = %e, "the recording's tool-list snapshot is missing or unreadable")
        }
    }
}

/// The header as written: the tool list goes to its snapshot (stored once)
/// and the header names it by hash. An older header with its list inline
/// is migrated this way when its recording is rewritten.
pub fn header_for_disk(storage: &Path, h: &Header) -> std::io::Result<Header> {
    let mut out = h.clone();
    if !out.tools.is_empty() {
        out.tools_hash = Some(tool_lists::save(storage, &out.tools)?);
        out.tools.clear();
    }
    out.schema_version = SCHEMA_VERSION;
    Ok(out)
}

/// Delete a recording's folder (never following a symlink).
pub fn delete(storage: &Path, id: &str) -> Result<(), HubError> {
    let dir = dir_of(storage, id)?;
    fs::remove_dir_all(&dir).map_err(|e| {
        HubError::new(
            ErrorType::Permission,
            format!("cannot delete {}: {e}", dir.display()),
        )
    })
}

/// Rewrite a recording atomically (temp file, fsync, rename).
pub fn rewrite(storage: &Path, rec: &Recording) -> Result<(), HubError> {
    let dir = dir_of(storage, &rec.header.recording_id)?;
    let tmp = dir.join("recording.jsonl.tmp");
    let io = |e: std::io::Error| {
        HubError::new(
            ErrorType::Permission,
            format!("cannot rewrite {}: {e}", dir.display()),
        )
    };
    let header = header_for_disk(storage, &rec.header).map_err(io)?;
    let mut f = File::create(&tmp).map_err(io)?;
    let mut write = |l: &Line| -> std::io::Result<()> {
        let mut s = serde_json::to_string(l).map_err(std::io::Error::other)?;
        s.push('\n');
        f.write_all(s.as_bytes())
    };
    write(&Line::Header(header)).map_err(io)?;
    for s in &rec.steps {
        write(&Line::Step(s.clone())).map_err(io)?;
    }
    if let Some(e) = &rec.end {
        write(&Line::End(e.clone())).map_err(io)?;
    }
    f.sync_all().map_err(io)?;
    fs::rename(&tmp, dir.join(FILE)).map_err(io)
}

/// Replace `{"$file": …}` results with the stored values (for replays and
/// offline servers, which compare and answer with the real result).
pub fn inline_files(storage: &Path, rec: &mut Recording) {
    let id = rec.header.recording_id.clone();
    for step in rec.steps.iter_mut() {
        let Some(name) = step
            .result
            .get("$file")
            .and_then(Value::as_str)
            .map(String::from)
        else {
            continue;
        };
        match read_attachment(storage, &id, &name)
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        {
            Some(v) => step.result = v,
            None => {
                tracing::warn!(recording = %id, file = %name, "a stored result is missing or unreadable")
            }
        }
    }
}

/// Read a file stored beside a recording (images, large results).
pub fn read_attachment(storage: &Path, id: &str, name: &str) -> Option<Vec<u8>> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
        && !name.starts_with('.');
    if !ok {
        return None;
    }
    let dir = dir_of(storage, id).ok()?;
    fs::read(dir.join(name)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_are_refused_before_any_fs_call() {
        for bad in [
            "../x",
            "..%2F",
            "/etc/passwd",
            "a\0b",
            &"a".repeat(300),
            "",
            "A",
            ".",
            "x/y",
        ] {
            assert!(!valid_id(bad), "{bad:?}");
            assert!(dir_of(Path::new("/nonexistent"), bad).is_err());
        }
        assert!(valid_id(&new_id()));
        assert!(valid_id("login-flow_2"));
    }
}
