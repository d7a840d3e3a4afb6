//! The shell gate: rules that match parsed commands (`crate::shell`), not
//! the raw string, so `'rm' -rf /`, `r\m -rf /`, `X=/; rm -rf $X` or
//! `/sbin/shut""down` are seen for what they are. What the parser cannot
//! see through (a command name that is a variable, `eval`, an interpreter
//! fed from a pipe, a malformed script) asks a person.

use serde_json::Value;

use crate::shell::{self, Command, Word};

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
/// Commands that run the rest of their arguments as a command.
const WRAPPERS: &[&str] = &[
    "command", "env", "sudo", "doas", "xargs", "nice", "nohup", "time", "exec", "timeout",
    "stdbuf", "busybox", "setsid", "chroot", "ionice", "builtin",
];
const INTERPRETERS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "csh",
    "tcsh",
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
    let parsed = shell::parse(script);
    if let Some(why) = parsed.unreadable {
        return Some(format!("the script cannot be read safely ({why})"));
    }
    parsed.commands.iter().find_map(check_command)
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
fn effective(words: &[Word]) -> (&[Word], bool) {
    let mut rest = words;
    let mut via_xargs = false;
    loop {
        while rest.first().is_some_and(is_assignment) {
            rest = &rest[1..];
        }
        let Some(first) = rest.first() else {
            return (rest, via_xargs);
        };
        if first.dynamic {
            return (rest, via_xargs);
        }
        let name = base(&first.text);
        if !WRAPPERS.contains(&name) {
            return (rest, via_xargs);
        }
        via_xargs |= name == "xargs";
        rest = &rest[1..];
        // The wrapper's own options (and `timeout`'s duration).
        while let Some(w) = rest.first() {
            let opt = w.text.starts_with('-') && !w.dynamic;
            let takes_value = matches!(w.text.as_str(), "-u" | "-g" | "-n" | "-I" | "-P" | "-s");
            if opt {
                rest = &rest[if takes_value { 2 } else { 1 }.min(rest.len())..];
            } else if name == "timeout" && w.text.chars().next().is_some_and(|c| c.is_ascii_digit())
            {
                rest = &rest[1..];
            } else {
                break;
            }
        }
    }
}

fn check_command(cmd: &Command) -> Option<String> {
    for r in &cmd.redirects {
        if is_disk_device(&r.text) {
            return Some(format!("writes to the disk device {}", r.text));
        }
    }
    let (words, via_xargs) = effective(&cmd.words);
    let first = words.first()?;
    if first.dynamic {
        return Some(
            "the command name is a variable or a substitution; its value is only known when it runs"
                .into(),
        );
    }
    let name = base(&first.text);
    let args = &words[1..];
    let dynamic_arg = args.iter().any(|w| w.dynamic);
    match name {
        "eval" => return Some("eval runs text as a command".into()),
        "source" | "." if dynamic_arg || args.iter().any(|a| a.text.starts_with("/dev/")) => {
            return Some(format!("{name} of a generated file"))
        }
        _ => {}
    }
    if INTERPRETERS.contains(&name) || name.starts_with("python3.") {
        if cmd.piped || via_xargs {
            return Some(format!("{name} reads a script from a pipe"));
        }
        if dynamic_arg {
            return Some(format!("{name} runs a script made by a substitution"));
        }
        if let Some(i) = args.iter().position(|a| a.text == "-c") {
            if let Some(script) = args.get(i + 1) {
                if let Some(why) = check_script(&script.text) {
                    return Some(format!("{name} -c: {why}"));
                }
            }
        }
    }
    if POWER.contains(&name) {
        return Some(format!("{name} shuts down or reboots the machine"));
    }
    if name == "init" && args.first().is_some_and(|a| a.text == "0" || a.text == "6") {
        return Some("init 0/6 shuts down or reboots the machine".into());
    }
    if name == "systemctl"
        && args.iter().any(|a| {
            matches!(
                a.text.as_str(),
                "reboot" | "poweroff" | "halt" | "kexec" | "suspend" | "hibernate"
            )
        })
    {
        return Some("systemctl shuts down or reboots the machine".into());
    }
    if name.starts_with("mkfs") || name == "wipefs" {
        return Some(format!("{name} erases a disk or file system"));
    }
    if name == "dd"
        && args
            .iter()
            .any(|a| a.text.strip_prefix("of=").is_some_and(is_disk_device))
    {
        return Some("dd writes to a disk device".into());
    }
    if name == "rm" {
        return check_rm(args, via_xargs);
    }
    if name == "find" {
        return check_find(args);
    }
    if name == "chmod" || name == "chown" {
        let recursive = args
            .iter()
            .any(|a| a.text == "-R" || a.text == "--recursive");
        if recursive && args.iter().any(is_root_like) {
            return Some(format!("recursive {name} of the root or home directory"));
        }
    }
    None
}

