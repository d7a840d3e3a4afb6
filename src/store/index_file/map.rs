//! An [`IndexFile`] whose entries are all held in memory, in a map by id
//! (the runs' index, the finished tasks'): replayed from the file at load,
//! each change set in the map and appended as a line. The file is
//! rewritten from the map when it holds more than twice as many lines as
//! entries, or when lines could not be read at load.

use std::collections::HashMap;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{del_line, put_line, IndexFile, Loaded};

/// An entry of an index: named by the id of what it describes.
pub trait Indexed: Serialize + DeserializeOwned {
    fn id(&self) -> &str;
}

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op<E> {
    Put { entry: Box<E> },
    Del { id: String },
}

/// The entries of one index file, kept in memory, and the file.
pub struct MapIndex<E> {
    entries: HashMap<String, E>,
    file: IndexFile,
}

impl<E: Indexed> MapIndex<E> {
    /// An index with no entries that will write to `path` (nothing is read).
    pub fn empty(path: &Path) -> MapIndex<E> {
        MapIndex {
            entries: HashMap::new(),
            file: IndexFile::new(path),
        }
    }

    /// Read the index at `path` (entries replayed in order; the file is
    /// rewritten without the lines that cannot be read).
    pub fn load(path: &Path) -> (MapIndex<E>, Loaded) {
        let mut entries = HashMap::new();
        let (file, loaded) = IndexFile::load(path, |_, line| {
            match serde_json::from_slice::<Op<E>>(line) {
                Ok(Op::Put { entry }) => {
                    entries.insert(entry.id().to_string(), *entry);
                }
                Ok(Op::Del { id }) => {
                    entries.remove(&id);
                }
                Err(_) => return false,
            }
            true
        });
        let mut ix = MapIndex { entries, file };
        if matches!(loaded, Loaded::Read { bad } if bad > 0) {
            ix.compact();
        }
        (ix, loaded)
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
            Ok(line) => self.append(&line),
            Err(err) => {
                tracing::warn!(path = %self.file.path().display(), error = %err, "cannot encode an index entry")
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
            self.append(&line);
        }
        Some(gone)
    }

    /// The file was written by this hub and has been deleted since.
    pub fn file_gone(&self) -> bool {
        self.file.gone()
    }

    /// After a check that found the file deleted (`gone`, from
    /// [`MapIndex::file_gone`]): write it again, and say so.
    pub fn rewrite_if_deleted(&mut self, gone: bool, what: &str, storage: &Path) {
        if gone {
            tracing::warn!(storage = %storage.display(), "the {what} index file was deleted; written again");
            self.compact();
        }
    }

    /// Append one line; when the file has grown past twice the live
    /// entries, rewrite it whole instead.
    fn append(&mut self, line: &[u8]) {
        if self.file.due(self.entries.len()) {
            self.compact();
        } else {
            self.file.append(line);
        }
    }

    /// Rewrite the file with one `put` per entry.
    pub fn compact(&mut self) {
        let lines = self
            .entries
            .values()
            .filter_map(|e| Some((0, put_line(e).ok()?)));
        self.file.compact(&mut [], lines);
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
        let (mut ix, loaded) = MapIndex::<E>::load(&path);
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
        let (ix, loaded) = MapIndex::<E>::load(&path);
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
        let (mut ix, _) = MapIndex::<E>::load(&path);
        for n in 0..500 {
            ix.put(e("one", n));
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 2 + 64, "{lines} lines for one entry");
        let (again, _) = MapIndex::<E>::load(&path);
        assert_eq!(again.get("one"), Some(&e("one", 499)));
    }

    #[test]
    fn a_deleted_file_is_written_again_from_memory() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("ix.jsonl");
        let mut ix = MapIndex::<E>::empty(&path);
        ix.put(e("a", 1));
        std::fs::remove_file(&path).unwrap();
        let gone = ix.file_gone();
        assert!(gone);
        ix.rewrite_if_deleted(gone, "test", d.path());
        let (again, _) = MapIndex::<E>::load(&path);
        assert_eq!(again.get("a"), Some(&e("a", 1)));
    }
}
