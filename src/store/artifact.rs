//! One stored file of a recording or a run (a step's image, a screenshot, a
//! large result, an output), read for `get_artifact` and strictly confined
//! to its owner's folder.
//!
//! The owner's folder comes from `dir_of` of its store (a validated id, not a
//! symlink). The client's `path` is then checked twice: lexically (relative,
//! plain names only: no `..`, `.`, root, backslash or NUL) and on disk (the
//! canonical path must still lie inside the canonical folder, so a symlink
//! pointing out is refused; the final open does not follow a symlink and
//! does not block on a FIFO). Only a regular file up to the size cap is read.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use crate::errors::{ErrorType, HubError};

/// The largest file `get_artifact` returns (its base64 is a third larger).
pub const MAX_BYTES: u64 = 8 * 1024 * 1024;
/// Longest `path` accepted.
const MAX_PATH: usize = 512;

/// A file read from an owner's folder.
#[derive(Debug)]
pub struct Artifact {
    /// The path as asked, relative to the owner's folder.
    pub path: String,
    pub mime: &'static str,
    pub bytes: Vec<u8>,
}

/// Read `rel` inside `root` (the owner's folder, already validated), at most
/// `max` bytes. `owner` names the folder in errors ("recording \"rec-1\"").
pub fn read(root: &Path, rel: &str, owner: &str, max: u64) -> Result<Artifact, HubError> {
    check_lexically(rel, owner)?;
    let base = fs::canonicalize(root).map_err(|e| io_error(owner, rel, &e))?;
    let full = match fs::canonicalize(root.join(rel)) {
        Ok(p) => p,
        Err(e) => return Err(io_error(owner, rel, &e)),
    };
    if !full.starts_with(&base) {
        return Err(HubError::new(
            ErrorType::Permission,
            format!("{rel:?} leads outside the folder of {owner} (a symlink); refusing to follow it"),
        )
        .with_suggestion(
            "ask for a file that is stored in the folder itself, as named by get_recording (a step's images and screenshot) or get_run (an entry's data.screenshot)",
        ));
    }
    let mut f = open_plain(&full).map_err(|e| io_error(owner, rel, &e))?;
    let meta = f.metadata().map_err(|e| io_error(owner, rel, &e))?;
    if !meta.is_file() {
        return Err(HubError::new(
            ErrorType::InvalidParams,
            format!("{rel:?} in {owner} is not a file"),
        )
        .with_suggestion("name one file, e.g. \"screenshots/001_front-page.png\""));
    }
    if meta.len() > max {
        return Err(too_big(rel, owner, meta.len(), max, &full));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.by_ref()
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(owner, rel, &e))?;
    // The file grew between the size check and the read.
    if bytes.len() as u64 > max {
        return Err(too_big(rel, owner, bytes.len() as u64, max, &full));
    }
    Ok(Artifact {
        path: rel.to_string(),
        mime: mime_of(rel, &bytes),
        bytes,
    })
}

/// Relative, made of plain names, no separator tricks.
fn check_lexically(rel: &str, owner: &str) -> Result<(), HubError> {
    let bad = |why: &str| {
        HubError::new(
            ErrorType::InvalidParams,
            format!(
                "path {:?} {why}: it must name a file inside the folder of {owner}",
                crate::util::truncate(rel, 80)
            ),
        )
        .with_suggestion(
            "give the path relative to that folder, as get_recording or get_run name it (\"step-2.png\", \"screenshots/001_front-page.png\"), without '..' or a leading '/'",
        )
    };
    if rel.is_empty() {
        return Err(bad("is empty"));
    }
    if rel.len() > MAX_PATH {
        return Err(bad("is too long"));
    }
    if rel.contains('\0') || rel.contains('\\') {
        return Err(bad("holds a NUL or a backslash"));
    }
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(_) => {}
            Component::ParentDir => return Err(bad("climbs out with '..'")),
            Component::RootDir | Component::Prefix(_) => return Err(bad("is absolute")),
            Component::CurDir => return Err(bad("holds '.'")),
        }
    }
    Ok(())
}

/// Open without following a final symlink and without blocking on a FIFO.
fn open_plain(path: &PathBuf) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

