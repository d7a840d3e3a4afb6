//! `run:` paths: the workspace tools reach the current run's `scripts/` and
//! `outputs/` (`run:scripts/x.py`, `run:outputs/result.csv`), and
//! `run_command` may run in the run's folder (`cwd: "run:"`, `"run:outputs"`)
//! and is told where it is (`TOOLHUB_RUN_*` variables).
//!
//! Runs live above this layer, so the current run is asked for through
//! [`RunFolder`], which the runs service implements and the application
//! hands to [`super::Builtin`]. A `run:` path is confined like a workspace
//! path, to the run's `scripts/` or `outputs/` folder (for `cwd`, also the
//! run folder itself): `..`, symlinks and absolute paths cannot leave it.

use std::path::{Path, PathBuf};

use crate::errors::{ErrorType, HubError};

/// The prefix that names the current run's folders.
pub const PREFIX: &str = "run:";

/// The folders a `run:` path may name (the log and metadata are the hub's).
const SUBDIRS: [&str; 2] = ["scripts", "outputs"];

/// The current run of a session, as the runs service sees it.
pub struct CurrentRun {
    pub run_id: String,
    /// `<runs.storagePath>/<run_id>`.
    pub dir: PathBuf,
}

/// The calling connection's current run, asked of the runs service (which
/// sits above this layer and implements it; the application wires it).
/// `run_command`'s sandbox leaves [`RunFolder::folder`] writable; `run:`
/// paths resolve against [`RunFolder::current`]. Each is asked for a
/// call's session and its principal (`client`: the client of `clients`
/// that made the call, `None`: the main token), as a client's calls have
/// only the run its session chose, never the person's.
pub trait RunFolder: Send + Sync {
    /// The folder of `session`'s current run, when it has one (clears
    /// nothing).
    fn folder(&self, session: &str, client: Option<&str>) -> Option<PathBuf>;

    /// `session`'s current run, or why there is none (with a suggestion
    /// saying how to set one).
    fn current(&self, session: &str, client: Option<&str>) -> Result<CurrentRun, HubError>;
}

/// A `run:` path split into the folder that confines it and the rest.
pub struct RunPath {
    /// The canonical confinement root: the run's `scripts/` or `outputs/`
    /// (or the run folder, for `cwd: "run:"`).
    pub root: PathBuf,
    /// The path inside `root` (`"."` for the root itself).
    pub rest: String,
    /// How a result names `root` (`run:outputs`, or `run:`).
    pub shown: String,
}

/// The part after `run:`, when `user` has the prefix.
pub fn strip(user: &str) -> Option<&str> {
    user.strip_prefix(PREFIX)
}

/// Resolve the part after `run:` against the current run of `session`
/// for the principal `client`. `allow_run_root`: the run folder itself may
/// be named (`cwd: "run:"`).
pub fn resolve(
    folders: Option<&dyn RunFolder>,
    (session, client): (&str, Option<&str>),
    after: &str,
    allow_run_root: bool,
) -> Result<RunPath, HubError> {
    let folders = folders.ok_or_else(|| {
        HubError::new(
            ErrorType::NotFound,
            "run: paths are not available in this hub (no runs service)",
        )
        .with_suggestion("use a path relative to the workspace folder")
    })?;
    let run = folders.current(session, client)?;
    let trimmed = after.trim_start_matches("./");
    let (first, rest) = trimmed.split_once('/').unwrap_or((trimmed, ""));
    let sub = if first.is_empty() && rest.is_empty() && allow_run_root {
        None
    } else if SUBDIRS.contains(&first) {
        Some(first)
    } else {
        return Err(HubError::new(
            ErrorType::InvalidParams,
            format!(
                "'{PREFIX}{after}' is not in the run's scripts/ or outputs/ folder"
            ),
        )
        .with_suggestion(format!(
            "name a file under {PREFIX}scripts/ or {PREFIX}outputs/, e.g. \"{PREFIX}outputs/result.csv\""
        )));
    };
    let io = |e: std::io::Error, p: &Path| {
        HubError::new(
            ErrorType::NotFound,
            format!(
                "the folder {} of run {:?} cannot be used: {e}",
                p.display(),
                run.run_id
            ),
        )
        .with_suggestion("get_run shows whether the run is intact; create_run makes a new one")
    };
    let run_dir = std::fs::canonicalize(&run.dir).map_err(|e| io(e, &run.dir))?;
    let root = match sub {
        None => run_dir.clone(),
        Some(s) => {
            let want = run.dir.join(s);
            std::fs::create_dir_all(&want).map_err(|e| io(e, &want))?;
            std::fs::canonicalize(&want).map_err(|e| io(e, &want))?
        }
    };
    // A scripts/ or outputs/ swapped for a symlink leads elsewhere.
    if !root.starts_with(&run_dir) {
        return Err(HubError::new(
            ErrorType::Permission,
            format!(
                "the {} folder of run {:?} leads outside the run; refusing it",
                sub.unwrap_or("run"),
                run.run_id
            ),
        ));
    }
    let rest = rest.trim_matches('/');
    Ok(RunPath {
        root,
        rest: if rest.is_empty() {
            ".".into()
        } else {
            rest.into()
        },
        shown: format!("{PREFIX}{}", sub.unwrap_or("")),
    })
}

impl RunPath {
    /// A path the tool reported relative to [`RunPath::root`], as `run:…`.
    pub fn show(&self, relative: &str) -> String {
        match (relative, self.shown.as_str()) {
            (".", s) => s.to_string(),
            (r, PREFIX) => format!("{PREFIX}{r}"),
            (r, s) => format!("{s}/{r}"),
        }
    }
}

/// The `TOOLHUB_RUN_*` variables of a run folder (absolute paths).
pub fn env_of(dir: &Path) -> Vec<(String, String)> {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = dir.to_string_lossy().into_owned();
    vec![
        ("TOOLHUB_RUN_ID".into(), id),
        ("TOOLHUB_RUN_DIR".into(), dir.clone()),
        ("TOOLHUB_RUN_SCRIPTS".into(), format!("{dir}/scripts")),
        ("TOOLHUB_RUN_OUTPUTS".into(), format!("{dir}/outputs")),
    ]
}
