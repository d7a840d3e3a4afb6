//! Recordings, runs and history carry the principal that made them (issue
//! 49.2): through a client token (`ext`, view `chat`) a client lists, reads,
//! replays, changes and deletes only its own, and another's answers exactly
//! as an unknown id does; the main token sees and does everything.

use serde_json::{json, Value};

use crate::runs::create_and_set;
use crate::servers::wait_running;
use crate::support::{testserver_entry, Client, TestHub};

const EXT: &str = "ext-token-0123456789abcdef";
/// A well-formed id no recording has.
const NO_REC: &str = "rec-00000000000000000000000000000000";

/// A hub with the test server `t`, a workspace file, and the client `ext`
/// whose view `chat` holds `t__echo`, `t__slow`, the hub's recording, run and history
/// tools, and `hub__read_file` and `hub__write_file`.
async fn hub() -> (TestHub, Client) {
    hub_with(json!({})).await
}

/// [`hub`] with `server` settings over the test defaults.
async fn hub_with(server: Value) -> (TestHub, Client) {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    std::fs::create_dir_all(p.join("workspace")).expect("workspace");
    std::fs::write(p.join("workspace/note.txt"), "the person's note").expect("note");
    let cfg = json!({
        "mcpServers": {"t": testserver_entry(&p, "t", &[])},
        "views": {"chat": {"tools": [
            "t__echo", "t__slow", "hub__history", "hub__record_*", "hub__run_*",
            "hub__read_file", "hub__write_file"
        ]}},
        "clients": {"ext": {"token": EXT, "views": ["chat"]}},
        "server": server,
    });
    let hub = TestHub::start_in(dir, cfg).await;
    let mut main = hub.connect().await;
    wait_running(&mut main, "t").await;
    (hub, main)
}

async fn ext(hub: &TestHub) -> Client {
    hub.connect_at("/ws/chat", EXT)
        .await
        .expect("ext opens chat")
}

/// The error of a reply or a tool result, when it is one.
fn error_of(r: &Value) -> Value {
    if r["type"] == "error" || r["success"] == false {
        r["error"].clone()
    } else {
        Value::Null
    }
}

/// `r` is the answer for an unknown id: NOT_FOUND, with the same words as
/// `unknown` (the answer for an id that does not exist) but for the id.
fn like_unknown(r: &Value, unknown: &Value, (id, other): (&str, &str)) {
    let (e, u) = (error_of(r), error_of(unknown));
    assert_eq!(e["errorType"], "NOT_FOUND", "{r}");
    assert_eq!(u["errorType"], "NOT_FOUND", "{unknown}");
    let norm = |v: &Value, id: &str| v.to_string().replace(id, "<id>");
    assert_eq!(norm(&e, id), norm(&u, other), "differs from an unknown id");
}

/// Record `call` on `c` as one recording; its id.
async fn record(c: &mut Client, name: &str, tool: &str, params: Value) -> String {
    let started = c
        .request(json!({"type": "start_recording", "name": name}))
        .await;
    assert_eq!(started["type"], "recording_started", "{started}");
    let r = c.call(tool, params).await;
    assert_eq!(r["success"], true, "{r}");
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["stepCount"], 1, "{stopped}");
    started["recordingId"].as_str().expect("id").to_string()
}

fn ids(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r[key].as_str().map(String::from))
        .collect()
}

