//! `get_artifact`: one stored file of a recording or a run, base64 with its
//! media type. The owner's folder comes from its own store's `dir_of` (id
//! validated, symlinked folders refused); `store::artifact` confines the
//! path to that folder and caps the size. The read runs off the reactor.

use serde_json::json;

use crate::app::App;
use crate::caller::Caller;
use crate::errors::{ErrorType, HubError};
use crate::protocol::artifact::{ArtifactOwner, ArtifactReq};
use crate::protocol::{self, MsgId};
use crate::session::Outbox;
use crate::session::Place;
use crate::store::artifact::{self, Artifact};

pub fn handle(app: &App, out: &Outbox, id: MsgId, req: ArtifactReq, place: Option<Place>) {
    let cfg = app.hub.config();
    let (out, caller) = (out.clone(), out.caller());
    tokio::spawn(async move {
        let owner = req.owner.clone();
        let read = tokio::task::spawn_blocking(move || read(&cfg, &req, &caller)).await;
        let result = read.unwrap_or_else(|e| {
            Err(HubError::new(
                ErrorType::Unknown,
                format!("reading the file failed: {e}"),
            ))
        });
        let reply = match result {
            Ok(a) => {
                let (key, value) = match &owner {
                    ArtifactOwner::Recording(r) => ("recordingId", r),
                    ArtifactOwner::Run(r) => ("runId", r),
                };
                let mut body = json!({
                    "path": a.path,
                    "mimeType": a.mime,
                    "bytes": a.bytes.len(),
                    "data": crate::b64::encode(&a.bytes),
                });
                body[key] = json!(value);
                protocol::reply("artifact", &id, body)
            }
            Err(e) => protocol::error_msg(&id, &e),
        };
        drop(place);
        out.send(reply);
    });
}

/// A client token reads only the files of its own recordings and runs
/// (another's answers as an unknown id does).
fn read(
    cfg: &crate::config::Config,
    req: &ArtifactReq,
    caller: &Caller,
) -> Result<Artifact, HubError> {
    let (dir, owner) = match &req.owner {
        ArtifactOwner::Recording(id) => (
            {
                let storage = &cfg.recording.storage_path;
                crate::recording::check_owner(storage, id, caller)?;
                crate::store::recordings::dir_of(storage, id)?
            },
            format!("recording {id:?}"),
        ),
        ArtifactOwner::Run(id) => (
            {
                let storage = &cfg.runs.storage_path;
                crate::runs::check_owner(storage, id, caller)?;
                crate::runs::store::dir_of(storage, id)?
            },
            format!("run {id:?}"),
        ),
    };
    artifact::read(&dir, &req.path, &owner, artifact::MAX_BYTES)
}
