//! The shell gate: rules that match parsed commands (`crate::shell`), not
//! the raw string, so `'rm' -rf /`, `r\m -rf /`, `X=/; rm -rf $X`,
//! `"r""m" -fr /usr` or `/sbin/shut""down` are seen for what they are.
//! What the parser cannot see through (a command name that is a variable,
//! `eval` of a substitution, an interpreter fed from a pipe or a
//! generated here-string, a malformed script) asks a person.
//!
//! The commands are read in order, and a `cd` to a directory the gate can
//! name (`cd ~`, `cd /`, `cd /usr/lib`) is remembered, so a relative path
//! after it is judged where it lands: `cd ~ && rm -rf .` deletes the home
//! directory. Inline code of an interpreter (`python3 -c`, `perl -e`,
//! `node -e`) is read for the calls that delete a directory tree, and asks
//! when one names a home or system directory.
//!
//! Each simple command is first unwrapped (assignments, `sudo`, `env`,
//! `xargs`, … and their options; brace expansion), then tried against
//! [`RULES`] in order; the first that has a reason to ask wins.

mod code;
mod files;
mod paths;
mod procfs;
#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::shell::{self, Command, Word};
use files::{
    chmod_chown, find_delete, find_exec, has_flag, mv_protected, rm_no_preserve_root, rm_protected,
    rm_xargs, rsync_delete,
};
use paths::is_disk_device;

/// Params whose string value is a shell script.
const SCRIPT_KEYS: &[&str] = &["command", "script", "cmd"];
/// Environment variables that make a shell run code of their own.
const CODE_ENV: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
];
/// Commands that run the rest of their arguments as a command, with the
/// options of theirs that take a value (`sudo -u root rm …`).
#[rustfmt::skip]
const WRAPPERS: &[(&str, &[&str])] = &[
    ("command", &[]),
    ("env", &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"]),
    ("sudo", &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R",
        "--user", "--group", "--host", "--prompt", "--chdir", "--role", "--type",
        "--other-user", "--command-timeout", "--chroot", "--close-from"]),
    ("doas", &["-u", "-C"]),
    ("xargs", &["-I", "-n", "-P", "-s", "-d", "-a", "-E", "-L", "--max-args",
        "--max-procs", "--max-chars", "--delimiter", "--arg-file", "--eof", "--max-lines"]),
    ("nice", &["-n", "--adjustment"]),
    ("nohup", &[]),
    ("time", &["-f", "-o", "--format", "--output"]),
    ("exec", &["-a"]),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    ("stdbuf", &["-i", "-o", "-e", "--input", "--output", "--error"]),
    ("busybox", &[]),
    ("setsid", &[]),
    ("chroot", &[]),
    ("ionice", &["-c", "-n", "-p", "--class", "--classdata", "--pid"]),
    ("builtin", &[]),
    ("watch", &["-n", "--interval"]),
];
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"];
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "node",
    "nodejs",
    "deno",
    "perl",
    "ruby",
    "php",
    "lua",
    "tclsh",
    "pwsh",
    "osascript",
];
const POWER: &[&str] = &["shutdown", "reboot", "halt", "poweroff"];
/// Commands that erase a disk or a file system outright.
const ERASERS: &[&str] = &["wipefs", "mkswap", "blkdiscard"];
/// Partition editors: asked about when given a disk device.
const PARTITIONERS: &[&str] = &["fdisk", "sfdisk", "sgdisk", "gdisk", "cfdisk", "parted"];
/// Commands that write their file arguments: asked about when one is a disk.
const DEVICE_WRITERS: &[&str] = &["cp", "tee", "shred", "install", "truncate"];

/// One simple command, unwrapped: what the rules look at.
struct Seen<'a> {
    /// The command as parsed (its redirections, whether it reads a pipe).
    cmd: &'a Command,
    /// The command name without its directory: `/sbin/shutdown` → `shutdown`.
    name: &'a str,
    /// The words after the name.
    args: &'a [Word],
    /// Its name is a variable or a substitution.
    dynamic: bool,
    /// Runs under `xargs`: its arguments come from a pipe.
    via_xargs: bool,
    /// Command lines a wrapper runs as a script (`env -S '…'`).
    scripts: Vec<String>,
    /// The directory an earlier `cd` of the script went to, when known.
    cwd: Option<&'a str>,
}

