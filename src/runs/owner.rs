//! Who may see a run: the main token every run; a client token only the
//! runs it created (`Metadata::client`). Another's run answers exactly as
//! an unknown id does, so a client learns nothing of the others' runs, not
//! even their names (no "did you mean" from runs it cannot see).

use std::path::Path;

use super::{model, store};
use crate::caller::Caller;
use crate::errors::{ErrorType, HubError};

/// `Ok` when `caller` may see run `id`: the main token always (nothing is
/// read); a client when the run's metadata names it. A malformed id is
/// refused as such (that says nothing about the store).
pub fn check_owner(storage: &Path, id: &str, caller: &Caller) -> Result<(), HubError> {
    let Some(me) = caller.client_name() else {
        return Ok(());
    };
    model::check_id(id)?;
    match store::peek_meta(storage, id) {
        Ok((m, _)) if m.client.as_deref() == Some(me) => Ok(()),
        _ => Err(unknown(id)),
    }
}

/// What a client token is told of a run it may not see, or that does not
/// exist: the same words either way.
pub fn unknown(id: &str) -> HubError {
    HubError::new(ErrorType::NotFound, format!("no run {id:?}"))
        .with_suggestion("list_runs shows your runs; create_run makes a new one")
}
