//! The test server's barriers, driven from a test: a call to
//! `<server>__barrier {name}` waits until the test releases `name`, so a
//! test orders events ("the call is still running when the socket drops")
//! by waiting on them, not by a delay long enough on a quiet machine.
//! A barrier lives in one server process: a restarted server knows none.

use serde_json::json;

use crate::support::Client;

/// Once at least `count` calls wait at `server`'s barrier `name` (at most
/// the hub's call timeout): how many wait.
pub async fn await_waiting(c: &mut Client, server: &str, name: &str, count: usize) -> u64 {
    let w = c
        .call(
            &format!("{server}__await_waiting"),
            json!({"name": name, "count": count}),
        )
        .await;
    assert_eq!(w["success"], true, "{w}");
    w["result"]["waiting"].as_u64().unwrap_or(0)
}

/// Let every call at `server`'s barrier `name` go, and any later one:
/// how many were waiting.
pub async fn release(c: &mut Client, server: &str, name: &str) -> u64 {
    let r = c
        .call(&format!("{server}__release"), json!({"name": name}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    r["result"]["waiting"].as_u64().unwrap_or(0)
}

/// Once `count` calls wait at `server`'s barrier `name`, let them go: how
/// many waited.
pub async fn release_when_waiting(c: &mut Client, server: &str, name: &str, count: usize) -> u64 {
    await_waiting(c, server, name, count).await;
    release(c, server, name).await
}
