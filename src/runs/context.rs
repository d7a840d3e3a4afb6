//! The hub-wide current run: `<stateDir>/current_run`, a small JSON file
//! (`run_id`, `last_accessed`, `theme_description`) rewritten through a temp
//! file and a rename, so it survives a restart and is never half written.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::model::{self, Metadata};
use crate::store::private::write_atomic;

pub const FILE: &str = "current_run";

/// The environment variable that overrides the file.
pub const ENV: &str = "TOOLHUB_CURRENT_RUN";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    pub run_id: String,
    pub last_accessed: String,
    pub theme_description: String,
}

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// The file's run id, when the file exists and names a valid id.
pub fn read(state_dir: &Path) -> Option<Context> {
    let bytes = std::fs::read(path(state_dir)).ok()?;
    match serde_json::from_slice::<Context>(&bytes) {
        Ok(c) if model::valid_id(&c.run_id) => Some(c),
        Ok(c) => {
            tracing::warn!(run = %c.run_id, "current_run names an invalid run id; ignored");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "current_run is unreadable; ignored");
            None
        }
    }
}

pub fn write(state_dir: &Path, meta: &Metadata) {
    let c = Context {
        run_id: meta.run_id.clone(),
        last_accessed: crate::util::now_rfc3339(),
        theme_description: meta.theme_description.clone(),
    };
    let res = serde_json::to_vec_pretty(&c)
        .map_err(std::io::Error::other)
        .and_then(|b| write_atomic(&path(state_dir), &b));
    if let Err(e) = res {
        tracing::warn!(error = %e, "cannot write current_run");
    }
}

/// Remove the file when it names `run_id` (a run that was deleted).
pub fn clear_if(state_dir: &Path, run_id: &str) {
    if read(state_dir).is_some_and(|c| c.run_id == run_id) {
        if let Err(e) = std::fs::remove_file(path(state_dir)) {
            tracing::warn!(error = %e, "cannot remove current_run");
        }
    }
}

/// The environment's run id (read once at start-up).
pub fn from_env() -> Option<String> {
    let v = std::env::var(ENV).ok()?;
    let v = v.trim().to_string();
    if v.is_empty() {
        None
    } else if model::valid_id(&v) {
        Some(v)
    } else {
        tracing::warn!(run = %v, "{ENV} is not a valid run id; ignored");
        None
    }
}