fn is_disk_device(path: &str) -> bool {
    const DISKS: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "rdisk", "mapper/", "md", "dm-", "loop",
        "sr", "mem", "kmem",
    ];
    path.strip_prefix("/dev/")
        .is_some_and(|d| DISKS.iter().any(|p| d.starts_with(p)))
}

/// `/`, `/*`, `~`, `~/`, `$HOME`, or a value only known at run time.
fn is_root_like(w: &Word) -> bool {
    if w.dynamic {
        return true;
    }
    let t = w.text.trim_end_matches('*').trim_end_matches('/');
    t.is_empty() && !w.text.is_empty() || t == "~" || w.text == "/." || w.text == "/.."
}

fn check_rm(args: &[Word], via_xargs: bool) -> Option<String> {
    let mut recursive = false;
    let mut targets = Vec::new();
    let mut options_done = false;
    for a in args {
        if !options_done && a.text == "--" {
            options_done = true;
        } else if !options_done && a.text.starts_with("--") {
            if a.text == "--recursive" {
                recursive = true;
            }
            if a.text == "--no-preserve-root" {
                return Some("rm with --no-preserve-root".into());
            }
        } else if !options_done && a.text.starts_with('-') && a.text.len() > 1 && !a.dynamic {
            recursive |= a.text.contains(['r', 'R']);
        } else {
            targets.push(a);
        }
    }
    if !recursive {
        return None;
    }
    if via_xargs {
        return Some("recursive rm of paths read from a pipe (xargs)".into());
    }
    targets.into_iter().find(|t| is_root_like(t)).map(|t| {
        if t.dynamic {
            "recursive rm of a path only known when it runs (a variable or substitution)".into()
        } else {
            format!("recursive delete of {}", t.text)
        }
    })
}

fn check_find(args: &[Word]) -> Option<String> {
    let deletes = args.iter().any(|a| a.text == "-delete");
    // `-exec CMD … ;` runs a command of its own: check it as one.
    if let Some(i) = args
        .iter()
        .position(|a| matches!(a.text.as_str(), "-exec" | "-execdir" | "-ok"))
    {
        let end = args[i + 1..]
            .iter()
            .position(|a| a.text == ";" || a.text == "+")
            .map(|e| i + 1 + e)
            .unwrap_or(args.len());
        let inner = Command {
            words: args[i + 1..end].to_vec(),
            ..Command::default()
        };
        let name = inner.words.first().map(|w| base(&w.text).to_string());
        if name.as_deref() == Some("rm") && args.iter().take(i).any(is_root_like) {
            return Some("find -exec rm over the root or home directory".into());
        }
        if let Some(why) = check_command(&inner) {
            return Some(format!("find -exec: {why}"));
        }
    }
    let start_root = args
        .iter()
        .take_while(|a| !a.text.starts_with('-'))
        .any(is_root_like);
    (deletes && start_root).then(|| "find -delete over the root or home directory".into())
}