#[tokio::test]
async fn a_client_cannot_read_rewrite_or_delete_the_main_tokens_recording() {
    let (hub, mut main) = hub().await;
    let id = record(
        &mut main,
        "mine",
        "hub__read_file",
        json!({"path": "note.txt"}),
    )
    .await;
    let mut c = ext(&hub).await;
    // Listing: main's is absent, by message and by tool.
    let l = c.request(json!({"type": "list_recordings"})).await;
    assert_eq!(l["total"], 0, "{l}");
    assert!(!l.to_string().contains(&id), "{l}");
    let l = c.call("hub__record_list", json!({})).await;
    assert_eq!(l["success"], true, "{l}");
    assert!(!l.to_string().contains(&id), "{l}");
    // Every other message answers as for an id that does not exist.
    let rewrite = json!([{"index": 0, "changes": {
        "tool": "hub__write_file", "params": {"path": "pwned.txt", "content": "x"}}}]);
    for msg in [
        json!({"type": "get_recording"}),
        json!({"type": "export_recording", "format": "batch"}),
        json!({"type": "update_recording", "modifySteps": rewrite}),
        json!({"type": "update_recording", "insertSteps": [{"index": 0, "step": {
            "tool": "hub__write_file", "params": {"path": "pwned.txt", "content": "x"}}}]}),
        json!({"type": "replay_recording", "mode": "live"}),
        json!({"type": "replay_recording", "mode": "dry"}),
        json!({"type": "replay_recording", "mode": "offline"}),
        json!({"type": "get_artifact", "path": "recording.jsonl"}),
        json!({"type": "delete_recording"}),
    ] {
        let mut theirs = msg.clone();
        theirs["recordingId"] = json!(id);
        let mut unknown = msg.clone();
        unknown["recordingId"] = json!(NO_REC);
        let r = c.request(theirs).await;
        let u = c.request(unknown).await;
        like_unknown(&r, &u, (&id, NO_REC));
    }
    for tool in [
        "hub__record_get",
        "hub__record_replay",
        "hub__record_delete",
    ] {
        let r = c.call(tool, json!({"recordingId": id})).await;
        let u = c.call(tool, json!({"recordingId": NO_REC})).await;
        like_unknown(&r, &u, (&id, NO_REC));
    }
    // The main token's recording is as it made it, and still there.
    let l = main.request(json!({"type": "list_recordings"})).await;
    assert_eq!(ids(&l["recordings"], "recordingId"), [id.as_str()], "{l}");
    let g = main
        .request(json!({"type": "get_recording", "recordingId": id}))
        .await;
    let steps = &g["recording"]["steps"];
    assert_eq!(steps.as_array().map(Vec::len), Some(1), "{g}");
    assert_eq!(steps[0]["tool"], "hub__read_file", "{g}");
    // Its next live replay runs the original step: nothing is written.
    let r = main
        .request(json!({"type": "replay_recording", "recordingId": id, "mode": "live"}))
        .await;
    assert_eq!(r["type"], "replay_complete", "{r}");
    assert_eq!(r["success"], true, "{r}");
    assert!(!hub.path().join("workspace/pwned.txt").exists());
    assert!(!r.to_string().contains("pwned"), "{r}");
}

