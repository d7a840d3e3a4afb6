use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::builtin::command::CommandRunner;

fn cfg(mode: SandboxMode, network: bool) -> BuiltinConfig {
    BuiltinConfig {
        enabled: true,
        workspace: PathBuf::from("/ws"),
        command_timeout: Duration::from_secs(10),
        max_output_bytes: 64 * 1024,
        max_read_bytes: 1024,
        sandbox: mode,
        sandbox_network: network,
        sandbox_deny_read: Vec::new(),
        sandbox_allow_read: Vec::new(),
        command_env: Vec::new(),
        config_file: PathBuf::from("/cfg/config.json"),
    }
}

#[test]
fn decide_confines_refuses_or_runs_unconfined() {
    use SandboxMode::*;
    let confined = |abi| Confinement::Confined { abi };
    // (mode, network allowed, kernel ABI) → confined?
    let table: &[(SandboxMode, bool, i32, Option<Confinement>)] = &[
        (WorkspaceWrite, true, 7, Some(confined(7))),
        (WorkspaceWrite, false, 7, Some(confined(7))),
        (ReadOnly, true, 3, Some(confined(3))),
        (ReadOnly, false, 4, Some(confined(4))),
        (WorkspaceWrite, true, 3, Some(confined(3))),
        (Off, true, 0, Some(Confinement::Unconfined)),
        (Off, false, 7, Some(Confinement::Unconfined)),
        // Refused: no Landlock, too old for truncate, too old for TCP.
        (WorkspaceWrite, true, 0, None),
        (ReadOnly, true, -1, None),
        (WorkspaceWrite, true, 2, None),
        (WorkspaceWrite, false, 3, None),
    ];
    for (mode, network, abi, want) in table {
        let got = decide(*mode, *network, *abi);
        match want {
            Some(v) => assert_eq!(&got, v, "{mode:?} {network} {abi}"),
            None => {
                let Confinement::Refused { why, fix } = &got else {
                    panic!("{mode:?} {network} {abi}: expected a refusal, got {got:?}");
                };
                assert!(fix.contains("builtin.sandbox"), "{fix}");
                assert!(!why.is_empty());
            }
        }
    }
    let Confinement::Refused { why, fix } = decide(WorkspaceWrite, false, 3) else {
        panic!("refused");
    };
    assert!(
        why.contains("sandboxNetwork") && why.contains("ABI 3"),
        "{why}"
    );
    assert!(fix.contains("sandboxNetwork to true"), "{fix}");
    let Confinement::Refused { why, .. } = decide(WorkspaceWrite, true, 0) else {
        panic!("refused");
    };
    assert!(why.contains("Landlock is not available"), "{why}");
}

#[test]
fn health_check_and_refusal_say_what_the_hub_does() {
    let missing = Sandbox::with_verdict(
        &cfg(SandboxMode::WorkspaceWrite, true),
        Path::new("/ws"),
        PathBuf::from("/state/tmp"),
        decide(SandboxMode::WorkspaceWrite, true, 0),
    );
    let c = missing.check();
    assert!(!c.ok);
    assert!(
        c.message.contains("run_command is refused"),
        "{}",
        c.message
    );
    let e = missing.refusal().expect("refused");
    assert_eq!(e.error_type, ErrorType::Permission);
    assert!(
        e.message.contains("Landlock is not available"),
        "{}",
        e.message
    );
    assert!(e.suggestion.contains("\"off\""), "{}", e.suggestion);

    let off = Sandbox::with_verdict(
        &cfg(SandboxMode::Off, true),
        Path::new("/ws"),
        PathBuf::from("/state/tmp"),
        Confinement::Unconfined,
    );
    let c = off.check();
    assert!(!c.ok && c.message.contains("UNCONFINED"), "{}", c.message);
    assert!(off.refusal().is_none());

    let on = Sandbox::with_verdict(
        &cfg(SandboxMode::WorkspaceWrite, false),
        Path::new("/ws"),
        PathBuf::from("/state/tmp"),
        Confinement::Confined { abi: 7 },
    );
    let c = on.check();
    assert!(c.ok && c.fix.is_none());
    assert!(
        c.message.contains("ABI 7") && c.message.contains("/ws"),
        "{}",
        c.message
    );
    assert!(
        c.message.contains("TCP connect and bind denied"),
        "{}",
        c.message
    );
}

