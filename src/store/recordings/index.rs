//! The recordings index: `<storage>/.index.jsonl`, an append-only file of
//! `{"op":"put","entry":{…}}` and `{"op":"del","id":…}` lines, one
//! [`Entry`] per recording (name, description, tags, times, step count,
//! servers and tools used, status, size). Listing, searching and sorting
//! read only the index (kept in memory, a few hundred bytes a recording);
//! no recording file is opened.
//!
//! It is kept in step with the files: the hub puts or deletes an entry
//! right after each change it makes to a recording, and [`Index::verify`]
//! (at start, then every few seconds) compares each file's size and
//! modification time with its entry and reads again what differs, adds
//! folders without an entry (a crash between a recording's write and its
//! index line) and drops entries whose folder is gone. A missing index is
//! rebuilt from the files. The file itself (replay, append, compaction
//! past twice as many lines as recordings) is a `store::index_file`.

pub mod entry;

pub use entry::Entry;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::valid_id;
use crate::protocol::recording::{ListReq, RecordingSort};
pub use crate::store::index_file::Repairs;
use crate::store::index_file::{IndexFile, Indexed, Loaded};

/// The index file, beside the recordings (a dot name is never an id).
pub const FILE: &str = ".index.jsonl";

struct State {
    storage: PathBuf,
    /// The entries and the file (`store::index_file`).
    ix: IndexFile<Entry>,
}

impl Indexed for Entry {
    fn id(&self) -> &str {
        &self.id
    }
}

/// The index of one recordings folder (the configured `storagePath`; a
/// changed path is loaded on first use).
#[derive(Default)]
pub struct Index {
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

/// The ids of the recording folders (symlinks and stray files are not recordings).
pub fn ids(storage: &Path) -> Vec<String> {
    let Ok(rd) = fs::read_dir(storage) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| valid_id(n))
        .collect()
}

