//! Tool-list snapshots stored once per distinct list:
//! `<storage>/.tools/<sha256>.json`. A recording's header names the snapshot
//! it was made against (`toolsHash`) instead of carrying a copy of the whole
//! list, so a one-step recording is a few hundred bytes. Recordings of
//! schema 1 carry the list inline and still load as they are.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The folder of the snapshots (a dot name: never taken for a recording).
pub const DIR: &str = ".tools";

/// A snapshot name is 64 lowercase hex digits, checked before any path is
/// built from it (a header's `toolsHash` is read from disk).
pub fn valid_hash(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

fn path_of(storage: &Path, hash: &str) -> Option<PathBuf> {
    valid_hash(hash).then(|| storage.join(DIR).join(format!("{hash}.json")))
}

/// Store `tools` once (a no-op when the same list is already stored) and
/// return its hash.
pub fn save(storage: &Path, tools: &[Value]) -> std::io::Result<String> {
    let bytes = serde_json::to_vec(tools).map_err(std::io::Error::other)?;
    let hash = hex::encode(Sha256::digest(&bytes));
    let dir = storage.join(DIR);
    fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{hash}.json"));
    // Same name, same content: an existing file is the same snapshot.
    if !path.exists() {
        crate::util::write_atomic(&path, &bytes)?;
    }
    Ok(hash)
}

/// The tool list stored under `hash`, or why it cannot be read.
pub fn load(storage: &Path, hash: &str) -> Result<Vec<Value>, String> {
    let path = path_of(storage, hash).ok_or_else(|| format!("{hash:?} is not a tool-list hash"))?;
    let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_is_stored_once_and_read_back_by_hash() {
        let dir = tempfile::tempdir().unwrap();
        let tools = vec![json!({"name": "echo", "inputSchema": {"type": "object"}})];
        let a = save(dir.path(), &tools).unwrap();
        let b = save(dir.path(), &tools).unwrap();
        assert_eq!(a, b);
        assert!(valid_hash(&a));
        assert_eq!(fs::read_dir(dir.path().join(DIR)).unwrap().count(), 1);
        assert_eq!(load(dir.path(), &a).unwrap(), tools);
        let other = save(dir.path(), &[json!({"name": "add"})]).unwrap();
        assert_ne!(a, other);
        assert!(load(dir.path(), "../../etc/passwd").is_err());
        assert!(load(dir.path(), &"0".repeat(64)).is_err());
    }
}