#[tokio::test]
async fn a_client_records_lists_and_replays_its_own_and_main_sees_both() {
    let (hub, mut main) = hub().await;
    let theirs = record(&mut main, "main's", "t__echo", json!({"message": "m"})).await;
    let mut c = ext(&hub).await;
    let mine = record(&mut c, "ext's", "t__echo", json!({"message": "e"})).await;
    // Started by tool too: the saved recording is the session's client's.
    let r = c
        .call("hub__record_start", json!({"name": "by tool"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let by_tool = r["result"]["recordingId"].as_str().expect("id").to_string();
    c.call("t__echo", json!({"message": "e2"})).await;
    let r = c.call("hub__record_stop", json!({})).await;
    assert_eq!(r["result"]["stepCount"], 1, "{r}");

    let l = c.request(json!({"type": "list_recordings"})).await;
    let mut want = vec![mine.clone(), by_tool.clone()];
    want.sort();
    let mut got = ids(&l["recordings"], "recordingId");
    got.sort();
    assert_eq!(got, want, "{l}");
    assert_eq!(l["total"], 2, "{l}");
    assert!(l["recordings"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|r| r["client"] == "ext"));
    // A search is filtered the same way.
    let l = c
        .request(json!({"type": "list_recordings", "query": "s"}))
        .await;
    assert_eq!(ids(&l["recordings"], "recordingId"), [mine.as_str()], "{l}");
    let g = c
        .request(json!({"type": "get_recording", "recordingId": mine}))
        .await;
    assert_eq!(g["type"], "recording", "{g}");
    let r = c
        .request(json!({"type": "replay_recording", "recordingId": mine, "mode": "live"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let r = c
        .call("hub__record_replay", json!({"recordingId": by_tool}))
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");

    // The main token lists, reads, replays and deletes every recording.
    let l = main.request(json!({"type": "list_recordings"})).await;
    let mut got = ids(&l["recordings"], "recordingId");
    got.sort();
    let mut all = vec![theirs, mine.clone(), by_tool];
    all.sort();
    assert_eq!(got, all, "{l}");
    let r = main
        .request(json!({"type": "replay_recording", "recordingId": mine, "mode": "live"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let d = main
        .request(json!({"type": "delete_recording", "recordingId": mine}))
        .await;
    assert_eq!(d["type"], "recording_deleted", "{d}");
}

async fn run_text(c: &mut Client, id: &str) -> String {
    let r = c
        .request(json!({"type": "get_run", "runId": id, "tail": 100}))
        .await;
    assert_eq!(r["type"], "run", "{r}");
    r["entries"].to_string()
}

#[tokio::test]
async fn a_client_sees_and_uses_only_its_own_runs_and_main_sees_all() {
    let (hub, mut main) = hub().await;
    // The main token's run, also the hub-wide default.
    let theirs = create_and_set(&mut main, "the person's topic").await;
    main.call("t__echo", json!({"message": "main-call"})).await;
    let no_run = "no-such-run";
    let mut c = ext(&hub).await;
    let l = c.request(json!({"type": "list_runs"})).await;
    assert_eq!(l["total"], 0, "{l}");
    assert!(!l.to_string().contains(&theirs), "{l}");
    let l = c.call("hub__run_list", json!({})).await;
    assert!(!l.to_string().contains(&theirs), "{l}");
    for msg in [
        json!({"type": "get_run"}),
        json!({"type": "set_run"}),
        json!({"type": "log_run_entry", "step": "x", "status": "success",
            "action_type": "other", "execution_method": "manual"}),
        json!({"type": "archive_run"}),
        json!({"type": "get_artifact", "path": ".metadata.json"}),
        json!({"type": "delete_run"}),
    ] {
        let mut t = msg.clone();
        t["runId"] = json!(theirs);
        let mut u = msg.clone();
        u["runId"] = json!(no_run);
        let r = c.request(t).await;
        let u = c.request(u).await;
        like_unknown(&r, &u, (&theirs, no_run));
    }
    for tool in ["hub__run_get", "hub__run_set", "hub__run_delete"] {
        let r = c.call(tool, json!({"runId": theirs})).await;
        let u = c.call(tool, json!({"runId": no_run})).await;
        like_unknown(&r, &u, (&theirs, no_run));
    }
    // The hub-wide current run is the person's: the client has none.
    c.call("t__echo", json!({"message": "ext-stray"})).await;
    let r = c
        .request(
            json!({"type": "log_run_entry", "step": "x", "status": "success",
            "action_type": "other", "execution_method": "manual"}),
        )
        .await;
    assert_eq!(r["error"]["errorType"], "INVALID_PARAMS", "{r}");
    // Its own run: created, current, logged into.
    let mine = create_and_set(&mut c, "the client's topic").await;
    c.call("t__echo", json!({"message": "ext-call"})).await;
    let l = c.request(json!({"type": "list_runs"})).await;
    assert_eq!(ids(&l["runs"], "runId"), [mine.as_str()], "{l}");
    assert_eq!(l["runs"][0]["client"], "ext", "{l}");
    assert!(run_text(&mut c, &mine).await.contains("ext-call"));
    // A client's set_run is its session's alone: main's calls still go to
    // the person's run.
    main.call("t__echo", json!({"message": "main-later"})).await;
    let main_log = run_text(&mut main, &theirs).await;
    assert!(main_log.contains("main-call") && main_log.contains("main-later"));
    assert!(!main_log.contains("ext-"), "{main_log}");
    // The main token sees both, reads the client's, and may delete it.
    let l = main.request(json!({"type": "list_runs"})).await;
    let mut got = ids(&l["runs"], "runId");
    got.sort();
    let mut all = vec![theirs.clone(), mine.clone()];
    all.sort();
    assert_eq!(got, all, "{l}");
    assert!(run_text(&mut main, &mine).await.contains("ext-call"));
    assert!(!run_text(&mut main, &mine).await.contains("main-"));
    let d = main
        .request(json!({"type": "delete_run", "runId": mine}))
        .await;
    assert_eq!(d["type"], "run_deleted", "{d}");
}

#[tokio::test]
async fn a_clients_history_holds_only_its_own_calls_and_mains_holds_all() {
    let (hub, mut main) = hub().await;
    main.call("t__echo", json!({"message": "main-aggregate"}))
        .await;
    // The main token in the client's own view: the view alone would show it.
    let token = hub.token.clone().expect("token");
    let mut main_chat = hub.connect_at("/ws/chat", &token).await.expect("chat");
    let r = main_chat
        .call("t__echo", json!({"message": "main-in-chat"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let mut c = ext(&hub).await;
    let r = c.call("t__echo", json!({"message": "ext-call"})).await;
    assert_eq!(r["success"], true, "{r}");
    let by_msg = c
        .request(json!({"type": "history", "limit": 100}))
        .await
        .to_string();
    let by_tool = c.call("hub__history", json!({"limit": 100})).await;
    assert_eq!(by_tool["success"], true, "{by_tool}");
    for h in [by_msg, by_tool["result"].to_string()] {
        assert!(h.contains("ext-call"), "{h}");
        assert!(!h.contains("main-"), "{h}");
    }
    let h = c.request(json!({"type": "history", "limit": 100})).await;
    assert!(h["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| e["client"] == "ext"));
    let all = main
        .request(json!({"type": "history", "limit": 100}))
        .await
        .to_string();
    for m in ["main-aggregate", "main-in-chat", "ext-call"] {
        assert!(all.contains(m), "{m}: {all}");
    }
    // The main token in the chat view sees that view's calls, both
    // principals'.
    let chat = main_chat
        .request(json!({"type": "history", "limit": 100}))
        .await
        .to_string();
    assert!(
        chat.contains("main-in-chat") && chat.contains("ext-call"),
        "{chat}"
    );
    assert!(!chat.contains("main-aggregate"), "{chat}");
}

#[tokio::test]
async fn over_mcp_a_clients_hub_tools_see_only_its_own_work() {
    use crate::mcp::driver::{mcp_url, text_of, Driver};
    let (hub, mut main) = hub().await;
    let rec = record(&mut main, "main's", "t__echo", json!({"message": "m"})).await;
    let run = create_and_set(&mut main, "the person's topic").await;
    main.call("t__echo", json!({"message": "main-call"})).await;
    let mut d = Driver::start().await;
    let url = format!("{}/chat", mcp_url(&hub));
    d.ok(json!({"op": "connect", "url": url, "token": EXT}))
        .await;
    let r = d.call("t__echo", json!({"message": "ext-over-mcp"})).await;
    assert_ne!(r["isError"], true, "{r}");
    for (tool, args, hidden) in [
        ("hub__record_list", json!({}), rec.as_str()),
        ("hub__run_list", json!({}), run.as_str()),
        ("hub__history", json!({"limit": 100}), "main-call"),
    ] {
        let r = d.call(tool, args).await;
        assert_ne!(r["isError"], true, "{tool}: {r}");
        assert!(!r.to_string().contains(hidden), "{tool}: {r}");
    }
    let h = d.call("hub__history", json!({"limit": 100})).await;
    assert!(h.to_string().contains("ext-over-mcp"), "{h}");
    for (tool, args) in [
        ("hub__record_get", json!({"recordingId": rec})),
        ("hub__record_replay", json!({"recordingId": rec})),
        ("hub__record_delete", json!({"recordingId": rec})),
        ("hub__run_get", json!({"runId": run})),
        ("hub__run_delete", json!({"runId": run})),
    ] {
        let r = d.call(tool, args).await;
        assert_eq!(r["isError"], true, "{tool}: {r}");
        let text = text_of(&r);
        assert!(
            text.contains("no recording") || text.contains("no run"),
            "{tool}: {r}"
        );
    }
    // Both are still the main token's, whole.
    let g = main
        .request(json!({"type": "get_recording", "recordingId": rec}))
        .await;
    assert_eq!(g["type"], "recording", "{g}");
    assert!(run_text(&mut main, &run).await.contains("main-call"));
}

/// One stateless 2026-07-28 `tools/call` at `/mcp/chat` with `ext`'s token:
/// the raw reply body.
async fn stateless_ext_call(hub: &TestHub, tool: &str, args: Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": tool, "arguments": args, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "ext", "version": "0"},
    }}})
    .to_string();
    let req = format!(
        "POST /mcp/chat HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {EXT}\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        hub.addr,
        body.len()
    );
    let text = crate::mcp::raw_http(hub, &req).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

#[tokio::test]
async fn a_clients_calls_never_reach_the_persons_current_run() {
    let (hub, mut main) = hub().await;
    // The person's run, current for the hub (the hub-wide default).
    let run = create_and_set(&mut main, "the person's topic").await;
    let w = main
        .call(
            "hub__write_file",
            json!({"path": "run:outputs/secret.txt", "content": "the person's output"}),
        )
        .await;
    assert_eq!(w["success"], true, "{w}");
    let outputs = crate::runs::run_dir(&hub, &run).join("outputs");
    // Over /ws and over stateless /mcp, a client's run: paths name no run
    // and its calls are logged into none.
    let mut c = ext(&hub).await;
    let r = c
        .call("hub__read_file", json!({"path": "run:outputs/secret.txt"}))
        .await;
    assert_eq!(r["success"], false, "{r}");
    assert!(!r.to_string().contains("the person's output"), "{r}");
    let r = c
        .call(
            "hub__write_file",
            json!({"path": "run:outputs/ws.txt", "content": "x"}),
        )
        .await;
    assert_eq!(r["success"], false, "{r}");
    c.call("t__echo", json!({"message": "ext-over-ws"})).await;
    let read = stateless_ext_call(
        &hub,
        "hub__read_file",
        json!({"path": "run:outputs/secret.txt"}),
    )
    .await;
    assert!(read.contains("no current run"), "{read}");
    assert!(!read.contains("the person's output"), "{read}");
    let write = stateless_ext_call(
        &hub,
        "hub__write_file",
        json!({"path": "run:outputs/mcp.txt", "content": "x"}),
    )
    .await;
    assert!(write.contains("no current run"), "{write}");
    let echo = stateless_ext_call(&hub, "t__echo", json!({"message": "ext-stateless"})).await;
    assert!(echo.contains("ext-stateless"), "{echo}");
    assert!(!outputs.join("ws.txt").exists() && !outputs.join("mcp.txt").exists());
    let log = run_text(&mut main, &run).await;
    assert!(!log.contains("ext-"), "{log}");
    // The person's own calls still go there.
    main.call("t__echo", json!({"message": "main-call"})).await;
    assert!(run_text(&mut main, &run).await.contains("main-call"));
}

#[tokio::test]
async fn a_clients_batch_outliving_its_session_stays_out_of_the_persons_run() {
    // A dropped socket ends its session at once; its batch goes on.
    let (hub, mut main) = hub_with(json!({"sessionGraceMs": 0})).await;
    let run = create_and_set(&mut main, "the person's topic").await;
    let mut c = ext(&hub).await;
    c.send(json!({"type": "tool_batch", "id": "late", "steps": [
        {"tool": "t__slow", "params": {"ms": 1500}},
        {"tool": "t__echo", "params": {"message": "ext-after-close"}}]}))
        .await;
    let started = c.recv_type("task_state").await;
    let task = started["taskId"].clone();
    let hello = c.seen.iter().find(|v| v["type"] == "hello").cloned();
    let session = hello.and_then(|h| h["sessionId"].as_str().map(String::from));
    let session = session.expect("hello names the session");
    drop(c);
    hub.wait_log(&format!("client disconnected session={session}"))
        .await;
    // The main token sees the view's tasks from the view.
    let token = hub.token.clone().expect("token");
    let mut chat = hub.connect_at("/ws/chat", &token).await.expect("chat");
    let st = chat
        .request(json!({"type": "task_status", "taskId": task, "wait": true}))
        .await;
    assert_eq!(st["task"]["state"], "success", "{st}");
    let log = run_text(&mut main, &run).await;
    assert!(
        !log.contains("ext-after-close") && !log.contains("t__slow"),
        "{log}"
    );
}
