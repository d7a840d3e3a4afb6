//! The append-only index file a store keeps beside its files, so that
//! start-up and listings read the index instead of every file: one JSON
//! line per change, `{"op":"put","entry":{…}}` or `{"op":"del","id":…}`,
//! the last line of an id winning. The runs' and the recordings'
//! `.index.jsonl` and the task store's `tasks.index.jsonl` are all this
//! file.
//!
//! [`IndexFile`] keeps the file only: it reads it line by line at load
//! (handing each whole line and its offset to the owner), appends a line
//! and says where it went, reads lines back by offset, and compacts (the
//! live lines, copied unparsed from the old file or given afresh, written
//! to a temp file that replaces the old one; each moves to a new offset).
//! What is kept in memory is the owner's choice: [`MapIndex`] holds every
//! entry (the runs, the finished tasks); the recordings index holds a
//! small key per recording and reads the rest by offset.
//!
//! The owner decides what an entry holds, when the file is rebuilt and how
//! it is checked against the files ([`Stamp`] is the cheap check: a
//! `stat`, no read). A write that fails is logged and leaves the entry in
//! memory; the owner's next check against the files (at the latest at the
//! next start) repairs the file. Like the task journals, the file is
//! readable by its owner only (mode 0600).

mod map;

pub use map::{Indexed, MapIndex};

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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
    /// Read; `bad` lines could not be parsed (the owner rewrites the file
    /// without them).
    Read { bad: usize },
    /// There was no file: the owner rebuilds the entries from its files.
    Missing,
    /// The file exists but cannot be read: the owner rebuilds in memory.
    Unreadable(std::io::Error),
}

/// Where a line is: its offset, its length (without the newline) and the
/// owner's number for it (handed back by [`IndexFile::each_line`] and
/// [`IndexFile::compact`]).
pub type Span = (u64, u32, u32);

/// Where [`IndexFile::compact`] put a line: the owner's number for it, its
/// new offset and its length.
pub type Placed = (u32, u64, u32);

/// How many bytes are read or written at once when the file is walked.
const WINDOW: usize = 64 * 1024;

/// The index file: where it is, the handle appends and reads go through,
/// its length (the next line's offset) and its number of lines.
pub struct IndexFile {
    path: PathBuf,
    fd: Option<File>,
    len: u64,
    lines: usize,
}

impl IndexFile {
    /// The file at `path`, not read (it is opened at the first append).
    pub fn new(path: &Path) -> IndexFile {
        IndexFile {
            path: path.to_path_buf(),
            fd: None,
            len: 0,
            lines: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines in the file.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Is the file due for a compaction: more than twice as many lines as
    /// the `live` entries (and some slack, so a small index is not
    /// rewritten on every change)?
    pub fn due(&self, live: usize) -> bool {
        self.lines > 2 * live + 64
    }

    /// Read the file at `path`: `take(offset, line)` for each whole line
    /// (without its newline) in order, false when it is not an index line.
    /// Those, and a torn last line (a crash mid-append), are counted in
    /// `Loaded::Read` and logged; the owner then compacts the file.
    pub fn load(path: &Path, mut take: impl FnMut(u64, &[u8]) -> bool) -> (IndexFile, Loaded) {
        let mut ix = IndexFile::new(path);
        let f = match open_rw(path, false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (ix, Loaded::Missing),
            Err(e) => return (ix, Loaded::Unreadable(e)),
        };
        let mut bad = 0;
        let mut offset = 0u64;
        let mut line = Vec::with_capacity(1024);
        let mut r = BufReader::with_capacity(WINDOW, &f);
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(n) => {
                    match line.strip_suffix(b"\n") {
                        Some(text) if take(offset, text) => {}
                        _ => bad += 1,
                    }
                    ix.lines += 1;
                    offset += n as u64;
                }
                Err(_) => {
                    bad += 1;
                    break;
                }
            }
        }
        drop(r);
        if bad > 0 {
            tracing::warn!(path = %path.display(), lines = bad, "unreadable index lines skipped; the index is written again");
        }
        ix.len = offset;
        ix.fd = Some(f);
        (ix, Loaded::Read { bad })
    }

    /// Append one line (without its newline); its offset, or `None` when
    /// it could not be written (logged).
    pub fn append(&mut self, line: &[u8]) -> Option<u64> {
        if self.fd.is_none() {
            let opened = self
                .path
                .parent()
                .map_or(Ok(()), fs::create_dir_all)
                .and_then(|()| open_rw(&self.path, true));
            match opened {
                Ok(f) => {
                    self.len = f.metadata().map(|m| m.len()).unwrap_or(0);
                    self.fd = Some(f);
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot open the index");
                    return None;
                }
            }
        }
        let fd = self.fd.as_mut()?;
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        match crate::util::append_whole(fd, &buf) {
            Ok(()) => {
                let at = self.len;
                self.len += buf.len() as u64;
                self.lines += 1;
                Some(at)
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot append to the index");
                None
            }
        }
    }

    /// The file was written by this hub and has been deleted since.
    pub fn gone(&self) -> bool {
        self.fd.is_some() && !self.path.exists()
    }

