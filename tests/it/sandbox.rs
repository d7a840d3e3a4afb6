//! `run_command` in its Landlock sandbox (`builtin.sandbox`,
//! `builtin.sandboxNetwork`), against the real daemon on this kernel: what
//! a command may write, read and connect to, the error a refused write
//! gets, and what `health_status` and the start-up log say when Landlock
//! is missing or the sandbox is off.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::{Client, TestHub};

/// The hub's own kernel check, repeated: a kernel without Landlock ABI 3
/// cannot run the confined tests (the refusal test still runs).
fn landlock_abi() -> i64 {
    // SAFETY: the version query touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    }
}

pub(crate) fn confined_kernel() -> bool {
    let abi = landlock_abi();
    if abi < 3 {
        eprintln!("skipped: this kernel's Landlock ABI is {abi} (3 needed)");
    }
    abi >= 3
}

/// A hub whose `HOME` is a folder of its temp dir (outside the workspace),
/// with `config` merged over the test defaults and `env` set.
pub(crate) async fn hub_with(config: Value, env: &[(&str, &str)]) -> (TestHub, PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let h = home.clone();
    let hub = TestHub::start_in_with(dir, config, move |cmd| {
        cmd.env("HOME", &h);
        for (k, v) in &env {
            cmd.env(k, v);
        }
    })
    .await;
    (hub, home)
}

pub(crate) async fn run(c: &mut Client, command: &str) -> Value {
    c.call("run_command", json!({ "command": command })).await
}

