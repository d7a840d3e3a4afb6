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
//! rebuilt from the files; the file is compacted when it holds more than
//! twice as many lines as recordings.

pub mod entry;

pub use entry::Entry;

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::valid_id;
use crate::protocol::recording::{ListReq, RecordingSort};
pub use crate::store::index_file::Repairs;

/// The index file, beside the recordings (a dot name is never an id).
pub const FILE: &str = ".index.jsonl";

#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    Put { entry: Box<Entry> },
    Del { id: String },
}

/// `Op::Put` written from a borrowed entry.
#[derive(Serialize)]
struct PutRef<'a> {
    op: &'static str,
    entry: &'a Entry,
}

struct State {
    storage: PathBuf,
    entries: HashMap<String, Entry>,
    /// Lines in the index file (for compaction).
    lines: usize,
    file: Option<File>,
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
            Index::state(&mut g, storage).entries.len()
        };
        let r = self.verify(storage, &HashSet::new());
        tracing::info!(storage = %storage.display(), recordings = n + r.added - r.removed, "recordings index ready");
        r
    }

    /// Read recording `id` again and put its entry (after the hub wrote it).
    pub fn refresh(&self, storage: &Path, id: &str) {
        let e = entry::read(storage, id);
        let mut g = self.lock();
        put(Index::state(&mut g, storage), e);
    }

    /// Drop recording `id` (after the hub deleted it).
    pub fn remove(&self, storage: &Path, id: &str) {
        let mut g = self.lock();
        let st = Index::state(&mut g, storage);
        if st.entries.remove(id).is_some() {
            append_op(st, &Op::Del { id: id.to_string() });
        }
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
                .entries
                .iter()
                .map(|(id, e)| (id.clone(), (e.size, e.mtime_ns)))
                .collect();
            (known, st.file.is_some() && !storage.join(FILE).exists())
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
        let stamp_of = |st: &State, id: &str| st.entries.get(id).map(|e| (e.size, e.mtime_ns));
        // Only what the hub did not update meanwhile is applied and counted.
        for e in fresh {
            let was = known.get(&e.id).copied();
            if stamp_of(st, &e.id) == was {
                match was {
                    None => r.added += 1,
                    Some(_) => r.changed += 1,
                }
                put(st, e);
            }
        }
        for id in gone {
            if stamp_of(st, id) == known.get(id).copied() && !storage.join(id).exists() {
                r.removed += 1;
                st.entries.remove(id);
                append_op(st, &Op::Del { id: id.clone() });
            }
        }
        if file_gone {
            tracing::warn!(storage = %storage.display(), "the recordings index file was deleted; written again");
            compact(st);
        }
        if r.any() {
            tracing::info!(
                storage = %storage.display(),
                added = r.added,
                changed = r.changed,
                removed = r.removed,
                "recordings index: picked up recordings changed outside the hub"
            );
        }
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
        for e in st.entries.values() {
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
    let mut st = State {
        storage: storage.to_path_buf(),
        entries: HashMap::new(),
        lines: 0,
        file: None,
    };
    let path = storage.join(FILE);
    match File::open(&path) {
        Ok(f) => {
            let mut bad = 0;
            for line in BufReader::new(f).lines().map_while(Result::ok) {
                st.lines += 1;
                match serde_json::from_str::<Op>(&line) {
                    Ok(Op::Put { entry }) => {
                        st.entries.insert(entry.id.clone(), *entry);
                    }
                    Ok(Op::Del { id }) => {
                        st.entries.remove(&id);
                    }
                    Err(_) => bad += 1,
                }
            }
            if bad > 0 {
                // The entries are checked against the files next anyway.
                tracing::warn!(path = %path.display(), lines = bad, "unreadable lines in the recordings index skipped");
                compact(&mut st);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let ids = ids(storage);
            if ids.is_empty() {
                return st;
            }
            for id in &ids {
                st.entries.insert(id.clone(), entry::read(storage, id));
            }
            tracing::info!(storage = %storage.display(), rebuilt = ids.len(), "recordings index was missing; rebuilt from the recordings");
            compact(&mut st);
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the recordings index; listing from the recordings");
            for id in ids(storage) {
                let e = entry::read(storage, &id);
                st.entries.insert(id, e);
            }
        }
    }
    st
}

fn put(st: &mut State, e: Entry) {
    let line = serde_json::to_vec(&PutRef {
        op: "put",
        entry: &e,
    });
    st.entries.insert(e.id.clone(), e);
    if let Ok(line) = line {
        append(st, line);
    }
}

/// Append one line; when the file has grown past twice the live entries,
/// rewrite it whole instead. A failed write is logged: the next `verify`
/// (or start) repairs the index from the files.
fn append_op(st: &mut State, op: &Op) {
    if let Ok(line) = serde_json::to_vec(op) {
        append(st, line);
    }
}

/// Append one serialised line (the entries are already updated in memory).
fn append(st: &mut State, mut line: Vec<u8>) {
    if st.lines > 2 * st.entries.len() + 64 {
        compact(st);
        return;
    }
    line.push(b'\n');
    if st.file.is_none() {
        let opened = fs::create_dir_all(&st.storage).and_then(|()| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(st.storage.join(FILE))
        });
        match opened {
            Ok(f) => st.file = Some(f),
            Err(e) => {
                tracing::warn!(storage = %st.storage.display(), error = %e, "cannot open the recordings index");
                return;
            }
        }
    }
    if let Some(f) = st.file.as_mut() {
        match crate::util::append_whole(f, &line) {
            Ok(()) => st.lines += 1,
            Err(e) => {
                tracing::warn!(storage = %st.storage.display(), error = %e, "cannot append to the recordings index")
            }
        }
    }
}

/// Rewrite the index file with one `put` per entry (temp file + rename).
fn compact(st: &mut State) {
    let mut buf = Vec::with_capacity(st.entries.len() * 400);
    for e in st.entries.values() {
        if serde_json::to_writer(
            &mut buf,
            &PutRef {
                op: "put",
                entry: e,
            },
        )
        .is_ok()
        {
            buf.push(b'\n');
        }
    }
    let path = st.storage.join(FILE);
    let written = fs::create_dir_all(&st.storage)
        .and_then(|()| crate::util::write_atomic(&path, &buf))
        .and_then(|()| OpenOptions::new().append(true).open(&path));
    match written {
        Ok(f) => {
            st.file = Some(f);
            st.lines = st.entries.len();
        }
        Err(e) => {
            st.file = None;
            tracing::warn!(path = %path.display(), error = %e, "cannot write the recordings index")
        }
    }
}

#[cfg(test)]
mod tests;
