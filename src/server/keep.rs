//! `keep_result`: a long tool result the client folded in the chat is
//! kept in the workspace as a text file (written atomically, replacing a
//! result kept under the same name), so the AI can read it whole with
//! `hub__read_file`. The file work runs off the async workers.
//!
//! Each kept result belongs to the principal that kept it, recorded by
//! where it lies: the main token's in `.toolhub/results/<name>.txt`, a
//! client's in `.toolhub/results/clients/<client>/<name>.txt`, so one
//! principal never replaces another's. A principal's results together
//! weigh at most `server.keptResultsMaxBytes`: a keep past it is refused
//! with `LIMIT_EXCEEDED`. Cleanup, at every keep: results older than
//! [`MAX_AGE`] go (every principal's), and a principal keeps at most
//! [`MAX_COUNT`], its oldest going first. The text is call data: it is
//! redacted as history is (`history::redact_text`) and written 0600 in
//! 0700 folders (`store::private`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::app::App;
use crate::caller::Caller;
use crate::config::SecurityConfig;
use crate::errors::{ErrorType, HubError};
use crate::protocol::keep::KeepResultReq;
use crate::protocol::{self, MsgId};
use crate::session::Outbox;
use crate::session::Place;

/// The largest text kept (bytes of UTF-8); a frame must also fit
/// `server.maxMessageBytes`.
pub const MAX_TEXT_BYTES: usize = 32 * 1024 * 1024;

/// Where kept results go, relative to the workspace.
pub const RESULTS_DIR: &str = ".toolhub/results";
/// Where a client's go, inside [`RESULTS_DIR`]: `clients/<client>`.
const CLIENTS_DIR: &str = "clients";
/// A kept result older than this is removed (at the next keep).
pub const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most results one principal keeps; the oldest go first.
pub const MAX_COUNT: usize = 200;

/// One keep's inputs beyond the request.
struct Rules<'a> {
    caller: &'a Caller,
    max_bytes: usize,
    security: &'a SecurityConfig,
}

pub fn handle(app: &App, out: &Outbox, id: MsgId, req: KeepResultReq, place: Option<Place>) {
    let cfg = app.hub.config();
    let out = out.clone();
    tokio::spawn(async move {
        let kept = if cfg.builtin.enabled {
            let caller = out.caller();
            tokio::task::spawn_blocking(move || {
                let rules = Rules {
                    caller: &caller,
                    max_bytes: cfg.server.kept_results_max_bytes,
                    security: &cfg.security,
                };
                keep(&cfg.builtin.workspace, &req, &rules)
            })
            .await
            .unwrap_or_else(|e| {
                Err(HubError::new(
                    ErrorType::Unknown,
                    format!("keeping the result failed: {e}"),
                ))
            })
        } else {
            Err(HubError::new(
                ErrorType::NotFound,
                "keep_result: the workspace tools are off (builtin.enabled is false), so no tool could read a kept result",
            )
            .with_suggestion("put the whole result into the chat, or have the operator set builtin.enabled to true in config.json (a config reload applies it)"))
        };
        drop(place);
        match kept {
            Ok((path, chars)) => out.send(protocol::reply(
                "result_kept",
                &id,
                json!({"path": path, "chars": chars}),
            )),
            Err(e) => out.send(protocol::error_msg(&id, &e)),
        };
    });
}

