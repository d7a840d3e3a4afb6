//! The Chrome extension (extension/) against this hub: the block parser's
//! unit tests in node, the whole extension in Debian's chromium under
//! playwright-core (tests/extension/run.mjs) with a fixture chat page, and
//! 60 s of idleness in a chromium that no debugger holds awake.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::node_script::{self, NodeScript};
use crate::support::{testserver_entry, write_config, TestHub};

/// The id the manifest's `key` gives the extension.
const EXTENSION_ID: &str = "ogalccghdnhlhiecjohlmgmaembolcgn";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn screenshots() -> PathBuf {
    node_script::screenshots("extension-screenshots")
}

/// The hub the browser tests use: test servers `t` (on, trusted: its
/// annotations count) and `u` (off, with an extra tool), `x` (on, not
/// trusted: its `readOnlyHint` tools still wait for a click), a confirm
/// rule on echo "danger", and exactly the extension's origin allowed.
fn config(dir: &Path) -> Value {
    let mut t = testserver_entry(dir, "t", &[]);
    t["trusted"] = json!(true);
    let mut u = testserver_entry(dir, "u", &["--extra-tool", "u_extra"]);
    u["disabled"] = json!(true);
    // One instance per tab (a browser's stand-in: its memo is its page).
    let mut pc = testserver_entry(dir, "pc", &[]);
    pc["scope"] = json!("context");
    json!({
        "server": {"allowedOrigins": [format!("chrome-extension://{EXTENSION_ID}")]},
        // `m` asks the person a form mid-call (run.mjs "form").
        "mcpServers": {"t": t, "u": u, "pc": pc, "x": testserver_entry(dir, "x", &[]),
            "m": testserver_entry(dir, "m", &["--mrtr"])},
        "safety": {"rules": [
            {"tool": "echo", "match": {"message": "danger"}, "action": "confirm", "reason": "dangerous echo"}
        ]},
        // The extension as a client with a view of its own (run.mjs "view").
        "views": {"chat": {"tools": ["t__echo", "hub__read_file"]}},
        "clients": {"extension": {"token": "extension-view-token-0123456789", "views": ["chat"]}}
    })
}