#[test]
fn a_permission_failure_without_a_path_still_points_at_the_sandbox() {
    let on = Sandbox::with_verdict(
        &cfg(SandboxMode::WorkspaceWrite, true),
        Path::new("/ws"),
        PathBuf::from("/t"),
        Confinement::Confined { abi: 7 },
    );
    let e = on.hint(HubError::classified("command exited with status 1: EACCES"));
    assert_eq!(e.error_type, ErrorType::Permission);
    assert!(
        e.suggestion.contains("builtin.sandbox \"workspace-write\""),
        "{}",
        e.suggestion
    );
    let other = on.hint(HubError::classified(
        "command exited with status 1: no such file",
    ));
    assert!(
        !other.suggestion.contains("sandbox"),
        "{}",
        other.suggestion
    );
}

#[test]
fn writable_folders_follow_the_mode() {
    let run = Some(PathBuf::from("/runs/r1"));
    let ww = Sandbox::with_verdict(
        &cfg(SandboxMode::WorkspaceWrite, true),
        Path::new("/ws"),
        PathBuf::from("/t"),
        Confinement::Confined { abi: 7 },
    );
    assert_eq!(
        ww.writable(run.clone()),
        [PathBuf::from("/t"), "/ws".into(), "/runs/r1".into()]
    );
    let ro = Sandbox::with_verdict(
        &cfg(SandboxMode::ReadOnly, true),
        Path::new("/ws"),
        PathBuf::from("/t"),
        Confinement::Confined { abi: 7 },
    );
    assert_eq!(ro.writable(run), [PathBuf::from("/t")]);
}

#[test]
fn refused_paths_are_read_from_what_shells_and_tools_print() {
    let table = [
        ("sh: 1: cannot create /tmp/x: Permission denied", "/tmp/x"),
        (
            "sh: 1: cannot create ../out side.txt: Permission denied",
            "../out side.txt",
        ),
        (
            "bash: line 1: /root/.bashrc: Permission denied",
            "/root/.bashrc",
        ),
        ("bash: /etc/x: Read-only file system", "/etc/x"),
        ("touch: cannot touch '/tmp/a': Permission denied", "/tmp/a"),
        (
            "mkdir: cannot create directory ‘/tmp/d’: Permission denied",
            "/tmp/d",
        ),
        (
            "cp: cannot create regular file '/tmp/c': Permission denied",
            "/tmp/c",
        ),
        (
            "mv: cannot move 'a.txt' to '/tmp/b.txt': Permission denied",
            "/tmp/b.txt",
        ),
        ("tee: /home/u/log: Permission denied", "/home/u/log"),
        (
            "rm: cannot remove '/tmp/keep': Permission denied",
            "/tmp/keep",
        ),
        (
            "PermissionError: [Errno 13] Permission denied: '/tmp/p.txt'",
            "/tmp/p.txt",
        ),
        (
            "Error: EACCES: permission denied, open '/tmp/n.json'",
            "/tmp/n.json",
        ),
        (
            "ln: failed to create symbolic link '/tmp/l': Permission denied",
            "/tmp/l",
        ),
    ];
    for (line, want) in table {
        assert_eq!(denied::path_of(line).as_deref(), Some(want), "{line}");
    }
    for line in ["all good", "sh: 1: Permission denied"] {
        assert_eq!(denied::path_of(line), None, "{line}");
    }
    let many = "touch: cannot touch '/a/1': Permission denied\nnoise\ntouch: cannot touch '/a/1': Permission denied\nsh: 1: cannot create /a/2: Permission denied\n";
    assert_eq!(denied::paths(many), ["/a/1", "/a/2"]);
}

