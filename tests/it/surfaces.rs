//! What no single service owns in docs/security.md's "Who may see and do
//! what" (`server::surfaces`): a session stays with the principal that
//! opened it, and what is the person's alone is refused before any handler
//! runs.

use serde_json::{json, Value};

use crate::servers::wait_running;
use crate::support::{testserver_entry, Client, TestHub};

const EXT: &str = "ext-token-0123456789abcdef";

/// A hub whose view `chat` holds one read-only hub tool, given to `ext`.
async fn hub() -> TestHub {
    TestHub::start(json!({
        "views": {"chat": {"tools": ["hub__read_file"]}},
        "clients": {"ext": {"token": EXT, "views": ["chat"]}},
    }))
    .await
}

fn hello_of(c: &Client) -> Value {
    c.seen
        .iter()
        .find(|v| v["type"] == "hello")
        .cloned()
        .expect("a hello")
}

async fn resume(c: &mut Client, hello: &Value) -> Value {
    c.request(json!({
        "type": "resume_session",
        "sessionId": hello["sessionId"],
        "resumeToken": hello["resumeToken"],
        "lastSeq": 0,
    }))
    .await
}

/// The person's session at `/ws/chat`, its resume token leaked: a client
/// of the same view presenting it gets the answer for a session that
/// never existed, and the person's session goes on and resumes with the
/// person's token.
#[tokio::test]
async fn a_client_cannot_resume_another_principals_session() {
    let hub = hub().await;
    let main = hub.token.clone().expect("the hub's token");
    let mut person = hub.connect_at("/ws/chat", &main).await.expect("person");
    let leaked = hello_of(&person);

    let mut ext = hub.connect_at("/ws/chat", EXT).await.expect("ext");
    let taken = resume(&mut ext, &leaked).await;
    assert_eq!(taken["type"], "error", "{taken}");
    assert_eq!(taken["error"]["errorType"], "NOT_FOUND", "{taken}");
    // Word for word the answer for an id that never existed.
    let mut probe = hub.connect_at("/ws/chat", EXT).await.expect("ext");
    let unknown = resume(
        &mut probe,
        &json!({"sessionId": "no-such-session", "resumeToken": leaked["resumeToken"]}),
    )
    .await;
    let sid = leaked["sessionId"].as_str().expect("id");
    assert_eq!(
        taken["error"].to_string().replace(sid, "<id>"),
        unknown["error"]
            .to_string()
            .replace("no-such-session", "<id>"),
    );
    // Both sessions go on.
    let pong = ext.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong", "{pong}");
    let pong = person.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong", "{pong}");

    // The person's own token resumes it.
    let mut again = hub.connect_at("/ws/chat", &main).await.expect("person");
    let resumed = resume(&mut again, &leaked).await;
    assert_eq!(resumed["type"], "session_resumed", "{resumed}");
}

/// `reload_tools` with `approve` from a client token: `PERMISSION` naming
/// what is the person's alone, before any handler ran (no reload is
/// logged); without `approve` the client re-lists its view.
#[tokio::test]
async fn approving_changed_tools_is_refused_to_a_client_before_any_handler() {
    let hub = hub().await;
    let mut ext = hub.connect_at("/ws/chat", EXT).await.expect("ext");
    let r = ext
        .request(json!({"type": "reload_tools", "approve": true}))
        .await;
    assert_eq!(r["type"], "error", "{r}");
    assert_eq!(r["error"]["errorType"], "PERMISSION", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("approving changed tools") && msg.contains("ext"),
        "{msg}"
    );
    assert!(r["error"]["suggestion"].is_string(), "{r}");
    let plain = ext.request(json!({"type": "reload_tools"})).await;
    assert_eq!(plain["type"], "tools", "{plain}");
    let names: Vec<&str> = plain["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["qualifiedName"].as_str())
        .collect();
    assert_eq!(names, ["hub__read_file"]);
}

/// A view's session hears of the servers that have a tool in its view
/// only: its hello lists them, and a server outside the view going down
/// and back is news for the person, not for the client. Two servers, `t`
/// outside `ext`'s view and `u` inside it, crash one after the other;
/// events reach a session in the order the hub sent them, so once `ext`
/// hears of `u`, it would already have heard of `t`.
#[tokio::test]
async fn a_clients_session_hears_only_of_its_views_servers() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(
        dir,
        json!({
            "mcpServers": {
                "t": testserver_entry(&p, "t", &[]),
                "u": testserver_entry(&p, "u", &[]),
            },
            "views": {"chat": {"tools": ["u__echo", "u__crash"]}},
            "clients": {"ext": {"token": EXT, "views": ["chat"]}},
        }),
    )
    .await;
    let mut person = hub.connect().await;
    wait_running(&mut person, "t").await;
    wait_running(&mut person, "u").await;
    let mut ext = hub.connect_at("/ws/chat", EXT).await.expect("ext");
    let names = |hello: &Value| -> Vec<String> {
        hello["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["name"].as_str().map(String::from))
            .collect()
    };
    assert_eq!(names(&hello_of(&ext)), ["u"]);
    assert!(names(&hello_of(&person)).contains(&"t".to_string()));

    person.call("t__crash", json!({})).await;
    person
        .recv_where("t restarting", |v| {
            v["type"] == "server_status" && v["name"] == "t" && v["state"] != "running"
        })
        .await;
    ext.call("u__crash", json!({})).await;
    ext.recv_where("u restarting", |v| {
        v["type"] == "server_status" && v["name"] == "u" && v["state"] != "running"
    })
    .await;
    let heard: Vec<&Value> = ext
        .seen
        .iter()
        .filter(|v| v["type"] == "server_status" && v["name"] != "u")
        .collect();
    assert!(
        heard.is_empty(),
        "ext heard of servers outside its view: {heard:?}"
    );
}
