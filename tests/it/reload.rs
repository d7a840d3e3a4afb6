//! config.json hot reload: valid edits apply per server, invalid ones change nothing.

use serde_json::json;

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
    c.send(json!({"type": "tool_batch", "id": "b", "steps": [{"tool": "t__slow", "params": {"ms": 1500, "message": "ok"}}]}))
        .await;
    hub.wait_log("testserver t call slow").await;
    cfg["mcpServers"]["t"] = testserver_entry(&p, "t", &["--extra-tool", "another"]);
    write_config(&p.join("config.json"), &cfg);
    let step = c.recv_type("batch_step_result").await;
    assert_eq!(step["success"], true, "{step}");
    assert_eq!(
        step["retries"][0]["errorType"], "SERVER_UNAVAILABLE",
        "{step}"
    );
    assert_eq!(c.recv_type("batch_complete").await["state"], "success");
}
