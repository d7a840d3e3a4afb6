//! The parser's tests: one per construct it must see through.

use super::*;

fn names(src: &str) -> Vec<String> {
    parse(src)
        .commands
        .iter()
        .filter_map(|c| c.words.first().map(|w| w.text.clone()))
        .collect()
}

#[test]
fn commands_are_found_through_quotes_operators_and_substitutions() {
    assert_eq!(names("exit 0; 'rm' -rf /"), ["exit", "rm"]);
    assert_eq!(names("r\\m -rf /"), ["rm"]);
    assert_eq!(names("a && b || c | d & e"), ["a", "b", "c", "d", "e"]);
    // A substitution's commands come before the command that uses them.
    assert_eq!(
        names("(cd x; make) && echo `date` $(id -u)"),
        ["cd", "make", "date", "id", "echo"]
    );
    assert_eq!(names("/sbin/shut\"\"down now"), ["/sbin/shutdown"]);
    assert_eq!(names("bash <(curl -s x)"), ["curl", "bash"]);
    let s = parse("wget -qO- x | python3");
    assert!(s.commands[1].piped && !s.commands[0].piped);
    let s = parse("echo hi > /dev/sda 2>&1");
    assert_eq!(s.commands[0].words.len(), 2);
    assert_eq!(s.commands[0].redirects[0].text, "/dev/sda");
    let s = parse("rm -rf \"$(printf /)\"");
    assert!(s.commands[0].substituted && s.commands[1].words[2].dynamic);
    assert!(parse("echo 'oops").unreadable.is_some());
    assert!(parse("echo $(ls").unreadable.is_some());
    assert!(parse("f() { ls; }; f").unreadable.is_none());
}

