//! config.json hot reload: valid edits apply per server, invalid ones change nothing.

use serde_json::json;

use crate::barrier;
use crate::servers::wait_running;
use crate::support::{testserver_entry, write_config, TestHub};

#[tokio::test]
async fn valid_edit_adds_and_removes_servers_leaving_others_alone() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut cfg = crate::support::with_test_defaults(json!({
        "mcpServers": {"keep": testserver_entry(&p, "keep", &[])},
    }));
    let hub = TestHub::start_in(dir, cfg.clone()).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "keep").await;
    let before = c.request(json!({"type": "health_check"})).await;
    let keep_pid = before["servers"][0]["pid"].clone();
    cfg["mcpServers"]["added"] = testserver_entry(&p, "added", &[]);
    write_config(&p.join("config.json"), &cfg);
    c.recv_where("tools_updated with added__echo", |v| {
        v["type"] == "tools_updated"
            && v["added"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("added__echo")))
    })
    .await;
    let after = c.request(json!({"type": "health_check"})).await;
    let keep = after["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .find(|s| s["name"] == "keep")
        .cloned();
    assert_eq!(
        keep.expect("keep")["pid"],
        keep_pid,
        "an unchanged server must not restart"
    );
    cfg["mcpServers"]
        .as_object_mut()
        .expect("obj")
        .remove("added");
    write_config(&p.join("config.json"), &cfg);
    c.recv_where("tools_updated removing added__echo", |v| {
        v["type"] == "tools_updated"
            && v["removed"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("added__echo")))
    })
    .await;
}

#[tokio::test]
async fn invalid_edit_keeps_the_old_config_and_shows_the_error() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let cfg = crate::support::with_test_defaults(json!({
        "mcpServers": {"keep": testserver_entry(&p, "keep", &[])},
    }));
    let hub = TestHub::start_in(dir, cfg).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "keep").await;
    std::fs::write(p.join("config.json"), "{\n  \"mcpServers\": {\n").expect("write");
    hub.wait_log("config reload refused").await;
    let h = c.request(json!({"type": "health_check"})).await;
    let check = h["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "config")
        .cloned()
        .expect("config check");
    assert_eq!(check["ok"], false);
    assert!(
        check["message"]
            .as_str()
            .unwrap_or("")
            .contains("config.json:"),
        "{check}"
    );
    let r = c.call("keep__echo", json!({"message": "still here"})).await;
    assert_eq!(r["success"], true, "{r}");
}

#[tokio::test]
async fn a_reload_that_restarts_a_server_retries_its_in_flight_step() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut cfg = crate::support::with_test_defaults(json!({
        "mcpServers": {"t": testserver_entry(&p, "t", &[])},
    }));
    let hub = TestHub::start_in(dir, cfg.clone()).await;
    let mut c = hub.connect().await;
    wait_running(&mut c, "t").await;
    // Read-only: a step the restart cut off may run again (an unannotated
    // one would end as outcome unknown, `once.rs`). It waits at the old
    // server's barrier until the reload replaces the server, and at the
    // new one's until the test lets it go.
    c.send(json!({"type": "tool_batch", "id": "b", "steps": [{"tool": "t__barrier_read", "params": {"name": "b"}}]}))
        .await;
    hub.wait_log("testserver t call barrier_read").await;
    cfg["mcpServers"]["t"] = testserver_entry(&p, "t", &["--extra-tool", "another"]);
    write_config(&p.join("config.json"), &cfg);
    hub.wait_log_count("testserver t call barrier_read", 2)
        .await;
    assert_eq!(barrier::release(&mut c, "t", "b").await, 1);
    let step = c.recv_type("batch_step_result").await;
    assert_eq!(step["success"], true, "{step}");
    assert_eq!(
        step["retries"][0]["errorType"], "SERVER_UNAVAILABLE",
        "{step}"
    );
    assert_eq!(c.recv_type("batch_complete").await["state"], "success");
}

