//! The append-only per-task journal: `<dir>/<taskId>.jsonl`.
//!
//! One JSON object per `\n`-terminated line, every line tagged by `"kind"`; line 1
//! is the header. A line is committed iff it ends with `\n` and parses, so each
//! record goes out as a single `write_all` of `json + "\n"`. On read, a torn last
//! line (a crash mid-write) is truncated away and reported; damage anywhere
//! before the last line is reported as corruption and never skipped, because
//! later records depend on earlier ones (a step result without its start, a
//! decision without its `need_user`).
//!
//! Everything here is blocking std IO: the runner calls an append that
//! syncs ([`JournalWriter::syncs_on`]) under `block_in_place`, any other
//! append (one `write` into the page cache) inline.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::store::valid_id;

mod guarded_fs;
mod read_back;

pub use read_back::read;

use guarded_fs::{
    check_dir_meta, create_in, ensure_dir, invalid_input, journal_name, journal_stem,
    open_dir_nofollow, refuse_link, with_path,
};

/// Version of the line format. Bump it (and add a migration) when a record
/// changes shape; a hub refuses journals newer than it understands.
pub const SCHEMA_VERSION: u32 = 1;

/// File name suffix of a journal; the stem is the task id.
const SUFFIX: &str = ".jsonl";

/// A batch's `callKey` and the hash of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallKeyMark {
    pub key: String,
    pub hash: String,
}

/// One journal line. Unknown fields are ignored when reading (forward
/// compatible within a schema version); an unknown `kind` is an error.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    #[serde(rename_all = "camelCase")]
    Header {
        schema_version: u32,
        task_id: String,
        batch_id: serde_json::Value,
        /// The batch's steps array as sent.
        steps: serde_json::Value,
        options: serde_json::Value,
        created_ms: u64,
        hub_version: String,
        /// The `callKey` the batch was sent with: a repeat after a restart
        /// finds its task by it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_key: Option<CallKeyMark>,
        /// The client context the steps run in: a resume after a restart
        /// runs them in a fresh instance of the same context.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<crate::client_context::ClientContext>,
        /// The view the task was started in: a resume after a restart
        /// stays within it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        view: Option<String>,
        /// Set for a task no client drives (an MCP task): the hub resumes
        /// it at start. The value says how its result is read
        /// (`engine::unattended::Kind`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unattended: Option<String>,
        /// The client of `clients` whose token made the task (absent: the
        /// main token): after a restart only it and the main token see
        /// the task, and its steps are still that client's calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: crate::caller::Owner,
    },
    #[serde(rename_all = "camelCase")]
    StepStarted {
        index: usize,
        /// Rendered params, already redacted by the caller.
        params: serde_json::Value,
        ts: u64,
    },
    #[serde(rename_all = "camelCase")]
    StepFinished {
        index: usize,
        /// `"success"`, `"failed"` or `"skipped"`.
        state: String,
        /// The `batch_step_result` body.
        outcome: serde_json::Value,
        /// `{"name":..,"value":..}` when the step has `saveAs`.
        var: Option<serde_json::Value>,
        ts: u64,
    },
    #[serde(rename_all = "camelCase")]
    State {
        state: String,
        error: Option<serde_json::Value>,
        ts: u64,
    },
    #[serde(rename_all = "camelCase")]
    NeedUser {
        index: usize,
        reason: String,
        params_hash: String,
        ts: u64,
    },
    #[serde(rename_all = "camelCase")]
    Decision {
        index: usize,
        approve: bool,
        params_hash: String,
        ts: u64,
    },
    #[serde(rename_all = "camelCase")]
    Resume { from: usize, ts: u64 },
    #[serde(rename_all = "camelCase")]
    End { state: String, ts: u64 },
}

impl Record {
    /// A record that must be on the disk before the runner acts on it: a
    /// step's start before its call goes out (a crash then leaves the step
    /// uncertain, never silently unrun), and the end. Every other record is
    /// only written; the next barrier's `fdatasync` covers it too.
    fn is_barrier(&self) -> bool {
        matches!(self, Record::StepStarted { .. } | Record::End { .. })
    }
}

/// When appended records reach the disk (the config's
/// `taskEngine.durability`, `config::Durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Group commit per step: a record is written at once, and one
    /// `fdatasync` covers everything written so far whenever a barrier (a
    /// step's start, the end) is appended or the caller [`flush`]es. The
    /// caller holds every message that reports a record until
    /// [`unsynced`] is false: a step's result is durable before it is sent.
    ///
    /// [`flush`]: JournalWriter::flush
    /// [`unsynced`]: JournalWriter::unsynced
    Step,
    /// No sync per record (the OS page cache holds them); `fdatasync` on `End`.
    Batch,
}

