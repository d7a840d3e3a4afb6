//! docs/configuration.md's reference says what the loader does: every key
//! the loader accepts (`toolhub::config::key_sections`, read from the Raw
//! serde types) has a row in its section's table, every row names a key the
//! loader accepts, and every default written as a JSON value (`60000`,
//! `true`, `"./state"`, `[]`) is what a config that leaves the key out
//! loads. Removed keys are listed as removed and have no row.
//!
//! How the page is read: under `## config.json reference`, each `### `
//! heading names the object its `| key | default | meaning |` tables
//! describe ([`HEADINGS`]); a row's key may go deeper (`retention.maxAge…`,
//! `tools.TOOL.resumeUncertain`, `rules[].tool`), upper-case segments and
//! `[]` standing for any name or item. The `retry.strategies` table has one
//! row per class and one column per key.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use toolhub::config::{key_sections, parse, Config, REMOVED_KEYS};

/// Each heading of the reference that has key tables, and the object of
/// config.json (a dotted path, `*` for any name) its rows are keys of.
const HEADINGS: &[(&str, &str)] = &[
    ("server", "server"),
    ("mcpServers.NAME", "mcpServers.*"),
    ("builtin", "builtin"),
    ("taskEngine", "taskEngine"),
    ("healthCheck", "healthCheck"),
    ("recording and replay", ""),
    ("runs", ""),
    ("retry", "retry"),
    ("safety", "safety"),
    ("security", "security"),
    ("assertions", "assertions"),
    ("views", "views.*"),
    ("clients", "clients.*"),
];

/// A config with one entry of every map and list that has keys of its own,
/// so that their defaults load too.
const MINIMAL: &str = r#"{
  "mcpServers": {"s": {"command": "x", "tools": {"t": {}}}, "h": {"url": "http://127.0.0.1:1/mcp"}},
  "safety": {"rules": [{}]},
  "views": {"v": {}}
}"#;

const BASE: &str = "/tmp/config-docs";

fn page() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    std::fs::read_to_string(path).expect("read docs/configuration.md")
}

/// `rules[].tool` -> `rules.*.tool`; `tools.TOOL.x` -> `tools.*.x`.
fn normalize(prefix: &str, key: &str) -> String {
    let key = key.replace("[]", ".*");
    let segs = key.split('.').map(|s| {
        let placeholder = !s.is_empty() && s.chars().all(|c| c.is_ascii_uppercase());
        if placeholder {
            "*"
        } else {
            s
        }
    });
    let key: Vec<&str> = segs.collect();
    match prefix {
        "" => key.join("."),
        _ => format!("{prefix}.{}", key.join(".")),
    }
}

/// The first code span of a cell.
fn span(cell: &str) -> Option<&str> {
    let rest = cell.split_once('`')?.1;
    Some(rest.split_once('`')?.0)
}

struct Docs {
    /// Dotted key (normalized) -> its default cell, for every key row.
    rows: BTreeMap<String, String>,
    /// Class -> (key -> cell) of the `retry.strategies` table.
    strategies: BTreeMap<String, BTreeMap<String, String>>,
    /// The reference's prose, outside tables.
    prose: String,
}

