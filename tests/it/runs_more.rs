//! Runs, continued: the steps of the hub's control tools (`hub__tool_batch`,
//! `hub__record_replay`) logged into the caller's run, from /ws and /mcp.

use serde_json::{json, Value};

use crate::mcp::driver::Driver;
use crate::runs::{create_and_set, entries, file_names, hub_with_t, run_dir};

/// `(data.tool, action_type, execution_method, data.source.type)` of each entry.
fn kinds(e: &[Value]) -> Vec<[String; 4]> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    e.iter()
        .map(|x| {
            [
                s(&x["data"]["tool"]),
                s(&x["action_type"]),
                s(&x["execution_method"]),
                s(&x["data"]["source"]["type"]),
            ]
        })
        .collect()
}

fn k(tool: &str, action: &str, method: &str, source: &str) -> [String; 4] {
    [tool, action, method, source].map(String::from)
}

#[tokio::test]
async fn steps_of_hub_tool_batch_and_record_replay_are_logged_into_the_callers_run() {
    let (_hub, mut c) = hub_with_t(json!({})).await;
    // A recording of one call, made before any run is current.
    c.request(json!({"type": "start_recording", "name": "one echo"}))
        .await;
    assert_eq!(
        c.call("t__echo", json!({"message": "r"})).await["success"],
        true
    );
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    let rec_id = stopped["recordingId"].as_str().expect("rec").to_string();

    let id = create_and_set(&mut c, "control tools").await;
    // Recorded while the batch runs: only the control tool's own call is
    // kept, not its steps (a replay would run them twice).
    c.request(json!({"type": "start_recording", "name": "batch tool"}))
        .await;
    let batch = c
        .call(
            "hub__tool_batch",
            json!({"steps": [
                {"id": "e1", "tool": "t__echo", "params": {"message": "in the tool"}},
                {"id": "c1", "tool": "hub__run_command", "params": {"command": "echo x"}}
            ]}),
        )
        .await;
    assert_eq!(batch["success"], true, "{batch}");
    let stopped = c.request(json!({"type": "stop_recording"})).await;
    assert_eq!(stopped["stepCount"], 1, "{stopped}");

    let replay = c
        .call("hub__record_replay", json!({"recordingId": rec_id}))
        .await;
    assert_eq!(replay["success"], true, "{replay}");

    let e = entries(&mut c, &id, 50).await;
    assert_eq!(
        kinds(&e),
        vec![
            k("t__echo", "other", "tool", "batch_step"),
            k(
                "hub__run_command",
                "data_processing",
                "command",
                "batch_step"
            ),
            k("hub__tool_batch", "other", "tool", "tool_call"),
            k("t__echo", "recipe_execution", "recipe", "batch_step"),
            k("hub__record_replay", "other", "tool", "tool_call"),
        ],
        "{e:#?}"
    );
    assert_eq!(e[0]["data"]["source"]["stepId"], "e1");
    assert_eq!(e[0]["step"], "batch step e1: t__echo");
    assert!(e[3]["step"]
        .as_str()
        .unwrap_or_default()
        .starts_with("replay step"));
}

#[tokio::test]
async fn an_mcp_sessions_hub_tool_batch_is_logged_into_its_own_run() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let (mut d, _) = Driver::connect(&hub, json!({})).await;
    d.call(
        "hub__run_create",
        json!({"theme": "mcp work", "runId": "mcp-work"}),
    )
    .await;
    d.call("hub__run_set", json!({"runId": "mcp-work"})).await;
    // Another connection's choice moves the hub-wide default elsewhere;
    // the MCP session keeps its own.
    let other = create_and_set(&mut c, "elsewhere").await;
    d.call(
        "hub__tool_batch",
        json!({"steps": [{"id": "m1", "tool": "t__echo", "params": {"message": "via mcp"}}]}),
    )
    .await;
    let e = entries(&mut c, "mcp-work", 50).await;
    let kinds = kinds(&e);
    assert_eq!(
        kinds,
        vec![
            k("t__echo", "other", "tool", "batch_step"),
            k("hub__tool_batch", "other", "tool", "mcp_call"),
        ],
        "{e:#?}"
    );
    assert_eq!(e[1]["step"], "tool_call hub__tool_batch", "{e:#?}");
    assert_eq!(
        entries(&mut c, &other, 50).await.len(),
        0,
        "nothing of the MCP session goes into another connection's run"
    );
}

/// The error class of a failed tool call, after checking it failed.
fn failed_with(r: &Value, class: &str) {
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"]["errorType"], class, "{r}");
}