#[tokio::test]
async fn the_block_parser_passes_its_unit_tests() {
    let out = tokio::process::Command::new("node")
        .arg("--test")
        .arg(root().join("tests/extension/blocks.test.mjs"))
        .arg(root().join("tests/extension/instructions.test.mjs"))
        .arg(root().join("tests/extension/policy.test.mjs"))
        .output()
        .await
        .expect("node (the tests need Node.js)");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the extension's consent reads from the tool list (issue 49.5):
/// `trustedServers` names the hub's own server and the servers marked
/// `trusted` in config, never another; a view names only its own; and a
/// view's renamed tool says what it really is (`realTool`), so a renamed
/// `hub__tool_batch` is still judged as one. Through the main token, a
/// client's token on its view, and `hub__list_tools`.
#[tokio::test]
async fn the_tool_list_says_whose_annotations_count() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut c = config(&p);
    c["views"]["chat"] = json!({"tools": ["t__echo", "x__echo", "hub__read_file", "hub__tool_batch"],
        "rename": {"hub__tool_batch": {"name": "batch"}}});
    let hub = TestHub::start_in(dir, c).await;
    let trusted = |l: &Value| -> Vec<String> {
        l["trustedServers"]
            .as_array()
            .unwrap_or_else(|| panic!("no trustedServers in {l}"))
            .iter()
            .map(|s| s.as_str().unwrap_or_default().to_string())
            .collect()
    };
    let mut main = hub.connect().await;
    let all = main.request(json!({"type": "list_tools"})).await;
    assert!(
        all["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["server"] == "x")),
        "{all}"
    );
    assert_eq!(trusted(&all), ["hub", "t"], "the hub and t; not x, m or pc");
    let listed = main.call("hub__list_tools", json!({})).await;
    assert_eq!(trusted(&listed["result"]), ["hub", "t"], "{listed}");

    let mut ext = hub
        .connect_at("/ws/chat", "extension-view-token-0123456789")
        .await
        .expect("the client opens its view");
    let view = ext.request(json!({"type": "list_tools"})).await;
    assert_eq!(trusted(&view), ["hub", "t"], "{view}");
    let tools = view["tools"].as_array().expect("tools");
    let batch = tools
        .iter()
        .find(|t| t["qualifiedName"] == "batch")
        .expect("batch");
    assert_eq!(batch["realTool"], "hub__tool_batch", "{batch}");
    assert!(
        tools
            .iter()
            .filter(|t| t["qualifiedName"] != "batch")
            .all(|t| t.get("realTool").is_none()),
        "only a renamed tool has realTool: {view}"
    );
    let path = hub.path().join("config.json");
    let mut c2: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("json");
    c2["views"]["chat"] = json!({"tools": ["x__echo"]});
    write_config(&path, &c2);
    let update = ext.recv_type("tools_updated").await;
    assert_eq!(
        trusted(&update),
        Vec::<String>::new(),
        "a view of x alone names no trusted server: {update}"
    );
}

/// `node tests/extension/run.mjs` against `hub`, answering its `ask:` lines.
struct Script(NodeScript);

impl Script {
    fn start(hub: &TestHub, env: &[(&str, String)]) -> Script {
        let mut all = vec![
            ("HUB_WS", hub.url()),
            ("TOKEN", hub.token.clone().expect("token")),
            ("HUB_DIR", hub.path().display().to_string()),
        ];
        all.extend(env.iter().cloned());
        Script(NodeScript::start(
            "tests/extension/run.mjs",
            "extension",
            screenshots(),
            &all,
        ))
    }

    /// Run to the end, answering `ask:` lines; the hub may be replaced
    /// (`restart-hub`), so it is given back.
    async fn run(mut self, mut hub: TestHub) -> TestHub {
        while let Some(l) = self.0.next_line().await {
            let Some(cmd) = l.strip_prefix("ask: ") else {
                continue;
            };
            let answer = if let Some(needle) = cmd.strip_prefix("log-count ") {
                hub.log_count(needle).to_string()
            } else if cmd == "restart-hub" {
                hub = restart_on_same_address(hub).await;
                "ok".to_string()
            } else if cmd == "crash-hub" {
                hub = crash_on_same_address(hub).await;
                "ok".to_string()
            } else {
                format!("unknown request {cmd:?}")
            };
            self.0.say(&answer).await;
        }
        self.0.finish().await;
        hub
    }
}

/// Stop the hub (its sockets close with 1001) and start it again on the
/// same folder, config and address, as after an upgrade.
async fn restart_on_same_address(mut hub: TestHub) -> TestHub {
    let addr = hub.addr.clone();
    let config_path = hub.path().join("config.json");
    let dir = std::mem::replace(&mut hub.dir, tempfile::tempdir().expect("dir"));
    assert!(hub.terminate().await.success());
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).expect("config"))
            .expect("json");
    config["server"]["listen"] = json!(addr);
    write_config(&config_path, &config);
    let hub = TestHub::spawn(dir, &config_path).await;
    assert_eq!(hub.addr, addr);
    hub
}

/// SIGKILL the hub mid-work and start it again on the same address.
async fn crash_on_same_address(hub: TestHub) -> TestHub {
    let addr = hub.addr.clone();
    let config_path = hub.path().join("config.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).expect("config"))
            .expect("json");
    config["server"]["listen"] = json!(addr);
    write_config(&config_path, &config);
    let hub = hub.crash_and_restart().await;
    assert_eq!(hub.addr, addr);
    hub
}

/// The whole extension in chromium: a single call and a batch streamed into
/// the fixture chat, re-render and reload, an approval from the popup,
/// two tabs, results into the chat input, the worker stopped mid-call and
/// at random points of ten 10-step batches, the hub restarted, a server
/// enabled in config.json, and a wrong token.
#[tokio::test]
async fn the_extension_runs_blocks_in_chromium() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(dir, config(&p)).await;
    let hub = Script::start(&hub, &[]).run(hub).await;
    // The hub saw exactly the extension's origin (config allows no other).
    assert!(
        hub.log_count("status=403") == 0,
        "no upgrade was refused for its origin"
    );
    assert!(screenshots().join("extension-chat.png").exists());
}

