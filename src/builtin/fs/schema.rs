//! Names, descriptions and input schemas of the four built-in tools, as they
//! appear in `list_tools`. Kept next to the code that parses the same fields
//! so the two change together.

use serde_json::{json, Value};

/// `(name, description, inputSchema)` for `read_file`, `write_file`,
/// `list_directory` and `run_command`.
pub fn tool_definitions() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "read_file",
            "Read a file inside the hub's workspace folder and return its content as a string. \
             Paths are relative to the workspace (absolute paths must point inside it; `..` \
             escapes and symlinks leading outside are refused). Text must be UTF-8; read binary \
             files with encoding \"base64\". Files over the configured size limit are refused.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace folder; run:scripts/… or run:outputs/… names a file of the current run."},
                    "encoding": {"type": "string", "enum": ["utf8", "base64"], "default": "utf8",
                                 "description": "utf8 returns the text; base64 returns the bytes base64-encoded."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        (
            "write_file",
            "Write a file inside the hub's workspace folder, replacing it atomically (a reader \
             never sees a half-written file), or append to it. Missing parent folders are \
             created unless createDirs is false. Returns the workspace-relative path and the \
             number of bytes written.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace folder; run:scripts/… or run:outputs/… names a file of the current run."},
                    "content": {"type": "string", "description": "The text to write (or base64 data with encoding \"base64\")."},
                    "encoding": {"type": "string", "enum": ["utf8", "base64"], "default": "utf8"},
                    "append": {"type": "boolean", "default": false, "description": "Append instead of replacing."},
                    "createDirs": {"type": "boolean", "default": true, "description": "Create missing parent folders."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        ),
        (
            "list_directory",
            "List a folder inside the hub's workspace: each entry's name, type (file, dir, \
             symlink or other) and size in bytes (files only), sorted by name. Symlinks are \
             reported, not followed.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "default": ".", "description": "Folder path, relative to the workspace folder; run:scripts or run:outputs names a folder of the current run."}
                },
                "additionalProperties": false
            }),
        ),
        (
            "run_command",
            "Run a shell command line with /bin/sh -c in the hub's workspace folder (or a \
             sub-folder given as cwd) and return exitCode, stdout, stderr, truncated and \
             durationMs. stdin is empty; each output stream is capped at the configured size. \
             The command and everything it started are killed when it times out or the call is \
             cancelled, and background processes it leaves behind are stopped when it exits. \
             A non-zero exit status counts as a failed call.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command line, e.g. \"ls -la | head\"."},
                    "cwd": {"type": "string", "description": "Working folder, relative to the workspace folder (default: the workspace); run:, run:scripts or run:outputs is a folder of the current run. While a run is current, TOOLHUB_RUN_ID, TOOLHUB_RUN_DIR, TOOLHUB_RUN_SCRIPTS and TOOLHUB_RUN_OUTPUTS name it."},
                    "timeout": {"type": "integer", "minimum": 1,
                                "description": "Timeout in milliseconds; defaults to the configured builtin.commandTimeout and is capped at ten times it."},
                    "env": {"type": "object", "additionalProperties": {"type": "string"},
                            "description": "Extra environment variables, added to the hub's environment."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
    ]
}