/// Each compound command's reserved words are grammar: what runs inside
/// is found as a command, the keywords never are.
#[test]
fn reserved_words_are_grammar_not_commands() {
    let table: &[(&str, &[&str])] = &[
        // `!` negates a pipeline.
        ("! shutdown now", &["shutdown"]),
        ("! rm -rf / | ! ls", &["rm", "ls"]),
        // if / then / elif / else / fi
        ("if true; then rm -rf ~; fi", &["true", "rm"]),
        (
            "if a; then b; elif c; then d; else e; fi",
            &["a", "b", "c", "d", "e"],
        ),
        ("if ! grep -q x f\nthen\n  reboot\nfi", &["grep", "reboot"]),
        // for / select: the header's words are not commands, but what
        // they substitute is.
        ("for d in /; do rm -rf $d; done", &["rm"]),
        ("for d in $(ls /); do echo $d; done", &["ls", "echo"]),
        ("for x\ndo halt; done", &["halt"]),
        ("for x do halt; done", &["halt"]),
        ("select x in a b; do poweroff; done", &["poweroff"]),
        // while / until
        ("while true; do reboot; done", &["true", "reboot"]),
        ("until rm -rf /; do :; done", &["rm", ":"]),
        ("while read f; do rm \"$f\"; done < list", &["read", "rm"]),
        // case: the subject and the patterns are not commands.
        ("case $x in a) ls ;; *) rm -rf / ;; esac", &["ls", "rm"]),
        ("case x in (a|b) halt;; esac; echo", &["halt", "echo"]),
        ("case x in\n a)\n  reboot\n  ;;\nesac", &["reboot"]),
        (
            "case x in a) reboot;& b) halt;;& c) ls; esac",
            &["reboot", "halt", "ls"],
        ),
        ("echo $(case x in a) reboot;; esac)", &["reboot", "echo"]),
        ("case $(rm -rf /) in *) ;; esac", &["rm"]),
        // functions, both spellings
        ("f() { rm -rf /; }; f", &["rm", "f"]),
        ("function f { halt; }; f", &["halt", "f"]),
        ("function f() { halt; }", &["halt"]),
        // subshells and groups
        ("(cd /; rm -rf *)", &["cd", "rm"]),
        ("{ rm -rf ~; }", &["rm"]),
        ("{ a; { b; }; } > log", &["a", "b"]),
        // substitutions
        ("echo $(reboot)", &["reboot", "echo"]),
        ("echo `halt`", &["halt", "echo"]),
        ("echo \"$(poweroff)\"", &["poweroff", "echo"]),
        // wrappers and eval are commands (the gate looks through them)
        ("eval 'rm -rf /'", &["eval"]),
        ("ls | xargs rm", &["ls", "xargs"]),
        ("env X=1 rm -rf /", &["env"]),
        ("command rm x; exec halt", &["command", "exec"]),
        (
            "sudo rm x; nohup halt; time reboot",
            &["sudo", "nohup", "time"],
        ),
        ("sh -c 'halt'; bash -c \"reboot\"", &["sh", "bash"]),
        // a keyword is one only where a command starts, and unquoted
        ("echo then do done; 'then' x", &["echo", "then"]),
        ("coproc reboot", &["reboot"]),
        // an operator ends a `for` header (a syntax error): what follows is judged
        ("for x in a || halt; do :; done", &["halt", ":"]),
    ];
    let mut wrong = Vec::new();
    for (src, want) in table {
        let got = names(src);
        if got != *want {
            wrong.push(format!("{src:?}: got {got:?}, want {want:?}"));
        }
        if let Some(why) = parse(src).unreadable {
            wrong.push(format!("{src:?}: unreadable ({why})"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_broken_compound_is_unreadable() {
    for src in ["case x in a) ls", "case x", "case x in a; ls;; esac"] {
        assert!(parse(src).unreadable.is_some(), "{src:?}");
    }
}

/// `$'…'` is decoded as bash does (`$'\x72m'` is `rm`); `$"…"` is `"…"`.
#[test]
fn ansi_c_quoting_is_decoded() {
    assert_eq!(names("$'\\x72m' -rf ~"), ["rm"]);
    assert_eq!(names("$'\\162\\155' x"), ["rm"]);
    assert_eq!(names("$'\\u0072m' x; $\"halt\""), ["rm", "halt"]);
    let w = &parse("echo $'a\\tb\\'c\\x' d").commands[0].words;
    assert_eq!(w[1].text, "a\tb'c\\x");
    assert!(w[1].quoted && !w[1].dynamic);
    assert!(parse("echo $'oops").unreadable.is_some());
}

/// A here-string is the command's input, not a redirect target.
#[test]
fn here_strings_are_kept_apart() {
    let s = parse("bash <<< \"$(echo x | base64 -d)\"");
    assert_eq!(
        names("bash <<< \"$(echo x | base64 -d)\""),
        ["echo", "base64", "bash"]
    );
    let bash = &s.commands[2];
    assert!(bash.redirects.is_empty());
    assert!(bash.here_strings[0].dynamic);
    let s = parse("cat <<< /dev/sda > out");
    assert_eq!(s.commands[0].here_strings[0].text, "/dev/sda");
    assert_eq!(s.commands[0].redirects[0].text, "out");
}

/// Substitutions hide in parameter operands, arithmetic and nested
/// backticks too (found by comparing with brush-parser, issue 38.6).
#[test]
fn substitutions_inside_operands_arithmetic_and_nested_backticks_are_found() {
    assert_eq!(names("echo ${x:-$(rm -rf ~)}"), ["rm", "echo"]);
    assert_eq!(names("echo \"${x:-`reboot`}\""), ["reboot", "echo"]);
    assert_eq!(names("echo ${x:-'}'} $(id)"), ["id", "echo"]);
    assert_eq!(names("echo $(( $(rm -rf ~) + 1 ))"), ["rm", "echo"]);
    assert_eq!(names("echo $(( (1 + 2) * 3 )) ok"), ["echo"]);
    assert_eq!(
        names("echo `echo \\`reboot\\``"),
        ["reboot", "echo", "echo"]
    );
    assert!(parse("echo ${x:-$(ls)}").unreadable.is_none());
}

/// `parse` on a thread with tokio's default 2 MiB stack.
fn parse_on_a_small_stack(src: String) -> Script {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || parse(&src))
        .expect("thread")
        .join()
        .expect("no stack overflow")
}

/// A script nested thousands deep is unreadable, not a stack overflow
/// (2,757 `$(` aborted the process on a 2 MiB thread).
#[test]
fn deep_nesting_is_unreadable_not_a_crash() {
    let deep = "$(".repeat(5000) + &")".repeat(5000);
    let why = parse_on_a_small_stack(format!("echo {deep}")).unreadable;
    assert!(
        why.as_deref().is_some_and(|m| m.contains("nested")),
        "{why:?}"
    );
    for deep in ["$((".repeat(5000), "${x:-".repeat(5000)] {
        assert!(parse_on_a_small_stack(format!("echo {deep}"))
            .unreadable
            .is_some());
    }
    // Each `$( )` is two levels.
    let fine = "$(".repeat(MAX_NESTING / 2 - 1) + "ls" + &")".repeat(MAX_NESTING / 2 - 1);
    let why = parse(&fine).unreadable;
    assert!(why.is_none(), "{why:?}");
}

/// A here-document's body is data fed to its command, not commands: an
/// apostrophe in it is no unterminated quote; an interpreter's body is its
/// script (the gate judges it as a here-string); an unquoted delimiter's
/// body runs its substitutions.
#[test]
fn here_document_bodies_are_input_not_commands() {
    let s = parse("git commit -m \"$(cat <<'EOF'\nfix: don't rm -rf ~ here\nEOF\n)\" && echo done");
    assert!(s.unreadable.is_none(), "{:?}", s.unreadable);
    assert_eq!(
        names("git commit -m \"$(cat <<'EOF'\nfix: don't rm -rf ~ here\nEOF\n)\" && echo done"),
        ["cat", "git", "echo"]
    );
    assert_eq!(
        s.commands[0].here_strings[0].text,
        "fix: don't rm -rf ~ here\n"
    );
    let s = parse("python3 <<'PY'\nimport shutil\nshutil.rmtree('/')\nPY\nls");
    assert_eq!(s.commands[0].words[0].text, "python3");
    assert!(s.commands[0].here_strings[0].text.contains("rmtree('/')"));
    assert_eq!(s.commands[1].words[0].text, "ls");
    // `<<-` strips leading tabs; an unquoted delimiter's body expands.
    let s = parse("cat <<-END\n\tline $(id)\n\tEND\necho after");
    assert!(s.unreadable.is_none(), "{:?}", s.unreadable);
    assert_eq!(
        names("cat <<-END\n\tline $(id)\n\tEND\necho after"),
        ["cat", "id", "echo"]
    );
    assert!(s.commands[0].here_strings[0].dynamic);
    assert!(parse("cat <<EOF\nno end").unreadable.is_some());
}
