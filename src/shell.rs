//! A parser for the shell subset `run_command` scripts are written in, so
//! the safety gate sees commands the way the shell will run them: every
//! simple command through quoting (`'…'`, `"…"`), backslash escapes, the
//! operators `;` `&` `&&` `||` `|` and newlines, subshells and groups,
//! `$( )`, backticks and `<( )`/`>( )` (whose commands are found too),
//! with redirections set apart from arguments. The reserved words of the
//! compound commands are grammar, not commands: `!`, `if`/`then`/`elif`/
//! `else`/`fi`, `for`/`select`/`while`/`until` … `do` … `done` (a `for`
//! header's words are not a command), `case … in pat) … ;; esac` (the
//! subject and the patterns are not commands), `function name`, `{ }`,
//! so `if true; then rm -rf ~; fi` yields the command `rm -rf ~`.
//!
//! It does not expand anything: a word that holds a variable or a
//! substitution is marked `dynamic`, and the gate treats what it cannot
//! see through as something to ask about. Pure: no IO.

/// One word after quote and escape removal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    pub text: String,
    /// Holds `$VAR`, `${…}`, `$( )`, backticks or `<( )`: its value is only
    /// known when the shell runs.
    pub dynamic: bool,
    /// Was (partly) quoted or escaped: `'rm'`, `r\m`.
    pub quoted: bool,
}

/// One simple command: words (assignments first, if any) and redirections.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    pub words: Vec<Word>,
    /// Targets of `>`, `>>`, `<`, `2>` … (heredoc delimiters included).
    pub redirects: Vec<Word>,
    /// Words fed to its input by a here-string (`bash <<< "…"`).
    pub here_strings: Vec<Word>,
    /// Reads a pipe: not the first command of a pipeline.
    pub piped: bool,
    /// Found inside `$( )`, backticks or `<( )`.
    pub substituted: bool,
}

/// The commands of a script, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    pub commands: Vec<Command>,
    /// Set when the script is malformed (an unterminated quote or
    /// substitution): the gate must not trust what it found.
    pub unreadable: Option<String>,
}

/// Nesting deeper than this makes a script unreadable: the parser
/// recurses for each substitution, parameter operand and arithmetic
/// expression (a `$( )` is two levels), and a few KB of `$(` must not
/// overflow the stack of the thread that judges it.
pub const MAX_NESTING: usize = 64;

/// Parse `src`.
pub fn parse(src: &str) -> Script {
    let mut p = Parser {
        chars: src.chars().collect(),
        pos: 0,
        out: Script::default(),
        nesting: 0,
    };
    p.script(false, false);
    p.out
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    out: Script,
    /// Substitutions open around the current position (this parser's and
    /// its parents').
    nesting: usize,
}

/// Where the parser stands in a compound command, for the words that are
/// its grammar rather than a command.
#[derive(Default)]
struct Compound {
    /// After `for`/`select`: the loop's name and word list, until a
    /// separator or `do`.
    header: bool,
    /// After `case`: its subject, until `in`.
    subject: bool,
    /// A `case` pattern (`a|b)`) comes next.
    pattern: bool,
    /// `case`s open (their `esac` not yet read).
    cases: usize,
    /// After `function`: the function's name.
    name: bool,
}

impl Parser {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn fail(&mut self, why: &str) {
        if self.out.unreadable.is_none() {
            self.out.unreadable = Some(why.to_string());
        }
    }

    /// Commands until the end, or until an unmatched `)` when `nested`.
    fn script(&mut self, nested: bool, substituted: bool) {
        if self.too_deep() {
            return;
        }
        self.nesting += 1;
        self.script_body(nested, substituted);
        self.nesting -= 1;
    }

    /// At [`MAX_NESTING`]: the script is unreadable and the rest of it is
    /// not read.
    fn too_deep(&mut self) -> bool {
        if self.nesting < MAX_NESTING {
            return false;
        }
        self.fail(&format!("nested more than {MAX_NESTING} levels deep"));
        self.pos = self.chars.len();
        true
    }