/// The chat sites the extension supports, each a fixture of its real DOM and
/// editor under its real host name (tests/extension/sites.mjs): only the
/// assistant's live turn runs by itself, only tools the site may run without
/// asking; history, navigation, share views and user messages wait for a
/// click; results go into the real ProseMirror and Quill editors. And the
/// attack: a shared conversation that pipes the SSH key of the hub's HOME
/// into curl runs nothing on open, and the sandbox refuses the read after a
/// click, so the local listener gets no key material.
#[tokio::test]
async fn on_the_chat_sites_only_the_live_turn_runs_by_itself() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let home = p.join("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("home");
    let marker = format!("FAKE-ED25519-KEY-{}", std::process::id());
    std::fs::write(
        home.join(".ssh/id_ed25519"),
        format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{marker}\n-----END OPENSSH PRIVATE KEY-----\n"
        ),
    )
    .expect("key");
    let workspace = p.join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    for id in ["chatgpt", "claude", "gemini", "genspark"] {
        std::fs::write(
            workspace.join(format!("notes-{id}.txt")),
            format!("notes of {id}"),
        )
        .expect("notes");
        let big = format!("BIG-HEAD-{id}\n{}\nBIG-TAIL-{id}", "x".repeat(30_000));
        std::fs::write(workspace.join(format!("big-{id}.txt")), big).expect("big");
    }
    let hub = TestHub::start_in_with(dir, config(&p), |cmd| {
        cmd.env("HOME", &home);
    })
    .await;
    let env = [
        ("HUB_WS", hub.url()),
        ("TOKEN", hub.token.clone().expect("token")),
        ("HUB_DIR", hub.path().display().to_string()),
        ("KEY_MARKER", marker),
    ];
    NodeScript::start("tests/extension/sites.mjs", "sites", screenshots(), &env)
        .finish()
        .await;
    assert!(
        !hub.logs().contains("FAKE-ED25519-KEY"),
        "the key never reached the hub's log"
    );
}

/// The worker stopped during a call for longer than the hub keeps its
/// session: the hub cancels the call with the session, and the extension
/// reports it so (from the hub's history) instead of sending it again,
/// which would run it a second time.
#[tokio::test]
async fn a_call_cancelled_with_its_expired_session_is_not_run_again() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let mut c = config(&p);
    c["server"]["sessionGraceMs"] = json!(50);
    let hub = TestHub::start_in(dir, c).await;
    Script::start(&hub, &[("ONLY", "grace".into())])
        .run(hub)
        .await;
}

/// 60 s without a call: the worker keeps its socket (the hub's WebSocket
/// pings do not count as activity for an extension's service worker, so it
/// sends its own) and never reconnects. Chromium runs here with no
/// debugger attached: playwright holds every worker awake, so the profile
/// is prepared with it first and then opened by chromium alone.
#[tokio::test]
async fn the_extension_keeps_its_socket_through_60_s_of_idleness() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().to_path_buf();
    let hub = TestHub::start_in(dir, config(&p)).await;
    let profile = tempfile::tempdir().expect("profile");
    Script::start(
        &hub,
        &[("SETUP_ONLY", profile.path().display().to_string())],
    )
    .run_setup()
    .await;
    // The setup browser has closed its socket: count from here.
    let connected = hub.log_count("client connected");
    hub.wait_log_count("client disconnected", connected).await;
    let disconnected = hub.log_count("client disconnected");
    let ext = root().join("extension");
    let mut chromium = tokio::process::Command::new(
        std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
    );
    chromium
        .args([
            "--headless=new",
            &format!("--disable-extensions-except={}", ext.display()),
            &format!("--load-extension={}", ext.display()),
            "--no-sandbox",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-gpu",
            &format!("--user-data-dir={}", profile.path().display()),
            "about:blank",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let mut browser = chromium.spawn().expect("chromium");
    let pgid = browser.id().expect("pid") as i32;
    hub.wait_log_count("client connected", connected + 1).await;
    // The idleness itself: wait for the event that must not come (the
    // socket dropping), for 60 s; it coming is the failure.
    let dropped = hub
        .log_count_reaches(
            "client disconnected",
            disconnected + 1,
            Duration::from_secs(60),
        )
        .await;
    assert!(
        !dropped,
        "the extension's socket dropped within 60 s idle:\n{}",
        hub.logs()
    );
    let now_connected = hub.log_count("client connected");
    let now_disconnected = hub.log_count("client disconnected");
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = browser.wait().await;
    assert_eq!(
        (now_connected, now_disconnected),
        (connected + 1, disconnected),
        "after 60 s idle the extension's socket is the same one (no drop, no reconnect):\n{}",
        hub.logs()
    );
}

impl Script {
    /// The profile-only run (SETUP_ONLY): no requests, `done` at the end.
    async fn run_setup(self) {
        self.0.finish().await;
    }
}
