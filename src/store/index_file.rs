//! An append-only index file: one JSON line per change, `{"op":"put",
//! "entry":{…}}` or `{"op":"del","id":…}`, replayed into a map at load. A
//! store keeps one beside its files (the runs' `.index.jsonl`, the task
//! store's) so that start-up and listings read the index instead of every
//! file.
//!
//! This module only keeps the file: the store that owns it decides what an
//! entry holds, when it is rebuilt and how it is checked against the files
//! ([`Stamp`] is the cheap check: a `stat`, no read). A write that fails is
//! logged and leaves the entry in memory; the owner's next check against
//! the files (at the latest at the next start) repairs the file. The file
//! is rewritten whole (temp file and rename) when it holds more than twice
//! as many lines as entries. Like the task journals, the file is readable
//! by its owner only (mode 0600).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// An entry of an index: named by the id of what it describes.
pub trait Indexed: Serialize + DeserializeOwned {
    fn id(&self) -> &str;
}

/// What a file looks like without reading it: size, modification time and
/// inode (a file replaced by a rename has a new inode even when its size
/// and time match).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub size: u64,
    pub mtime_ns: u64,
    pub ino: u64,
}

impl Stamp {
    /// The stamp of `path` (following no symlink of its last part).
    pub fn of(path: &Path) -> std::io::Result<Stamp> {
        let m = fs::symlink_metadata(path)?;
        let mtime_ns = (m.mtime().max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(m.mtime_nsec().max(0) as u64);
        Ok(Stamp {
            size: m.len(),
            mtime_ns,
            ino: m.ino(),
        })
    }
}

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op<E> {
    Put { entry: Box<E> },
    Del { id: String },
}

#[derive(Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum OpRef<'a, E> {
    Put { entry: &'a E },
    Del { id: &'a str },
}

/// The line that puts `entry` (without its newline).
pub fn put_line<E: Serialize>(entry: &E) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&OpRef::Put { entry })
}

/// The line that deletes entry `id` (without its newline).
pub fn del_line(id: &str) -> serde_json::Result<Vec<u8>> {
    let op: OpRef<'_, ()> = OpRef::Del { id };
    serde_json::to_vec(&op)
}

/// What a check of an index against its files found and repaired.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Repairs {
    /// Files without an entry (written, then a crash before the index line).
    pub added: usize,
    /// Files changed behind the hub's back.
    pub changed: usize,
    /// Entries whose file is gone.
    pub removed: usize,
}

impl Repairs {
    pub fn any(&self) -> bool {
        self.added + self.changed + self.removed > 0
    }

    /// Log what a check of the `index` ("runs") over its `files`
    /// ("runs", "journals") in `storage` picked up.
    pub fn log(&self, index: &str, files: &str, storage: &Path) {
        if self.any() {
            tracing::info!(
                storage = %storage.display(),
                added = self.added,
                changed = self.changed,
                removed = self.removed,
                "{index} index: picked up {files} changed outside the hub"
            );
        }
    }
}

/// How the file was found at load.
#[derive(Debug)]
pub enum Loaded {
    /// Read; `bad` lines could not be parsed (and were dropped by a rewrite).
    Read { bad: usize },
    /// There was no file: the owner rebuilds the entries from its files.
    Missing,
    /// The file exists but cannot be read: the owner rebuilds in memory.
    Unreadable(std::io::Error),
}

/// The entries of one index file, kept in memory, and the file.
pub struct IndexFile<E> {
    path: PathBuf,
    entries: HashMap<String, E>,
    /// Lines in the file (for compaction).
    lines: usize,
    file: Option<File>,
}

impl<E: Indexed> IndexFile<E> {
    /// An index with no entries that will write to `path` (nothing is read).
    pub fn empty(path: &Path) -> IndexFile<E> {
        IndexFile {
            path: path.to_path_buf(),
            entries: HashMap::new(),
            lines: 0,
            file: None,
        }
    }