/// A rule of the gate: its name (tests and docs use it) and the check that
/// says why to ask.
struct Rule {
    name: &'static str,
    check: fn(&Seen) -> Option<String>,
}

/// The rules, in the order they are tried. Each has a row in
/// `tests::EACH_RULE`, and the README's safety section lists them.
#[rustfmt::skip]
const RULES: &[Rule] = &[
    Rule { name: "disk-redirect", check: disk_redirect },
    Rule { name: "dynamic-name", check: dynamic_name },
    Rule { name: "eval", check: eval },
    Rule { name: "source-generated", check: source_generated },
    Rule { name: "wrapped-script", check: wrapped_script },
    Rule { name: "interpreter-pipe", check: interpreter_pipe },
    Rule { name: "interpreter-substitution", check: interpreter_substitution },
    Rule { name: "interpreter-here-string", check: interpreter_here_string },
    Rule { name: "interpreter-code", check: interpreter_code },
    Rule { name: "shell-c", check: shell_c },
    Rule { name: "power", check: power },
    Rule { name: "erase-disk", check: erase_disk },
    Rule { name: "partition-disk", check: partition_disk },
    Rule { name: "dd-device", check: dd_device },
    Rule { name: "write-device", check: write_device },
    Rule { name: "rm-no-preserve-root", check: rm_no_preserve_root },
    Rule { name: "rm-xargs", check: rm_xargs },
    Rule { name: "rm-protected", check: rm_protected },
    Rule { name: "find-delete", check: find_delete },
    Rule { name: "find-exec", check: find_exec },
    Rule { name: "chmod-chown", check: chmod_chown },
    Rule { name: "mv-protected", check: mv_protected },
    Rule { name: "rsync-delete", check: rsync_delete },
    Rule { name: "proc-secrets", check: procfs::proc_secrets },
];

/// A reason to ask before the call runs, or `None` when nothing in the
/// params' scripts needs it.
pub fn check(params: &Value) -> Option<String> {
    let Value::Object(map) = params else {
        return None;
    };
    for key in SCRIPT_KEYS {
        if let Some(Value::String(script)) = map.get(*key) {
            if let Some(why) = check_script(script) {
                return Some(why);
            }
        }
    }
    if let Some(Value::Object(env)) = map.get("env") {
        for (k, v) in env {
            if CODE_ENV.contains(&k.as_str()) {
                return Some(format!(
                    "env sets {k}, which makes the shell run other code"
                ));
            }
            if let Some(why) = v.as_str().and_then(check_script) {
                return Some(format!("env {k}: {why}"));
            }
        }
    }
    None
}

/// The first reason to ask about `script`.
pub fn check_script(script: &str) -> Option<String> {
    first_hit(script).map(|(_, why)| why)
}

/// The first rule that asks about `script`, and its reason. An unreadable
/// script is the rule `unreadable`.
fn first_hit(script: &str) -> Option<(&'static str, String)> {
    let parsed = shell::parse(script);
    if let Some(why) = parsed.unreadable {
        return Some((
            "unreadable",
            format!("the script cannot be read safely ({why})"),
        ));
    }
    let mut cwd: Option<String> = None;
    for cmd in &parsed.commands {
        if let Some(hit) = check_command(cmd, cwd.as_deref()) {
            return Some(hit);
        }
        let words = paths::expand_braces(&cmd.words);
        let seen = unwrap(cmd, &words, None);
        if matches!(seen.name, "cd" | "pushd" | "popd") {
            cwd = went_to(&seen, cwd.as_deref());
        }
    }
    None
}

/// Where `cd DIR` (or `pushd DIR`) leaves the shell, when the gate can
/// name it: `cd` alone is `~`; `cd -`, `popd` and a variable are unknown;
/// a relative directory is known only after a known one.
fn went_to(s: &Seen, cwd: Option<&str>) -> Option<String> {
    if s.name == "popd" {
        return None;
    }
    let dir = files::operands(s.args).into_iter().next();
    let Some(dir) = dir else {
        return Some("~".into());
    };
    if dir.dynamic || dir.text == "-" {
        return None;
    }
    if dir.text.starts_with('/') || dir.text.starts_with('~') {
        return Some(dir.text.clone());
    }
    cwd.map(|c| paths::resolve(c, &dir.text))
}

