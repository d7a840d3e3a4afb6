use std::path::Path;

use serde_json::json;

use super::*;

fn runner(root: &Path, timeout_ms: u64, cap: usize) -> CommandRunner {
    CommandRunner::new(root.to_path_buf(), Duration::from_millis(timeout_ms), cap)
}

/// Every await in these tests is bounded, so a hang fails instead of blocking CI.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("did not finish within 20 s")
}

async fn run(r: &CommandRunner, params: Value) -> Result<Value, HubError> {
    bounded(r.run(&params, CancellationToken::new())).await
}

/// Waits (up to 5 s, on a pidfd, no polling) for `pid` to have exited.
/// Exited means exited: a zombie counts as dead, because in some sandboxes
/// PID 1 never reaps orphans, so `kill(pid, 0)` keeps succeeding on them.
fn exits_within_5s(pid: libc::pid_t) -> bool {
    // SAFETY: plain syscalls on integers; the fd is closed below.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as libc::c_int;
        if fd < 0 {
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // Retried on EINTR: tokio's SIGCHLD handler interrupts poll.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let n = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let n = libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int);
            if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break n;
            }
        };
        libc::close(fd);
        n == 1
    }
}

/// The first line of `text` that is a pid.
fn first_pid(text: &str) -> libc::pid_t {
    text.lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {text:?}"))
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("cstring");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Reads the pid line the command writes into `fifo`. Opened read-write so
/// the open does not wait for a writer and no early EOF is seen; async, so a
/// command that never writes fails the bounded wait instead of pinning a thread.
async fn pid_from_fifo(fifo: PathBuf) -> libc::pid_t {
    use tokio::io::AsyncReadExt;
    let mut rx = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(&fifo)
        .expect("open fifo");
    let mut text = Vec::new();
    bounded(async {
        while !text.ends_with(b"\n") {
            let mut buf = [0u8; 64];
            let n = rx.read(&mut buf).await.expect("read fifo");
            assert!(n > 0, "fifo closed before a pid was written");
            text.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    first_pid(&String::from_utf8_lossy(&text))
}

#[tokio::test]
async fn reports_output_and_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(dir.path(), 10_000, 1 << 20);
    let v = run(&r, json!({"command": "echo out; echo err >&2; exit 3"}))
        .await
        .expect("ran");
    assert_eq!(v["exitCode"], 3);
    assert_eq!(v["stdout"], "out\n");
    assert_eq!(v["stderr"], "err\n");
    assert_eq!(v["truncated"], false);
    assert!(v["durationMs"].is_u64());
    assert!(exit_failed(&v));
    let e = exit_error(&v).expect("failure");
    assert_eq!(e.message, "command exited with status 3: err");

    let ok = run(&r, json!({"command": "true"})).await.expect("ran");
    assert_eq!(ok["exitCode"], 0);
    assert!(!exit_failed(&ok) && exit_error(&ok).is_none());
}

#[tokio::test]
async fn runs_in_the_workspace_with_env_and_cwd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canon");
    std::fs::create_dir(root.join("sub")).expect("mkdir");
    let r = runner(&root, 10_000, 1 << 20);
    let v = run(
        &r,
        json!({"command": "pwd; echo \"$GREETING\"", "env": {"GREETING": "hi there"}}),
    );
    assert_eq!(
        v.await.expect("ran")["stdout"],
        format!("{}\nhi there\n", root.display())
    );
    let v = run(&r, json!({"command": "pwd", "cwd": "sub"}))
        .await
        .expect("ran");
    assert_eq!(v["stdout"], format!("{}\n", root.join("sub").display()));
    let v = run(&r, json!({"command": "cat"}))
        .await
        .expect("stdin is empty");
    assert_eq!(v["stdout"], "");
}

#[tokio::test]
async fn bad_params_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(dir.path(), 10_000, 1024);
    for (params, field) in [
        (json!({}), "'command'"),
        (json!({"command": 5}), "'command'"),
        (json!({"command": " "}), "'command'"),
        (json!({"command": "ls", "timeout": -1}), "'timeout'"),
        (json!({"command": "ls", "timeout": "5"}), "'timeout'"),
        (json!({"command": "ls", "env": {"A": 1}}), "'env.A'"),
        (json!({"command": "ls", "env": ["A"]}), "'env'"),
    ] {
        let e = run(&r, params.clone()).await.expect_err("refused");
        assert_eq!(e.error_type, ErrorType::InvalidParams, "{params}");
        assert!(e.message.contains(field), "{params}: {}", e.message);
    }
    let e = run(&r, json!({"command": "ls", "cwd": "../"}))
        .await
        .expect_err("outside");
    assert_eq!(e.error_type, ErrorType::Permission);
    let e = run(&r, json!({"command": "ls", "cwd": "missing"}))
        .await
        .expect_err("missing");
    assert_eq!(e.error_type, ErrorType::NotFound);
}

#[tokio::test]
async fn killed_by_signal_has_null_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(dir.path(), 10_000, 1024);
    let v = run(&r, json!({"command": "kill -9 $$"}))
        .await
        .expect("ran");
    assert_eq!(v["exitCode"], Value::Null);
    assert_eq!(v["signal"], 9);
    assert!(exit_failed(&v));
    let e = exit_error(&v).expect("failure");
    assert!(
        e.message.starts_with("command was killed by signal 9"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn huge_output_is_capped_without_hanging() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(dir.path(), 15_000, 1 << 20);
    // 10 MB on each stream: a reader that waited on one pipe would deadlock.
    let cmd = "head -c 10485760 /dev/zero; head -c 10485760 /dev/zero >&2; echo done >&2";
    let v = run(&r, json!({"command": cmd})).await.expect("ran");
    assert_eq!(v["exitCode"], 0);
    assert_eq!(v["truncated"], true);
    assert_eq!(v["stdout"].as_str().map(str::len), Some(1 << 20));
    assert_eq!(v["stderr"].as_str().map(str::len), Some(1 << 20));
}

#[tokio::test]
async fn timeout_kills_the_shell_and_its_grandchild() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(dir.path(), 1_000, 1024);
    let e = run(&r, json!({"command": "sleep 100 & echo $!; sleep 100"}))
        .await
        .expect_err("timeout");
    assert_eq!(e.error_type, ErrorType::Timeout);
    assert!(
        e.message.starts_with("command timed out after 1000 ms"),
        "{}",
        e.message
    );
    let pid = first_pid(
        e.message
            .split("--- end of stdout ---")
            .nth(1)
            .expect("tail"),
    );
    assert!(exits_within_5s(pid), "grandchild {pid} survived");
}

#[tokio::test]
async fn sigterm_ignoring_processes_get_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(dir.path(), 1_000, 1024);
    let started = Instant::now();
    let cmd = "trap '' TERM; sleep 100 & echo $!; sleep 100";
    let e = run(&r, json!({"command": cmd})).await.expect_err("timeout");
    assert_eq!(e.error_type, ErrorType::Timeout);
    assert!(
        started.elapsed() >= child::KILL_GRACE,
        "SIGKILL came before the grace"
    );
    let pid = first_pid(
        e.message
            .split("--- end of stdout ---")
            .nth(1)
            .expect("tail"),
    );
    assert!(exits_within_5s(pid), "grandchild {pid} survived");
}

