#![no_main]
//! A task journal on disk may be anything (torn, edited, hostile): reading
//! it at start-up must give a task or an error, never a panic.

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Some(dir) = DIR.get_or_init(|| tempfile::tempdir().ok()).as_ref() else {
        return;
    };
    let path = dir.path().join("fuzz-task.jsonl");
    if std::fs::write(&path, data).is_ok() {
        let _ = toolhub::store::journal::read(&path);
    }
});
