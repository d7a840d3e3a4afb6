//! Processes: argv never a shell, no child outlives the hub (SIGTERM or
//! SIGKILL), and one hub per state dir and per port.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::servers::wait_running;
use crate::support::{alive, bin, testserver, testserver_entry, Client, TestHub, WAIT};

/// Wait until `server`'s state satisfies `pred` (health first, then events).
async fn wait_state(c: &mut Client, server: &str, pred: fn(&str) -> bool) -> Value {
    let h = c.request(json!({"type": "health_check"})).await;
    if let Some(s) = h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == server && pred(s["state"].as_str().unwrap_or("")))
    {
        return s.clone();
    }
    let name = server.to_string();
    c.recv_where("server_status", move |v| {
        v["type"] == "server_status"
            && v["name"] == name.as_str()
            && pred(v["state"].as_str().unwrap_or(""))
    })
    .await
}

#[tokio::test]
async fn server_args_are_argv_never_a_shell() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let pwned = |n: u32| p.join(format!("pwned{n}"));
    let args = [
        format!("; touch {}", pwned(1).display()),
        format!("$(touch {})", pwned(2).display()),
        format!("`touch {}`", pwned(3).display()),
        format!("&& touch {} #", pwned(4).display()),
        format!("| touch {}", pwned(5).display()),
    ];
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"evil": {"command": testserver(), "args": args}}}),
    )
    .await;
    let mut c = hub.connect().await;
    // The test server refuses the first argument it does not know, so the
    // hub sees it exit and reports it down.
    let st = wait_state(&mut c, "evil", |s| {
        matches!(s, "restarting" | "crash_loop" | "stopped")
    })
    .await;
    assert_ne!(st["state"], "running", "{st}");
    // The whole string arrived as one argument, metacharacters and all.
    hub.wait_log(&format!("unknown argument `{}`", args[0]))
        .await;
    for n in 1..=5 {
        assert!(!pwned(n).exists(), "a shell ran argument {n}");
    }
}

/// The pid of `server`'s process from `health_check`.
pub(crate) async fn server_pid(c: &mut Client, server: &str) -> i32 {
    let h = c.request(json!({"type": "health_check"})).await;
    h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == server)
        .and_then(|s| s["pid"].as_i64())
        .unwrap_or_else(|| panic!("no pid for {server}: {h}")) as i32
}

#[tokio::test]
async fn sigterm_kills_a_term_ignoring_server_and_its_grandchild() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut entry = testserver_entry(&p, "t", &[]);
    entry["env"] = json!({"TESTSERVER_IGNORE_TERM": "1"});
    let hub = TestHub::start_in(dir, json!({"mcpServers": {"t": entry}})).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let r = c.call("t__spawn_grandchild", json!({})).await;
    assert_eq!(r["success"], true, "{r}");
    // The grandchild inherits SIG_IGN for SIGTERM too: only SIGKILL of the
    // whole process group ends it.
    let grandchild = r["result"]["pid"].as_i64().expect("pid") as i32;
    let server = server_pid(&mut c, "t").await;
    assert!(alive(server) && alive(grandchild));
    let status = hub.terminate().await;
    assert!(status.success(), "{status:?}");
    assert!(!alive(server), "server {server} survived the hub");
    assert!(
        !alive(grandchild),
        "grandchild {grandchild} survived the hub"
    );
}

/// Wait, event-driven, until `pid` has exited: a pidfd becomes readable
/// when the process exits (a zombie counts as exited).
pub(crate) async fn wait_exit(pid: i32, limit: Duration) -> bool {
    // SAFETY: a plain syscall; the fd it returns is owned below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::ESRCH),
            "pidfd_open({pid}): {err}"
        );
        return true; // already gone and reaped
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the AsyncFd owns `fd`, which stays open and the same for its
    // whole life.
    let afd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    }
    .map_err(|e| e.to_string())
    .expect("AsyncFd");
    tokio::time::timeout(limit, afd.readable()).await.is_ok()
}

#[tokio::test]
async fn sigkilled_hub_takes_its_servers_with_it() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let server = server_pid(&mut c, "t").await;
    assert!(alive(server));
    hub.child.start_kill().expect("SIGKILL the hub");
    tokio::time::timeout(WAIT, hub.child.wait())
        .await
        .expect("hub did not die")
        .expect("wait");
    assert!(
        wait_exit(server, WAIT).await,
        "server {server} outlived a SIGKILLed hub (PR_SET_PDEATHSIG)"
    );
    assert!(!alive(server));
}

/// Every file under `dir`, with its bytes and mtime.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let path = e.path();
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                out.push((
                    path.display().to_string(),
                    bytes,
                    meta.modified().expect("mtime"),
                ));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn second_hub_on_the_same_state_dir_exits_at_once() {
    let hub = TestHub::start(json!({})).await;
    let state = hub.path().join("state");
    let lock = state.join("toolhub.lock");
    assert_eq!(
        std::fs::read_to_string(&lock).expect("lock file").trim(),
        hub.pid().to_string()
    );
    let before = snapshot(&state);
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(bin())
            .arg("--config")
            .arg(hub.path().join("config.json"))
            .output(),
    )
    .await
    .expect("the second hub did not exit")
    .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("another toolhub is running"), "{err}");
    assert!(err.contains(&state.display().to_string()), "{err}");
    assert!(err.contains(&format!("pid {}", hub.pid())), "{err}");
    assert!(err.contains(&lock.display().to_string()), "{err}");
    assert!(!err.contains("listening"), "{err}");
    assert_eq!(
        snapshot(&state),
        before,
        "the second hub touched the state dir"
    );
    let mut c = hub.connect().await;
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
}

#[tokio::test]
async fn second_hub_on_a_busy_port_exits_at_once() {
    let hub = TestHub::start(json!({})).await;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("config.json");
    let cfg = json!({"server": {"listen": hub.addr}, "taskEngine": {"stateDir": "./state"}});
    std::fs::write(&path, cfg.to_string()).expect("write");
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(bin())
            .arg("--config")
            .arg(&path)
            .output(),
    )
    .await
    .expect("the second hub did not exit")
    .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot listen on {}", hub.addr)) && err.contains("another hub"),
        "{err}"
    );
    let mut c = hub.connect().await;
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
}