fn read_docs() -> Docs {
    let page = page();
    let reference = page
        .split_once("## config.json reference")
        .expect("a `## config.json reference` section")
        .1;
    let reference = reference.split("\n## ").next().unwrap_or(reference);
    let mut docs = Docs {
        rows: BTreeMap::new(),
        strategies: BTreeMap::new(),
        prose: String::new(),
    };
    let mut heading = "";
    let mut header: Vec<String> = Vec::new();
    for line in reference.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            heading = h.trim();
            continue;
        }
        if !line.starts_with('|') {
            header.clear();
            docs.prose.push_str(line);
            docs.prose.push('\n');
            continue;
        }
        let cells: Vec<String> = line
            .trim()
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect();
        if header.is_empty() {
            header = cells;
            continue;
        }
        if cells[0].starts_with("---") {
            continue;
        }
        match header[0].as_str() {
            "key" => {
                let prefix = HEADINGS
                    .iter()
                    .find(|(h, _)| *h == heading)
                    .unwrap_or_else(|| {
                        panic!("a key table under `### {heading}`, which HEADINGS does not name")
                    })
                    .1;
                let key = span(&cells[0]).expect("a row's key is a code span");
                let path = normalize(prefix, key);
                let old = docs.rows.insert(path.clone(), cells[1].clone());
                assert!(old.is_none(), "{path} has two rows");
            }
            "class" => {
                let class = span(&cells[0]).expect("a class is a code span").to_string();
                let keys = header[1..].iter().cloned().zip(cells[1..].iter().cloned());
                docs.strategies.insert(class, keys.collect());
            }
            _ => {}
        }
    }
    // The strategy table's columns are the keys of each strategy.
    if let Some(first) = docs.strategies.values().next() {
        for key in first.keys() {
            docs.rows
                .insert(format!("retry.strategies.*.{key}"), String::new());
        }
    }
    docs
}

/// Every key the loader accepts, as a dotted path with `*` for any name.
fn loader_keys() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (section, keys) in key_sections() {
        for key in keys {
            out.insert(normalize(section, key));
        }
    }
    out
}

/// Whether `path` holds an object of its own keys (documented by theirs).
fn is_section(path: &str) -> bool {
    key_sections()
        .iter()
        .any(|(s, _)| *s == path || s.starts_with(&format!("{path}.")))
}

#[test]
fn every_key_the_loader_accepts_is_documented_and_every_documented_key_loads() {
    let docs = read_docs();
    let loaded = loader_keys();
    let documented: BTreeSet<String> = docs.rows.keys().cloned().collect();
    let undocumented: Vec<&String> = loaded
        .iter()
        .filter(|k| !documented.contains(*k) && !is_section(k))
        .filter(|k| k.contains('.') || !docs.prose.contains(&format!("`{k}`")))
        .collect();
    let unknown: Vec<&String> = documented.difference(&loaded).collect();
    println!(
        "{} keys accepted by the loader ({} leaves), {} documented rows",
        loaded.len(),
        loaded.iter().filter(|k| !is_section(k)).count(),
        documented.len()
    );
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "keys the loader accepts without a row in docs/configuration.md: {undocumented:?}\n\
         rows of docs/configuration.md that the loader does not accept: {unknown:?}"
    );
}

#[test]
fn removed_keys_are_listed_as_removed_and_have_no_row() {
    let docs = read_docs();
    let removed = docs
        .prose
        .split_once("Removed keys")
        .expect("a `Removed keys` paragraph in the reference")
        .1;
    for (path, _) in REMOVED_KEYS {
        assert!(removed.contains(&format!("`{path}`")), "{path} not listed");
        assert!(!docs.rows.contains_key(*path), "{path} still has a row");
    }
}

fn ms(d: std::time::Duration) -> Value {
    json!(d.as_millis() as u64)
}

fn hours(d: std::time::Duration) -> Value {
    json!(d.as_secs() / 3600)
}

/// A loaded path as the docs write it: `./x` under the config's folder.
fn rel(p: &Path) -> Value {
    let inner = p.strip_prefix(BASE).expect("under the config folder");
    json!(format!("./{}", inner.display()))
}

/// A loaded `~/…` path as the docs write it.
fn home(paths: &[PathBuf]) -> Value {
    let home = std::env::var("HOME").expect("HOME");
    let list: Vec<String> = paths
        .iter()
        .map(|p| match p.strip_prefix(&home) {
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => p.display().to_string(),
        })
        .collect();
    json!(list)
}