/// `fdatasync`s of journals made by this process (all tasks): the relay
/// benchmark reads it from `health_check` to show syncs per step.
static SYNCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many journal `fdatasync`s this process has made.
pub fn syncs_total() -> u64 {
    SYNCS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Appends records to one journal. Owned by the task's runner; one writer per file.
#[derive(Debug)]
pub struct JournalWriter {
    file: File,
    path: PathBuf,
    durability: SyncPolicy,
    /// Set once a write or sync failed. After a failed write the file may end in
    /// a partial line, and after a failed fsync the kernel may have dropped dirty
    /// pages, so appending more would bury the damage mid-file where `read`
    /// calls it corruption. The caller re-reads (which truncates the tear) and
    /// re-opens instead.
    poisoned: bool,
    /// Records written since the last `fdatasync`.
    dirty: bool,
    /// The directory of a journal just created with step durability: its
    /// entry is synced with the header by the first sync, not at create.
    dir: Option<File>,
    /// Number of fdatasync calls made, so tests can see the durability policy.
    syncs: u64,
}

impl JournalWriter {
    /// Create `<dir>/<task_id>.jsonl` (dir created if missing, mode 0700; file
    /// mode 0600) with the header as its first line; O_EXCL: refuses to
    /// overwrite. Refuses invalid ids with `InvalidInput` before touching the
    /// filesystem. Refuses if `dir` itself is a symlink.
    ///
    /// The header line and the directory entry are synced in both durability
    /// modes: without the directory fsync a later `End` sync could land in a
    /// file whose name was lost. With `Batch` that happens here; with `Step`
    /// the header is only written, and the first sync (the first step's
    /// start, or a [`flush`](Self::flush)) makes both durable, before any
    /// message about the task may be sent.
    pub fn create(dir: &Path, header: &Record, durability: SyncPolicy) -> io::Result<Self> {
        let Record::Header {
            schema_version,
            task_id,
            ..
        } = header
        else {
            return Err(invalid_input(
                "the first journal record must be a header record".to_string(),
            ));
        };
        if !valid_id(task_id) {
            return Err(invalid_input(format!(
                "invalid task id {task_id:?}: expected 1-128 characters of [A-Za-z0-9_-] starting with a letter or digit"
            )));
        }
        if *schema_version != SCHEMA_VERSION {
            return Err(invalid_input(format!(
                "journal header has schemaVersion {schema_version}, expected {SCHEMA_VERSION}"
            )));
        }
        let line = encode(header)?;

        ensure_dir(dir)?;
        let dir_fd = open_dir_nofollow(dir)?;
        let name = format!("{task_id}{SUFFIX}");
        let path = dir.join(&name);
        let file = create_in(&dir_fd, &name).map_err(|e| with_path(e, &path))?;
        let mut writer = JournalWriter {
            file,
            path,
            durability,
            poisoned: false,
            dirty: true,
            dir: Some(File::from(dir_fd)),
            syncs: 0,
        };
        let written = writer
            .file
            .write_all(&line)
            .and_then(|()| match durability {
                SyncPolicy::Batch => writer.sync(),
                SyncPolicy::Step => Ok(()),
            });
        if let Err(e) = written {
            // Leave no half-made journal behind: recovery would report it as
            // headerless, though nobody was ever told the task existed.
            if let Err(rm) = fs::remove_file(&writer.path) {
                tracing::warn!(path = %writer.path.display(), error = %rm, "could not remove journal after a failed create");
            }
            return Err(with_path(e, &writer.path));
        }
        Ok(writer)
    }

    /// Re-open an existing journal for appending (after recovery/resume). Opens
    /// with O_NOFOLLOW and O_APPEND. Refuses a path that is not
    /// `<valid id>.jsonl`, an empty file and a file whose last line is
    /// unterminated: run [`read`] first, it truncates a torn tail.
    pub fn open_append(path: &Path, durability: SyncPolicy) -> io::Result<Self> {
        journal_name(path)?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| with_path(refuse_link(e), path))?;
        let meta = file.metadata().map_err(|e| with_path(e, path))?;
        if !meta.is_file() {
            return Err(invalid_input(format!(
                "{} is not a regular file; expected a journal",
                path.display()
            )));
        }
        if meta.len() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: journal is empty (no header line)", path.display()),
            ));
        }
        let mut last = [0u8; 1];
        file.read_exact_at(&mut last, meta.len() - 1)
            .map_err(|e| with_path(e, path))?;
        if last[0] != b'\n' {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: journal ends in an unterminated line; read it first to repair the torn tail",
                    path.display()
                ),
            ));
        }
        Ok(JournalWriter {
            file,
            path: path.to_path_buf(),
            durability,
            poisoned: false,
            dirty: false,
            dir: None,
            syncs: 0,
        })
    }

    /// Append one record as one line (a single `write_all` of `"json\n"`), then
    /// fdatasync per durability: with `Step` only a barrier (a step's start,
    /// the end) is synced at once, and its sync covers every record written
    /// before it; with `Batch` only the end. Cost is O(record), never
    /// rewrites the file.
    pub fn append(&mut self, rec: &Record) -> io::Result<()> {
        self.usable()?;
        if matches!(rec, Record::Header { .. }) {
            return Err(invalid_input(
                "a header record may only be the first line; use JournalWriter::create".to_string(),
            ));
        }
        let line = encode(rec)?;
        let syncs = self.syncs_on(rec);
        let result = crate::util::append_whole(&mut self.file, &line).and_then(|()| {
            self.dirty = true;
            if syncs {
                self.sync()
            } else {
                Ok(())
            }
        });
        self.checked(result)
    }

    /// Whether appending `rec` makes an `fdatasync` (a step durability
    /// barrier, or the end): only then may the append block for long; any
    /// other append is one `write` into the page cache.
    pub fn syncs_on(&self, rec: &Record) -> bool {
        match (self.durability, rec) {
            (SyncPolicy::Step, r) => r.is_barrier(),
            (SyncPolicy::Batch, r) => matches!(r, Record::End { .. }),
        }
    }

    /// Make every record written so far durable (one `fdatasync`), if step
    /// durability still owes a sync; nothing otherwise. The runner calls it
    /// before anything that may take time, so held messages go out.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.unsynced() {
            return Ok(());
        }
        self.usable()?;
        let result = self.sync();
        self.checked(result)
    }

    /// Records were written that step durability promises to sync and has
    /// not yet: a message reporting them must wait for the next sync.
    pub fn unsynced(&self) -> bool {
        self.durability == SyncPolicy::Step && self.dirty
    }

    /// How many `fdatasync`s this writer has made.
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn usable(&self) -> io::Result<()> {
        if self.poisoned {
            return Err(io::Error::other(format!(
                "{}: an earlier journal write failed; read and re-open the journal before appending",
                self.path.display()
            )));
        }
        Ok(())
    }

    fn checked(&mut self, result: io::Result<()>) -> io::Result<()> {
        if result.is_err() {
            self.poisoned = true;
        }
        result.map_err(|e| with_path(e, &self.path))
    }

    fn sync(&mut self) -> io::Result<()> {
        // Only the data (and the size) must reach the disk; mtime need not.
        self.file.sync_data()?;
        self.syncs += 1;
        SYNCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(dir) = &self.dir {
            // A new journal's name: after its header, before anything relies on it.
            dir.sync_all()?;
            self.dir = None;
        }
        self.dirty = false;
        Ok(())
    }
}

