//! Files of call data kept private: everything the hub writes under its
//! state dir (`taskEngine.stateDir`: history, task journals and their
//! index, call-key spill files, pins, `children.json`, the token, the
//! current run) and the kept results in the workspace is created mode
//! 0600 in folders of mode 0700, whatever the umask. [`tighten`] brings a
//! state dir an older version left looser to the same modes at start-up.
//!
//! The task journal's guarded create (`journal::guarded_fs`) uses the same
//! modes; what goes into these files is redacted by their writers
//! (`history::redact`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// A private file: read and write for the hub's user only.
pub const FILE_MODE: u32 = 0o600;
/// A private folder: the hub's user only.
pub const DIR_MODE: u32 = 0o700;

/// `dir` and its missing parents, each created 0700; an existing `dir` is
/// tightened to 0700 (a symbolic link is followed: the caller checks for
/// one where a client could have put it).
pub fn dir(dir: &Path) -> io::Result<()> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => tighten_one(dir, &meta, DIR_MODE),
        Ok(_) => Err(io::Error::other(format!(
            "{} is not a folder",
            dir.display()
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir),
        Err(e) => Err(e),
    }
}

/// Options that create a file 0600 (what is opened is the caller's choice).
pub fn options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(FILE_MODE);
    o
}

/// Open `path` for appending, created 0600 when missing.
pub fn open_append(path: &Path) -> io::Result<File> {
    options().create(true).append(true).open(path)
}

/// Write `bytes` to `path` (created or truncated), mode 0600.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    f.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
    f.write_all(bytes)
}

/// Replace `path` atomically with `bytes` (a 0600 temp file, synced, then
/// renamed), so a reader sees the old text or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::util::write_atomic_mode(path, bytes, FILE_MODE)
}

/// Bring every folder under `root` (and `root`) to 0700 and every file to
/// 0600 when it allows more (a state dir an older version wrote with the
/// umask's modes). Symbolic links are not followed. The number of entries
/// tightened; an entry that cannot be changed does not stop the walk, and
/// the first such error is returned once the rest is done.
pub fn tighten(root: &Path) -> io::Result<usize> {
    let meta = fs::symlink_metadata(root)?;
    let (mut n, mut failed) = (0, None);
    walk(root, &meta, &mut n, &mut failed);
    failed.map_or(Ok(n), Err)
}

fn walk(path: &Path, meta: &fs::Metadata, n: &mut usize, failed: &mut Option<io::Error>) {
    let ft = meta.file_type();
    let mode = if ft.is_dir() { DIR_MODE } else { FILE_MODE };
    if ft.is_dir() || ft.is_file() {
        match tighten_one(path, meta, mode) {
            Ok(()) => *n += usize::from(loose(meta, mode)),
            Err(e) => {
                failed.get_or_insert(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
            }
        }
    }
    if ft.is_dir() {
        match fs::read_dir(path) {
            Ok(rd) => {
                for e in rd.flatten() {
                    // A file removed meanwhile (a spill file, a pruned journal).
                    if let Ok(m) = e.metadata() {
                        walk(&e.path(), &m, n, failed);
                    }
                }
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
}

/// The mode allows more than `mode` (group or other bits).
fn loose(meta: &fs::Metadata, mode: u32) -> bool {
    meta.permissions().mode() & 0o777 & !mode != 0
}

fn tighten_one(path: &Path, meta: &fs::Metadata, mode: u32) -> io::Result<()> {
    if loose(meta, mode) {
        let kept = meta.permissions().mode() & 0o777 & mode;
        fs::set_permissions(path, fs::Permissions::from_mode(kept))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn an_older_loose_state_dir_is_tightened_and_new_files_are_private() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("state");
        fs::create_dir_all(root.join("tasks")).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(root.join("tasks"), fs::Permissions::from_mode(0o775)).unwrap();
        fs::write(root.join("history.jsonl"), "{}\n").unwrap();
        fs::set_permissions(
            root.join("history.jsonl"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        fs::write(root.join("tasks/a.jsonl"), "{}\n").unwrap();
        fs::set_permissions(
            root.join("tasks/a.jsonl"),
            fs::Permissions::from_mode(0o400),
        )
        .unwrap();
        let outside = t.path().join("outside");
        fs::write(&outside, "x").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();

        assert_eq!(tighten(&root).unwrap(), 3);
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&root.join("tasks")), 0o700);
        assert_eq!(mode(&root.join("history.jsonl")), 0o600);
        // Never widened; a link's target is not touched.
        assert_eq!(mode(&root.join("tasks/a.jsonl")), 0o400);
        assert_eq!(mode(&outside), 0o644);
        assert_eq!(tighten(&root).unwrap(), 0);

        dir(&root.join("callkeys/deep")).unwrap();
        assert_eq!(mode(&root.join("callkeys")), 0o700);
        assert_eq!(mode(&root.join("callkeys/deep")), 0o700);
        write(&root.join("callkeys/1.json"), b"{}").unwrap();
        write_atomic(&root.join("pins.json"), b"{}").unwrap();
        open_append(&root.join("h.jsonl")).unwrap();
        for f in ["callkeys/1.json", "pins.json", "h.jsonl"] {
            assert_eq!(mode(&root.join(f)), 0o600, "{f}");
        }
    }
}