fn io_error(owner: &str, rel: &str, e: &std::io::Error) -> HubError {
    match e.kind() {
        std::io::ErrorKind::NotFound => HubError::new(
            ErrorType::NotFound,
            format!("{owner} has no file {rel:?}"),
        )
        .with_suggestion(
            "the names are in get_recording (a step's images and screenshot) and get_run (an entry's data.screenshot); paths are relative to the folder",
        ),
        _ => HubError::new(
            ErrorType::Permission,
            format!("cannot read {rel:?} of {owner}: {e}"),
        ),
    }
}

fn too_big(rel: &str, owner: &str, size: u64, max: u64, full: &Path) -> HubError {
    HubError::new(
        ErrorType::LimitExceeded,
        format!("{rel:?} of {owner} is {size} bytes; get_artifact returns files up to {max} bytes"),
    )
    .with_suggestion(format!(
        "open it on the hub's machine instead: {}",
        full.display()
    ))
}

/// The media type, from the name, else from the first bytes of an image.
pub fn mime_of(name: &str, bytes: &[u8]) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        "jsonl" => "application/x-ndjson",
        "md" => "text/markdown",
        "html" | "htm" => "text/html",
        "txt" | "log" => "text/plain",
        "csv" => "text/csv",
        "pdf" => "application/pdf",
        _ if bytes.starts_with(b"\x89PNG\r\n\x1a\n") => "image/png",
        _ if bytes.starts_with(b"\xff\xd8\xff") => "image/jpeg",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().expect("dir");
        let root = d.path().join("owner");
        fs::create_dir_all(root.join("screenshots")).expect("mkdir");
        fs::write(root.join("screenshots/001_a.png"), b"\x89PNG\r\n\x1a\nrest").expect("write");
        fs::write(d.path().join("secret.txt"), b"outside").expect("write");
        (d, root)
    }

    #[test]
    fn a_file_inside_is_read_with_its_media_type() {
        let (_d, root) = folder();
        let a = read(&root, "screenshots/001_a.png", "run \"x\"", MAX_BYTES).expect("read");
        assert_eq!(a.mime, "image/png");
        assert_eq!(a.bytes, b"\x89PNG\r\n\x1a\nrest");
    }

    #[test]
    fn escapes_are_refused_before_and_after_the_filesystem() {
        let (d, root) = folder();
        for p in [
            "../secret.txt",
            "screenshots/../../secret.txt",
            "/etc/passwd",
            "./screenshots/001_a.png",
            "",
            "a\\..\\b",
            "a\0b",
        ] {
            let e = read(&root, p, "run \"x\"", MAX_BYTES).expect_err(p);
            assert_eq!(e.error_type, ErrorType::InvalidParams, "{p}: {e:?}");
            assert!(!e.suggestion.is_empty());
        }
        std::os::unix::fs::symlink(d.path().join("secret.txt"), root.join("link.txt"))
            .expect("symlink");
        std::os::unix::fs::symlink(d.path(), root.join("up")).expect("symlink");
        for p in ["link.txt", "up/secret.txt"] {
            let e = read(&root, p, "run \"x\"", MAX_BYTES).expect_err(p);
            assert_eq!(e.error_type, ErrorType::Permission, "{p}: {e:?}");
        }
        let e = read(&root, "screenshots", "run \"x\"", MAX_BYTES).expect_err("a folder");
        assert_eq!(e.error_type, ErrorType::InvalidParams);
        let e = read(&root, "nope.png", "run \"x\"", MAX_BYTES).expect_err("missing");
        assert_eq!(e.error_type, ErrorType::NotFound);
    }

    #[test]
    fn a_file_over_the_cap_is_refused_with_where_it_is() {
        let (_d, root) = folder();
        let e = read(&root, "screenshots/001_a.png", "run \"x\"", 4).expect_err("too big");
        assert_eq!(e.error_type, ErrorType::LimitExceeded);
        assert!(e.message.contains("up to 4 bytes"), "{}", e.message);
        assert!(e.suggestion.contains("001_a.png"), "{}", e.suggestion);
    }

    #[test]
    fn media_types_come_from_the_name_or_the_magic_bytes() {
        assert_eq!(mime_of("x.JPG", b""), "image/jpeg");
        assert_eq!(mime_of("noext", b"\x89PNG\r\n\x1a\n"), "image/png");
        assert_eq!(mime_of("noext", b"hello"), "application/octet-stream");
    }
}