fn check_command(cmd: &Command, cwd: Option<&str>) -> Option<(&'static str, String)> {
    let words = paths::expand_braces(&cmd.words);
    let seen = unwrap(cmd, &words, cwd);
    RULES
        .iter()
        .find_map(|r| (r.check)(&seen).map(|why| (r.name, why)))
}

/// The last path segment: `/sbin/shutdown` → `shutdown`.
fn base(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

fn is_assignment(w: &Word) -> bool {
    let Some((name, _)) = w.text.split_once('=') else {
        return false;
    };
    !name.is_empty()
        && !w.quoted
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// The command and its arguments after assignments and wrappers.
fn unwrap<'a>(cmd: &'a Command, words: &'a [Word], cwd: Option<&'a str>) -> Seen<'a> {
    let mut rest = words;
    let mut via_xargs = false;
    let mut scripts = Vec::new();
    loop {
        while rest.first().is_some_and(is_assignment) {
            rest = &rest[1..];
        }
        let Some(first) = rest.first() else {
            break;
        };
        if first.dynamic {
            break;
        }
        let name = base(&first.text);
        let Some((_, takes_value)) = WRAPPERS.iter().find(|(w, _)| *w == name) else {
            break;
        };
        via_xargs |= name == "xargs";
        rest = &rest[1..];
        // The wrapper's own options, and the values of those that take one.
        while let Some(w) = rest.first() {
            // (`env -` is `env -i`: an option too.)
            if w.dynamic || !w.text.starts_with('-') {
                break;
            }
            rest = &rest[1..];
            if w.text == "--" {
                break;
            }
            let split = matches!(w.text.as_str(), "-S" | "--split-string");
            if let Some(split_value) = w.text.strip_prefix("--split-string=") {
                scripts.push(split_value.to_string());
            }
            if takes_value.contains(&w.text.as_str()) {
                if let (true, Some(v)) = (split, rest.first()) {
                    scripts.push(v.text.clone());
                }
                rest = &rest[1.min(rest.len())..];
            }
        }
        // `timeout 5 cmd`, `chroot /srv cmd`: one positional before the command.
        let positional = match name {
            "timeout" => rest
                .first()
                .is_some_and(|w| w.text.starts_with(|c: char| c.is_ascii_digit())),
            "chroot" => true,
            _ => false,
        };
        if positional {
            rest = &rest[1.min(rest.len())..];
        }
    }
    let (name, dynamic) = match rest.first() {
        Some(w) => (base(&w.text), w.dynamic),
        None => ("", false),
    };
    Seen {
        cmd,
        name,
        args: rest.get(1..).unwrap_or(&[]),
        dynamic,
        via_xargs,
        scripts,
        cwd,
    }
}

fn disk_redirect(s: &Seen) -> Option<String> {
    let r = s.cmd.redirects.iter().find(|r| is_disk_device(&r.text))?;
    Some(format!("writes to the disk device {}", r.text))
}

fn dynamic_name(s: &Seen) -> Option<String> {
    s.dynamic.then(|| {
        "the command name is a variable or a substitution; its value is only known when it runs"
            .into()
    })
}

/// `eval` of fixed text is judged as the script it is; of a variable or a
/// substitution, asked about.
fn eval(s: &Seen) -> Option<String> {
    if s.name != "eval" {
        return None;
    }
    if s.args.iter().any(|a| a.dynamic) {
        return Some("eval runs text only known when it runs".into());
    }
    let text: Vec<&str> = s.args.iter().map(|a| a.text.as_str()).collect();
    check_script(&text.join(" ")).map(|why| format!("eval: {why}"))
}

fn source_generated(s: &Seen) -> Option<String> {
    let generated = s
        .args
        .iter()
        .any(|a| a.dynamic || a.text.starts_with("/dev/"));
    (matches!(s.name, "source" | ".") && generated)
        .then(|| format!("{} of a generated file", s.name))
}

fn wrapped_script(s: &Seen) -> Option<String> {
    s.scripts
        .iter()
        .find_map(|script| check_script(script))
        .map(|why| format!("env -S: {why}"))
}

fn is_interpreter(name: &str) -> bool {
    SHELLS.contains(&name) || INTERPRETERS.contains(&name) || name.starts_with("python3.")
}

