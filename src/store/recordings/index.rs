//! The recordings index: `<storage>/.index.jsonl`, an append-only file of
//! `{"op":"put","entry":{…}}` and `{"op":"del","id":…}` lines, one
//! [`Entry`] per recording (name, description, tags, times, step count,
//! servers and tools used, status, size). Listing, searching and sorting
//! read only the index; no recording file is opened.
//!
//! What stays in memory is small and fixed per recording: a 56-byte
//! [`keys::Key`] (id, times, the file's stamp, where its line is), ~63
//! bytes with the vector's slack, so 100,000 recordings hold ~6 MB. A
//! page sorted by time is chosen from the keys and its 50 lines read by
//! offset; a search (`query`, `tool`, `server`) and the `name` sort read
//! every recording's line from the file (a
//! [`store::index_file`](crate::store::index_file)), the page cache
//! keeping that cheap. The one thing held beyond the keys is an entry
//! whose line could not be written (a full disk), at most
//! [`PENDING_MAX`] of them until the file can be written again.
//!
//! It is kept in step with the files: the hub puts or deletes an entry
//! right after each change it makes to a recording, and [`RecordingIndex::verify`]
//! (at start, then every few seconds) compares each file's size and
//! modification time with its entry and reads again what differs, adds
//! folders without an entry (a crash between a recording's write and its
//! index line) and drops entries whose folder is gone. A missing index is
//! rebuilt from the files. The file is compacted past twice as many lines
//! as recordings.

pub mod entry;
pub mod keys;
mod list;

pub use entry::Entry;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::Value;

use self::keys::{Id, Key, Keys, NOT_WRITTEN};
use super::valid_id;
use crate::protocol::recording::ListReq;
pub use crate::store::index_file::Repairs;
use crate::store::index_file::{del_line, put_line, IndexFile, Loaded};

/// The index file, beside the recordings (a dot name is never an id).
pub const FILE: &str = ".index.jsonl";

/// At most this many entries are held in memory while their lines cannot
/// be written; past it a recording is left out of listings until the
/// file can be written again (the next check puts it back).
pub const PENDING_MAX: usize = 1024;

struct State {
    storage: PathBuf,
    keys: Keys,
    file: IndexFile,
    /// Entries whose line could not be written (their key's offset is
    /// `NOT_WRITTEN`), at most [`PENDING_MAX`].
    pending: HashMap<Id, Entry>,
    /// The round of the check against the files (see [`RecordingIndex::verify`]).
    round: bool,
}

/// The index of one recordings folder (the configured `storagePath`; a
/// changed path is loaded on first use).
#[derive(Default)]
pub struct RecordingIndex {
    state: Mutex<Option<State>>,
}

/// One page of a listing.
pub struct Page {
    pub items: Vec<Value>,
    /// Recordings matching the filters (all pages).
    pub total: usize,
    /// Recordings that cannot be read, one line each.
    pub problems: Vec<String>,
}

/// Call `f` with the id of each recording folder (symlinks and stray files
/// are not recordings), one at a time.
fn each_id(storage: &Path, mut f: impl FnMut(&str)) {
    let Ok(rd) = fs::read_dir(storage) else {
        return;
    };
    for e in rd.filter_map(Result::ok) {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Some(n) = e.file_name().to_str().filter(|n| valid_id(n)) {
            f(n);
        }
    }
}

/// The ids of the recording folders.
pub fn ids(storage: &Path) -> Vec<String> {
    let mut v = Vec::new();
    each_id(storage, |id| v.push(id.to_string()));
    v
}

/// How many folders the check compares under one hold of the lock.
const CHUNK: usize = 1024;

/// What the check saw of one folder.
#[derive(Clone, Copy, PartialEq)]
enum Seen {
    /// Being written: present, not compared.
    Skip,
    Stamp(u64),
    /// Its file cannot be `stat`ed: read again (it becomes a problem).
    NoStat,
}

