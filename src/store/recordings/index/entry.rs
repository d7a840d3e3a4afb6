//! One recording's line in the index, and how it is read from the
//! recording's file (the only place the index reads a recording).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::super::format::{End, Line, SCHEMA_VERSION};
use super::super::FILE;

/// What a listing needs of one recording, without opening it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub created_at: String,
    /// The client of `clients` that recorded it (absent: the main token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// When the recording last changed (its `end`, or the file's time).
    pub updated_at: String,
    pub schema_version: u32,
    pub step_count: usize,
    /// The servers and tools (qualified names) its steps called.
    #[serde(default)]
    pub servers: Vec<String>,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<End>,
    /// `recording.jsonl`'s size and modification time (ns since the epoch)
    /// when this entry was read: a file that differs changed behind the
    /// hub's back and is read again.
    pub size: u64,
    pub mtime_ns: u64,
    /// Set when the file cannot be read as a recording (listed in `problems`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The size and modification time of a recording's file.
pub fn stamp(dir: &Path) -> std::io::Result<(u64, u64)> {
    let m = std::fs::metadata(dir.join(FILE))?;
    let ns = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    Ok((m.len(), ns))
}

/// Read a recording's file line by line (one line in memory at a time) into
/// its index entry. An unreadable file gives an entry with a `problem`.
pub fn read(storage: &Path, id: &str) -> Entry {
    let dir = storage.join(id);
    let (size, mtime_ns) = stamp(&dir).unwrap_or((0, 0));
    let mut e = Entry {
        id: id.to_string(),
        name: id.to_string(),
        description: None,
        tags: Vec::new(),
        created_at: String::new(),
        client: None,
        updated_at: crate::util::rfc3339(UNIX_EPOCH + std::time::Duration::from_nanos(mtime_ns)),
        schema_version: 0,
        step_count: 0,
        servers: Vec::new(),
        tools: Vec::new(),
        end: None,
        size,
        mtime_ns,
        problem: None,
    };
    let path = dir.join(FILE);
    let f = match File::open(&path) {
        Ok(f) => f,
        Err(err) => {
            e.problem = Some(format!("{}: {err}", path.display()));
            return e;
        }
    };
    let (mut servers, mut tools) = (BTreeSet::new(), BTreeSet::new());
    let mut lines = BufReader::new(f).lines();
    match lines
        .next()
        .map(|l| l.map(|l| serde_json::from_str::<Line>(&l)))
    {
        Some(Ok(Ok(Line::Header(h)))) => {
            e.name = h.name;
            e.description = h.description;
            e.tags = h.tags;
            e.created_at = h.created_at;
            e.client = h.client;
            e.schema_version = h.schema_version;
        }
        _ => {
            e.problem = Some(format!("{}:1: not a recording header", path.display()));
            return e;
        }
    }
    // A torn or unknown line (a crash mid-write, a newer kind) is passed
    // over here; `load` reports it when the recording is opened.
    for line in lines.map_while(Result::ok) {
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Step(s)) => {
                e.step_count += 1;
                if let Some(server) = s.server {
                    servers.insert(server);
                }
                tools.insert(s.qualified_name.unwrap_or(s.tool));
            }
            Ok(Line::End(end)) => {
                e.updated_at = end.stopped_at.clone();
                e.end = Some(end);
            }
            _ => {}
        }
    }
    e.servers = servers.into_iter().collect();
    e.tools = tools.into_iter().collect();
    e
}

impl Entry {
    /// The recording as `list_recordings` shows it.
    pub fn to_json(&self) -> Value {
        json!({
            "recordingId": self.id,
            "name": self.name,
            "description": self.description,
            "tags": self.tags,
            "createdAt": self.created_at,
            "client": self.client,
            "updatedAt": self.updated_at,
            "schemaVersion": self.schema_version,
            "supported": self.schema_version <= SCHEMA_VERSION,
            "incomplete": self.end.is_none(),
            "stepCount": self.step_count,
            "servers": self.servers,
            "tools": self.tools,
            "sizeBytes": self.size,
            "metadata": self.end.as_ref().map(|e| json!({
                "totalDuration": e.total_duration_ms,
                "successRate": e.success_rate,
                "reason": e.reason,
            })),
        })
    }

    /// Does every word of `query` appear in the name, description or a tag?
    pub fn matches_query(&self, words: &[String]) -> bool {
        let hay = |w: &str| {
            contains_ci(&self.name, w)
                || self
                    .description
                    .as_deref()
                    .is_some_and(|d| contains_ci(d, w))
                || self.tags.iter().any(|t| contains_ci(t, w))
        };
        words.iter().all(|w| hay(w))
    }

    /// Did a step call `tool` (its qualified name, or a bare name)?
    pub fn used_tool(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| crate::util::names_tool(t, tool))
    }
}

/// Case-insensitive substring test; `needle` is already lowercase.
fn contains_ci(hay: &str, needle: &str) -> bool {
    if hay.is_ascii() && needle.is_ascii() {
        hay.as_bytes()
            .windows(needle.len().max(1))
            .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
            || needle.is_empty()
    } else {
        hay.to_lowercase().contains(needle)
    }
}
