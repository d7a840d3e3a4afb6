//! Reading a journal back, with torn-tail repair.

use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::guarded_fs::{invalid_input, refuse_link, truncate};
use super::{JournalError, Record, Replayed, SCHEMA_VERSION};

/// Read a journal. A last line that is incomplete (no trailing newline) or does
/// not parse is a torn write from a crash: the file is truncated to the end of
/// the last good line (ftruncate + fsync), `torn` describes what was dropped,
/// and reading succeeds. A bad line that is NOT the last one is `Corrupt` (the
/// file is left untouched). The header must be first and its schemaVersion <=
/// SCHEMA_VERSION.
///
/// A file whose only content is a torn or non-header first line is `NoHeader`
/// and is left untouched, and so is a `TooNew` file: its later lines may be
/// kinds this hub does not know, which are not tears.
pub fn read(path: &Path) -> Result<Replayed, JournalError> {
    let io_err = |source: io::Error| JournalError::Io {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |line: usize, message: String| JournalError::Corrupt {
        path: path.to_path_buf(),
        line,
        message,
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_err(refuse_link(e)))?;
    if !file.metadata().map_err(io_err)?.is_file() {
        return Err(io_err(invalid_input(
            "not a regular file; expected a journal".to_string(),
        )));
    }
    let mut reader = BufReader::new(file);
    let mut records = Vec::new();
    let mut buf = Vec::new();
    // Byte offset just past the last good line: where a tear is cut off.
    let mut good_end: u64 = 0;
    let mut tear: Option<Tear> = None;
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let Some(body) = buf.strip_suffix(b"\n") else {
            // read_until stops short of a newline only at end of file.
            if line_no == 1 {
                return Err(JournalError::NoHeader {
                    path: path.to_path_buf(),
                });
            }
            tear = Some(Tear {
                offset: good_end,
                bytes: n,
                line: line_no,
                why: "incomplete last line (no trailing newline)".to_string(),
            });
            break;
        };
        let parsed = if line_no == 1 {
            match parse_header(body) {
                HeaderLine::Ok(rec) => Ok(*rec),
                HeaderLine::NotHeader => {
                    return Err(JournalError::NoHeader {
                        path: path.to_path_buf(),
                    })
                }
                HeaderLine::TooNew(found) => {
                    return Err(JournalError::TooNew {
                        path: path.to_path_buf(),
                        found,
                        supported: SCHEMA_VERSION,
                    })
                }
                HeaderLine::Bad(message) => Err(message),
            }
        } else {
            match serde_json::from_slice::<Record>(body) {
                Ok(Record::Header { .. }) => {
                    return Err(corrupt(
                        line_no,
                        "a second header record; the header may only be line 1".to_string(),
                    ))
                }
                Ok(rec) => Ok(rec),
                Err(e) => Err(describe(&e)),
            }
        };
        match parsed {
            Ok(rec) => {
                records.push(rec);
                good_end += n as u64;
            }
            Err(message) => {
                let more = !reader.fill_buf().map_err(io_err)?.is_empty();
                if more {
                    return Err(corrupt(line_no, message));
                }
                if line_no == 1 {
                    // A lone unparsable first line: the crash hit the create.
                    return Err(JournalError::NoHeader {
                        path: path.to_path_buf(),
                    });
                }
                tear = Some(Tear {
                    offset: good_end,
                    bytes: n,
                    line: line_no,
                    why: format!("last line does not parse: {message}"),
                });
                break;
            }
        }
    }
    if records.is_empty() {
        return Err(JournalError::NoHeader {
            path: path.to_path_buf(),
        });
    }
    let torn = match tear {
        Some(tear) => {
            truncate(path, tear.offset).map_err(io_err)?;
            let what = format!(
                "dropped {} bytes at offset {} (line {}): {}",
                tear.bytes, tear.offset, tear.line, tear.why
            );
            tracing::warn!(path = %path.display(), offset = tear.offset, bytes = tear.bytes, "truncated torn journal tail: {what}");
            Some(what)
        }
        None => None,
    };
    Ok(Replayed {
        path: path.to_path_buf(),
        records,
        torn,
    })
}

/// The bytes dropped from a torn tail.
struct Tear {
    offset: u64,
    bytes: usize,
    line: usize,
    why: String,
}

/// How line 1 read.
enum HeaderLine {
    Ok(Box<Record>),
    /// Valid JSON, but not a header record.
    NotHeader,
    TooNew(u32),
    /// A header that does not parse or is of an unsupported older version.
    Bad(String),
}

/// Read the version before the whole record, so a newer journal is refused as
/// `TooNew` even when its header has fields this hub would reject.
fn parse_header(body: &[u8]) -> HeaderLine {
    let value: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return HeaderLine::Bad(describe(&e)),
    };
    if value.get("kind").and_then(|k| k.as_str()) != Some("header") {
        return HeaderLine::NotHeader;
    }
    match value.get("schemaVersion").and_then(|v| v.as_u64()) {
        Some(v) if v > u64::from(SCHEMA_VERSION) => {
            return HeaderLine::TooNew(u32::try_from(v).unwrap_or(u32::MAX))
        }
        // Older versions get a migration step here once version 2 exists.
        Some(v) if v < u64::from(SCHEMA_VERSION) => {
            return HeaderLine::Bad(format!(
                "schemaVersion {v} is not supported, expected {SCHEMA_VERSION}"
            ))
        }
        _ => {}
    }
    match serde_json::from_value::<Record>(value) {
        Ok(rec) => HeaderLine::Ok(Box::new(rec)),
        Err(e) => HeaderLine::Bad(describe(&e)),
    }
}

/// serde_json's message without its "at line 1 column N" (every journal line
/// is line 1 to serde), with the column kept.
fn describe(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let message = text
        .rfind(" at line ")
        .map_or(text.as_str(), |at| &text[..at]);
    if e.column() > 0 {
        format!("{message} (column {})", e.column())
    } else {
        message.to_string()
    }
}
