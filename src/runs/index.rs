//! The runs index: `<runs.storagePath>/.index.jsonl` (a
//! [`store::index_file`](crate::store::index_file)), one entry per run: its
//! metadata and the [`Stamp`] of its `.metadata.json`. `list_runs` reads
//! only the index (in memory); no metadata file is opened.
//!
//! Kept in step with the files: the runs service puts an entry right after
//! each change it makes to a run's metadata (create, set, archive, a
//! rebuild) and deletes it with the run. A check against the files
//! ([`RunIndex::verify`]: at first use, then every few seconds) `stat`s each
//! run's `.metadata.json`, reads again the ones whose stamp differs (a
//! change behind the hub's back), adds folders without an entry (a crash
//! between a run's write and its index line) and drops entries whose
//! folder is gone; what it repaired is logged. A missing index is rebuilt
//! from the runs. Checking never writes a run: metadata that is missing or
//! unreadable is rebuilt from the log in memory and named as a problem
//! until the run is next read or changed through the hub.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::model::{Metadata, RunStatus};
use super::store;
use crate::caller::Caller;
use crate::store::index_file::{Indexed, Loaded, MapIndex, Repairs, Stamp};

/// The index file, beside the runs (a dot name is never a run id).
pub const FILE: &str = ".index.jsonl";

/// One run's line in the index.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEntry {
    pub id: String,
    /// `None` when the metadata cannot be read at all (`problem` says why).
    pub meta: Option<Metadata>,
    /// Why the metadata is not as it should be (missing, unreadable).
    pub problem: Option<String>,
    /// Of `.metadata.json` when it was read (the default when missing).
    pub stamp: Stamp,
}

impl Indexed for RunEntry {
    fn id(&self) -> &str {
        &self.id
    }
}

/// One page of `list_runs`.
pub struct RunPage {
    pub runs: Vec<Metadata>,
    /// Runs matching the filter (all pages).
    pub total: usize,
    /// One line per run whose metadata is missing or unreadable.
    pub problems: Vec<String>,
}

struct State {
    storage: PathBuf,
    ix: MapIndex<RunEntry>,
    /// The runs folder's stamp when it was last checked: a run folder
    /// added or removed changes it, so `list` checks again at once (an
    /// edit inside a run is caught by the periodic check).
    folder: Option<Stamp>,
}

/// The index of one runs folder (the configured `runs.storagePath`; a
/// changed path is loaded on first use).
#[derive(Default)]
pub struct RunIndex {
    state: Mutex<Option<State>>,
}

impl RunIndex {
    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        // A panic while holding it leaves a usable map: entries are whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state for `storage`: loaded (or rebuilt) and checked against
    /// the runs on first use.
    fn state<'a>(slot: &'a mut Option<State>, storage: &Path) -> &'a mut State {
        if slot.as_ref().is_some_and(|s| s.storage != storage) {
            *slot = None;
        }
        slot.get_or_insert_with(|| {
            let mut st = load(storage);
            let n = st.ix.len();
            let r = verify(&mut st);
            tracing::info!(storage = %storage.display(), runs = n + r.added - r.removed, "runs index ready");
            st
        })
    }

    /// Load the index now (at start-up, off the call path).
    pub fn open(&self, storage: &Path) {
        let mut g = self.lock();
        RunIndex::state(&mut g, storage);
    }

    /// Hold the index while the hub changes a run's files, then put or
    /// drop its entry through the returned [`Held`]: a check against the
    /// files never runs between the change and its index line (it would
    /// count the hub's own change as one made behind its back).
    pub fn hold<'a>(&'a self, storage: &'a Path) -> Held<'a> {
        let mut g = self.lock();
        let st = RunIndex::state(&mut g, storage);
        let fresh = st.folder.is_some() && Stamp::of(storage).ok() == st.folder;
        Held {
            guard: g,
            storage,
            fresh,
        }
    }

    /// Check the index against the runs (see the module doc).
    pub fn verify(&self, storage: &Path) -> Repairs {
        let mut g = self.lock();
        let first = g.as_ref().is_none_or(|s| s.storage != storage);
        let st = RunIndex::state(&mut g, storage);
        if first {
            // Just loaded, and checked while loading.
            return Repairs::default();
        }
        verify(st)
    }

    /// A page of the runs with status `want` (all when `None`) that `who`
    /// may see (a client token: the runs it created, and no problems, as
    /// a run without metadata names no owner), most recently used first
    /// (ties by id, so pages never overlap).
    pub fn list(
        &self,
        storage: &Path,
        (want, who): (Option<RunStatus>, &Caller),
        offset: usize,
        limit: usize,
    ) -> RunPage {
        let mut g = self.lock();
        let st = RunIndex::state(&mut g, storage);
        if Stamp::of(storage).ok() != st.folder {
            verify(st);
        }
        let mut problems = Vec::new();
        let mut hits: Vec<&Metadata> = Vec::new();
        for e in st.ix.entries() {
            if let Some(p) = e.problem.as_ref().filter(|_| who.is_main()) {
                problems.push(format!("{}: {p}", e.id));
            }
            if let Some(m) = &e.meta {
                if want.is_none_or(|w| m.status == w) && who.may_see(m.client.as_deref()) {
                    hits.push(m);
                }
            }
        }
        hits.sort_unstable_by(|a, b| {
            b.last_accessed
                .cmp(&a.last_accessed)
                .then_with(|| a.run_id.cmp(&b.run_id))
        });
        problems.sort();
        RunPage {
            total: hits.len(),
            runs: hits.into_iter().skip(offset).take(limit).cloned().collect(),
            problems,
        }
    }
}

