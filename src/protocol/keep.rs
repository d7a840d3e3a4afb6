//! The body of `keep_result`: a long tool result the client folded in the
//! chat, to be kept in the workspace where a tool can read it whole.

use serde::Deserialize;

/// The longest `name`.
pub const MAX_NAME: usize = 100;

/// `keep_result`: keep `text` as `.toolhub/results/<name>.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeepResultReq {
    /// 1 to [`MAX_NAME`] of `A-Z a-z 0-9 _ -` (the extension sends the
    /// block's key, e.g. `th-0123456789abcdef-0`, `-s3` for a batch step).
    pub name: String,
    pub text: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawKeepResultReq {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

/// Whether `name` may name a kept result (and so a file name).
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl TryFrom<RawKeepResultReq> for KeepResultReq {
    type Error = String;

    fn try_from(r: RawKeepResultReq) -> Result<Self, String> {
        let Some(name) = r.name else {
            return Err("missing field \"name\": the name to keep the result under, 1 to 100 letters, digits, '_' or '-' (e.g. \"th-0123456789abcdef-0\")".into());
        };
        if !valid_name(&name) {
            let shown: String = name.chars().take(40).collect();
            return Err(format!(
                "\"name\" {shown:?} is not valid: use 1 to {MAX_NAME} letters, digits, '_' or '-' (e.g. \"th-0123456789abcdef-0\"); it becomes the file name .toolhub/results/NAME.txt"
            ));
        }
        let Some(text) = r.text else {
            return Err("missing field \"text\": the whole result to keep, as a string".into());
        };
        Ok(KeepResultReq { name, text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_safe() {
        for ok in [
            "th-0123456789abcdef-0",
            "th-0123456789abcdef-0-s3",
            "A_b-9",
            &"x".repeat(100),
        ] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in [
            "",
            "../x",
            "a/b",
            "a.b",
            "a b",
            "ä",
            &"x".repeat(101),
            ".",
            "a\0",
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
