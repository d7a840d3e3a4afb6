//! Here-documents: `<<` and `<<-` bodies are input fed to their command
//! (the gate judges an interpreter's as its script), not commands.

use super::{Parser, Script, Word};

/// A here-document waiting for its body.
pub(super) struct Heredoc {
    pub(super) delimiter: String,
    /// The delimiter was unquoted: the body's substitutions run.
    pub(super) expands: bool,
    /// `<<-`: leading tabs are stripped from each line.
    pub(super) strip_tabs: bool,
    /// The command it feeds, once that command is in the script.
    pub(super) owner: Option<usize>,
}

impl Parser {
    /// The bodies of `docs`, read from the line after their `<<` on: each
    /// becomes a here-string of the command it feeds (data, not commands;
    /// with an unquoted delimiter its substitutions run, so their commands
    /// are found).
    pub(super) fn heredoc_bodies(&mut self, docs: Vec<Heredoc>) {
        for doc in docs {
            let mut body = String::new();
            let mut closed = false;
            while self.pos < self.chars.len() {
                let start = self.pos;
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line: String = self.chars[start..self.pos].iter().collect();
                self.pos = (self.pos + 1).min(self.chars.len());
                let line = if doc.strip_tabs {
                    line.trim_start_matches('\t').to_string()
                } else {
                    line
                };
                if line == doc.delimiter {
                    closed = true;
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if !closed {
                self.fail("unterminated here-document");
            }
            let word = if doc.expands {
                self.expand_body(&body)
            } else {
                Word {
                    text: body,
                    dynamic: false,
                    quoted: true,
                }
            };
            if let Some(cmd) = doc.owner.and_then(|i| self.out.commands.get_mut(i)) {
                cmd.here_strings.push(word);
            }
        }
    }

    /// A here-document body with an unquoted delimiter: its `$( )`,
    /// backticks and `${…}` run, as in double quotes.
    fn expand_body(&mut self, body: &str) -> Word {
        let mut sub = Parser {
            chars: body.chars().collect(),
            pos: 0,
            out: Script::default(),
            nesting: self.nesting,
        };
        let mut w = Word {
            quoted: true,
            ..Word::default()
        };
        while let Some(c) = sub.peek(0) {
            match c {
                '\\' => {
                    if let Some(n) = sub.peek(1) {
                        w.text.push(n);
                    }
                    sub.pos += 2;
                }
                '$' | '`' => sub.dollar(&mut w),
                _ => {
                    w.text.push(c);
                    sub.pos += 1;
                }
            }
        }
        for mut c in sub.out.commands {
            c.substituted = true;
            self.out.commands.push(c);
        }
        if let Some(why) = sub.out.unreadable {
            self.fail(&why);
        }
        w
    }
}