    fn script_body(&mut self, nested: bool, substituted: bool) {
        let mut cmd = Command {
            substituted,
            ..Command::default()
        };
        let mut redirect_next = false;
        let mut here_string_next = false;
        // After `<<` / `<<-`: the next word is a here-document's delimiter.
        let mut heredoc_next: Option<bool> = None;
        // Here-documents whose body starts after the next newline.
        let mut pending: Vec<Heredoc> = Vec::new();
        let mut depth = 0usize;
        let mut g = Compound::default();
        let finish = |out: &mut Script,
                      cmd: &mut Command,
                      pending: &mut Vec<Heredoc>,
                      piped: bool| {
            if !cmd.words.is_empty() || !cmd.redirects.is_empty() || !cmd.here_strings.is_empty() {
                out.commands.push(std::mem::take(cmd));
                let at = out.commands.len() - 1;
                for h in pending.iter_mut().filter(|h| h.owner.is_none()) {
                    h.owner = Some(at);
                }
            }
            cmd.piped = piped;
            cmd.substituted = substituted;
        };
        while let Some(c) = self.peek(0) {
            if g.pattern && !matches!(c, ' ' | '\t' | '\n' | ';' | '#') {
                self.case_pattern(&mut g);
                continue;
            }
            match c {
                ' ' | '\t' => self.pos += 1,
                '\\' if self.peek(1) == Some('\n') => self.pos += 2,
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                ';' | '\n' | '&' => {
                    self.pos += 1;
                    g.header = false;
                    if c == ';' && g.cases > 0 && matches!(self.peek(0), Some(';' | '&')) {
                        // `;;`, `;&`, `;;&`: the end of a case item.
                        self.pos += 1;
                        if self.peek(0) == Some('&') {
                            self.pos += 1;
                        }
                        g.pattern = true;
                    } else if c == '&' && self.peek(0) == Some('&') {
                        self.pos += 1;
                    } else if c == '&' && self.peek(0) == Some('>') {
                        // `&>file`: a redirect, not a separator.
                        self.pos += 1;
                        redirect_next = true;
                        continue;
                    }
                    finish(&mut self.out, &mut cmd, &mut pending, false);
                    if c == '\n' && !pending.is_empty() {
                        self.heredoc_bodies(std::mem::take(&mut pending));
                    }
                }
                '|' => {
                    self.pos += 1;
                    // A `for` header ends at a separator; an operator there
                    // is a syntax error, and what follows is judged.
                    g.header = false;
                    let pipe = match self.peek(0) {
                        Some('|') => {
                            self.pos += 1;
                            false
                        }
                        Some('&') => {
                            self.pos += 1;
                            true
                        }
                        _ => true,
                    };
                    finish(&mut self.out, &mut cmd, &mut pending, pipe);
                }
                '(' => {
                    self.pos += 1;
                    g.header = false;
                    if cmd.words.len() == 1 && self.peek(0) == Some(')') {
                        // `name()`: a function definition; its body follows.
                        self.pos += 1;
                        cmd.words.clear();
                    } else {
                        depth += 1;
                        finish(&mut self.out, &mut cmd, &mut pending, false);
                    }
                }
                ')' => {
                    if depth == 0 {
                        if nested {
                            finish(&mut self.out, &mut cmd, &mut pending, false);
                            return;
                        }
                        self.fail("unmatched )");
                        self.pos += 1;
                    } else {
                        depth -= 1;
                        self.pos += 1;
                        finish(&mut self.out, &mut cmd, &mut pending, false);
                    }
                }
                '<' | '>' if self.peek(1) == Some('(') => {
                    // Process substitution: its commands run; the word is dynamic.
                    self.pos += 2;
                    self.script(true, true);
                    self.expect_close();
                    cmd.words.push(Word {
                        text: String::new(),
                        dynamic: true,
                        quoted: false,
                    });
                }
                '<' | '>' => {
                    let start = self.pos;
                    while matches!(self.peek(0), Some('<' | '>' | '&' | '|' | '-')) {
                        self.pos += 1;
                    }
                    let op = &self.chars[start..self.pos];
                    here_string_next = op == ['<', '<', '<'];
                    heredoc_next = match op {
                        ['<', '<'] => Some(false),
                        ['<', '<', '-'] => Some(true),
                        _ => None,
                    };
                    redirect_next = !here_string_next;
                }
                _ => {
                    // A file-descriptor prefix (`2>`) belongs to the redirect.
                    if c.is_ascii_digit() && matches!(self.peek(1), Some('<' | '>')) {
                        self.pos += 1;
                        continue;
                    }
                    let w = self.word();
                    if here_string_next {
                        cmd.here_strings.push(w);
                        here_string_next = false;
                    } else if redirect_next {
                        if let Some(strip_tabs) = heredoc_next.take() {
                            pending.push(Heredoc {
                                delimiter: w.text.clone(),
                                expands: !w.quoted,
                                strip_tabs,
                                owner: None,
                            });
                        }
                        cmd.redirects.push(w);
                        redirect_next = false;
                    } else if cmd.words.is_empty() && self.grammar(&mut g, &w) {
                        // A reserved word or a compound command's own word.
                    } else {
                        cmd.words.push(w);
                    }
                }
            }
        }
        if nested {
            self.fail("unterminated substitution");
        } else if depth > 0 {
            self.fail("unterminated subshell");
        } else if g.cases > 0 || g.subject {
            self.fail("unterminated case");
        }
        finish(&mut self.out, &mut cmd, &mut pending, false);
        if !pending.is_empty() {
            self.fail("here-document with no body");
        }
    }

