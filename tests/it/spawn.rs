//! Children die with the hub and only with the hub: not with the tokio
//! thread that forked them, and a dead wrapper takes its group with it.

use std::os::unix::process::CommandExt;
use std::time::Duration;

use serde_json::json;

use crate::servers::wait_running;
use crate::support::{alive, testserver, testserver_entry, TestHub, WAIT};
use crate::threats::process::{server_pid, wait_exit};

/// `PR_SET_PDEATHSIG` follows the forking *thread*. A blocking-pool thread
/// that retires after its keep-alive (10 s by default; 50 ms here) used to
/// take every server it had started with it.
#[test]
fn a_server_outlives_the_thread_that_started_it() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_keep_alive(Duration::from_millis(50))
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("dir");
        let cfg = json!({"mcpServers": {"t": testserver_entry(dir.path(), "t", &[])}});
        let loaded = toolhub::config::parse(&cfg.to_string(), &dir.path().join("config.json"))
            .expect("config");
        let spec = loaded.config.mcp_servers["t"].clone();
        let (ev_tx, _ev_rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = tokio::runtime::Handle::current();
        // Both are started on a blocking-pool thread: a control child forked
        // right there with the parent-death signal, and the server through
        // the hub's own `connect`.
        let (control, up) = tokio::task::spawn_blocking(move || {
            let mut control = std::process::Command::new("sleep");
            control.arg("60");
            // SAFETY: prctl is async-signal-safe.
            unsafe {
                control.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let control = control.spawn().expect("sleep");
            let up = handle.block_on(toolhub::mcp::upstream::connect(
                &spec,
                Default::default(),
                ev_tx,
                Default::default(),
                WAIT,
            ));
            (control, up)
        })
        .await
        .expect("blocking thread");
        let up = up.expect("server started");
        let server = up.pgid.expect("a stdio child has a pid");
        let mut control = control;
        // The control's death is the event that the thread has retired.
        assert!(
            wait_exit(control.id() as i32, WAIT).await,
            "the blocking thread never retired (control child still alive)"
        );
        let _ = control.wait();
        assert!(
            alive(server),
            "server {server} died with the thread that forked it"
        );
        let tools = toolhub::mcp::upstream::list_tools(&up.peer(), WAIT)
            .await
            .expect("the server still answers");
        assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
        toolhub::mcp::upstream::kill_group(up.pgid);
    });
}

/// The pids whose parent is `ppid`.
fn children_of(ppid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let parent = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if parent == Some(ppid) {
            out.push(pid);
        }
    }
    out
}

/// An `npx`-style wrapper (a shell that runs the real server as its child)
/// dies: the hub kills the group, restarts the server, and the old server
/// is not left running under PID 1 with the pipes still open.
#[tokio::test]
async fn a_dead_wrapper_takes_its_group_down_and_the_server_restarts() {
    let dir = tempfile::tempdir().expect("dir");
    let inner = testserver_entry(dir.path(), "t", &[]);
    let mut args = vec![
        json!("-c"),
        // Not the last command, so the shell forks instead of exec'ing.
        json!("\"$0\" \"$@\"; exit $?"),
        json!(testserver()),
    ];
    args.extend(inner["args"].as_array().expect("args").iter().cloned());
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": {"command": "/bin/sh", "args": args}}}),
    )
    .await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    let wrapper = server_pid(&mut c, "t").await;
    // Running means the handshake is done: the real server is up.
    let real = *children_of(wrapper)
        .first()
        .unwrap_or_else(|| panic!("the wrapper {wrapper} has no child"));
    // SAFETY: a plain syscall on the wrapper this test started.
    unsafe {
        libc::kill(wrapper, libc::SIGKILL);
    }
    assert!(
        wait_exit(real, WAIT).await,
        "the real server {real} outlived its wrapper"
    );
    assert!(!alive(real));
    // The running status of the restart, not the first start's (which may
    // still be queued: `wait_running` can answer from `health_check`).
    c.recv_where("t running again with a new pid", |v| {
        v["type"] == "server_status"
            && v["name"] == "t"
            && v["state"] == "running"
            && v["pid"].as_i64().is_some_and(|p| p != i64::from(wrapper))
    })
    .await;
    let now = server_pid(&mut c, "t").await;
    assert_ne!(now, wrapper, "health still reports the dead wrapper");
    assert!(alive(now));
    let h = c.request(json!({"type": "health_check"})).await;
    let t = h["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "t")
        .cloned()
        .expect("t");
    assert_eq!(t["restarts"], 1, "{t}");
    hub.wait_log(&format!("the server's process {wrapper} exited"))
        .await;
    let r = c.call("t__echo", json!({"message": "still here"})).await;
    assert_eq!(r["success"], true, "{r}");
}
