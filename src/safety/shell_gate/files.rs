//! The shell gate's rules about files: deleting, re-permissioning or
//! moving a protected directory (`paths::protected`).

use super::paths::{protected, resolve};
use super::{base, check_command, Seen};
use crate::shell::{Command, Word};

/// Non-option words: `-x`, `--long` and (after `--`) nothing else is an option.
pub(super) fn operands(args: &[Word]) -> Vec<&Word> {
    let mut out = Vec::new();
    let mut options_done = false;
    for a in args {
        if !options_done && a.text == "--" {
            options_done = true;
        } else if options_done || a.dynamic || !a.text.starts_with('-') || a.text == "-" {
            out.push(a);
        }
    }
    out
}

/// A short-option cluster (`-rf`, `-vR`) that holds one of `letters`, or
/// the long option `long`.
pub(super) fn has_flag(args: &[Word], letters: &[char], long: &str) -> bool {
    args.iter().take_while(|a| a.text != "--").any(|a| {
        a.text == long
            || (!a.dynamic
                && a.text.starts_with('-')
                && !a.text.starts_with("--")
                && a.text[1..].contains(letters))
    })
}

/// Why a path is dangerous to delete, chmod or move, or `None`. A
/// relative path is judged from `cwd`, the directory an earlier `cd` of
/// the script went to (`cd ~ && rm -rf .`), when that is known.
pub(super) fn danger(w: &Word, cwd: Option<&str>) -> Option<String> {
    if w.dynamic {
        return Some("a path only known when it runs (a variable or substitution)".into());
    }
    if let Some(p) = protected(&w.text) {
        return Some(format!("{} ({p})", w.text));
    }
    let cwd = cwd?;
    let p = protected(&resolve(cwd, &w.text))?;
    Some(format!("{} after cd {cwd} ({p})", w.text))
}

/// `find`'s starting points, `.` when it names none.
fn find_starts(args: &[Word]) -> Vec<Word> {
    let mut roots: Vec<Word> = find_roots(args).cloned().collect();
    if roots.is_empty() {
        roots.push(Word {
            text: ".".into(),
            ..Word::default()
        });
    }
    roots
}

pub(super) fn rm_no_preserve_root(s: &Seen) -> Option<String> {
    let flag = s.args.iter().any(|a| a.text == "--no-preserve-root");
    (s.name == "rm" && flag).then(|| "rm with --no-preserve-root".into())
}

fn rm_recursive(s: &Seen) -> bool {
    s.name == "rm" && has_flag(s.args, &['r', 'R'], "--recursive")
}

pub(super) fn rm_xargs(s: &Seen) -> Option<String> {
    (rm_recursive(s) && s.via_xargs)
        .then(|| "recursive rm of paths read from a pipe (xargs)".into())
}

pub(super) fn rm_protected(s: &Seen) -> Option<String> {
    if !rm_recursive(s) {
        return None;
    }
    let why = operands(s.args)
        .into_iter()
        .find_map(|w| danger(w, s.cwd))?;
    Some(format!("recursive delete of {why}"))
}

/// `find`'s starting points: after its own `-H`/`-L`/`-P`/`-D x`/`-O3`,
/// up to the first test or action.
fn find_roots(args: &[Word]) -> impl Iterator<Item = &Word> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.text.as_str() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            t if t.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    args.iter()
        .skip(i)
        .take_while(|a| a.dynamic || !(a.text.starts_with('-') || a.text == "(" || a.text == "!"))
}

pub(super) fn find_delete(s: &Seen) -> Option<String> {
    if s.name != "find" || !s.args.iter().any(|a| a.text == "-delete") {
        return None;
    }
    let why = find_starts(s.args).iter().find_map(|w| danger(w, s.cwd))?;
    Some(format!("find -delete over {why}"))
}

/// `find … -exec CMD … ;` runs a command of its own: judged as one, and an
/// `rm` there over a protected start is a recursive delete.
pub(super) fn find_exec(s: &Seen) -> Option<String> {
    if s.name != "find" {
        return None;
    }
    let i = s
        .args
        .iter()
        .position(|a| matches!(a.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))?;
    let end = s.args[i + 1..]
        .iter()
        .position(|a| a.text == ";" || a.text == "+")
        .map_or(s.args.len(), |e| i + 1 + e);
    let inner = Command {
        words: s.args[i + 1..end].to_vec(),
        ..Command::default()
    };
    let name = inner.words.first().map(|w| base(&w.text));
    if name == Some("rm") {
        if let Some(why) = find_starts(s.args).iter().find_map(|w| danger(w, s.cwd)) {
            return Some(format!("find -exec rm over {why}"));
        }
    }
    check_command(&inner, s.cwd).map(|(_, why)| format!("find -exec: {why}"))
}

pub(super) fn chmod_chown(s: &Seen) -> Option<String> {
    if !matches!(s.name, "chmod" | "chown" | "chgrp") {
        return None;
    }
    if !has_flag(s.args, &['R'], "--recursive") {
        return None;
    }
    let why = operands(s.args)
        .into_iter()
        .find_map(|w| danger(w, s.cwd))?;
    Some(format!("recursive {} of {why}", s.name))
}

/// `mv / …`, `mv ~ /dev/null`, `mv /usr /tmp/x`, `mv -t /tmp /usr`: a
/// protected source.
pub(super) fn mv_protected(s: &Seen) -> Option<String> {
    if s.name != "mv" {
        return None;
    }
    let ops = operands(s.args);
    // With a target directory (`-t DIR`) every operand may be a source.
    let target_given = s
        .args
        .iter()
        .any(|a| a.text == "-t" || a.text.starts_with("--target-directory"));
    let sources = match ops.split_last() {
        Some((_, rest)) if !target_given => rest,
        _ => &ops[..],
    };
    let why = sources
        .iter()
        .filter(|w| !w.dynamic)
        .find_map(|w| danger(w, s.cwd))?;
    Some(format!("moves {why}"))
}

/// `rsync --delete empty/ /usr/`: the destination loses whatever the
/// source lacks, so a protected destination is a delete.
pub(super) fn rsync_delete(s: &Seen) -> Option<String> {
    let deletes = s.args.iter().any(|a| a.text.starts_with("--delete"));
    if s.name != "rsync" || !deletes {
        return None;
    }
    let dest = operands(s.args).pop()?;
    let why = danger(dest, s.cwd)?;
    Some(format!("rsync --delete into {why}"))
}