    /// Is `w`, read where a command starts, grammar? Reserved words are
    /// (unquoted); so are a `for` header's, a `case` subject's and a
    /// `function`'s name, whatever they are.
    fn grammar(&mut self, g: &mut Compound, w: &Word) -> bool {
        let plain = !w.quoted && !w.dynamic;
        if g.name {
            g.name = false;
            if self.peek(0) == Some('(') && self.peek(1) == Some(')') {
                self.pos += 2;
            }
            return true;
        }
        if g.header {
            g.header = !(plain && w.text == "do");
            return true;
        }
        if g.subject {
            if plain && w.text == "in" {
                g.subject = false;
                g.cases += 1;
                g.pattern = true;
            }
            return true;
        }
        if !plain {
            return false;
        }
        match w.text.as_str() {
            "!" | "if" | "then" | "elif" | "else" | "fi" | "while" | "until" | "do" | "done"
            | "{" | "}" | "coproc" => {}
            "for" | "select" => g.header = true,
            "case" => g.subject = true,
            "esac" => g.cases = g.cases.saturating_sub(1),
            "function" => g.name = true,
            _ => return false,
        }
        true
    }

    /// A `case` item's patterns, `(a|b)` or `a|b)`, up to and with the
    /// `)`; or the `esac` that closes the case.
    fn case_pattern(&mut self, g: &mut Compound) {
        g.pattern = false;
        if self.peek(0) == Some('(') {
            self.pos += 1;
        }
        let mut first = true;
        loop {
            while matches!(self.peek(0), Some(' ' | '\t' | '\n')) {
                self.pos += 1;
            }
            match self.peek(0) {
                Some(')') => {
                    self.pos += 1;
                    return;
                }
                Some('|') => self.pos += 1,
                None => {
                    self.fail("unterminated case");
                    return;
                }
                Some(_) => {
                    let start = self.pos;
                    let w = self.word();
                    if first && !w.quoted && w.text == "esac" {
                        g.cases = g.cases.saturating_sub(1);
                        return;
                    }
                    if self.pos == start {
                        self.fail("malformed case pattern");
                        return;
                    }
                }
            }
            first = false;
        }
    }

    fn expect_close(&mut self) {
        if self.peek(0) == Some(')') {
            self.pos += 1;
        }
    }