/// Keeps run one at a time (a quota is checked against what is on disk).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Write the text; the workspace-relative path and its length in Unicode
/// characters (of the text as kept, redacted).
fn keep(workspace: &Path, req: &KeepResultReq, rules: &Rules) -> Result<(String, usize), HubError> {
    let bytes = req.text.len();
    if bytes > MAX_TEXT_BYTES {
        return Err(HubError::new(
            ErrorType::LimitExceeded,
            format!(
                "keep_result: the text is {bytes} bytes, over the limit of {MAX_TEXT_BYTES} bytes (32 MiB)"
            ),
        )
        .with_suggestion("keep a shorter part of the result (its head and tail), or have the tool write its output to a file in the workspace instead"));
    }
    let text = crate::history::redact_text(&req.text, rules.security);
    let rel = match rules.caller.client_name() {
        None => RESULTS_DIR.to_string(),
        Some(c) => format!("{RESULTS_DIR}/{CLIENTS_DIR}/{}", folder_of(c)),
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = results_dir(workspace, &rel).map_err(|e| {
        HubError::new(
            ErrorType::Permission,
            format!(
                "keep_result: cannot use {rel} in the workspace {}: {e}",
                workspace.display()
            ),
        )
        .with_suggestion(format!(
            "check that the workspace is writable and that {rel} is a plain folder inside it (not a symbolic link)"
        ))
    })?;
    let name = format!("{}.txt", req.name);
    clean(workspace, &dir, &name);
    let used: u64 = kept_in(&dir)
        .iter()
        .filter(|k| k.path.file_name() != Some(name.as_ref()))
        .map(|k| k.bytes)
        .sum();
    let want = used + text.len() as u64;
    if want > rules.max_bytes as u64 {
        let who = match rules.caller.client_name() {
            None => "the main token".to_string(),
            Some(c) => format!("client \"{c}\""),
        };
        return Err(HubError::new(
            ErrorType::LimitExceeded,
            format!(
                "keep_result: {who} keeps {used} bytes of results in {rel}; {} more would pass server.keptResultsMaxBytes ({} bytes)",
                text.len(),
                rules.max_bytes
            ),
        )
        .with_suggestion(format!(
            "put only the head and tail of the result into the chat, or delete results you no longer need from {rel} (results older than 7 days go by themselves); the operator can raise server.keptResultsMaxBytes in config.json"
        )));
    }
    let file = dir.join(&name);
    crate::store::private::write_atomic(&file, text.as_bytes()).map_err(|e| {
        HubError::classified(format!("keep_result: cannot write {}: {e}", file.display()))
    })?;
    Ok((format!("{rel}/{name}"), text.chars().count()))
}

/// A client's folder name: the name itself when it is a plain id, else a
/// digest of it (a client name is any string config allows).
fn folder_of(client: &str) -> String {
    if crate::store::valid_id(client) {
        return client.to_string();
    }
    use sha2::{Digest, Sha256};
    format!("c-{}", hex::encode(&Sha256::digest(client.as_bytes())[..8]))
}

/// A kept result on disk.
struct Kept {
    path: PathBuf,
    bytes: u64,
    at: SystemTime,
}

/// The results kept in `dir` (its `.txt` files), oldest first.
fn kept_in(dir: &Path) -> Vec<Kept> {
    let mut out: Vec<Kept> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let m = e.metadata().ok().filter(|m| m.is_file())?;
            let path = e.path();
            (path.extension()? == "txt").then_some(Kept {
                path,
                bytes: m.len(),
                at: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            })
        })
        .collect();
    out.sort_by_key(|k| k.at);
    out
}

/// Remove every principal's results older than [`MAX_AGE`], and the
/// keeper's oldest past [`MAX_COUNT`] - 1 (room for `name`, unless it
/// replaces one).
fn clean(workspace: &Path, dir: &Path, name: &str) {
    let Ok(root) = std::fs::canonicalize(workspace) else {
        return;
    };
    let results = root.join(RESULTS_DIR);
    let mut dirs = vec![results.clone()];
    if let Ok(rd) = std::fs::read_dir(results.join(CLIENTS_DIR)) {
        dirs.extend(
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    let now = SystemTime::now();
    for d in &dirs {
        for k in kept_in(d) {
            if now.duration_since(k.at).unwrap_or_default() > MAX_AGE {
                let _ = std::fs::remove_file(&k.path);
            }
        }
    }
    let mine: Vec<Kept> = kept_in(dir)
        .into_iter()
        .filter(|k| k.path.file_name() != Some(name.as_ref()))
        .collect();
    let over = (mine.len() + 1).saturating_sub(MAX_COUNT);
    for k in mine.iter().take(over) {
        let _ = std::fs::remove_file(&k.path);
    }
}

/// `<workspace>/<rel>`, created (folders 0700; the last tightened to 0700),
/// and a real folder inside the workspace: a symbolic link a command put in
/// its place is refused.
fn results_dir(workspace: &Path, rel: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let root = std::fs::canonicalize(workspace)?;
    let mut dir = root.clone();
    for part in rel.split('/') {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a folder",
                    dir.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
                .mode(crate::store::private::DIR_MODE)
                .create(&dir)?,
            Err(e) => return Err(e),
        }
    }
    std::fs::set_permissions(
        &dir,
        std::fs::Permissions::from_mode(crate::store::private::DIR_MODE),
    )?;
    Ok(dir)
}

#[cfg(test)]
mod tests;