/// A journal as read back.
#[derive(Debug)]
pub struct Replayed {
    pub path: PathBuf,
    pub records: Vec<Record>,
    /// Set when a torn last line was found and truncated away.
    pub torn: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: corrupt journal record: {message}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: journal schemaVersion {found} is newer than this hub understands ({supported}); upgrade toolhub")]
    TooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{path}: journal has no header line")]
    NoHeader { path: PathBuf },
}

/// Every `*.jsonl` in `dir` whose stem passes valid_id, sorted; symlinks are
/// skipped (not followed) and reported via tracing::warn. A missing `dir` has
/// no journals; a `dir` that is itself a symlink is refused, as in `create`.
pub fn list(dir: &Path) -> io::Result<Vec<PathBuf>> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(with_path(e, dir)),
        Ok(meta) => check_dir_meta(&meta, dir)?,
    }
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| with_path(e, dir))? {
        let entry = entry.map_err(|e| with_path(e, dir))?;
        let path = entry.path();
        // DirEntry::file_type does not follow symlinks.
        let kind = entry.file_type().map_err(|e| with_path(e, &path))?;
        if kind.is_symlink() {
            tracing::warn!(path = %path.display(), "skipping symlink in the journal dir; journals are never read through links");
            continue;
        }
        if !kind.is_file() || journal_stem(&entry.file_name()).is_none() {
            tracing::debug!(path = %path.display(), "skipping non-journal entry in the journal dir");
            continue;
        }
        out.push(path);
    }
    out.sort();
    Ok(out)
}

/// A journal whose header line never completed: the hub stopped inside
/// `create` or, with step durability, before the task's first sync wrote the
/// header out. No message about its task was sent (they wait for that sync),
/// so recovery removes it instead of reporting a headerless journal.
pub fn never_committed(path: &Path) -> io::Result<bool> {
    use std::io::BufRead;
    journal_name(path)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| with_path(refuse_link(e), path))?;
    let mut first = Vec::new();
    io::BufReader::new(file)
        .read_until(b'\n', &mut first)
        .map_err(|e| with_path(e, path))?;
    Ok(first.last() != Some(&b'\n'))
}

/// Delete a journal (used by retention). Refuses a path that is not
/// `<valid id>.jsonl`; a symlink is unlinked, never its target.
pub fn remove(path: &Path) -> io::Result<()> {
    journal_name(path)?;
    fs::remove_file(path).map_err(|e| with_path(e, path))
}

fn encode(rec: &Record) -> io::Result<Vec<u8>> {
    // Compact serde_json escapes control characters inside strings, so the
    // only raw newline in the line is the terminator added here.
    let mut line = serde_json::to_vec(rec).map_err(io::Error::from)?;
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
mod tests;
