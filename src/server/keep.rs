//! `keep_result`: a long tool result the client folded in the chat is
//! kept in the workspace as `.toolhub/results/<name>.txt` (written
//! atomically, replacing a result kept under the same name), so the AI can
//! read it whole with `hub__read_file`. The file work runs off the async
//! workers.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::app::App;
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

pub fn handle(app: &App, out: &Outbox, id: MsgId, req: KeepResultReq, place: Option<Place>) {
    let builtin = app.hub.config().builtin.clone();
    let out = out.clone();
    tokio::spawn(async move {
        let kept = if builtin.enabled {
            let ws = builtin.workspace.clone();
            tokio::task::spawn_blocking(move || keep(&ws, &req))
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

/// Write the text; the workspace-relative path and its length in Unicode
/// characters.
fn keep(workspace: &Path, req: &KeepResultReq) -> Result<(String, usize), HubError> {
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
    let dir = results_dir(workspace).map_err(|e| {
        HubError::new(
            ErrorType::Permission,
            format!(
                "keep_result: cannot use {RESULTS_DIR} in the workspace {}: {e}",
                workspace.display()
            ),
        )
        .with_suggestion(format!(
            "check that the workspace is writable and that {RESULTS_DIR} is a plain folder inside it (not a symbolic link)"
        ))
    })?;
    let file = dir.join(format!("{}.txt", req.name));
    crate::util::write_atomic(&file, req.text.as_bytes()).map_err(|e| {
        HubError::classified(format!("keep_result: cannot write {}: {e}", file.display()))
    })?;
    Ok((
        format!("{RESULTS_DIR}/{}.txt", req.name),
        req.text.chars().count(),
    ))
}

/// `<workspace>/.toolhub/results`, created, and a real folder inside the
/// workspace: a symbolic link a command put in its place is refused.
fn results_dir(workspace: &Path) -> std::io::Result<PathBuf> {
    let root = std::fs::canonicalize(workspace)?;
    let mut dir = root.clone();
    for part in RESULTS_DIR.split('/') {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a folder",
                    dir.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&dir)?,
            Err(e) => return Err(e),
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(name: &str, text: &str) -> KeepResultReq {
        KeepResultReq {
            name: name.into(),
            text: text.into(),
        }
    }

    #[test]
    fn keeps_overwrites_and_refuses_a_linked_folder() {
        let dir = tempfile::tempdir().expect("dir");
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).expect("ws");
        let (path, chars) = keep(&ws, &req("th-1-s3", "héllo")).expect("kept");
        assert_eq!(path, ".toolhub/results/th-1-s3.txt");
        assert_eq!(chars, 5);
        assert!(keep(&ws, &req("th-1-s3", "again")).is_ok());
        let text = std::fs::read_to_string(ws.join(&path)).expect("read");
        assert_eq!(text, "again");

        let other = tempfile::tempdir().expect("other");
        let ws2 = dir.path().join("ws2");
        std::fs::create_dir_all(ws2.join(".toolhub")).expect("ws2");
        std::os::unix::fs::symlink(other.path(), ws2.join(".toolhub/results")).expect("link");
        let e = keep(&ws2, &req("x", "t")).expect_err("refused");
        assert_eq!(e.error_type, ErrorType::Permission);
        assert!(!other.path().join("x.txt").exists());
    }
}
