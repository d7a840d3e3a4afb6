//! Inline code of an interpreter (`python3 -c`, `perl -e`, `node -e`, a
//! here-string): not parsed, but read for the calls that delete a
//! directory tree and what they are given. It asks when such a call meets
//! a home directory (`os.homedir()`, `$ENV{HOME}`, `Path.home()`, `'~'`)
//! or a literal protected path (`'/home/u'`, `'/usr'`); `rmtree('build')`
//! and `print(1)` stay quiet. Code that runs a shell command
//! (`os.system('rm -rf ~')`) has its string literals judged as scripts.

use super::paths::protected;
use crate::shell::Word;

/// Calls (lowercased) that delete a directory tree.
const TREE_DELETERS: &[&str] = &[
    "rmtree",         // Python shutil, Perl File::Path
    "remove_tree",    // Perl File::Path
    "rmsync",         // Node fs.rmSync
    "rmdirsync",      // Node fs.rmdirSync({recursive})
    ".rm(",           // Node fs.rm / fs.promises.rm, Ruby FileUtils.rm
    ".rmdir(",        // Node fs.rmdir, Python Path.rmdir
    "rm_rf",          // Ruby FileUtils.rm_rf
    "fileutils.rm",   // Ruby FileUtils.rm_r, .rm
    "rimraf",         // Node
    "removedirs",     // Python os
    "remove_dir_all", // Rust-like and Deno
    "deno.remove",    // Deno.remove(p, {recursive})
    "remove-item",    // PowerShell
    "delete_tree",
];
/// Ways code names a home directory (lowercased).
const HOME_NAMES: &[&str] = &[
    "homedir",     // Node os.homedir()
    "{home}",      // Perl $ENV{HOME}
    "'home'",      // os.environ['HOME'], ENV['HOME']
    "\"home\"",    // os.getenv("HOME")
    "home()",      // Python Path.home()
    "dir.home",    // Ruby Dir.home
    "$home",       // PowerShell $HOME, Perl $home
    "env.home",    // Node process.env.HOME
    "userprofile", // Windows
    "getpwuid",    // Python pwd / Perl getpwuid
];
/// Calls (lowercased) that hand a string to a shell.
const SHELL_OUTS: &[&str] = &[
    "system(",
    "popen",
    "subprocess",
    "execsync",
    "exec(",
    "spawnsync",
    "child_process",
    "`",
];

/// The inline code an interpreter is given, with the option that gives
/// it: `python3 -c CODE`, `perl -e CODE` (or `-pe`, `-le` …), `node -e` /
/// `--eval` / `-p`, `ruby -e`, `php -r`, `deno eval`, `pwsh -c`.
pub(super) fn inline<'a>(name: &str, args: &'a [Word]) -> Option<(&'a str, &'a str)> {
    let python = name.starts_with("python");
    let takes_code = |t: &str| -> bool {
        match name {
            "node" | "nodejs" => matches!(t, "-e" | "--eval" | "-p" | "--print"),
            "perl" | "ruby" => {
                // A cluster ending in `e`: `-e`, `-pe`, `-lne`, `-E`.
                t.len() >= 2
                    && t.starts_with('-')
                    && !t.starts_with("--")
                    && !t.starts_with("-M")
                    && !t.starts_with("-I")
                    && t[1..].chars().all(|c| c.is_ascii_alphabetic())
                    && (t.ends_with('e') || t.ends_with('E'))
            }
            "php" => t == "-r",
            "deno" => t == "eval",
            "lua" | "osascript" => t == "-e",
            "pwsh" => t.eq_ignore_ascii_case("-c") || t.eq_ignore_ascii_case("-command"),
            _ => python && t == "-c",
        }
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a.text == "--" {
            return None;
        }
        if let Some(code) = a.text.strip_prefix("--eval=") {
            return Some(("--eval", code));
        }
        if takes_code(&a.text) {
            return it.next().map(|c| (a.text.as_str(), c.text.as_str()));
        }
    }
    None
}

/// Why `name FLAG CODE` needs a person, or `None`.
pub(super) fn danger(name: &str, flag: &str, code: &str) -> Option<String> {
    let lower = code.to_lowercase();
    let literals = literals(code);
    if SHELL_OUTS.iter().any(|s| lower.contains(s)) {
        let hit = literals.iter().find_map(|l| match super::first_hit(l) {
            Some(("unreadable", _)) | None => None,
            Some((_, why)) => Some(why),
        });
        if let Some(why) = hit {
            return Some(format!("{name} {flag} runs a shell command: {why}"));
        }
    }
    let (at, call) = TREE_DELETERS
        .iter()
        .find_map(|d| lower.find(d).map(|i| (i, *d)))?;
    // The call as the code spells it (`rmSync`), when lowercasing kept
    // the offsets.
    let call = code
        .get(at..at + call.len())
        .filter(|_| code.len() == lower.len())
        .unwrap_or(call)
        .trim_matches(['.', '(']);
    if HOME_NAMES.iter().any(|h| lower.contains(h)) {
        return Some(format!(
            "{name} {flag} runs code that deletes a directory tree ({call}) of the home directory"
        ));
    }
    let (lit, what) = literals.iter().find_map(|l| protected(l).map(|p| (l, p)))?;
    Some(format!(
        "{name} {flag} runs code that deletes a directory tree ({call}) of {lit} ({what})"
    ))
}

/// The contents of the `'…'`, `"…"` and `` `…` `` literals of `code`
/// (escapes kept as written).
fn literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        if !matches!(c, '\'' | '"' | '`') {
            continue;
        }
        let mut lit = String::new();
        while let Some(d) = chars.next() {
            if d == '\\' {
                lit.push(d);
                lit.extend(chars.next());
            } else if d == c {
                break;
            } else {
                lit.push(d);
            }
        }
        out.push(lit);
    }
    out
}