    /// One word: until unquoted whitespace or an operator.
    fn word(&mut self) -> Word {
        let mut w = Word::default();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | ')' => break,
                // `name(`: the caller sees a function definition or a subshell.
                '(' => break,
                '\\' => {
                    w.quoted = true;
                    if let Some(n) = self.peek(1) {
                        if n != '\n' {
                            w.text.push(n);
                        }
                        self.pos += 2;
                    } else {
                        self.pos += 1;
                    }
                }
                '\'' => {
                    w.quoted = true;
                    self.pos += 1;
                    loop {
                        match self.peek(0) {
                            Some('\'') => {
                                self.pos += 1;
                                break;
                            }
                            Some(ch) => {
                                w.text.push(ch);
                                self.pos += 1;
                            }
                            None => {
                                self.fail("unterminated single quote");
                                break;
                            }
                        }
                    }
                }
                '"' => {
                    w.quoted = true;
                    self.pos += 1;
                    self.double_quoted(&mut w);
                }
                // `$'…'`: ANSI-C quoting, its escapes decoded (`$'\x72m'` is `rm`).
                '$' if self.peek(1) == Some('\'') => {
                    w.quoted = true;
                    self.pos += 2;
                    self.ansi_c_quoted(&mut w);
                }
                // `$"…"`: a translated string, read as `"…"`.
                '$' if self.peek(1) == Some('"') => self.pos += 1,
                '$' | '`' => self.dollar(&mut w),
                _ => {
                    w.text.push(c);
                    self.pos += 1;
                }
            }
        }
        w
    }

    /// The body of `$'…'` after its opening quote: bash's escapes decoded.
    fn ansi_c_quoted(&mut self, w: &mut Word) {
        loop {
            match self.peek(0) {
                Some('\'') => {
                    self.pos += 1;
                    return;
                }
                Some('\\') => {
                    self.pos += 1;
                    self.ansi_c_escape(w);
                }
                Some(ch) => {
                    w.text.push(ch);
                    self.pos += 1;
                }
                None => {
                    self.fail("unterminated $' quote");
                    return;
                }
            }
        }
    }

    /// One escape of `$'…'`, after its backslash.
    fn ansi_c_escape(&mut self, w: &mut Word) {
        let Some(c) = self.peek(0) else {
            w.text.push('\\');
            return;
        };
        self.pos += 1;
        let simple = match c {
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(c),
            _ => None,
        };
        if let Some(ch) = simple {
            w.text.push(ch);
            return;
        }
        let (radix, max, first) = match c {
            '0'..='7' => (8, 3, Some(c)),
            'x' => (16, 2, None),
            'u' => (16, 4, None),
            'U' => (16, 8, None),
            'c' => {
                // `\cX`: the control character of X.
                if let Some(x) = self.peek(0) {
                    self.pos += 1;
                    w.text.push(char::from((x as u32 & 0x1f) as u8));
                }
                return;
            }
            _ => {
                w.text.push('\\');
                w.text.push(c);
                return;
            }
        };
        let mut digits = String::new();
        digits.extend(first);
        while digits.len() < max && self.peek(0).is_some_and(|d| d.is_digit(radix)) {
            digits.extend(self.peek(0));
            self.pos += 1;
        }
        match u32::from_str_radix(&digits, radix) {
            // (A byte above 0x7f is one byte of UTF-8 in bash; here its
            // Latin-1 character: what matters is that ASCII decodes.)
            Ok(n) => w.text.extend(char::from_u32(n)),
            // `\x` with no digits stays as written.
            Err(_) => {
                w.text.push('\\');
                w.text.push(c);
            }
        }
    }

    fn double_quoted(&mut self, w: &mut Word) {
        loop {
            match self.peek(0) {
                Some('"') => {
                    self.pos += 1;
                    return;
                }
                Some('\\') => {
                    match self.peek(1) {
                        Some(n @ ('$' | '`' | '"' | '\\')) => w.text.push(n),
                        Some('\n') => {}
                        Some(n) => {
                            w.text.push('\\');
                            w.text.push(n);
                        }
                        None => {}
                    }
                    self.pos += 2;
                }
                Some('$' | '`') => self.dollar(w),
                Some(ch) => {
                    w.text.push(ch);
                    self.pos += 1;
                }
                None => {
                    self.fail("unterminated double quote");
                    return;
                }
            }
        }
    }
}

mod dollar;
mod heredoc;

use heredoc::Heredoc;

#[cfg(test)]
mod tests;