/// `ExtendTimeout` -> `"extend_timeout"`, `Shared` -> `"shared"`.
fn name(v: impl std::fmt::Debug) -> Value {
    let mut out = String::new();
    for (i, c) in format!("{v:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    json!(out)
}

/// A loaded map as the docs write an empty one: `{}` (its size otherwise).
fn map(len: usize) -> Value {
    match len {
        0 => json!({}),
        n => json!(n),
    }
}

type Get = fn(&Config) -> Value;

/// What the loaded config holds for each key with a documented default.
fn loaded_values() -> Vec<(&'static str, Get)> {
    vec![
        ("server.listen", |c| json!(c.server.listen.to_string())),
        ("server.allowedOrigins", |c| json!(c.server.allowed_origins)),
        ("server.maxMessageBytes", |c| {
            json!(c.server.max_message_bytes)
        }),
        ("server.maxConnections", |c| json!(c.server.max_connections)),
        ("server.sendQueue", |c| json!(c.server.send_queue)),
        ("server.sessionGraceMs", |c| ms(c.server.session_grace)),
        ("server.resumeBufferBytes", |c| {
            json!(c.server.resume_buffer_bytes)
        }),
        ("server.callKeyTtlMs", |c| ms(c.server.call_key_ttl)),
        ("server.callKeyMax", |c| json!(c.server.call_key_max)),
        ("server.callKeyMaxBytes", |c| {
            json!(c.server.call_key_max_bytes)
        }),
        ("server.callKeyClientMaxBytes", |c| {
            json!(c.server.call_key_client_max_bytes)
        }),
        ("server.keptResultsMaxBytes", |c| {
            json!(c.server.kept_results_max_bytes)
        }),
        ("server.maxInFlightPerSession", |c| {
            json!(c.server.max_in_flight_per_session)
        }),
        ("server.maxUnattendedTasks", |c| {
            json!(c.server.max_unattended_tasks)
        }),
        ("server.handshakeTimeout", |c| {
            ms(c.server.handshake_timeout)
        }),
        ("server.pingInterval", |c| ms(c.server.ping_interval)),
        ("server.idleTimeout", |c| ms(c.server.idle_timeout)),
        ("server.maxJsonDepth", |c| json!(c.server.max_json_depth)),
        ("server.mcpEndpoint", |c| json!(c.server.mcp_endpoint)),
        ("server.mcpPageSize", |c| json!(c.server.mcp_page_size)),
        ("server.mcpSessionIdle", |c| ms(c.server.mcp_session_idle)),
        ("server.mcpStreamPoll", |c| ms(c.server.mcp_stream_poll)),
        ("server.workerThreads", |c| json!(c.server.worker_threads)),
        ("server.mcpBareNames", |c| json!(c.server.mcp_bare_names)),
        ("mcpServers.*.args", |c| {
            match &c.mcp_servers["s"].transport {
                toolhub::config::Transport::Stdio { args, .. } => json!(args),
                _ => Value::Null,
            }
        }),
        ("mcpServers.*.env", |c| {
            match &c.mcp_servers["s"].transport {
                toolhub::config::Transport::Stdio { env, .. } => json!(env),
                _ => Value::Null,
            }
        }),
        ("mcpServers.*.headers", |c| {
            match &c.mcp_servers["h"].transport {
                toolhub::config::Transport::Http { headers, .. } => json!(headers),
                _ => Value::Null,
            }
        }),
        ("mcpServers.*.disabled", |c| {
            json!(c.mcp_servers["s"].disabled)
        }),
        ("mcpServers.*.trusted", |c| {
            json!(c.mcp_servers["s"].trusted)
        }),
        ("mcpServers.*.tools", |c| {
            map(c.mcp_servers["h"].tool_overrides.len())
        }),
        ("mcpServers.*.scope", |c| name(c.mcp_servers["s"].scope)),
        ("mcpServers.*.maxInstances", |c| {
            json!(c.mcp_servers["s"].instances.max)
        }),
        ("mcpServers.*.instanceIdleMs", |c| {
            ms(c.mcp_servers["s"].instances.idle)
        }),
        ("builtin.enabled", |c| json!(c.builtin.enabled)),
        ("builtin.workspace", |c| rel(&c.builtin.workspace)),
        ("builtin.commandTimeout", |c| ms(c.builtin.command_timeout)),
        ("builtin.maxOutputBytes", |c| {
            json!(c.builtin.max_output_bytes)
        }),
        ("builtin.maxReadBytes", |c| json!(c.builtin.max_read_bytes)),
        ("builtin.sandbox", |c| json!(c.builtin.sandbox.as_str())),
        ("builtin.sandboxNetwork", |c| {
            json!(c.builtin.sandbox_network)
        }),
        ("builtin.sandboxDenyRead", |c| {
            home(&c.builtin.sandbox_deny_read)
        }),
        ("builtin.sandboxAllowRead", |c| {
            home(&c.builtin.sandbox_allow_read)
        }),
        ("builtin.commandEnv", |c| json!(c.builtin.command_env)),
        ("taskEngine.defaultTimeout", |c| {
            ms(c.task_engine.default_timeout)
        }),
        ("taskEngine.stateDir", |c| rel(&c.task_engine.state_dir)),
        ("taskEngine.maxBatchSteps", |c| {
            json!(c.task_engine.max_batch_steps)
        }),
        ("taskEngine.durability", |c| name(c.task_engine.durability)),
        ("taskEngine.resumeUncertain", |c| {
            name(c.task_engine.resume_uncertain)
        }),
        ("taskEngine.retention.maxAgeHours", |c| {
            hours(c.task_engine.retention.max_age)
        }),
        ("taskEngine.retention.maxTasks", |c| {
            json!(c.task_engine.retention.max_tasks)
        }),
        ("taskEngine.retention.resumableMaxAgeHours", |c| {
            hours(c.task_engine.retention.resumable_max_age)
        }),
        ("taskEngine.retention.resumableMaxTasks", |c| {
            json!(c.task_engine.retention.resumable_max_tasks)
        }),
        ("healthCheck.enabled", |c| json!(c.health_check.enabled)),
        ("healthCheck.interval", |c| ms(c.health_check.interval)),
        ("healthCheck.autoFix", |c| json!(c.health_check.auto_fix)),
        ("recording.enabled", |c| json!(c.recording.enabled)),
        ("recording.screenshotOnStep", |c| {
            json!(c.recording.screenshot_on_step)
        }),
        ("recording.storagePath", |c| rel(&c.recording.storage_path)),
        ("recording.maxBytes", |c| json!(c.recording.max_bytes)),
        ("replay.ignore.paths", |c| json!(c.replay.ignore_paths)),
        ("replay.ignore.regexes", |c| json!(c.replay.ignore_regexes)),
        ("runs.storagePath", |c| rel(&c.runs.storage_path)),
        ("retry.safeToRepeat", |c| json!(c.retry.safe_to_repeat)),
        ("retry.retryDestructiveOnTimeout", |c| {
            json!(c.retry.retry_destructive_on_timeout)
        }),
        ("safety.confirmTimeout", |c| ms(c.safety.confirm_timeout)),
        ("safety.rules.*.tool", |c| json!(c.safety.rules[0].tool)),
        ("safety.rules.*.match", |c| {
            map(c.safety.rules[0].matches.len())
        }),
        ("safety.rules.*.action", |c| name(c.safety.rules[0].action)),
        ("security.redactKeys", |c| json!(c.security.redact_keys)),
        ("security.pinTools", |c| json!(c.security.pin_tools)),
        ("assertions.pollInterval", |c| {
            ms(c.assertions.poll_interval)
        }),
        ("views.*.hide", |c| json!(c.views["v"].hide)),
        ("views.*.rename", |c| map(c.views["v"].rename.len())),
        ("views.*.discovery", |c| json!(c.views["v"].discovery)),
    ]
}

/// A documented default written as a JSON value: the cell's first code span
/// when it parses (`60000`, `"./state"`, `[]`), with what follows it
/// ignored (`` `33554432` (32 MiB) ``).
fn concrete(cell: &str) -> Option<Value> {
    if !cell.starts_with('`') {
        return None;
    }
    serde_json::from_str(span(cell)?).ok()
}

#[test]
fn every_documented_default_is_what_the_loader_uses() {
    let docs = read_docs();
    let loaded = parse(MINIMAL, &Path::new(BASE).join("config.json"))
        .expect("the minimal config loads")
        .config;
    let getters: BTreeMap<&str, Get> = loaded_values().into_iter().collect();
    let mut compared = 0;
    let mut wrong = Vec::new();
    for (key, cell) in &docs.rows {
        let Some(documented) = concrete(cell) else {
            continue;
        };
        let get = getters.get(key.as_str()).unwrap_or_else(|| {
            panic!("{key} documents the default {documented}; add it to loaded_values()")
        });
        let actual = get(&loaded);
        compared += 1;
        if actual != documented {
            wrong.push(format!("{key}: documented {documented}, loads {actual}"));
        }
    }
    for key in getters.keys() {
        let cell = docs.rows.get(*key).map(String::as_str).unwrap_or("");
        assert!(
            concrete(cell).is_some(),
            "loaded_values() reads {key}, which has no documented JSON default"
        );
    }
    println!("{compared} documented defaults compared with the loaded config");
    assert!(
        wrong.is_empty(),
        "documented defaults that differ: {wrong:#?}"
    );
}

#[test]
fn the_documented_retry_strategies_are_the_loaded_ones() {
    let docs = read_docs();
    let loaded = parse("{}", &Path::new(BASE).join("config.json"))
        .expect("{} loads")
        .config;
    let mut want = BTreeMap::new();
    for (class, s) in &loaded.retry.strategies {
        let row = json!({
            "maxRetries": s.max_retries,
            "delay": ms(s.delay),
            "backoff": s.backoff,
            "jitter": s.jitter,
            "action": name(s.action),
        });
        want.insert(class.as_str().to_string(), row);
    }
    let mut got = BTreeMap::new();
    for (class, cells) in &docs.strategies {
        let row: serde_json::Map<String, Value> = cells
            .iter()
            .map(|(k, cell)| {
                let v = concrete(cell)
                    .or_else(|| serde_json::from_str(cell).ok())
                    .or_else(|| span(cell).map(|s| json!(s)))
                    .unwrap_or_else(|| panic!("retry.strategies {class}.{k}: {cell}"));
                (k.clone(), v)
            })
            .collect();
        got.insert(class.clone(), Value::Object(row));
    }
    assert_eq!(
        got, want,
        "docs (left) and loaded strategies (right) differ"
    );
}

/// The "Restart needed" item of the page's Hot reload section names exactly
/// the keys a reload keeps at their start-up value
/// (`config::reload::RESTART_KEYS`): a key that moves in or out of that list
/// fails here until the page says so too.
#[test]
fn the_documented_restart_keys_are_the_ones_a_reload_keeps() {
    let page = page();
    let hot = page
        .split("\n## Hot reload")
        .nth(1)
        .expect("docs/configuration.md has a `## Hot reload` section");
    let item = hot
        .split("- **Restart needed** for ")
        .nth(1)
        .and_then(|rest| rest.split("change to one").next())
        .expect("the Hot reload section has a `- **Restart needed** for …` item");
    let documented: BTreeSet<String> = item
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.contains('.'))
        .map(str::to_string)
        .collect();
    let kept: BTreeSet<String> = toolhub::config::reload::RESTART_KEYS
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(documented.len() >= 5, "read too few keys: {documented:?}");
    assert_eq!(
        documented, kept,
        "docs/configuration.md's `Restart needed` keys differ from config::reload::RESTART_KEYS"
    );
}