#[test]
fn refused_tcp_is_recognised_in_node_bash_and_curl_wording() {
    for yes in [
        "Error: connect EACCES 127.0.0.1:8765",
        "bash: connect: Permission denied",
        "curl: (7) Failed to connect to 127.0.0.1 port 80: Permission denied",
        "Error: listen EACCES: permission denied 0.0.0.0:3000",
    ] {
        assert!(denied::tcp_refused(yes), "{yes}");
    }
    for no in [
        "connect ECONNREFUSED 127.0.0.1:1",
        "cat: x: Permission denied",
    ] {
        assert!(!denied::tcp_refused(no), "{no}");
    }
}

#[test]
fn a_path_is_the_sandbox_s_only_when_outside_every_writable_folder() {
    let ws = PathBuf::from("/w/ws");
    let writable = [PathBuf::from("/w/tmp"), ws.clone()];
    let devices = ["/dev/null"];
    let abs = |p| denied::absolute(p, &ws);
    assert!(denied::outside(&abs("../outside.txt"), &writable, &devices));
    assert!(denied::outside(&abs("/tmp/x"), &writable, &devices));
    assert!(denied::outside(
        &abs("sub/../../../etc/x"),
        &writable,
        &devices
    ));
    assert!(!denied::outside(&abs("notes/a.txt"), &writable, &devices));
    assert!(!denied::outside(&abs("/w/tmp/f"), &writable, &devices));
    assert!(!denied::outside(&abs("/dev/null"), &writable, &devices));
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(abs("~/.bashrc"), Path::new(&home).join(".bashrc"));
}

/// A real confined child on this kernel (skipped where Landlock is absent:
/// the integration tests cover the refusal).
#[tokio::test]
async fn a_confined_command_writes_inside_and_is_refused_outside_with_the_path_named() {
    let abi = real_abi();
    if abi < MIN_ABI {
        eprintln!("skipped: Landlock ABI {abi} on this kernel");
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let (ws, sandbox, runner) = confined(dir.path());
    let ok = ran(&runner, "echo in > inside.txt && echo t > \"$TMPDIR/t\" && cat /etc/hostname >/dev/null && echo done").await;
    assert_eq!(ok["exitCode"], 0, "{ok}");
    assert!(ws.join("inside.txt").exists());
    assert!(sandbox.tmp().join("t").exists());

    let outside = dir.path().join("outside.txt");
    let v = ran(&runner, &format!("echo x > {}", outside.display())).await;
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["error"]["code"], "PERMISSION");
    let msg = v["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains(&outside.display().to_string()), "{msg}");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("Permission denied"),
        "{v}"
    );
    assert!(!outside.exists());
}

#[test]
fn a_refused_read_says_read_and_never_suggests_turning_the_sandbox_off() {
    use denied::FsAccess;
    for (line, want) in [
        (
            "ls: cannot read symbolic link '/proc/9/cwd': Permission denied",
            FsAccess::Read,
        ),
        (
            "ls: cannot access '/proc/9/fd': Permission denied",
            FsAccess::Read,
        ),
        (
            "head: cannot open '/x/y' for reading: Permission denied",
            FsAccess::Read,
        ),
        ("sh: 1: cannot open /x/y: Permission denied", FsAccess::Read),
        (
            "sh: 1: cannot create /x/y: Permission denied",
            FsAccess::Write,
        ),
        (
            "truncate: cannot open '/x/y' for writing: Permission denied",
            FsAccess::Write,
        ),
        (
            "rm: cannot remove '/x/y': Permission denied",
            FsAccess::Write,
        ),
        (
            "ln: failed to create symbolic link '/x/l': Permission denied",
            FsAccess::Write,
        ),
        ("cat: /x/y: Permission denied", FsAccess::Unknown),
    ] {
        assert_eq!(denied::access_of(line), want, "{line}");
    }
    let sandbox = Sandbox::with_verdict(
        &cfg(SandboxMode::WorkspaceWrite, true),
        Path::new("/ws"),
        PathBuf::from("/t"),
        Confinement::Confined { abi: 7 },
    );
    let writable = sandbox.writable(None);
    for stderr in [
        "ls: cannot read symbolic link '/proc/1/cwd': Permission denied\n",
        "cat: /proc/1/environ: Permission denied\n",
    ] {
        let result = json!({"exitCode": 2, "stdout": "", "stderr": stderr});
        let v = sandbox
            .explain(&result, Path::new("/ws"), &writable)
            .unwrap_or_else(|| panic!("not explained: {stderr}"));
        let msg = v["error"]["message"].as_str().unwrap_or("");
        let suggestion = v["error"]["suggestion"].as_str().unwrap_or("");
        assert!(
            msg.starts_with("the sandbox refused to read /proc/1/"),
            "{msg}"
        );
        assert!(
            !msg.contains("write") && !suggestion.contains("\"off\""),
            "{v}"
        );
        assert_eq!(
            v["sandbox"]["refusedReads"][0]
                .as_str()
                .map(|p| p.starts_with("/proc/1/")),
            Some(true),
            "{v}"
        );
    }
}

