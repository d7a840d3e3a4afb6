//! Durable state on disk: append-only JSONL journals, one per task
//! (`journal`), the recordings' file format and folder store
//! (`recordings`), the append-only index file a store keeps beside its
//! files (`index_file`), and one stored file of a recording's or a run's
//! folder read for `get_artifact`, confined to that folder (`artifact`).
//! `offload` runs the stores' file work off the runtime's threads;
//! `private` creates the files of call data 0600 in 0700 folders.
//!
//! Every path in this module is built from an id that passed [`valid_id`], so a
//! client-supplied task or recording id can never name a file outside the store.

pub mod artifact;
pub mod index_file;
pub mod journal;
pub mod offload;
pub mod private;
pub mod recordings;

/// Longest id accepted: a leading character plus up to 127 more.
const MAX_ID_LEN: usize = 128;

/// Validate a task/recording id before any filesystem call:
/// `^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$` (uuids pass).
///
/// Checked by hand rather than with a regex because it guards every path this
/// module builds and must be obviously correct: no `.`, `/`, `%`, NUL or
/// non-ASCII byte can get through, so `"../x"`, `"..%2F"`, `"/etc/passwd"` and
/// `"."` are all refused.
pub fn valid_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    match bytes.split_first() {
        Some((first, rest)) => {
            bytes.len() <= MAX_ID_LEN
                && first.is_ascii_alphanumeric()
                && rest
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::valid_id;

    #[test]
    fn valid_id_accepts_plain_and_uuid_ids() {
        let long_ok = "a".repeat(128);
        for id in [
            "a",
            "Z",
            "7",
            "task_01J9ZK",
            "batch-001",
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            "0f8fad5bd9cb469fa16570867728950e",
            "a_-_-b",
            "A-",
            long_ok.as_str(),
        ] {
            assert!(valid_id(id), "expected {id:?} to be accepted");
        }
    }

    #[test]
    fn valid_id_refuses_hostile_and_malformed_ids() {
        let too_long = "a".repeat(129);
        let way_too_long = "a".repeat(300);
        for id in [
            "",
            ".",
            "..",
            "../x",
            "..%2F",
            "..%2Fetc",
            "/etc/passwd",
            "a/b",
            "a\\b",
            "a\0b",
            "\0",
            "a.jsonl",
            "a b",
            "a\n",
            "-leading-dash",
            "_leading_underscore",
            "é",
            "aé",
            "a%20",
            too_long.as_str(),
            way_too_long.as_str(),
        ] {
            assert!(!valid_id(id), "expected {id:?} to be refused");
        }
    }
}