impl RecordingIndex {
    pub fn new() -> RecordingIndex {
        RecordingIndex::default()
    }

    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        // A panic while holding it leaves usable keys: each is whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state for `storage`, loaded (or rebuilt) on first use.
    fn state<'a>(slot: &'a mut Option<State>, storage: &Path) -> &'a mut State {
        if slot.as_ref().is_some_and(|s| s.storage != storage) {
            *slot = None;
        }
        slot.get_or_insert_with(|| load(storage))
    }

    /// Load the index (rebuilding it when missing) and check it against
    /// the files; what was repaired is logged.
    pub fn open(&self, storage: &Path) -> Repairs {
        let n = {
            let mut g = self.lock();
            RecordingIndex::state(&mut g, storage).keys.len()
        };
        let r = self.verify(storage, &HashSet::new());
        tracing::info!(storage = %storage.display(), recordings = n + r.added - r.removed, "recordings index ready");
        // Reading the file took memory the size of the store for a moment
        // (one key per line before the last of each id was kept): give it
        // back.
        if n > 4096 && tokio::runtime::Handle::try_current().is_ok() {
            crate::trim::soon();
        }
        r
    }

    /// Read recording `id` again and put its entry (after the hub wrote it).
    pub fn refresh(&self, storage: &Path, id: &str) {
        let e = entry::read(storage, id);
        let mut g = self.lock();
        RecordingIndex::state(&mut g, storage).put(e);
    }

    /// Drop recording `id` (after the hub deleted it).
    pub fn remove(&self, storage: &Path, id: &str) {
        let mut g = self.lock();
        RecordingIndex::state(&mut g, storage).remove(keys::id_of(id).0, id);
    }

    /// Compare every entry with its file (size and modification time; a
    /// `stat` each, no file is read unless it changed), read again what
    /// differs, add folders without an entry and drop entries whose folder
    /// is gone. `skip` holds recordings being written (they are put when
    /// they stop). The files are read without holding the lock; an entry
    /// the hub updated meanwhile is left as the hub put it.
    pub fn verify(&self, storage: &Path, skip: &HashSet<String>) -> Repairs {
        let skip: HashSet<Id> = skip.iter().map(|s| keys::id_of(s).0).collect();
        // Each key whose folder is seen is marked with this round's bit,
        // so nothing the size of the store is allocated: the folders are
        // `stat`ed without the lock and compared a chunk at a time.
        let round = {
            let mut g = self.lock();
            let st = RecordingIndex::state(&mut g, storage);
            st.round = !st.round;
            st.round
        };
        // What differs: (id, the stamp the key had, if any), and the names
        // of those not in the hub's own form.
        let mut differ: Vec<(Id, Option<u64>)> = Vec::new();
        let mut names: HashMap<Id, String> = HashMap::new();
        let mut chunk: Vec<(Id, Seen, Option<String>)> = Vec::with_capacity(CHUNK);
        let mut compare = |chunk: &mut Vec<(Id, Seen, Option<String>)>| {
            let mut g = self.lock();
            let st = RecordingIndex::state(&mut g, storage);
            for (id, seen, name) in chunk.drain(..) {
                let was = match st.keys.get_mut(id) {
                    Some(k) => {
                        k.set_seen(round);
                        if seen == Seen::Skip || seen == Seen::Stamp(k.stamp) {
                            continue;
                        }
                        Some(k.stamp)
                    }
                    None if seen == Seen::Skip => continue,
                    None => None,
                };
                differ.push((id, was));
                if let Some(n) = name {
                    names.insert(id, n);
                }
            }
        };
        each_id(storage, |id| {
            let (k, hex) = keys::id_of(id);
            let seen = if skip.contains(&k) {
                Seen::Skip
            } else {
                match entry::stamp(&storage.join(id)) {
                    Ok((size, mtime)) => Seen::Stamp(keys::stamp(size, mtime)),
                    Err(_) => Seen::NoStat,
                }
            };
            chunk.push((k, seen, (!hex).then(|| id.to_string())));
            if chunk.len() == CHUNK {
                compare(&mut chunk);
            }
        });
        compare(&mut chunk);
        drop(chunk);
        // Keys not seen this round: their folder may be gone (a key the
        // hub put meanwhile is not marked; its folder exists).
        let (gone, file_gone) = {
            let mut g = self.lock();
            let st = RecordingIndex::state(&mut g, storage);
            let unseen: Vec<Key> = st
                .keys
                .iter()
                .filter(|k| k.seen() != round)
                .copied()
                .collect();
            let gone: Vec<(Id, u64, String)> = unseen
                .iter()
                .filter_map(|k| Some((k.id, k.stamp, st.id_text(k)?)))
                .collect();
            (gone, st.file.gone())
        };
        let id_text = |id: Id| names.get(&id).cloned().unwrap_or_else(|| hex_text(id));
        let fresh: Vec<(Entry, Option<u64>)> = differ
            .iter()
            .map(|&(id, was)| (entry::read(storage, &id_text(id)), was))
            .collect();
        let mut r = Repairs::default();
        let mut g = self.lock();
        let st = RecordingIndex::state(&mut g, storage);
        let stamp_of = |st: &State, id: Id| st.keys.get(id).map(|k| k.stamp);
        // Only what the hub did not update meanwhile is applied and counted.
        let mut apply = Vec::new();
        for (e, was) in fresh {
            let id = keys::id_of(&e.id).0;
            if stamp_of(st, id) == was {
                match was {
                    None => r.added += 1,
                    Some(_) => r.changed += 1,
                }
                apply.push(e);
            }
        }
        st.put_many(apply);
        for (id, was, name) in gone {
            if stamp_of(st, id) == Some(was) && !storage.join(&name).exists() {
                r.removed += 1;
                st.remove(id, &name);
            }
        }
        if file_gone {
            tracing::warn!(storage = %storage.display(), "the recordings index file was deleted; written again");
            st.compact();
        }
        r.log("recordings", "recordings", storage);
        r
    }

    /// A page of the recordings matching `req`, from the index alone;
    /// with `only`, just those the client of that name made (and no
    /// problems: an unreadable recording names no owner).
    pub fn list(&self, storage: &Path, req: &ListReq, only: Option<&str>) -> Page {
        let mut g = self.lock();
        list::page(RecordingIndex::state(&mut g, storage), req, only)
    }
}

