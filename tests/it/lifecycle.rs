//! Start-up, bad config, graceful shutdown with no orphans.

use serde_json::json;

use crate::support::{alive, testserver_entry, TestHub};

#[tokio::test]
async fn bad_config_names_file_line_column_and_exits_2() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("config.json");
    std::fs::write(
        &path,
        "{\n  \"server\": {\n    \"listen\": \"127.0.0.1:0\",\n  }\n}\n",
    )
    .expect("write");
    let out = tokio::process::Command::new(crate::support::bin())
        .arg("--config")
        .arg(&path)
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or_default().to_string();
    assert!(first.contains(&format!("{}:4:", path.display())), "{first}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[tokio::test]
async fn unknown_key_warns_with_nearest_known_key() {
    let hub = TestHub::start(json!({"healthChek": {}})).await;
    let line = hub.wait_log("unknown key").await;
    assert!(
        line.contains("healthChek") && line.contains("healthCheck"),
        "{line}"
    );
}

#[tokio::test]
async fn sigterm_kills_every_child_and_its_group() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({"mcpServers": {"t": testserver_entry(&p, "t", &[])}}),
    )
    .await;
    let mut c = hub.connect().await;
    let r = c.call("t__spawn_grandchild", json!({})).await;
    assert_eq!(r["success"], true, "{r}");
    let grandchild = r["result"]["pid"].as_i64().expect("pid") as i32;
    let health = c.request(json!({"type": "health_check"})).await;
    let server_pid = health["servers"][0]["pid"].as_i64().expect("server pid") as i32;
    assert!(alive(grandchild) && alive(server_pid));
    let status = hub.terminate().await;
    assert!(status.success(), "{status:?}");
    assert!(!alive(server_pid), "server survived the hub");
    assert!(
        !alive(grandchild),
        "grandchild in the server's group survived the hub"
    );
}

#[tokio::test]
async fn sigint_shuts_down_gracefully() {
    let hub = TestHub::start(json!({})).await;
    unsafe {
        libc::kill(hub.pid(), libc::SIGINT);
    }
    hub.wait_log("SIGINT received").await;
    hub.wait_log("stopped").await;
}

/// The close frame a client sees when its connection ends.
pub(crate) async fn close_code(c: &mut crate::support::Client) -> Option<u16> {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    tokio::time::timeout(crate::support::WAIT, async {
        loop {
            match c.ws.next().await {
                Some(Ok(Message::Close(f))) => return f.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await
    .expect("no close frame in time")
}

#[tokio::test]
async fn an_idle_connection_is_closed_with_normal_closure() {
    let hub = TestHub::start(json!({"server": {"idleTimeout": 300}})).await;
    let mut idle = hub.connect().await;
    // Idle: no frame for server.idleTimeout → 1000 (normal closure).
    assert_eq!(close_code(&mut idle).await, Some(1000));
}

#[tokio::test]
async fn shutdown_closes_sockets_with_going_away() {
    let hub = TestHub::start(json!({})).await;
    let mut c = hub.connect().await;
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
    // SAFETY: a plain signal to the hub this test started.
    unsafe {
        libc::kill(hub.pid(), libc::SIGTERM);
    }
    // Shutdown → 1001 (going away), never 1008 (policy: evicted).
    let code = close_code(&mut c).await;
    assert_eq!(code, Some(1001), "close code on shutdown");
    let status = hub.terminate().await;
    assert!(status.success(), "{status:?}");
}

/// The hub's tasks run on `server.workerThreads` threads: one by default.
/// A config that still sets the removed `server.spinMicros` loads, with a
/// warning that it is ignored.
#[tokio::test]
async fn the_runtime_has_the_configured_worker_threads_and_spin_micros_is_ignored() {
    for (config, workers) in [
        (json!({}), 1),
        (json!({"server": {"spinMicros": 250}}), 1),
        (json!({"server": {"workerThreads": 3}}), 3),
    ] {
        let spin = config["server"].get("spinMicros").is_some();
        let hub = TestHub::start(config).await;
        let mut c = hub.connect().await;
        let h = c.request(json!({"type": "health_check"})).await;
        assert_eq!(h["runtime"], json!({"workerThreads": workers}), "{h}");
        if spin {
            hub.wait_log("server.spinMicros was removed in this version")
                .await;
        }
    }
}