#[tokio::test]
#[ignore = "a measurement: cargo test --lib measure_pidns -- --ignored --nocapture"]
async fn measure_pidns() {
    let dir = tempfile::tempdir().expect("dir");
    let (_, sandbox, runner) = confined(dir.path());
    let n = 200;
    let t = std::time::Instant::now();
    for _ in 0..n {
        let v = ran(&runner, "true").await;
        assert_eq!(v["exitCode"], 0);
    }
    eprintln!(
        "{:?}: {:.2} ms per `true`",
        sandbox.procs,
        t.elapsed().as_secs_f64() * 1000.0 / n as f64
    );
}

/// A confined command is PID 2 of a namespace of its own: its /proc shows
/// its own processes only, PID 1 (the init, a copy of the hub) shows no
/// byte of the hub's arguments or environment, and exit codes and signals
/// come through as the shell's.
#[tokio::test]
async fn a_confined_command_sees_only_its_own_processes() {
    let abi = real_abi();
    if abi < MIN_ABI {
        eprintln!("skipped: Landlock ABI {abi} on this kernel");
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let (_, sandbox, runner) = confined(dir.path());
    if !matches!(sandbox.procs, pidns::ProcView::Own { .. }) {
        eprintln!("skipped: no PID namespace here: {:?}", sandbox.procs);
        return;
    }
    let v = ran(&runner, "echo $$ $PPID; n=$(ls /proc | grep -c '^[0-9]'); test $n -le 5 && echo few; head -1 /proc/self/status; tr -d '\\0' < /proc/1/environ | wc -c; tr -d '\\0' < /proc/1/cmdline | wc -c").await;
    assert_eq!(v["stdout"], "2 1\nfew\nName:\thead\n0\n0\n", "{v}");
    assert_eq!(ran(&runner, "exit 3").await["exitCode"], 3);
    let v = ran(&runner, "kill -TERM $$").await;
    assert_eq!(
        (v["exitCode"].clone(), v["signal"].clone()),
        (json!(null), json!(15)),
        "{v}"
    );
    let v = ran(&runner, "ls -l /proc/$PPID/cwd").await;
    let msg = v["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with("the sandbox refused to read /proc/1/cwd"),
        "{v}"
    );
}

/// A workspace under `dir`, a sandbox as the hub makes it (the kernel
/// asked), and a runner confined by it.
fn confined(dir: &Path) -> (PathBuf, Arc<Sandbox>, CommandRunner) {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let ws = std::fs::canonicalize(&ws).expect("canonical");
    let c = cfg(SandboxMode::WorkspaceWrite, true);
    let sandbox = Arc::new(Sandbox::new(&c, &ws, &dir.join("state")).expect("sandbox"));
    let runner = CommandRunner::new(ws.clone(), Duration::from_secs(20), 64 * 1024)
        .with_sandbox(sandbox.clone(), None);
    (ws, sandbox, runner)
}

/// `cmd` run to its end (at most 20 s).
async fn ran(runner: &CommandRunner, cmd: &str) -> Value {
    let params = json!({ "command": cmd });
    tokio::time::timeout(
        Duration::from_secs(20),
        runner.run(&params, CancellationToken::new()),
    )
    .await
    .expect("finished")
    .expect("ran")
}