#[tokio::test]
async fn timeout_parameter_is_capped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(dir.path(), 50, 1024);
    assert_eq!(r.max_timeout(), Duration::from_millis(500));
    let e = run(&r, json!({"command": "sleep 100", "timeout": 3_600_000}))
        .await
        .expect_err("t");
    assert!(
        e.message.starts_with("command timed out after 500 ms"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn cancel_kills_the_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pid.fifo");
    mkfifo(&fifo);
    let r = runner(dir.path(), 60_000, 1024);
    let token = CancellationToken::new();
    let params =
        json!({"command": format!("sleep 100 & echo $! > '{}'; sleep 100", fifo.display())});
    let call = tokio::spawn({
        let token = token.clone();
        async move { r.run(&params, token).await }
    });
    let pid = pid_from_fifo(fifo).await;
    token.cancel();
    let e = bounded(call).await.expect("join").expect_err("cancelled");
    assert_eq!(e.error_type, ErrorType::Cancelled);
    assert!(exits_within_5s(pid), "grandchild {pid} survived");
}

#[tokio::test]
async fn background_jobs_do_not_outlive_an_exited_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(dir.path(), 60_000, 1024);
    // The background sleep keeps stdout open; the call must still return.
    let v = run(&r, json!({"command": "sleep 100 & echo $!"}))
        .await
        .expect("ran");
    assert_eq!(v["exitCode"], 0);
    let pid = first_pid(v["stdout"].as_str().expect("stdout"));
    assert!(exits_within_5s(pid), "background job {pid} survived");
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pid.fifo");
    mkfifo(&fifo);
    let r = runner(dir.path(), 60_000, 1024);
    let params =
        json!({"command": format!("sleep 100 & echo $! > '{}'; sleep 100", fifo.display())});
    let call = tokio::spawn(async move { r.run(&params, CancellationToken::new()).await });
    let pid = pid_from_fifo(fifo).await;
    call.abort();
    assert!(
        bounded(call).await.is_err(),
        "the call should have been aborted"
    );
    assert!(exits_within_5s(pid), "grandchild {pid} survived");
}

#[test]
fn exit_error_quotes_the_end_of_long_output() {
    let long = format!("{}TAIL", "é".repeat(5000));
    let v = json!({"exitCode": 1, "stdout": "", "stderr": long});
    let e = exit_error(&v).expect("failure");
    assert!(e.message.ends_with("TAIL"));
    assert_eq!(
        e.message.chars().count(),
        "command exited with status 1: ".len() + 1000
    );
    let v = json!({"exitCode": 2, "stdout": "", "stderr": ""});
    assert_eq!(
        exit_error(&v).expect("f").message,
        "command exited with status 2 (no output)"
    );
}