/// The text of a hub-form id.
fn hex_text(id: Id) -> String {
    format!("rec-{:016x}{:016x}", id.0, id.1)
}

/// An index line read back as its entry.
#[derive(Deserialize)]
struct PutLine {
    entry: Entry,
}

impl State {
    /// Set entry `e`: its line appended, its key put.
    fn put(&mut self, e: Entry) {
        if let Some(k) = self.write(e) {
            self.keys.put(k);
        }
        self.compact_if_due();
    }

    /// Set many entries (one sort of the keys instead of one insert each).
    fn put_many(&mut self, es: impl IntoIterator<Item = Entry>) {
        let ks: Vec<Key> = es.into_iter().filter_map(|e| self.write(e)).collect();
        self.keys.put_many(ks);
        self.compact_if_due();
    }

    /// Append `e`'s line and give its key (`None`: it could not be
    /// written and the pending map is full; its old key is dropped).
    fn write(&mut self, e: Entry) -> Option<Key> {
        let mut k = Key::new(
            &e.id,
            &e.created_at,
            &e.updated_at,
            keys::stamp(e.size, e.mtime_ns),
            e.problem.is_some(),
        );
        let written = put_line(&e)
            .ok()
            .and_then(|l| Some((self.file.append(&l)?, l.len())));
        match written {
            Some((at, len)) => {
                k.offset = at;
                k.len = len as u32;
                self.pending.remove(&k.id);
            }
            None if self.pending.len() < PENDING_MAX || self.pending.contains_key(&k.id) => {
                self.pending.insert(k.id, e);
            }
            None => {
                tracing::warn!(recording = %e.id, "the recordings index cannot be written and holds {PENDING_MAX} entries already; this recording is listed again once it can");
                self.keys.remove(k.id);
                return None;
            }
        }
        Some(k)
    }

