//! serde_json syntax and type errors as located one-line [`ConfigError`]s,
//! with columns counted in characters.

use std::path::Path;

use super::ctx::one_line;
use super::locate::Locator;
use super::ConfigError;

/// A serde_json error as a located one-line error; type errors get the
/// dotted path of the offending value in front.
pub(super) fn json_error(
    path: &Path,
    text: &str,
    e: &serde_json::Error,
    loc: Option<&Locator>,
) -> ConfigError {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let mut msg = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    // serde names our mirror types ("expected struct RawServer"); say "an object".
    while let Some(at) = msg.find("struct Raw") {
        let end = msg[at + 10..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .map_or(msg.len(), |i| at + 10 + i);
        msg.replace_range(at..end, "an object");
    }
    if let Some(place) = loc.and_then(|l| l.display_at(e.line(), e.column())) {
        msg = format!("{place}: {msg}");
    }
    let line = e.line().max(1);
    // serde_json counts bytes; report characters like everything else.
    let line_text = text.lines().nth(line - 1).unwrap_or("");
    let byte_col = e.column().max(1);
    let column = line_text
        .char_indices()
        .take_while(|(i, _)| *i < byte_col - 1)
        .count()
        + 1;
    ConfigError::Invalid {
        path: path.to_path_buf(),
        line,
        column,
        message: one_line(&msg),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::bad;

    #[test]
    fn syntax_error_reports_line_and_column() {
        // Missing comma after "a": serde_json stops at the next key's quote.
        let (l, c, m) = bad(
            "{\n  \"server\": {\n    \"listen\": \"127.0.0.1:1\"\n    \"token\": \"x\"\n  }\n}",
        );
        assert_eq!((l, c), (4, 5), "{m}");
        assert!(m.contains("expected `,` or `}`"), "{m}");
    }

    #[test]
    fn type_error_reports_line_column_and_key() {
        let (l, c, m) = bad("{\n  \"server\": {\n    \"maxConnections\": \"x\"\n  }\n}");
        assert_eq!((l, c), (3, 25), "{m}");
        assert_eq!(
            m,
            "server.maxConnections: invalid type: string \"x\", expected usize"
        );
        let (l, _, m) = bad("{\"mcpServers\": {\n \"fs\": 5}}");
        assert_eq!(l, 2);
        assert_eq!(
            m,
            "mcpServers.fs: invalid type: integer `5`, expected an object"
        );
        let (_, _, m) = bad(r#"{"taskEngine": {"durability": "sometimes"}}"#);
        assert!(
            m.starts_with("taskEngine.durability: unknown variant `sometimes`"),
            "{m}"
        );
    }

    #[test]
    fn an_unknown_sandbox_mode_names_the_key_and_the_allowed_values() {
        let (l, _, m) = bad("{\"builtin\": {\n \"sandbox\": \"workspace\"}}");
        assert_eq!(l, 2, "{m}");
        assert_eq!(
            m,
            "builtin.sandbox: unknown variant `workspace`, expected one of `workspace-write`, `read-only`, `off`"
        );
        let (_, _, m) = bad(r#"{"builtin": {"sandboxNetwork": "no"}}"#);
        assert!(m.starts_with("builtin.sandboxNetwork: invalid type"), "{m}");
    }
}