#[tokio::test]
async fn run_paths_reach_the_current_runs_scripts_and_outputs_and_nothing_else() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    // No run is current: a run: path says how to set one.
    let r = c
        .call(
            "hub__write_file",
            json!({"path": "run:outputs/x.txt", "content": "x"}),
        )
        .await;
    failed_with(&r, "INVALID_PARAMS");
    let hint = r["error"]["suggestion"].as_str().unwrap_or_default();
    assert!(hint.contains("set_run"), "{r}");

    let id = create_and_set(&mut c, "files").await;
    let dir = std::fs::canonicalize(run_dir(&hub, &id)).expect("run dir");
    let script = "echo made > \"$TOOLHUB_RUN_OUTPUTS/made.txt\"\necho ran\n";
    let w = c
        .call(
            "hub__write_file",
            json!({"path": "run:scripts/make.sh", "content": script}),
        )
        .await;
    assert_eq!(w["success"], true, "{w}");
    assert_eq!(w["result"]["path"], "run:scripts/make.sh", "{w}");
    assert_eq!(
        std::fs::read_to_string(dir.join("scripts/make.sh")).expect("script"),
        script
    );
    let r = c
        .call("hub__read_file", json!({"path": "run:scripts/make.sh"}))
        .await;
    assert_eq!(r["result"], script, "{r}");
    let l = c
        .call("hub__list_directory", json!({"path": "run:scripts"}))
        .await;
    assert_eq!(l["result"]["path"], "run:scripts", "{l}");
    assert_eq!(l["result"]["entries"][0]["name"], "make.sh", "{l}");

    // run_command in the run's folder, told where it is.
    let ran = c
        .call(
            "hub__run_command",
            json!({"command": "sh scripts/make.sh", "cwd": "run:"}),
        )
        .await;
    assert_eq!(ran["success"], true, "{ran}");
    assert_eq!(
        std::fs::read_to_string(dir.join("outputs/made.txt")).expect("output"),
        "made\n"
    );
    let pwd = c
        .call(
            "hub__run_command",
            json!({"command": "pwd; echo \"$TOOLHUB_RUN_ID\"", "cwd": "run:outputs"}),
        )
        .await;
    assert_eq!(
        pwd["result"]["stdout"],
        format!("{}\n{id}\n", dir.join("outputs").display()),
        "{pwd}"
    );
    let e = entries(&mut c, &id, 50).await;
    let ran_entry = e
        .iter()
        .find(|x| x["data"]["params"]["command"] == "sh scripts/make.sh")
        .expect("the script's entry");
    assert_eq!(ran_entry["execution_method"], "file", "{ran_entry}");
    assert_eq!(ran_entry["data"]["file"], "scripts/make.sh");

    // Nothing outside scripts/ and outputs/: not the log, not `..`, not an
    // absolute path, not a symlink out.
    std::os::unix::fs::symlink("/etc", dir.join("outputs/etc")).expect("symlink");
    for path in [
        "run:logs/execution.jsonl",
        "run:.metadata.json",
        "run:/etc/passwd",
        "run:scripts/../.metadata.json",
        "run:outputs/../../../config.json",
        "run:outputs/etc/passwd",
    ] {
        let r = c.call("hub__read_file", json!({"path": path})).await;
        assert_eq!(r["success"], false, "{path}: {r}");
        let class = r["error"]["errorType"].as_str().unwrap_or_default();
        assert!(
            class == "INVALID_PARAMS" || class == "PERMISSION",
            "{path}: {r}"
        );
    }
    for cwd in ["run:logs", "run:outputs/..", "run:outputs/etc"] {
        let r = c
            .call("hub__run_command", json!({"command": "pwd", "cwd": cwd}))
            .await;
        assert_eq!(r["success"], false, "{cwd}: {r}");
    }
}

#[tokio::test]
async fn images_are_kept_in_the_run_when_a_call_or_step_asks() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = create_and_set(&mut c, "images").await;
    let shots = run_dir(&hub, &id).join("screenshots");
    // Not asked (and `image` is no screenshot tool): nothing is kept.
    assert_eq!(c.call("t__image", json!({})).await["success"], true);
    // A tool_call that asks, naming them.
    c.send(
        json!({"type": "tool_call", "id": "i1", "tool": "t__image", "params": {},
                  "saveImages": "Front page"}),
    )
    .await;
    let r = c.recv_where("i1", |v| v["replyTo"] == "i1").await;
    assert_eq!(r["success"], true, "{r}");
    // Batch steps that ask: one image, and a tool with none.
    c.send(json!({"type": "tool_batch", "id": "b", "steps": [
        {"id": "s1", "tool": "t__image", "saveImages": true},
        {"id": "s2", "tool": "t__echo", "params": {"message": "no image"}, "saveImages": true}
    ]}))
    .await;
    c.recv_where("batch", |v| v["type"] == "batch_complete")
        .await;
    // A step of hub__tool_batch, for the calling session's run.
    let tb = c
        .call(
            "hub__tool_batch",
            json!({"steps": [{"id": "n1", "tool": "t__image", "saveImages": "nested"}]}),
        )
        .await;
    assert_eq!(tb["success"], true, "{tb}");

    assert_eq!(
        file_names(&shots),
        ["001_front-page.png", "002_image.png", "003_nested.png"]
    );
    let png = std::fs::read(shots.join("001_front-page.png")).expect("png");
    assert_eq!(&png[1..4], b"PNG");
    let e = entries(&mut c, &id, 50).await;
    let shot_of = |tool: &str, nth: usize| -> Value {
        e.iter()
            .filter(|x| x["data"]["tool"] == tool)
            .nth(nth)
            .cloned()
            .unwrap_or_else(|| panic!("{tool} #{nth}: {e:#?}"))
    };
    let plain = shot_of("t__image", 0);
    assert_eq!(plain["action_type"], "other", "{plain}");
    assert!(plain["data"].get("screenshot").is_none(), "{plain}");
    let asked = shot_of("t__image", 1);
    assert_eq!(asked["action_type"], "screenshot", "{asked}");
    assert_eq!(
        asked["data"]["screenshot"],
        "screenshots/001_front-page.png"
    );
    let step = shot_of("t__image", 2);
    assert_eq!(
        step["data"]["screenshot"], "screenshots/002_image.png",
        "{step}"
    );
    let echo = shot_of("t__echo", 0);
    assert_eq!(echo["action_type"], "other", "{echo}");
    let nested = shot_of("t__image", 3);
    assert_eq!(
        nested["data"]["screenshot"], "screenshots/003_nested.png",
        "{nested}"
    );
}