/// The `sandbox` entry of `health_status`.
pub(crate) async fn sandbox_check(c: &mut Client) -> Value {
    let h = c.request(json!({"type": "health_check"})).await;
    h["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "sandbox"))
        .cloned()
        .unwrap_or_else(|| panic!("no sandbox check in {h}"))
}

/// A refused write: `PERMISSION`, the path in the message, a suggestion
/// that says how to allow it, and the command's stderr kept.
fn assert_refused(r: &Value, path: &str, suggestion_says: &str) {
    assert_eq!(r["success"], false, "{r}");
    let e = &r["error"];
    assert_eq!(e["errorType"], "PERMISSION", "{r}");
    let msg = e["message"].as_str().unwrap_or("");
    assert!(msg.contains("the sandbox refused to write"), "{msg}");
    assert!(msg.contains(path), "{path} not named in: {msg}");
    let s = e["suggestion"].as_str().unwrap_or("");
    assert!(s.contains(suggestion_says), "{s}");
    assert!(s.contains("builtin.sandbox"), "{s}");
    let out = &r["raw"]["structuredContent"];
    assert!(
        out["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("Permission denied"),
        "stderr not kept: {r}"
    );
    assert!(out["exitCode"].as_i64().is_some_and(|c| c != 0), "{r}");
}

fn unique(name: &str) -> String {
    format!("toolhub-sandbox-{name}-{}", std::process::id())
}

#[tokio::test]
async fn default_sandbox_writes_inside_the_workspace_and_refuses_outside_home_and_tmp() {
    if !confined_kernel() {
        return;
    }
    let (hub, home) = hub_with(json!({}), &[]).await;
    let root = hub.path();
    std::fs::write(root.join("readable.txt"), "read me").expect("outside file");
    let mut c = hub.connect().await;

    let r = run(
        &mut c,
        "mkdir -p notes && echo in > notes/inside.txt && cat notes/inside.txt",
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"]["stdout"], "in\n");
    assert!(root.join("workspace/notes/inside.txt").exists());

    // Reading outside the workspace works, and so do the temp dir and
    // /dev/null.
    let r = run(
        &mut c,
        &format!("cat {}", root.join("readable.txt").display()),
    )
    .await;
    assert_eq!(r["result"]["stdout"], "read me", "{r}");
    let r = run(
        &mut c,
        "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo x > /dev/null && ls / > /dev/null",
    )
    .await;
    assert_eq!(r["result"]["stdout"], "t\n", "{r}");

    let r = run(&mut c, "echo x > ../outside.txt").await;
    assert_refused(&r, "../outside.txt", "write inside the workspace");
    assert!(!root.join("outside.txt").exists());

    let r = run(&mut c, "echo 'alias ls=rm' >> \"$HOME/.bashrc\"").await;
    assert_refused(&r, &home.join(".bashrc").display().to_string(), "workspace");
    assert!(!home.join(".bashrc").exists());

    let tmp = Path::new("/tmp").join(unique("tmp"));
    let r = run(&mut c, &format!("touch {}", tmp.display())).await;
    assert_refused(&r, &tmp.display().to_string(), "workspace");
    assert!(!tmp.exists());

    let check = sandbox_check(&mut c).await;
    assert_eq!(check["ok"], true, "{check}");
    assert!(
        check["message"]
            .as_str()
            .unwrap_or("")
            .contains("confined by Landlock"),
        "{check}"
    );
    hub.wait_log("run_command is confined by Landlock").await;
}

#[tokio::test]
async fn read_only_sandbox_refuses_writes_inside_the_workspace_too() {
    if !confined_kernel() {
        return;
    }
    let (hub, _) = hub_with(json!({"builtin": {"sandbox": "read-only"}}), &[]).await;
    let mut c = hub.connect().await;
    let w = c
        .call(
            "write_file",
            json!({"path": "a.txt", "content": "by write_file"}),
        )
        .await;
    assert_eq!(w["success"], true, "{w}");
    let r = run(&mut c, "cat a.txt").await;
    assert_eq!(r["result"]["stdout"], "by write_file", "{r}");
    let r = run(&mut c, "echo x > b.txt").await;
    assert_refused(&r, "b.txt", "write_file");
    assert!(!hub.path().join("workspace/b.txt").exists());
    let r = run(&mut c, "rm a.txt").await;
    assert_refused(&r, "a.txt", "read-only");
    assert!(hub.path().join("workspace/a.txt").exists());
}

#[tokio::test]
async fn sandbox_off_runs_unconfined_and_health_status_says_so() {
    let (hub, _) = hub_with(json!({"builtin": {"sandbox": "off"}}), &[]).await;
    hub.wait_log("run_command runs UNCONFINED").await;
    let mut c = hub.connect().await;
    let check = sandbox_check(&mut c).await;
    assert_eq!(check["ok"], false, "{check}");
    let msg = check["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("\"off\"") && msg.contains("UNCONFINED"),
        "{msg}"
    );
    assert!(check["fix"]
        .as_str()
        .unwrap_or("")
        .contains("workspace-write"));
    let r = run(&mut c, "echo x > ../outside.txt").await;
    assert_eq!(r["success"], true, "{r}");
    assert!(hub.path().join("outside.txt").exists());
}

#[tokio::test]
async fn without_landlock_run_command_is_refused_with_the_reason() {
    // Test-only knob: the hub believes the kernel has no Landlock.
    let (hub, _) = hub_with(json!({}), &[("TOOLHUB_TEST_LANDLOCK_ABI", "0")]).await;
    let line = hub.wait_log("run_command is refused").await;
    assert!(line.contains("Landlock is not available"), "{line}");
    let mut c = hub.connect().await;
    let r = run(&mut c, "echo x > ../outside.txt").await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"]["errorType"], "PERMISSION", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("Landlock is not available"), "{msg}");
    assert!(
        r["error"]["suggestion"]
            .as_str()
            .unwrap_or("")
            .contains("builtin.sandbox to \"off\""),
        "{r}"
    );
    assert!(!hub.path().join("outside.txt").exists());
    let check = sandbox_check(&mut c).await;
    assert_eq!(check["ok"], false, "{check}");
    // The other workspace tools are unaffected.
    let w = c
        .call("write_file", json!({"path": "a.txt", "content": "x"}))
        .await;
    assert_eq!(w["success"], true, "{w}");
}

#[tokio::test]
async fn sandbox_network_false_refuses_tcp_to_the_hub_s_own_port() {
    if landlock_abi() < 4 {
        eprintln!("skipped: TCP rules need Landlock ABI 4");
        return;
    }
    let port = |hub: &TestHub| hub.addr.rsplit(':').next().unwrap_or("0").to_string();
    let connect = |port: &str| {
        format!("node -e \"require('net').connect({port}, '127.0.0.1').on('connect', () => {{ console.log('connected'); process.exit(0) }}).on('error', e => {{ console.error(e.message); process.exit(3) }})\"")
    };
    // Allowed: the same command connects.
    let (open, _) = hub_with(json!({"builtin": {"sandboxNetwork": true}}), &[]).await;
    let mut c = open.connect().await;
    let r = run(&mut c, &connect(&port(&open))).await;
    assert_eq!(r["result"]["stdout"], "connected\n", "{r}");

    // Denied: the default.
    let (closed, _) = hub_with(json!({}), &[]).await;
    let mut c = closed.connect().await;
    let r = run(&mut c, &connect(&port(&closed))).await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"]["errorType"], "PERMISSION", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("refused a TCP connection"), "{msg}");
    assert!(
        r["error"]["suggestion"]
            .as_str()
            .unwrap_or("")
            .contains("builtin.sandboxNetwork"),
        "{r}"
    );
    let check = sandbox_check(&mut c).await;
    assert!(
        check["message"]
            .as_str()
            .unwrap_or("")
            .contains("TCP connect and bind denied"),
        "{check}"
    );
}

#[tokio::test]
async fn the_current_run_folder_is_writable_and_another_run_s_is_not() {
    if !confined_kernel() {
        return;
    }
    let (hub, _) = hub_with(json!({}), &[]).await;
    let mut c = hub.connect().await;
    let mut ids = Vec::new();
    for theme in ["sandbox mine", "sandbox other"] {
        let r = c
            .request(json!({"type": "create_run", "theme": theme}))
            .await;
        assert_eq!(r["type"], "run_created", "{r}");
        ids.push(r["run"]["runId"].as_str().expect("runId").to_string());
    }
    let s = c.request(json!({"type": "set_run", "runId": ids[0]})).await;
    assert_eq!(s["type"], "run_set", "{s}");
    let runs = hub.path().join("runs");
    let mine = runs.join(&ids[0]).join("outputs/o.txt");
    let r = run(&mut c, &format!("echo o > {}", mine.display())).await;
    assert_eq!(r["success"], true, "{r}");
    assert!(mine.exists());
    let other = runs.join(&ids[1]).join("outputs/o.txt");
    let r = run(&mut c, &format!("echo o > {}", other.display())).await;
    assert_refused(&r, &other.display().to_string(), "workspace");
}

/// The shipped config.json (only its port changed) serves the built-in
/// tools under the default sandbox, and the README's wscat session works.
#[tokio::test]
async fn the_shipped_config_runs_the_readme_session_under_the_default_sandbox() {
    if !confined_kernel() {
        return;
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(shipped).expect("config.json"))
            .expect("json");
    assert_eq!(
        config["builtin"].get("sandbox"),
        None,
        "the default applies"
    );
    config["server"]["listen"] = json!("127.0.0.1:0");
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("config.json");
    std::fs::write(&path, config.to_string()).expect("write");
    let hub = TestHub::spawn(dir, &path).await;
    let mut c = hub.connect().await;
    let w = c
        .call(
            "write_file",
            json!({"path": "notes/hello.txt", "content": "hello world"}),
        )
        .await;
    assert_eq!(w["success"], true, "{w}");
    let r = run(&mut c, "ls notes && uname -s").await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"]["stdout"], "hello.txt\nLinux\n", "{r}");
    let check = sandbox_check(&mut c).await;
    assert_eq!(check["ok"], true, "{check}");
}