fn interpreter_pipe(s: &Seen) -> Option<String> {
    (is_interpreter(s.name) && (s.cmd.piped || s.via_xargs))
        .then(|| format!("{} reads a script from a pipe", s.name))
}

fn interpreter_substitution(s: &Seen) -> Option<String> {
    (is_interpreter(s.name) && s.args.iter().any(|a| a.dynamic))
        .then(|| format!("{} runs a script made by a substitution", s.name))
}

/// `bash <<< "$(… | base64 -d)"`: a shell or interpreter whose script is
/// a here-string; one made by a substitution asks, a fixed one is judged.
fn interpreter_here_string(s: &Seen) -> Option<String> {
    if !is_interpreter(s.name) {
        return None;
    }
    s.cmd.here_strings.iter().find_map(|h| {
        if h.dynamic {
            Some(format!(
                "{} runs a script fed by a here-string (<<<) made by a substitution",
                s.name
            ))
        } else if SHELLS.contains(&s.name) {
            check_script(&h.text).map(|why| format!("{} <<<: {why}", s.name))
        } else {
            code::danger(s.name, "<<<", &h.text)
        }
    })
}

/// `python3 -c`, `perl -e`, `node -e` … code that deletes a home or system
/// directory (`code::danger`).
fn interpreter_code(s: &Seen) -> Option<String> {
    let (flag, text) = code::inline(s.name, s.args)?;
    code::danger(s.name, flag, text)
}

/// `bash -c '…'`, `sh -ec '…'`, `bash -lc '…'`, `su -c '…'`, `python3 -c
/// '…'`: the script is judged like the outer one.
fn shell_c(s: &Seen) -> Option<String> {
    let script = if SHELLS.contains(&s.name) {
        // `-c` in any short-option cluster; the script is the first operand.
        if !has_flag(s.args, &['c'], "-c") {
            return None;
        }
        let mut args = s.args.iter();
        let mut found = None;
        while let Some(a) = args.next() {
            if a.text == "-o" || a.text == "+o" {
                args.next();
            } else if !(a.text.starts_with('-') || a.text.starts_with('+')) {
                found = Some(a);
                break;
            }
        }
        found?
    } else if is_interpreter(s.name) || matches!(s.name, "su" | "runuser") {
        let i = s.args.iter().position(|a| a.text == "-c")?;
        s.args.get(i + 1)?
    } else {
        return None;
    };
    check_script(&script.text).map(|why| format!("{} -c: {why}", s.name))
}

fn power(s: &Seen) -> Option<String> {
    let first = s.args.first().map(|a| a.text.as_str());
    let off = POWER.contains(&s.name)
        || (s.name == "init" && matches!(first, Some("0" | "6")))
        || (s.name == "systemctl"
            && s.args.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "reboot" | "poweroff" | "halt" | "kexec" | "suspend" | "hibernate"
                )
            }));
    off.then(|| format!("{} shuts down or reboots the machine", s.name))
}

fn erase_disk(s: &Seen) -> Option<String> {
    (s.name.starts_with("mkfs") || ERASERS.contains(&s.name))
        .then(|| format!("{} erases a disk or file system", s.name))
}

fn partition_disk(s: &Seen) -> Option<String> {
    let disk = s.args.iter().find(|a| is_disk_device(&a.text))?;
    PARTITIONERS
        .contains(&s.name)
        .then(|| format!("{} edits the partitions of {}", s.name, disk.text))
}

fn dd_device(s: &Seen) -> Option<String> {
    if s.name != "dd" {
        return None;
    }
    let of = s.args.iter().find(|a| a.text.starts_with("of="))?;
    let target = of.text.strip_prefix("of=").unwrap_or_default();
    if of.dynamic {
        Some("dd writes to a file only known when it runs".into())
    } else {
        is_disk_device(target).then(|| format!("dd writes to the disk device {target}"))
    }
}

fn write_device(s: &Seen) -> Option<String> {
    if !DEVICE_WRITERS.contains(&s.name) {
        return None;
    }
    let disk = s.args.iter().find(|a| is_disk_device(&a.text))?;
    Some(format!(
        "{} writes to the disk device {}",
        s.name, disk.text
    ))
}