/// Issue 16.4: server.token and server.allowedOrigins are applied by a
/// reload: the next connection must present the new token (and may come
/// from a newly allowed origin); a connection already open stays.
#[tokio::test]
async fn a_new_token_and_origins_apply_to_new_connections_and_open_ones_stay() {
    use crate::gate::upgrade_status;
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut cfg = crate::support::with_test_defaults(json!({}));
    let hub = TestHub::start_in(dir, cfg.clone()).await;
    let old = hub.token.clone().expect("generated token");
    let mut open = hub.connect().await;
    let host = ("Host", hub.addr.clone());
    let ext = (
        "Origin",
        "chrome-extension://abcdefghijklmnopabcdefghijklmnop".to_string(),
    );
    let bearer = |t: &str| ("Authorization", format!("Bearer {t}"));
    let new = "a-new-token-for-this-hub-0123456789abcdef";

    cfg["server"]["token"] = json!(new);
    cfg["server"]["allowedOrigins"] = json!(["https://app.example"]);
    write_config(&p.join("config.json"), &cfg);
    hub.wait_log("gate updated from the config").await;

    assert_eq!(
        upgrade_status(&hub.addr, &[host.clone(), bearer(&old)]).await,
        401,
        "the old token must no longer admit a new connection"
    );
    assert_eq!(
        upgrade_status(&hub.addr, &[host.clone(), bearer(new)]).await,
        101
    );
    let web = ("Origin", "https://app.example".to_string());
    assert_eq!(
        upgrade_status(&hub.addr, &[host.clone(), bearer(new), web]).await,
        101,
        "a newly allowed origin is admitted"
    );
    assert_eq!(
        upgrade_status(&hub.addr, &[host.clone(), bearer(new), ext]).await,
        403,
        "an origin no longer listed is refused"
    );
    // The connection opened with the old token still works.
    let pong = open.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong");
    assert!(
        !hub.logs().contains(new),
        "the new token leaked into the log"
    );
}

/// Issue 16.4: a key only a restart applies is named in health_status and
/// the log, and the hub keeps running with the value it started with.
#[tokio::test]
async fn keys_that_need_a_restart_are_named_in_health_and_the_log() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut cfg = crate::support::with_test_defaults(json!({}));
    let hub = TestHub::start_in(dir, cfg.clone()).await;
    let mut c = hub.connect().await;
    cfg["server"]["listen"] = json!("127.0.0.1:1");
    cfg["taskEngine"]["stateDir"] = json!("./elsewhere");
    cfg["taskEngine"]["durability"] = json!("batch");
    cfg["server"]["workerThreads"] = json!(2);
    write_config(&p.join("config.json"), &cfg);
    hub.wait_log("taskEngine.durability changed in the config file: restart needed")
        .await;
    assert!(
        hub.logs()
            .contains("server.listen changed in the config file: restart needed"),
        "{}",
        hub.logs()
    );
    let h = c.request(json!({"type": "health_check"})).await;
    assert_eq!(
        h["restartNeeded"],
        json!([
            "server.listen",
            "taskEngine.stateDir",
            "taskEngine.durability",
            "server.workerThreads"
        ]),
        "{h}"
    );
    let check = h["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "restartNeeded")
        .cloned()
        .expect("restartNeeded check");
    assert_eq!(check["ok"], false);
    let msg = check["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("server.listen") && msg.contains("restart needed"),
        "{check}"
    );
    // The state dir in force is still the one the hub started with.
    let state = h["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "stateDir")
        .cloned()
        .expect("stateDir check");
    assert!(
        !state["message"]
            .as_str()
            .unwrap_or_default()
            .contains("elsewhere"),
        "{state}"
    );
    // Put them back: nothing needs a restart any more.
    cfg["server"]["listen"] = json!("127.0.0.1:0");
    cfg["taskEngine"]["stateDir"] = json!("./state");
    cfg["taskEngine"]["durability"] = json!("step");
    cfg["server"]["workerThreads"] = json!(1);
    write_config(&p.join("config.json"), &cfg);
    hub.wait_log_count("config reloaded", 2).await;
    let h = c.request(json!({"type": "health_check"})).await;
    assert_eq!(h["restartNeeded"], json!([]), "{h}");
}

/// Issue 16.4: builtin.* is applied by a reload: disabling the workspace
/// tools removes them, and new limits apply to the next call.
#[tokio::test]
async fn builtin_settings_are_applied_by_a_reload() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut cfg = crate::support::with_test_defaults(json!({}));
    let hub = TestHub::start_in(dir, cfg.clone()).await;
    let mut c = hub.connect().await;
    let w = c
        .call(
            "write_file",
            json!({"path": "big.txt", "content": "x".repeat(2000)}),
        )
        .await;
    assert_eq!(w["success"], true, "{w}");

    cfg["builtin"]["enabled"] = json!(false);
    write_config(&p.join("config.json"), &cfg);
    c.recv_where("tools_updated removing hub__read_file", |v| {
        v["type"] == "tools_updated"
            && v["removed"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("hub__read_file")))
    })
    .await;
    let r = c.call("read_file", json!({"path": "big.txt"})).await;
    assert_eq!(r["error"]["errorType"], "TOOL_NOT_FOUND", "{r}");

    cfg["builtin"]["enabled"] = json!(true);
    cfg["builtin"]["maxReadBytes"] = json!(1000);
    write_config(&p.join("config.json"), &cfg);
    c.recv_where("tools_updated adding hub__read_file", |v| {
        v["type"] == "tools_updated"
            && v["added"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("hub__read_file")))
    })
    .await;
    let r = c.call("read_file", json!({"path": "big.txt"})).await;
    assert_eq!(r["error"]["errorType"], "LIMIT_EXCEEDED", "{r}");
}