/// The index held while the hub changes a run (see [`RunIndex::hold`]).
pub struct Held<'a> {
    guard: MutexGuard<'a, Option<State>>,
    storage: &'a Path,
    /// The folder had no change the index missed before the hub's own.
    fresh: bool,
}

impl Held<'_> {
    fn state(&mut self) -> &mut State {
        RunIndex::state(&mut self.guard, self.storage)
    }

    /// Read run `id` again and put its entry (after the hub changed it).
    pub fn refresh(&mut self, id: &str) {
        let e = read(self.storage, id);
        self.state().ix.put(e);
        self.own_change();
    }

    /// Drop run `id` (after the hub deleted it).
    pub fn remove(&mut self, id: &str) {
        self.state().ix.remove(id);
        self.own_change();
    }

    /// The hub's own change (a run created or deleted) moved the folder's
    /// stamp: a folder that was current before it stays current.
    fn own_change(&mut self) {
        if self.fresh {
            let now = Stamp::of(self.storage).ok();
            self.state().folder = now;
        }
    }
}

/// A run's entry as its files are now, without writing anything.
fn read(storage: &Path, id: &str) -> RunEntry {
    let stamp = stamp(storage, id);
    let (meta, problem) = match store::peek_meta(storage, id) {
        Ok((m, p)) => (Some(m), p),
        Err(e) => (None, Some(e.message)),
    };
    RunEntry {
        id: id.to_string(),
        meta,
        problem,
        stamp,
    }
}

fn stamp(storage: &Path, id: &str) -> Stamp {
    Stamp::of(&storage.join(id).join(store::META)).unwrap_or_default()
}

/// Read the index file, or rebuild it from the runs when it is missing.
fn load(storage: &Path) -> State {
    let (mut ix, loaded) = MapIndex::load(&storage.join(FILE));
    match loaded {
        Loaded::Read { .. } => {}
        Loaded::Missing => {
            let ids = store::ids(storage);
            if !ids.is_empty() {
                for id in &ids {
                    ix.put_quiet(read(storage, id));
                }
                tracing::info!(storage = %storage.display(), rebuilt = ids.len(), "runs index was missing; rebuilt from the runs");
                ix.compact();
            }
        }
        Loaded::Unreadable(e) => {
            // Checked against the runs next: every run is added from its files.
            tracing::warn!(storage = %storage.display(), error = %e, "cannot read the runs index; listing from the runs");
        }
    }
    State {
        storage: storage.to_path_buf(),
        ix,
        folder: None,
    }
}

/// `stat` every run's metadata against its entry; read again what
/// differs, add runs without an entry, drop entries whose run is gone.
fn verify(st: &mut State) -> Repairs {
    let storage = st.storage.clone();
    // Before reading the folder: a change made while it is read is seen
    // by the next check.
    st.folder = Stamp::of(&storage).ok();
    let on_disk = store::ids(&storage);
    let mut r = Repairs::default();
    for id in &on_disk {
        let now = stamp(&storage, id);
        let known = st.ix.get(id).map(|e| e.stamp);
        if known == Some(now) {
            continue;
        }
        match known {
            None => r.added += 1,
            Some(_) => r.changed += 1,
        }
        st.ix.put(read(&storage, id));
    }
    let present: HashSet<&String> = on_disk.iter().collect();
    let gone: Vec<String> = st
        .ix
        .entries()
        .filter(|e| !present.contains(&e.id))
        .map(|e| e.id.clone())
        .collect();
    for id in gone {
        r.removed += 1;
        st.ix.remove(&id);
    }
    let gone = st.ix.file_gone();
    st.ix.rewrite_if_deleted(gone, "runs", &storage);
    r.log("runs", "runs", &storage);
    r
}