    /// Drop entry `id` (`name` its text) and append its `del` line.
    fn remove(&mut self, id: Id, name: &str) {
        if self.keys.remove(id).is_none() {
            return;
        }
        self.pending.remove(&id);
        if let Ok(l) = del_line(name) {
            self.file.append(&l);
        }
        self.compact_if_due();
    }

    fn compact_if_due(&mut self) {
        if self.file.due(self.keys.len()) {
            self.compact();
        }
    }

    /// Rewrite the file with the live lines (and the pending entries),
    /// and move each key to its line's new offset.
    fn compact(&mut self) {
        let mut keep = Vec::with_capacity(self.keys.len());
        let mut fresh = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if k.offset != NOT_WRITTEN {
                keep.push((k.offset, k.len, i as u32));
            } else if let Some(e) = self.pending.get(&k.id) {
                fresh.extend(put_line(e).ok().map(|l| (i as u32, l)));
            }
        }
        if let Some(placed) = self.file.compact(&mut keep, fresh) {
            let mut ks: Vec<&mut Key> = self.keys.iter_mut().collect();
            for k in ks.iter_mut() {
                k.offset = NOT_WRITTEN;
            }
            for (i, at, len) in placed {
                ks[i as usize].offset = at;
                ks[i as usize].len = len;
            }
            self.pending.clear();
        }
        // A key whose line was lost (unreadable) is dropped; the next check
        // against the files puts it back.
        let pending = &self.pending;
        self.keys
            .retain(|k| k.offset != NOT_WRITTEN || pending.contains_key(&k.id));
    }

    /// The entries of `ks`, read from the file (or the pending map).
    fn entries(&self, ks: &[Key]) -> Vec<Option<Entry>> {
        let mut out: Vec<Option<Entry>> = vec![None; ks.len()];
        let mut spans = Vec::with_capacity(ks.len());
        for (i, k) in ks.iter().enumerate() {
            if k.offset == NOT_WRITTEN {
                out[i] = self.pending.get(&k.id).cloned();
            } else {
                spans.push((k.offset, k.len, i as u32));
            }
        }
        self.file.each_line(&mut spans, |i, line| {
            out[i as usize] = serde_json::from_slice::<PutLine>(line)
                .ok()
                .map(|p| p.entry);
        });
        out
    }

    /// The id of `k` as text (read from its line unless in the hub's form).
    fn id_text(&self, k: &Key) -> Option<String> {
        k.hex_id().or_else(|| {
            self.entries(std::slice::from_ref(k))
                .pop()
                .flatten()
                .map(|e| e.id)
        })
    }
}

/// Read the index file, or rebuild it from the recordings when it is missing.
fn load(storage: &Path) -> State {
    let mut found = Vec::new();
    let (file, loaded) = IndexFile::load(&storage.join(FILE), |at, line| {
        let k = keys::of_line(at, line);
        found.extend(k);
        k.is_some()
    });
    let mut st = State {
        storage: storage.to_path_buf(),
        keys: Keys::from_lines(found),
        file,
        pending: HashMap::new(),
        round: false,
    };
    match loaded {
        Loaded::Read { bad: 0 } => st.compact_if_due(),
        // Rewritten without the unreadable lines; the entries are checked
        // against the files next anyway.
        Loaded::Read { .. } => st.compact(),
        Loaded::Missing => {
            let ids = ids(storage);
            st.put_many(ids.iter().map(|id| entry::read(storage, id)));
            if !ids.is_empty() {
                tracing::info!(storage = %storage.display(), rebuilt = ids.len(), "recordings index was missing; rebuilt from the recordings");
            }
        }
        Loaded::Unreadable(e) => {
            tracing::warn!(storage = %storage.display(), error = %e, "cannot read the recordings index; rebuilding it from the recordings");
            st.put_many(ids(storage).iter().map(|id| entry::read(storage, id)));
            st.compact();
        }
    }
    st
}

#[cfg(test)]
mod tests;
