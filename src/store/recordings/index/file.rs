//! The recordings index file, `<storage>/.index.jsonl`: the same lines as
//! every `store::index_file` (`{"op":"put","entry":{…}}`,
//! `{"op":"del","id":…}`), but read by offset instead of kept in memory.
//! At load each line is reduced to its [`Key`] (where it starts, how long
//! it is); a listing reads the lines it needs by those offsets. Appends
//! return the offset they wrote at; a compaction (past twice as many lines
//! as recordings) copies the live lines, unparsed, to a new file and moves
//! every key to its new offset. Mode 0600, like the other index files.

use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::keys::{self, Key, NOT_WRITTEN};
pub use crate::store::index_file::Loaded;

/// The part of an entry the key is made of (the rest is passed over).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Lite<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow, default)]
    created_at: Cow<'a, str>,
    #[serde(borrow, default)]
    updated_at: Cow<'a, str>,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    mtime_ns: u64,
    #[serde(default)]
    problem: Option<IgnoredAny>,
}

/// An index line as the key needs it (a plain struct, not serde's
/// internally tagged enum, which buffers every field first).
#[derive(Deserialize)]
struct LiteLine<'a> {
    #[serde(borrow)]
    op: Cow<'a, str>,
    #[serde(borrow, default)]
    entry: Option<Lite<'a>>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
}

/// The key of one index line, or the id it deletes.
pub enum Parsed {
    Put(Key),
    Del(keys::Id),
}

/// Reduce one line to its key (`None`: not an index line).
pub fn parse(line: &[u8]) -> Option<Parsed> {
    let l = serde_json::from_slice::<LiteLine<'_>>(line).ok()?;
    match (&*l.op, l.entry, l.id) {
        ("put", Some(e), _) => Some(Parsed::Put(Key::new(
            &e.id,
            &e.created_at,
            &e.updated_at,
            keys::stamp(e.size, e.mtime_ns),
            e.problem.is_some(),
        ))),
        ("del", _, Some(id)) => Some(Parsed::Del(keys::id_of(&id).0)),
        _ => None,
    }
}

/// A key [`IndexFile::load`] made of a `del` line (at its line's offset).
pub fn is_del(k: &Key) -> bool {
    k.len == u32::MAX
}

/// The index file: where it is, the handle appends and reads go through,
/// its length (the next line's offset) and its number of lines.
pub struct IndexFile {
    path: PathBuf,
    fd: Option<File>,
    len: u64,
    lines: usize,
}

/// How many bytes a listing reads at once when it walks the file.
const WINDOW: usize = 64 * 1024;

impl IndexFile {
    pub fn new(path: &Path) -> IndexFile {
        IndexFile {
            path: path.to_path_buf(),
            fd: None,
            len: 0,
            lines: 0,
        }
    }

    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Read the file into keys (the last line of an id wins; a `del`
    /// drops it). Lines that cannot be read are counted in `Loaded::Read`.
    pub fn load(path: &Path) -> (IndexFile, Vec<Key>, Loaded) {
        let mut ix = IndexFile::new(path);
        let f = match open_rw(path, false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return (ix, Vec::new(), Loaded::Missing)
            }
            Err(e) => return (ix, Vec::new(), Loaded::Unreadable(e)),
        };
        // A `del` is kept as a key marked [`is_del`] at its place in the
        // order, so the last line of an id wins; the owner drops those.
        let mut found: Vec<Key> = Vec::new();
        let mut bad = 0;
        let mut offset = 0u64;
        let mut line = Vec::with_capacity(1024);
        let mut r = BufReader::with_capacity(WINDOW, &f);
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(n) => {
                    let whole = line.last() == Some(&b'\n');
                    let text = line.strip_suffix(b"\n").unwrap_or(&line);
                    match parse(text).filter(|_| whole) {
                        Some(Parsed::Put(mut k)) => {
                            k.offset = offset;
                            k.len = text.len() as u32;
                            found.push(k);
                        }
                        Some(Parsed::Del(id)) => {
                            let mut k = Key::new("", "", "", 0, false);
                            k.id = id;
                            k.offset = offset;
                            k.len = u32::MAX;
                            found.push(k);
                        }
                        // A torn last line (a crash mid-append) lands here too.
                        None => bad += 1,
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
        ix.len = offset;
        ix.fd = Some(f);
        (ix, found, Loaded::Read { bad })
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
    pub fn each_line(&self, spans: &mut [(u64, u32, u32)], mut f: impl FnMut(u32, &[u8])) {
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

    /// Rewrite the file with `lines`, one per key, in the keys' order
    /// (each from this file by its offset, or from `extra(i)` for a key
    /// with no line), and move each key to its new offset. A key whose
    /// line cannot be read is given `NOT_WRITTEN`; false when the new file
    /// could not be written (the old one stays).
    pub fn compact(
        &mut self,
        ks: &mut [&mut Key],
        mut extra: impl FnMut(&Key) -> Option<Vec<u8>>,
    ) -> bool {
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
        let tmp = PathBuf::from(tmp);
        let mut spans: Vec<(u64, u32, u32)> = ks
            .iter()
            .enumerate()
            .filter(|(_, k)| k.offset != NOT_WRITTEN)
            .map(|(i, k)| (k.offset, k.len, i as u32))
            .collect();
        let written = (|| -> std::io::Result<Vec<(usize, u64, u32)>> {
            if let Some(dir) = self.path.parent() {
                fs::create_dir_all(dir)?;
            }
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            let mut w = BufWriter::with_capacity(WINDOW, f);
            let mut at = 0u64;
            let mut placed = Vec::with_capacity(ks.len());
            let mut err = None;
            self.each_line(&mut spans, |i, line| {
                if err.is_some() {
                    return;
                }
                match w.write_all(line).and_then(|()| w.write_all(b"\n")) {
                    Ok(()) => {
                        placed.push((i as usize, at, line.len() as u32));
                        at += line.len() as u64 + 1;
                    }
                    Err(e) => err = Some(e),
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            for (i, k) in ks.iter().enumerate() {
                if k.offset == NOT_WRITTEN {
                    if let Some(line) = extra(k) {
                        w.write_all(&line)?;
                        w.write_all(b"\n")?;
                        placed.push((i, at, line.len() as u32));
                        at += line.len() as u64 + 1;
                    }
                }
            }
            let f = w.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            fs::set_permissions(&self.path, fs::Permissions::from_mode(0o600))?;
            Ok(placed)
        })();
        match written {
            Ok(placed) => {
                for k in ks.iter_mut() {
                    k.offset = NOT_WRITTEN;
                }
                let mut total = 0u64;
                for &(i, at, len) in &placed {
                    ks[i].offset = at;
                    ks[i].len = len;
                    total = total.max(at + u64::from(len) + 1);
                }
                self.lines = placed.len();
                self.len = total;
                self.fd = open_rw(&self.path, false).ok();
                true
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                tracing::warn!(path = %self.path.display(), error = %e, "cannot write the index");
                false
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