impl Index {
    pub fn new() -> Index {
        Index::default()
    }

    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        // A panic while holding it leaves a usable map: entries are whole.
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
            Index::state(&mut g, storage).ix.len()
        };
        let r = self.verify(storage, &HashSet::new());
        tracing::info!(storage = %storage.display(), recordings = n + r.added - r.removed, "recordings index ready");
        r
    }

    /// Read recording `id` again and put its entry (after the hub wrote it).
    pub fn refresh(&self, storage: &Path, id: &str) {
        let e = entry::read(storage, id);
        let mut g = self.lock();
        Index::state(&mut g, storage).ix.put(e);
    }

    /// Drop recording `id` (after the hub deleted it).
    pub fn remove(&self, storage: &Path, id: &str) {
        let mut g = self.lock();
        let st = Index::state(&mut g, storage);
        st.ix.remove(id);
    }

    /// Compare every entry with its file (size and modification time; a
    /// `stat` each, no file is read unless it changed), read again what
    /// differs, add folders without an entry and drop entries whose folder
    /// is gone. `skip` holds recordings being written (they are put when
    /// they stop). The files are read without holding the lock; an entry
    /// the hub updated meanwhile is left as the hub put it.
    pub fn verify(&self, storage: &Path, skip: &HashSet<String>) -> Repairs {
        let (known, file_gone): (HashMap<String, (u64, u64)>, bool) = {
            let mut g = self.lock();
            let st = Index::state(&mut g, storage);
            let known = st
                .ix
                .entries()
                .map(|e| (e.id.clone(), (e.size, e.mtime_ns)))
                .collect();
            (known, st.ix.file_gone())
        };
        let on_disk = ids(storage);
        let mut r = Repairs::default();
        let mut fresh = Vec::new();
        for id in &on_disk {
            if skip.contains(id) {
                continue;
            }
            let differs = match known.get(id) {
                None => true,
                Some(s) => entry::stamp(&storage.join(id)).ok() != Some(*s),
            };
            if differs {
                fresh.push(entry::read(storage, id));
            }
        }
        let present: HashSet<&String> = on_disk.iter().collect();
        let gone: Vec<&String> = known.keys().filter(|id| !present.contains(id)).collect();
        let mut g = self.lock();
        let st = Index::state(&mut g, storage);
        let stamp_of = |st: &State, id: &str| st.ix.get(id).map(|e| (e.size, e.mtime_ns));
        // Only what the hub did not update meanwhile is applied and counted.
        for e in fresh {
            let was = known.get(&e.id).copied();
            if stamp_of(st, &e.id) == was {
                match was {
                    None => r.added += 1,
                    Some(_) => r.changed += 1,
                }
                st.ix.put(e);
            }
        }
        for id in gone {
            if stamp_of(st, id) == known.get(id).copied() && !storage.join(id).exists() {
                r.removed += 1;
                st.ix.remove(id);
            }
        }
        st.ix.rewrite_if_deleted(file_gone, "recordings", storage);
        r.log("recordings", "recordings", storage);
        r
    }

    /// A page of the recordings matching `req`, from the index alone.
    pub fn list(&self, storage: &Path, req: &ListReq) -> Page {
        let words: Vec<String> = req
            .query
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
        let mut g = self.lock();
        let st = Index::state(&mut g, storage);
        let mut problems = Vec::new();
        let mut hits: Vec<&Entry> = Vec::new();
        for e in st.ix.entries() {
            if let Some(p) = &e.problem {
                problems.push(p.clone());
                continue;
            }
            let keep = e.matches_query(&words)
                && req.tool.as_deref().is_none_or(|t| e.used_tool(t))
                && req
                    .server
                    .as_deref()
                    .is_none_or(|s| e.servers.iter().any(|x| x == s))
                && req.since.as_ref().is_none_or(|s| s.admits(&e.created_at));
            if keep {
                hits.push(e);
            }
        }
        // Only the entries up to the end of the page are put in order: the
        // rest is split off in linear time (`select_nth_unstable_by`).
        let order = order_of(req.sort);
        let end = req
            .page
            .offset
            .saturating_add(req.page.limit())
            .min(hits.len());
        if end > 0 && end < hits.len() {
            hits.select_nth_unstable_by(end - 1, order);
        }
        hits[..end].sort_unstable_by(order);
        problems.sort();
        Page {
            total: hits.len(),
            items: hits
                .iter()
                .skip(req.page.offset)
                .take(req.page.limit())
                .map(|e| e.to_json())
                .collect(),
            problems,
        }
    }
}

type Order = fn(&&Entry, &&Entry) -> std::cmp::Ordering;

/// How `sort` orders two entries (ties by id, so pages never overlap).
fn order_of(sort: RecordingSort) -> Order {
    match sort {
        RecordingSort::Newest => |a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        },
        RecordingSort::Oldest => |a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        },
        RecordingSort::Updated => |a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        },
        RecordingSort::Name => |a, b| {
            let lower = |s: &str| s.chars().flat_map(char::to_lowercase).collect::<Vec<_>>();
            lower(&a.name)
                .cmp(&lower(&b.name))
                .then_with(|| a.id.cmp(&b.id))
        },
    }
}

/// Read the index file, or rebuild it from the recordings when it is missing.
fn load(storage: &Path) -> State {
    let (mut ix, loaded) = IndexFile::load(&storage.join(FILE));
    match loaded {
        // Unreadable lines were dropped; the entries are checked against
        // the files next anyway.
        Loaded::Read { .. } => {}
        Loaded::Missing => {
            let ids = ids(storage);
            if !ids.is_empty() {
                for id in &ids {
                    ix.put_quiet(entry::read(storage, id));
                }
                tracing::info!(storage = %storage.display(), rebuilt = ids.len(), "recordings index was missing; rebuilt from the recordings");
                ix.compact();
            }
        }
        Loaded::Unreadable(e) => {
            tracing::warn!(storage = %storage.display(), error = %e, "cannot read the recordings index; listing from the recordings");
            for id in ids(storage) {
                ix.put_quiet(entry::read(storage, &id));
            }
        }
    }
    State {
        storage: storage.to_path_buf(),
        ix,
    }
}

#[cfg(test)]
mod tests;