    /// Read the index at `path` (entries replayed in order).
    pub fn load(path: &Path) -> (IndexFile<E>, Loaded) {
        let mut ix = IndexFile::empty(path);
        let f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (ix, Loaded::Missing),
            Err(e) => return (ix, Loaded::Unreadable(e)),
        };
        let mut bad = 0;
        for line in BufReader::new(f).lines() {
            let Ok(line) = line else {
                bad += 1;
                break;
            };
            ix.lines += 1;
            match serde_json::from_str::<Op<E>>(&line) {
                Ok(Op::Put { entry }) => {
                    ix.entries.insert(entry.id().to_string(), *entry);
                }
                Ok(Op::Del { id }) => {
                    ix.entries.remove(&id);
                }
                // A torn last line (a crash mid-append) lands here too.
                Err(_) => bad += 1,
            }
        }
        if bad > 0 {
            tracing::warn!(path = %path.display(), lines = bad, "unreadable index lines skipped; the index is written again");
            ix.compact();
        }
        (ix, Loaded::Read { bad })
    }

    pub fn get(&self, id: &str) -> Option<&E> {
        self.entries.get(id)
    }

    pub fn entries(&self) -> impl Iterator<Item = &E> {
        self.entries.values()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Set `e` in memory and append its line.
    pub fn put(&mut self, e: E) {
        let line = put_line(&e);
        self.entries.insert(e.id().to_string(), e);
        match line {
            Ok(line) => self.append(line),
            Err(err) => {
                tracing::warn!(path = %self.path.display(), error = %err, "cannot encode an index entry")
            }
        }
    }

    /// Set `e` in memory only (a rebuild writes the file once, at the end,
    /// with [`compact`](Self::compact)).
    pub fn put_quiet(&mut self, e: E) {
        self.entries.insert(e.id().to_string(), e);
    }

    /// Drop entry `id` and append its `del` line.
    pub fn remove(&mut self, id: &str) -> Option<E> {
        let gone = self.entries.remove(id)?;
        if let Ok(line) = del_line(id) {
            self.append(line);
        }
        Some(gone)
    }

    /// The file was written by this hub and has been deleted since.
    pub fn file_gone(&self) -> bool {
        self.file.is_some() && !self.path.exists()
    }

    /// After a check that found the file deleted (`gone`, from
    /// [`IndexFile::file_gone`]): write it again, and say so.
    pub fn rewrite_if_deleted(&mut self, gone: bool, what: &str, storage: &Path) {
        if gone {
            tracing::warn!(storage = %storage.display(), "the {what} index file was deleted; written again");
            self.compact();
        }
    }

    /// Append one line; when the file has grown past twice the live
    /// entries, rewrite it whole instead.
    fn append(&mut self, mut line: Vec<u8>) {
        if self.lines > 2 * self.entries.len() + 64 {
            self.compact();
            return;
        }
        line.push(b'\n');
        if self.file.is_none() {
            let opened = self
                .path
                .parent()
                .map_or(Ok(()), fs::create_dir_all)
                .and_then(|()| {
                    OpenOptions::new()
                        .create(true)
                        .append(true)
                        .mode(0o600)
                        .open(&self.path)
                });
            match opened {
                Ok(f) => self.file = Some(f),
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot open the index");
                    return;
                }
            }
        }
        if let Some(f) = self.file.as_mut() {
            match crate::util::append_whole(f, &line) {
                Ok(()) => self.lines += 1,
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot append to the index")
                }
            }
        }
    }

    /// Rewrite the file with one `put` per entry (temp file + rename).
    pub fn compact(&mut self) {
        let mut buf = Vec::with_capacity(self.entries.len() * 256);
        for e in self.entries.values() {
            if serde_json::to_writer(&mut buf, &OpRef::Put { entry: e }).is_ok() {
                buf.push(b'\n');
            }
        }
        let written = self
            .path
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|()| crate::util::write_atomic(&self.path, &buf))
            .and_then(|()| fs::set_permissions(&self.path, fs::Permissions::from_mode(0o600)))
            .and_then(|()| OpenOptions::new().append(true).open(&self.path));
        match written {
            Ok(f) => {
                self.file = Some(f);
                self.lines = self.entries.len();
            }
            Err(e) => {
                self.file = None;
                tracing::warn!(path = %self.path.display(), error = %e, "cannot write the index");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct E {
        id: String,
        n: u32,
    }

    impl Indexed for E {
        fn id(&self) -> &str {
            &self.id
        }
    }

    fn e(id: &str, n: u32) -> E {
        E { id: id.into(), n }
    }

    #[test]
    fn puts_and_dels_replay_in_order_and_a_torn_line_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(".index.jsonl");
        let (mut ix, loaded) = IndexFile::<E>::load(&path);
        assert!(matches!(loaded, Loaded::Missing));
        ix.put(e("a", 1));
        ix.put(e("b", 1));
        ix.put(e("a", 2));
        assert_eq!(ix.remove("b"), Some(e("b", 1)));
        assert_eq!(ix.remove("b"), None);
        drop(ix);
        let mut text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4);
        text.push_str("{\"op\":\"put\",\"entry\":{\"id\":\"c\"");
        std::fs::write(&path, text).unwrap();
        let (ix, loaded) = IndexFile::<E>::load(&path);
        assert!(matches!(loaded, Loaded::Read { bad: 1 }), "{loaded:?}");
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.get("a"), Some(&e("a", 2)));
        // The rewrite dropped the torn line and the replaced entries.
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
    }

    #[test]
    fn the_file_is_compacted_when_it_grows_past_twice_the_entries() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("ix.jsonl");
        let (mut ix, _) = IndexFile::<E>::load(&path);
        for n in 0..500 {
            ix.put(e("one", n));
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 2 + 64, "{lines} lines for one entry");
        let (again, _) = IndexFile::<E>::load(&path);
        assert_eq!(again.get("one"), Some(&e("one", 499)));
    }

    #[test]
    fn a_stamp_changes_when_a_file_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        std::fs::write(&path, "abc").unwrap();
        let before = Stamp::of(&path).unwrap();
        crate::util::write_atomic(&path, b"abd").unwrap();
        assert_ne!(Stamp::of(&path).unwrap(), before);
    }
}
