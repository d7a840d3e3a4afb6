//! Maps JSON pointers (`/mcpServers/fs/command`) to places in the source text.
//!
//! serde_json gives line:column only for syntax and type errors; semantic
//! errors found after parsing need the place of the offending key. This is a
//! tiny scanner run only on text serde_json already accepted, so it can be
//! simple: it records every value's byte span and, for object members, where
//! the key starts. Recursion is bounded by serde_json's own depth limit (128),
//! which the text has already passed.

/// One value in the document.
#[derive(Debug, Clone)]
struct Entry {
    /// RFC 6901 pointer, "" for the root.
    pointer: String,
    /// Human form for messages: `mcpServers.fs.args[2]`.
    display: String,
    /// Byte offset of the member's key (its opening quote), if a member.
    key: Option<usize>,
    /// Byte span of the value, end exclusive.
    start: usize,
    end: usize,
}

#[derive(Debug, Clone)]
pub struct Locator<'a> {
    text: &'a str,
    entries: Vec<Entry>,
}

/// Escape one pointer segment (RFC 6901: `~` -> `~0`, `/` -> `~1`).
pub fn esc(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

impl<'a> Locator<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut scanner = Scanner {
            s: text.as_bytes(),
            text,
            i: 0,
            out: Vec::new(),
        };
        scanner.value(String::new(), String::new(), None);
        Locator {
            text,
            entries: scanner.out,
        }
    }

    /// 1-based line:column of the key at `pointer` (or of the value, for an
    /// array element or the root). A pointer that is not in the text falls
    /// back to its nearest ancestor that is.
    pub fn position(&self, pointer: &str) -> (usize, usize) {
        let mut p = pointer;
        loop {
            if let Some(e) = self.entries.iter().rev().find(|e| e.pointer == p) {
                return self.line_col(e.key.unwrap_or(e.start));
            }
            match p.rfind('/') {
                Some(cut) => p = &p[..cut],
                None => return (1, 1),
            }
        }
    }

    /// 1-based line:column of the value at `pointer` itself.
    pub fn value_position(&self, pointer: &str) -> (usize, usize) {
        match self.entries.iter().rev().find(|e| e.pointer == pointer) {
            Some(e) => self.line_col(e.start),
            None => self.position(pointer),
        }
    }

    /// The display path of the innermost value around serde_json's error
    /// position (which points at or just after the offending token).
    pub fn display_at(&self, line: usize, column: usize) -> Option<&str> {
        let offset = self.offset_of(line, column)?;
        self.entries
            .iter()
            .filter(|e| !e.pointer.is_empty() && e.start <= offset && offset <= e.end)
            .min_by_key(|e| e.end - e.start)
            .map(|e| e.display.as_str())
    }

    /// serde_json line:column (column counts bytes, 1-based) to a byte offset.
    fn offset_of(&self, line: usize, column: usize) -> Option<usize> {
        let line_start = if line <= 1 {
            0
        } else {
            self.text
                .match_indices('\n')
                .nth(line - 2)
                .map(|(i, _)| i + 1)?
        };
        Some((line_start + column.saturating_sub(1)).min(self.text.len()))
    }

    /// Byte offset to 1-based line and character column.
    fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = self.text.get(..offset).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let column = before
            .get(line_start..)
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        (line, column)
    }
}

struct Scanner<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
    out: Vec<Entry>,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// Skip a string starting at the opening quote; returns its raw span.
    fn string(&mut self) -> (usize, usize) {
        let start = self.i;
        self.i += 1;
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'\\' => self.i += 1,
                b'"' => break,
                _ => {}
            }
        }
        (start, self.i.min(self.s.len()))
    }

    fn value(&mut self, pointer: String, display: String, key: Option<usize>) {
        self.ws();
        let start = self.i;
        let index = self.out.len();
        self.out.push(Entry {
            pointer: pointer.clone(),
            display: display.clone(),
            key,
            start,
            end: start,
        });
        match self.peek() {
            Some(b'{') => self.object(&pointer, &display),
            Some(b'[') => self.array(&pointer, &display),
            Some(b'"') => {
                self.string();
            }
            Some(_) => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.i += 1;
                }
            }
            None => {}
        }
        if let Some(e) = self.out.get_mut(index) {
            e.end = self.i;
        }
    }

    fn object(&mut self, pointer: &str, display: &str) {
        self.i += 1;
        loop {
            self.ws();
            match self.peek() {
                Some(b'"') => {}
                Some(b'}') => {
                    self.i += 1;
                    return;
                }
                // `,` between members, or text serde_json would have refused.
                Some(b',') => {
                    self.i += 1;
                    continue;
                }
                _ => return,
            }
            let (ks, ke) = self.string();
            let name: String = self
                .text
                .get(ks..ke)
                .and_then(|raw| serde_json::from_str(raw).ok())
                .unwrap_or_default();
            self.ws();
            if self.peek() == Some(b':') {
                self.i += 1;
            }
            let child_display = if display.is_empty() {
                name.clone()
            } else {
                format!("{display}.{name}")
            };
            self.value(format!("{pointer}/{}", esc(&name)), child_display, Some(ks));
        }
    }

    fn array(&mut self, pointer: &str, display: &str) {
        self.i += 1;
        let mut n = 0usize;
        loop {
            self.ws();
            match self.peek() {
                Some(b']') => {
                    self.i += 1;
                    return;
                }
                Some(b',') => {
                    self.i += 1;
                    continue;
                }
                None => return,
                Some(_) => {}
            }
            let before = self.i;
            self.value(format!("{pointer}/{n}"), format!("{display}[{n}]"), None);
            n += 1;
            if self.i == before {
                return; // no progress: not JSON we understand
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "{\n  \"server\": {\"listen\": \"x\"},\n  \"mcpServers\": {\n    \"a/b\": {\"args\": [\"-y\", {\"k\": 1}]},\n    \"é\": {\"url\": 5}\n  }\n}\n";

    #[test]
    fn keys_are_located_by_pointer() {
        let l = Locator::new(DOC);
        assert_eq!(l.position("/server"), (2, 3));
        assert_eq!(l.position("/server/listen"), (2, 14));
        assert_eq!(l.value_position("/server/listen"), (2, 24));
        assert_eq!(l.position("/mcpServers/a~1b/args"), (4, 13));
        assert_eq!(l.position("/mcpServers/a~1b/args/1"), (4, 28));
        assert_eq!(l.position("/mcpServers/a~1b/args/1/k"), (4, 29));
        assert_eq!(l.position("/mcpServers/é/url"), (5, 11));
    }

    #[test]
    fn missing_pointer_falls_back_to_nearest_ancestor() {
        let l = Locator::new(DOC);
        assert_eq!(l.position("/server/token"), (2, 3));
        assert_eq!(l.position("/nothing/here"), (1, 1));
    }

    #[test]
    fn display_path_of_error_position() {
        let l = Locator::new(DOC);
        // serde_json reports a type error just after the value, 1-based bytes.
        assert_eq!(l.display_at(4, 34), Some("mcpServers.a/b.args[1].k"));
        assert_eq!(l.display_at(2, 26), Some("server.listen"));
    }
}
