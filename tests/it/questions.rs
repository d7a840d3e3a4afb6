//! Questions belong to their principal (issue 49.1): a `need_user` goes to
//! the session of the call or task that asked and, when a batch has no
//! attached session, to its principal's other sessions and the main
//! token's, never to another client's; a `confirm` from anyone else finds
//! nothing (`NOT_FOUND`, nothing approved). Question ids are random.
//!
//! Set up as a person would: the main token, and clients `ext` and
//! `agent` whose tokens open the view `chat` only.

use serde_json::{json, Value};

use crate::barrier;
use crate::support::{call_log, testserver_entry, Client, TestHub};

pub const EXT: &str = "ext-token-0123456789abcdef";
pub const AGENT: &str = "agent-token-0123456789abcdef";

pub fn config(dir: &std::path::Path) -> Value {
    json!({
        "mcpServers": {"t": testserver_entry(dir, "t", &[])},
        "views": {"chat": {"tools": [
            "hub__tool_batch", "hub__list_tasks", "hub__task_status", "hub__resume_task", "t__*"
        ]}},
        "clients": {
            "ext": {"token": EXT, "views": ["chat"]},
            "agent": {"token": AGENT, "views": ["chat"]}
        },
        "safety": {"confirmTimeout": 300_000, "rules": [
            {"tool": "*echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"},
            {"tool": "hub__write_file", "action": "confirm", "reason": "writes a file"}
        ]}
    })
}

pub async fn start() -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let hub = TestHub::start_in(dir, cfg).await;
    let mut main = hub.connect().await;
    crate::mcp::wait_running(&mut main, &["t"]).await;
    (hub, main)
}

pub async fn client(hub: &TestHub, token: &str) -> Client {
    hub.connect_at("/ws/chat", token).await.expect("chat")
}

/// `c`'s confirm of `ask` (its taskId, stepIndex and paramsHash, all it
/// could have observed).
async fn confirm(c: &mut Client, ask: &Value, approve: bool) -> Value {
    c.request(
        json!({"type": "confirm", "taskId": ask["taskId"], "approve": approve,
        "stepIndex": ask["stepIndex"], "paramsHash": ask["paramsHash"]}),
    )
    .await
}

/// A refusal that says only that there is no such question.
fn refused_as_unknown(r: &Value) {
    assert_eq!(r["type"], "error", "{r}");
    assert_eq!(r["error"]["errorType"], "NOT_FOUND", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no pending confirmation")),
        "{r}"
    );
}

fn asked(c: &Client, ask: &Value) -> bool {
    c.seen
        .iter()
        .any(|v| v["type"] == "need_user" && v["taskId"] == ask["taskId"])
}

/// The `need_user` `c` receives whose params carry `message`.
async fn question(c: &mut Client, message: &str) -> Value {
    c.recv_where(message, |v| {
        v["type"] == "need_user" && v["params"]["message"] == message
    })
    .await
}

/// Start `steps` (the first waits at barrier `name`) on `owner`'s session
/// as batch `name`, and close its socket while the barrier holds (the
/// session waits for a resume): the task's id.
async fn orphan(
    hub: &TestHub,
    main: &mut Client,
    mut owner: Client,
    name: &str,
    steps: Value,
) -> Value {
    owner
        .send(json!({"type": "tool_batch", "id": name, "steps": steps}))
        .await;
    let st = owner
        .recv_where("running", |v| {
            v["type"] == "task_state" && v["state"] == "running"
        })
        .await;
    barrier::await_waiting(main, "t", name, 1).await;
    let session = crate::instances::session_id(&owner);
    drop(owner);
    hub.wait_log(&format!("client disconnected session={session}"))
        .await;
    st["taskId"].clone()
}

/// The attack of the review (S1): `ext` answers the person's question with
/// everything it could observe or guess. It is refused as unknown, the
/// write never happens, and the person can still approve it.
#[tokio::test]
async fn a_client_cannot_answer_the_main_tokens_question() {
    let (hub, mut main) = start().await;
    let mut ext = client(&hub, EXT).await;
    let boot = main.seen[0]["bootId"].as_str().expect("bootId").to_string();
    main.send(
        json!({"type": "tool_call", "id": "w", "tool": "hub__write_file",
        "params": {"path": "pwned.txt", "content": "written by client ext"}}),
    )
    .await;
    let ask = main.recv_type("need_user").await;
    // 128 random bits: nothing of the bootId or a counter.
    let id = ask["taskId"].as_str().expect("taskId");
    let hex = id.strip_prefix("call-").expect("call- prefix");
    assert!(
        hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()) && !id.contains(&boot),
        "{ask}"
    );
    refused_as_unknown(&confirm(&mut ext, &ask, true).await);
    // Exactly what a question that never existed answers.
    let mut none = ask.clone();
    none["taskId"] = json!(format!("call-{}", "0".repeat(32)));
    let (mine, nothing) = (
        confirm(&mut ext, &ask, true).await,
        confirm(&mut ext, &none, true).await,
    );
    assert_eq!(
        mine["error"]["message"].as_str().map(|m| m.replace(id, "")),
        nothing["error"]["message"]
            .as_str()
            .map(|m| m.replace(&format!("call-{}", "0".repeat(32)), "")),
    );
    // The old guessable names match nothing, for anyone.
    for n in 1..4 {
        let mut guess = ask.clone();
        guess["taskId"] = json!(format!("call-{boot}-{n}"));
        refused_as_unknown(&confirm(&mut ext, &guess, true).await);
        refused_as_unknown(&confirm(&mut main, &guess, true).await);
    }
    let file = hub.path().join("workspace/pwned.txt");
    assert!(!file.exists(), "a refused approval wrote the file");
    assert!(
        !main.seen.iter().any(|v| v["replyTo"] == "w"),
        "the call ended"
    );
    // The person's own answer still works: the question was not used up.
    assert_eq!(confirm(&mut main, &ask, true).await["type"], "confirmed");
    let r = main
        .recv_where("tool_result w", |v| v["replyTo"] == "w")
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert!(file.exists());
}

