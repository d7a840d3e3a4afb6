//! The body of `get_artifact`: one stored file of a recording or a run,
//! named by its owner (exactly one of `recordingId`, `runId`) and its path
//! inside the owner's folder.

use serde::Deserialize;

/// Whose folder the file is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactOwner {
    Recording(String),
    Run(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactReq {
    pub owner: ArtifactOwner,
    /// Relative to the owner's folder (`step-2.png`, `screenshots/001_x.png`).
    pub path: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawArtifactReq {
    #[serde(default)]
    recording_id: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    path: String,
}

impl TryFrom<RawArtifactReq> for ArtifactReq {
    type Error = String;

    fn try_from(r: RawArtifactReq) -> Result<Self, String> {
        let owner = match (r.recording_id, r.run_id) {
            (Some(id), None) => ArtifactOwner::Recording(id),
            (None, Some(id)) => ArtifactOwner::Run(id),
            (Some(_), Some(_)) => {
                return Err("give one of \"recordingId\" and \"runId\", not both".into())
            }
            (None, None) => {
                return Err("missing field \"recordingId\" or \"runId\" (whose file it is)".into())
            }
        };
        Ok(ArtifactReq {
            owner,
            path: r.path,
        })
    }
}
