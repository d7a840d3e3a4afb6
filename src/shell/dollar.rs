//! `$name`, `${…}`, `$( )`, `$(( ))` and backticks: what a word's
//! substitutions run is found as commands.

use super::{Parser, Script, Word};

impl Parser {
    /// `$name`, `${…}`, `$( )`, `$(( ))`, backticks; a lone `$` is text.
    pub(super) fn dollar(&mut self, w: &mut Word) {
        if self.too_deep() {
            return;
        }
        self.nesting += 1;
        self.dollar_body(w);
        self.nesting -= 1;
    }

    fn dollar_body(&mut self, w: &mut Word) {
        if self.peek(0) == Some('`') {
            self.pos += 1;
            let start = self.pos;
            while let Some(c) = self.peek(0) {
                if c == '\\' {
                    self.pos += 2;
                    continue;
                }
                if c == '`' {
                    break;
                }
                self.pos += 1;
            }
            if self.peek(0) != Some('`') {
                self.fail("unterminated backtick");
            }
            let end = self.pos.min(self.chars.len());
            let inner = unescape_backticks(&self.chars[start..end]);
            self.pos = (end + 1).min(self.chars.len());
            self.nested(&inner);
            w.dynamic = true;
            return;
        }
        match self.peek(1) {
            Some('(') if self.peek(2) == Some('(') => {
                // Arithmetic: to the matching `))`; a substitution inside
                // it runs (`$(( $(cmd) + 1 ))`).
                self.pos += 3;
                let mut depth = 2usize;
                let mut inner = Word::default();
                while let Some(c) = self.peek(0) {
                    if c == '$' || c == '`' {
                        self.dollar(&mut inner);
                        continue;
                    }
                    self.pos += 1;
                    match c {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                w.dynamic = true;
            }
            Some('(') => {
                self.pos += 2;
                self.script(true, true);
                self.expect_close();
                w.dynamic = true;
            }
            Some('{') => {
                // `${name…}`: its operand may hold substitutions that run
                // (`${x:-$(cmd)}`, `${x:-`cmd`}`), quoted or not.
                self.pos += 2;
                let mut inner = Word::default();
                while let Some(c) = self.peek(0) {
                    match c {
                        '}' => {
                            self.pos += 1;
                            break;
                        }
                        '$' | '`' => self.dollar(&mut inner),
                        '"' => {
                            self.pos += 1;
                            self.double_quoted(&mut inner);
                        }
                        '\'' => {
                            self.pos += 1;
                            while self.peek(0).is_some_and(|c| c != '\'') {
                                self.pos += 1;
                            }
                            self.pos += 1;
                        }
                        '\\' => self.pos += 2,
                        _ => self.pos += 1,
                    }
                }
                w.dynamic = true;
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                self.pos += 2;
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .peek(0)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.pos += 1;
                    }
                }
                w.dynamic = true;
            }
            _ => {
                w.text.push('$');
                self.pos += 1;
            }
        }
    }

    /// Parse a backtick body as its own script; its commands join ours.
    fn nested(&mut self, inner: &str) {
        let mut sub = Parser {
            chars: inner.chars().collect(),
            pos: 0,
            out: Script::default(),
            nesting: self.nesting,
        };
        sub.script(false, true);
        for mut c in sub.out.commands {
            c.substituted = true;
            self.out.commands.push(c);
        }
        if let Some(why) = sub.out.unreadable {
            self.fail(&why);
        }
    }
}

/// A backtick body as the shell reads it: a backslash before `` ` ``, `$`
/// or `\\` only escapes it, so ``echo `echo \`reboot\``` runs `reboot`.
fn unescape_backticks(body: &[char]) -> String {
    let mut out = String::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        match (body[i], body.get(i + 1)) {
            ('\\', Some(&n)) if n == '`' || n == '$' || n == '\\' => {
                out.push(n);
                i += 2;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}
