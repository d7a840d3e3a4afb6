//! A run keeps the images of its calls (`saveImages`) as
//! `screenshots/NNN_slug.png` in its folder.

use serde_json::Value;

use super::{infer, model, store};
use crate::errors::{ErrorType, HubError};
use crate::hub::observe::Capture;

/// The name images of a call are kept under: `named`, else the call's
/// `filename`/`name`/`description`, else the tool.
pub(super) fn slug_of(capture: &Capture<'_>, named: Option<&str>) -> String {
    let from_params = ["filename", "name", "description"]
        .iter()
        .find_map(|k| capture.params.get(*k).and_then(Value::as_str));
    let base = named
        .or(from_params)
        .map(|n| n.trim_end_matches(".png").to_string())
        .unwrap_or_else(|| infer::bare(&capture.outcome.tool).to_string());
    model::slugify(&base, model::MAX_ID).unwrap_or_else(|| "screenshot".into())
}

/// Store the images (base64) as `screenshots/NNN_slug.png`, each written
/// and synced (blocking file IO); their paths within the run.
pub(super) fn keep_images(
    storage: &std::path::Path,
    run_id: &str,
    slug: &str,
    data: &[String],
) -> Vec<String> {
    use std::io::Write;
    let mut kept = Vec::new();
    for data in data {
        let Ok(bytes) = crate::b64::decode(data) else {
            tracing::warn!(run = run_id, "an image of the call is not base64; not kept");
            continue;
        };
        let stored = store::claim_screenshot(storage, run_id, slug).and_then(|(path, mut f)| {
            f.write_all(&bytes)
                .and_then(|_| f.sync_all())
                .map_err(|e| {
                    HubError::new(
                        ErrorType::Permission,
                        format!("cannot write {}: {e}", path.display()),
                    )
                })?;
            Ok(path)
        });
        match stored {
            Ok(path) => {
                if let Some(name) = path.file_name() {
                    kept.push(format!("screenshots/{}", name.to_string_lossy()));
                }
            }
            Err(e) => {
                tracing::warn!(run = run_id, error = %e.message, "cannot keep a screenshot")
            }
        }
    }
    kept
}