/// A batch of the main token whose socket closed: its question goes to the
/// main token's other sessions, never to a client's; `hub__tool_batch`'s
/// questions go to the caller's principal and the main token; each answers
/// only its own, and the person answers any.
#[tokio::test]
async fn an_ownerless_question_reaches_its_principal_and_the_main_token_only() {
    let (hub, mut main) = start().await;
    let owner = hub.connect().await;
    let steps = json!([
        {"tool": "t__barrier", "params": {"name": "m"}},
        {"tool": "t__echo", "params": {"message": "danger main"}}
    ]);
    let task = orphan(&hub, &mut main, owner, "m", steps).await;
    let mut ext = client(&hub, EXT).await;
    let mut agent = client(&hub, AGENT).await;
    barrier::release(&mut main, "t", "m").await;
    let q_main = question(&mut main, "danger main").await;
    assert_eq!(q_main["taskId"], task, "{q_main}");
    // Each client's hub__tool_batch asks its own principal (and the person).
    for (c, text) in [(&mut ext, "danger ext"), (&mut agent, "danger agent")] {
        c.send(
            json!({"type": "tool_call", "id": "tb", "tool": "hub__tool_batch",
            "params": {"steps": [{"tool": "t__echo", "params": {"message": text}}]}}),
        )
        .await;
    }
    let q_ext = question(&mut ext, "danger ext").await;
    let q_agent = question(&mut agent, "danger agent").await;
    assert_eq!(
        question(&mut main, "danger ext").await["taskId"],
        q_ext["taskId"]
    );
    assert_eq!(
        question(&mut main, "danger agent").await["taskId"],
        q_agent["taskId"]
    );
    // The events come in one order to every session: by the time a client
    // hears its own question, it would have heard the earlier ones.
    assert!(!asked(&ext, &q_main), "ext heard the person's question");
    assert!(!asked(&agent, &q_main), "agent heard the person's question");
    assert!(!asked(&agent, &q_ext), "agent heard ext's question");
    // Answers from the wrong principal find nothing.
    refused_as_unknown(&confirm(&mut ext, &q_main, true).await);
    refused_as_unknown(&confirm(&mut agent, &q_ext, true).await);
    refused_as_unknown(&confirm(&mut ext, &q_agent, true).await);
    assert!(
        call_log(&hub.path(), "t")
            .iter()
            .all(|l| !l["arguments"]["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("danger")),
        "a refused answer ran a step"
    );
    // Its principal answers its own; the person answers a client's.
    assert_eq!(confirm(&mut ext, &q_ext, true).await["type"], "confirmed");
    assert_eq!(
        confirm(&mut main, &q_agent, true).await["type"],
        "confirmed"
    );
    assert_eq!(confirm(&mut main, &q_main, true).await["type"], "confirmed");
    for c in [&mut ext, &mut agent] {
        let r = c
            .recv_where("tool_result tb", |v| v["replyTo"] == "tb")
            .await;
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(r["result"]["success"], true, "{r}");
    }
    let t = main
        .request(json!({"type": "task_status", "taskId": task, "wait": true}))
        .await;
    assert_eq!(t["task"]["state"], "success", "{t}");
}

/// A client's batch whose socket closed: its question reaches the same
/// client's other session and the main token's, not another client's;
/// either may answer.
#[tokio::test]
async fn a_clients_batch_question_reaches_its_sessions_and_the_main_token() {
    let (hub, mut main) = start().await;
    let first = client(&hub, EXT).await;
    let steps = json!([
        {"tool": "t__barrier", "params": {"name": "e"}},
        {"tool": "t__echo", "params": {"message": "danger one"}},
        {"tool": "t__echo", "params": {"message": "danger two"}}
    ]);
    let task = orphan(&hub, &mut main, first, "e", steps).await;
    let mut ext = client(&hub, EXT).await;
    let mut agent = client(&hub, AGENT).await;
    barrier::release(&mut main, "t", "e").await;
    let one = question(&mut ext, "danger one").await;
    assert_eq!(one["taskId"], task, "{one}");
    assert_eq!(question(&mut main, "danger one").await["taskId"], task);
    refused_as_unknown(&confirm(&mut agent, &one, true).await);
    // The same client's other session answers the first; the person the
    // second.
    assert_eq!(confirm(&mut ext, &one, true).await["type"], "confirmed");
    let two = question(&mut main, "danger two").await;
    assert_eq!(question(&mut ext, "danger two").await["stepIndex"], 2);
    assert_eq!(confirm(&mut main, &two, true).await["type"], "confirmed");
    let t = ext
        .request(json!({"type": "task_status", "taskId": task, "wait": true}))
        .await;
    assert_eq!(t["task"]["state"], "success", "{t}");
    assert_eq!(t["task"]["client"], "ext", "{t}");
    // The other client heard neither: its own question, asked after, is
    // the first it hears.
    agent
        .send(
            json!({"type": "tool_call", "id": "tb", "tool": "hub__tool_batch",
            "params": {"steps": [{"tool": "t__echo", "params": {"message": "danger agent"}}]}}),
        )
        .await;
    let mine = question(&mut agent, "danger agent").await;
    assert!(
        !asked(&agent, &one) && !asked(&agent, &two),
        "{:?}",
        agent.seen
    );
    assert_eq!(confirm(&mut agent, &mine, false).await["type"], "confirmed");
}
