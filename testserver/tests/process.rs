//! The test server as the hub meets it: a process on stdio. These tests are
//! also why `cargo test --workspace` builds the plain `toolhub-testserver`
//! binary (Cargo builds a package's bins for its integration tests), in
//! the same feature resolution as the hub's tests that spawn it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_toolhub-testserver");
const WAIT: Duration = Duration::from_secs(20);

#[test]
fn an_unknown_argument_exits_2_and_names_it() {
    let out = Command::new(BIN)
        .arg("--bogus")
        .output()
        .expect("run toolhub-testserver");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown argument `--bogus`") && err.contains("expected --name"),
        "stderr: {err}"
    );
}

#[test]
fn it_answers_the_handshake_and_logs_each_call() {
    let dir = std::env::temp_dir().join(format!("testserver-process-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let log = dir.join("calls.jsonl");
    let mut child = Command::new(BIN)
        .args(["--name", "probe", "--log"])
        .arg(&log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn toolhub-testserver");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if tx.send(v).is_err() {
                    break;
                }
            }
        }
    });
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").expect("write to the server");
        stdin.flush().expect("flush");
    };
    let answer = |id: i64| loop {
        let v = rx.recv_timeout(WAIT).expect("an answer within the wait");
        if v["id"] == id {
            return v;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "process-test", "version": "0"}}}),
    );
    let init = answer(1);
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "hi"}}}));
    let called = answer(2);
    assert_ne!(called["result"]["isError"], json!(true), "{called}");
    assert!(called.to_string().contains("hi"), "{called}");
    let logged = std::fs::read_to_string(&log).expect("the call log");
    let first: Value =
        serde_json::from_str(logged.lines().next().unwrap_or("")).expect("a JSON line");
    assert_eq!(first["tool"], "echo");
    assert_eq!(first["server"], "probe");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