    /// Call `f(i, line)` for each `(offset, len, i)` of `spans`, in the
    /// order of the offsets (`spans` is sorted here), reading the file in
    /// windows of 64 KiB. A span that cannot be read is passed over.
    pub fn each_line(&self, spans: &mut [Span], mut f: impl FnMut(u32, &[u8])) {
        let Some(fd) = self.fd.as_ref() else {
            return;
        };
        spans.sort_unstable_by_key(|s| s.0);
        let mut buf = Vec::new();
        let mut at = 0u64;
        for &(offset, len, i) in spans.iter() {
            let end = offset + u64::from(len);
            if offset < at || end > at + buf.len() as u64 {
                let want = (len as usize)
                    .max(WINDOW)
                    .min(self.len.saturating_sub(offset) as usize);
                buf.resize(want.max(len as usize), 0);
                match read_full(fd, &mut buf, offset) {
                    Ok(n) => buf.truncate(n),
                    Err(e) => {
                        tracing::warn!(path = %self.path.display(), error = %e, "cannot read the index");
                        buf.clear();
                    }
                }
                at = offset;
                if buf.len() < len as usize {
                    continue;
                }
            }
            let from = (offset - at) as usize;
            f(i, &buf[from..from + len as usize]);
        }
    }

    /// Rewrite the file with the live lines: those of `keep`, copied from
    /// this file by their offsets, then those of `fresh` (`(i, line)`),
    /// through a temp file and a rename. Where each line went, or `None`
    /// when the new file could not be written (logged; the old one stays).
    /// A line of `keep` that cannot be read is left out of the placements.
    pub fn compact(
        &mut self,
        keep: &mut [Span],
        fresh: impl IntoIterator<Item = (u32, Vec<u8>)>,
    ) -> Option<Vec<Placed>> {
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
        let tmp = PathBuf::from(tmp);
        let written = (|| -> std::io::Result<Vec<Placed>> {
            if let Some(dir) = self.path.parent() {
                fs::create_dir_all(dir)?;
            }
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.set_permissions(fs::Permissions::from_mode(0o600))?;
            let mut w = BufWriter::with_capacity(WINDOW, f);
            let mut at = 0u64;
            let mut placed = Vec::with_capacity(keep.len());
            let mut put = |w: &mut BufWriter<File>, i: u32, line: &[u8]| {
                w.write_all(line).and_then(|()| w.write_all(b"\n"))?;
                placed.push((i, at, line.len() as u32));
                at += line.len() as u64 + 1;
                Ok::<(), std::io::Error>(())
            };
            let mut err = None;
            self.each_line(keep, |i, line| {
                if err.is_none() {
                    err = put(&mut w, i, line).err();
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            for (i, line) in fresh {
                put(&mut w, i, &line)?;
            }
            let f = w.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            Ok(placed)
        })();
        match written {
            Ok(placed) => {
                self.lines = placed.len();
                self.len = placed
                    .last()
                    .map_or(0, |&(_, at, len)| at + u64::from(len) + 1);
                self.fd = open_rw(&self.path, false).ok();
                Some(placed)
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                tracing::warn!(path = %self.path.display(), error = %e, "cannot write the index");
                None
            }
        }
    }
}

/// The index file opened for reading and appending.
fn open_rw(path: &Path, create: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(create)
        .mode(0o600)
        .open(path)
}

/// Read at `offset` until `buf` is full or the file ends.
fn read_full(fd: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match fd.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_back_by_offset_before_and_after_a_compaction() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("ix.jsonl");
        let mut f = IndexFile::new(&path);
        let a = f.append(b"{\"a\":1}").unwrap();
        let b = f.append(b"{\"b\":22}").unwrap();
        assert_eq!((a, b, f.lines()), (0, 8, 2));
        let mut spans = [(b, 8, 1), (a, 7, 0)];
        let mut seen = Vec::new();
        f.each_line(&mut spans, |i, l| seen.push((i, l.to_vec())));
        assert_eq!(
            seen,
            [(0, b"{\"a\":1}".to_vec()), (1, b"{\"b\":22}".to_vec())]
        );
        // Keep b, add c: b moves to offset 0.
        let placed = f
            .compact(&mut [(b, 8, 1)], [(2, b"{\"c\":3}".to_vec())])
            .unwrap();
        assert_eq!(placed, [(1, 0, 8), (2, 9, 7)]);
        assert_eq!(f.lines(), 2);
        assert_eq!(f.append(b"{}"), Some(17));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"b\":22}\n{\"c\":3}\n{}\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_torn_last_line_is_bad_even_when_it_parses() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("ix.jsonl");
        std::fs::write(&path, "one\nnot mine\ntwo").unwrap();
        let mut took = Vec::new();
        let (f, loaded) = IndexFile::load(&path, |at, l| {
            took.push((at, l.to_vec()));
            l != b"not mine"
        });
        assert!(matches!(loaded, Loaded::Read { bad: 2 }), "{loaded:?}");
        assert_eq!(took, [(0, b"one".to_vec()), (4, b"not mine".to_vec())]);
        assert_eq!(f.lines(), 3);
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
