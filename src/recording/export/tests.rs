use serde_json::json;

use super::markdown::{code, text};
use super::*;
use crate::b64::encode as base64;
use crate::errors::{ErrorType, HubError};
use crate::store::recordings::format::{End, Header, Source, SCHEMA_VERSION};

mod flow;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-fake-png-body";

fn header() -> Header {
    Header {
        schema_version: SCHEMA_VERSION,
        recording_id: "rec_01abc".into(),
        name: "login flow".into(),
        description: Some("Logs in\nthen reads the inbox".into()),
        created_at: "2026-09-01T10:00:00.000Z".into(),
        hub_version: "0.1.0".into(),
        servers: vec![json!({"name": "fs", "state": "running", "toolCount": 3})],
        tools: vec![],
        tools_hash: None,
        tags: vec![],
        context: None,
        client: None,
    }
}

fn step(seq: usize, tool: &str, params: Value) -> Step {
    Step {
        seq,
        source: Source {
            kind: "tool_call".into(),
            batch_id: None,
            task_id: None,
            step_id: None,
            call_key: None,
            context: None,
        },
        tool: tool.into(),
        qualified_name: Some(format!("fs__{tool}")),
        server: Some("fs".into()),
        params,
        params_template: None,
        save_as: None,
        when: None,
        expect: None,
        variables: None,
        timestamp: "2026-09-01T10:00:01.000Z".into(),
        t_offset_ms: 1000 * seq as u64,
        duration_ms: 12 + seq as u64,
        success: true,
        attempts: 1,
        result: json!({"ok": seq}),
        error: None,
        images: vec![],
        screenshot: None,
    }
}

fn batch_step(seq: usize, id: &str, tool: &str, template: Value) -> Step {
    let mut s = step(seq, tool, json!({"rendered": true}));
    s.source = Source {
        kind: "batch_step".into(),
        batch_id: Some(json!("b1")),
        task_id: Some("task_1".into()),
        step_id: Some(id.into()),
        call_key: None,
        context: None,
    };
    s.params_template = Some(template);
    s
}

fn recording(steps: Vec<Step>, ended: bool) -> Recording {
    let n = steps.len();
    Recording {
        header: header(),
        steps,
        end: ended.then(|| End {
            step_count: n,
            total_duration_ms: 5312,
            success_rate: 0.5,
            stopped_at: "2026-09-01T10:05:00.000Z".into(),
            reason: "stopped".into(),
        }),
        incomplete: !ended,
    }
}

fn failed(mut s: Step) -> Step {
    s.success = false;
    s.attempts = 3;
    s.result = Value::Null;
    s.error = Some(HubError::new(ErrorType::Timeout, "took 30000ms | waited"));
    s
}

fn replay() -> Value {
    json!({"type": "replay_complete", "success": false, "totalSteps": 2, "successCount": 1,
           "failureCount": 1, "differences": [
               {"stepIndex": 0, "differences": []},
               {"stepIndex": 1, "differences": [
                   {"path": "", "kind": "success_flipped", "recorded": true, "actual": false},
                   {"path": "/result/items/0/id", "kind": "changed", "recorded": 1, "actual": "<b>2</b>"}]}]})
}

#[test]
fn json_has_every_part_in_disk_shape() {
    let rec = recording(vec![step(0, "read_file", json!({"path": "/a"}))], false);
    let v = json(&rec);
    assert_eq!(v["header"]["recordingId"], "rec_01abc");
    assert_eq!(v["steps"][0]["qualifiedName"], "fs__read_file");
    assert_eq!(v["steps"][0]["durationMs"], 12);
    assert_eq!(v["end"], Value::Null);
    assert_eq!(v["incomplete"], true);
    let ended = json(&recording(vec![], true));
    assert_eq!(ended["end"]["reason"], "stopped");
    assert_eq!(ended["incomplete"], false);
}

#[test]
fn markdown_has_metadata_and_one_row_per_step() {
    let rec = recording(
        vec![
            step(0, "read_file", json!({"path": "/a.json"})),
            failed(step(1, "run_command", json!({"command": "echo `a` | b"}))),
        ],
        true,
    );
    let md = markdown(&rec, None);
    assert!(
        md.starts_with("# login flow\n\nLogs in\nthen reads the inbox\n"),
        "{md}"
    );
    assert!(md.contains("| Recording | `rec_01abc` |"), "{md}");
    assert!(md.contains("| Succeeded | 1 of 2 (50.0%) |"), "{md}");
    assert!(md.contains("| Total duration | 5312 ms |"), "{md}");
    assert!(
        md.contains("| 0 | `read_file` | `{\"path\":\"/a.json\"}` | yes | 12 ms |  |\n"),
        "{md}"
    );
    assert!(
        md.contains("| 1 | `run_command` | ``{\"command\":\"echo `a` \\| b\"}`` | **no** (3 attempts) | 13 ms | `TIMEOUT` took 30000ms \\| waited |\n"),
        "{md}"
    );
    assert!(!md.contains("Last replay"));
    let open = markdown(&recording(vec![], false), None);
    assert!(open.contains("| Status | incomplete"), "{open}");
    assert!(open.contains("No steps were recorded."), "{open}");
}

#[test]
fn markdown_lists_the_last_replay_differences() {
    let rec = recording(vec![step(0, "a", json!({})), step(1, "b", json!({}))], true);
    let md = markdown(&rec, Some(&replay()));
    assert!(
        md.contains("## Last replay\n\nfailed: 1 of 2 steps succeeded, 1 failed.\n"),
        "{md}"
    );
    assert!(
        md.contains("| 1 | (outcome) | success flipped | `true` | `false` |"),
        "{md}"
    );
    assert!(
        md.contains("| 1 | `/result/items/0/id` | changed | `1` | `\"<b>2</b>\"` |"),
        "{md}"
    );
    // The replay runner's entries carry the list as `diff`.
    let runner = json!({"success": true, "differences": [
        {"stepIndex": 0, "tool": "a", "diff": [{"path": "/result/n", "kind": "added", "recorded": null, "actual": 1}]}]});
    let md_runner = markdown(&rec, Some(&runner));
    assert!(
        md_runner.contains("| 0 | `/result/n` | added | `null` | `1` |"),
        "{md_runner}"
    );
    // A dry replay lists problems instead of differences.
    let dry = json!({"success": false, "mode": "dry", "totalSteps": 2, "successCount": 1, "failureCount": 1,
                     "differences": [{"stepIndex": 1, "problems": ["tool `b` does not exist <now>"]}]});
    let md_dry = markdown(&rec, Some(&dry));
    assert!(md_dry.contains("failed (dry): 1 of 2 steps succeeded, 1 failed.\n\n- step 1: tool \\`b\\` does not exist &lt;now&gt;\n"), "{md_dry}");
    let page = html(&rec, Some(&dry), &|_| None);
    assert!(
        page.contains("<li>step 1: tool `b` does not exist &lt;now&gt;</li>"),
        "{page}"
    );
    assert!(!md_dry.contains("No differences") && !page.contains("No differences"));
    let clean = markdown(&rec, Some(&json!({"success": true, "differences": []})));
    assert!(clean.contains("passed.\n\nNo differences."), "{clean}");
}

#[test]
fn markdown_escapes_html_and_table_syntax() {
    assert_eq!(text("<script>|*x*"), "&lt;script&gt;\\|\\*x\\*");
    assert_eq!(code("a|b"), "`a\\|b`");
    assert_eq!(code("`x`"), "`` `x` ``");
    assert_eq!(code(""), "");
    let mut rec = recording(vec![], true);
    rec.header.name = "<script>alert(1)</script>".into();
    rec.header.description = Some("- not a list\n1. nor this".into());
    let md = markdown(&rec, None);
    assert!(!md.contains("<script"), "{md}");
    assert!(md.contains("\n\\- not a list\n1\\. nor this\n"), "{md}");
}

#[test]
fn html_escapes_every_recorded_text() {
    let mut s = step(
        0,
        "run<script>",
        json!({"q": "<script>alert('p')</script>"}),
    );
    s.result =
        json!({"content": [{"type": "text", "text": "</pre><script>alert(\"r\")</script>"}]});
    let mut bad = failed(step(1, "x", json!({})));
    bad.error = Some(HubError::new(
        ErrorType::Unknown,
        "<img src=x onerror=alert(1)>",
    ));
    let mut rec = recording(vec![s, bad], true);
    rec.header.name = "<script>n</script>".into();
    rec.header.description = Some("<script>d</script>".into());
    let page = html(&rec, Some(&replay()), &|_| None);
    assert!(!page.contains("<script"), "{page}");
    assert!(!page.contains("<img src=x"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(&#39;p&#39;)"), "{page}");
    assert!(page.contains("&lt;/pre&gt;&lt;script&gt;"), "{page}");
    assert!(
        page.contains("&quot;&lt;b&gt;2&lt;/b&gt;&quot;"),
        "the replay diff is escaped too"
    );
    assert_eq!(
        escape(r#"<a href="x">'&'</a>"#),
        "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
    );
}

#[test]
fn html_is_self_contained_with_embedded_images() {
    let mut s = step(
        0,
        "browser_navigate",
        json!({"url": "https://example.com/"}),
    );
    s.screenshot = Some("step-0.png".into());
    s.images = vec![
        "step-0-img-0.png".into(),
        "missing.png".into(),
        "notes.svg".into(),
    ];
    let rec = recording(vec![s, failed(step(1, "browser_click", json!({})))], true);
    let image = |name: &str| match name {
        "step-0.png" | "step-0-img-0.png" => Some(PNG.to_vec()),
        "notes.svg" => Some(b"<svg onload=alert(1)></svg>".to_vec()),
        _ => None,
    };
    let page = html(&rec, None, &image);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    assert_eq!(page.matches("<html").count(), 1);
    assert!(page.contains("<style>"));
    let uri = format!("src=\"data:image/png;base64,{}\"", base64(PNG));
    assert_eq!(page.matches(&uri).count(), 2, "{page}");
    assert!(page.contains("(file missing)"));
    assert!(page.contains("not a PNG, JPEG, GIF or WebP"));
    // The SVG file is not embedded (only the report's own flowchart is SVG).
    assert!(!page.contains("onload"), "{page}");
    assert_eq!(page.matches("<svg").count(), 1, "{page}");
    for external in [
        "<script",
        "<link",
        "src=\"http",
        "href=\"http",
        "@import",
        "url(",
    ] {
        assert!(!page.contains(external), "{external} in {page}");
    }
    // The summary, durations and the error are there.
    assert!(page.contains("<code>rec_01abc</code>"));
    assert!(
        page.contains("12 ms<div class=\"bar\" style=\"width:92%\">"),
        "{page}"
    );
    assert!(
        page.contains("<code>TIMEOUT</code> took 30000ms | waited"),
        "{page}"
    );
    assert!(page.contains("3 attempts"));
}

#[test]
fn html_shows_the_last_replay_and_incomplete_recordings() {
    let rec = recording(vec![step(0, "a", json!({}))], false);
    let page = html(&rec, Some(&replay()), &|_| None);
    assert!(page.contains("<h2>Last replay</h2>"));
    assert!(
        page.contains("<td><code>/result/items/0/id</code></td><td>changed</td>"),
        "{page}"
    );
    assert!(
        page.contains("<td><code>(outcome)</code></td><td>success flipped</td>"),
        "{page}"
    );
    assert!(page.contains("incomplete</span>"));
}

#[test]
fn base64_matches_rfc_4648_vectors() {
    let vectors = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ];
    for (plain, encoded) in vectors {
        assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
    }
    assert_eq!(base64(&[0xFF, 0xEF, 0xBE]), "/+++");
}

#[test]
fn batch_keeps_templates_save_as_when_expect_and_ids() {
    let mut s0 = batch_step(
        0,
        "read",
        "read_file",
        json!({"path": "{{vars.dir}}/a.json"}),
    );
    s0.save_as = Some("fileA".into());
    s0.expect = Some(json!({"contains": "ok"}));
    let mut s1 = batch_step(
        1,
        "run",
        "run_command",
        json!({"command": "echo {{fileA.result}}"}),
    );
    s1.when = Some(json!({"var": "fileA", "success": true}));
    let mut s2 = batch_step(2, "read", "read_file", json!({"path": "/b"}));
    s2.when = Some(json!("{{#if vars.go}}yes{{/if}}"));
    let s3 = step(
        3,
        "write_file",
        json!({"content": "Hello {{ name }}", "n": 1}),
    );
    let rec = recording(vec![s0, s1, s2, s3], true);
    let (msg, needed) = batch(&rec);
    assert_eq!(
        msg,
        json!({"type": "tool_batch", "id": "replay-rec_01abc", "options": {"stopOnError": true}, "steps": [
            {"id": "read", "tool": "fs__read_file", "params": {"path": "{{vars.dir}}/a.json"},
             "saveAs": "fileA", "expect": {"contains": "ok"}},
            {"id": "run", "tool": "fs__run_command", "params": {"command": "echo {{fileA.result}}"},
             "when": {"var": "fileA", "success": true}},
            {"id": "read-2", "tool": "fs__read_file", "params": {"path": "/b"},
             "when": "{{#if vars.go}}yes{{/if}}"},
            {"tool": "fs__write_file", "params": {"content": "Hello \\{{ name }}", "n": 1}}]})
    );
    assert_eq!(needed, ["dir", "go"]);
}

#[test]
fn batch_turns_redactions_into_variables_and_reports_them() {
    let mut s0 = batch_step(
        0,
        "login",
        "login",
        json!({"user": "{{vars.user}}", "password": {"$redacted": "password"},
               "nested": [{"api-key": {"$redacted": "api-key", "rule": "glob:*key*"}}]}),
    );
    s0.params = json!({"user": "ann", "password": {"$redacted": "password"}});
    let mut s1 = step(
        1,
        "call",
        json!({"token": {"$redacted": "token"}, "x": {"$redacted": 5}}),
    );
    s1.qualified_name = None;
    let (msg, needed) = batch(&recording(vec![s0, s1], true));
    assert_eq!(
        msg["steps"][0]["params"],
        json!({"user": "{{vars.user}}", "password": "{{vars.password}}",
               "nested": [{"api-key": "{{vars.[api-key]}}"}]})
    );
    // A non-string `$redacted` is data, not a placeholder.
    assert_eq!(
        msg["steps"][1]["params"],
        json!({"token": "{{vars.token}}", "x": {"$redacted": 5}})
    );
    assert_eq!(needed, ["api-key", "password", "token", "user"]);
    assert_eq!(msg["steps"][0]["tool"], "fs__login");
    assert_eq!(
        msg["steps"][1]["tool"], "call",
        "no qualified name: the name as asked"
    );
}

#[test]
fn variable_names_that_handlebars_cannot_spell_are_reduced() {
    assert_eq!(var_template("pw"), ("{{vars.pw}}".into(), "pw".into()));
    assert_eq!(
        var_template("my key"),
        ("{{vars.[my key]}}".into(), "my key".into())
    );
    assert_eq!(var_template("a]b"), ("{{vars.a_b}}".into(), "a_b".into()));
    assert_eq!(var_template(""), ("{{vars._}}".into(), "_".into()));
    let mut found = BTreeSet::new();
    template_vars(
        r"{{x.vars.no}} {{@root.vars.r}} \{{vars.esc}} {{lookup vars.[a b] 1}} {{vars.k-1}}",
        &mut found,
    );
    assert_eq!(found.into_iter().collect::<Vec<_>>(), ["a b", "k-1", "r"]);
}

/// The exported templates mean what they should to handlebars as the engine
/// configures it (strict mode, no HTML escaping).
#[test]
fn exported_templates_render_as_intended() {
    let mut hb = handlebars::Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(handlebars::no_escape);
    let ctx = json!({"vars": {"password": "s3cret", "api-key": "k", "my key": "m"}});
    let render = |t: &str| hb.render_template(t, &ctx).unwrap();
    let s = step(0, "w", json!({"content": "Hello {{ name }} and {{{raw}}}"}));
    let (msg, _) = batch(&recording(vec![s], true));
    let content = msg["steps"][0]["params"]["content"].as_str().unwrap();
    assert_eq!(render(content), "Hello {{ name }} and {{{raw}}}");
    assert_eq!(render(&var_template("password").0), "s3cret");
    assert_eq!(render(&var_template("api-key").0), "k");
    assert_eq!(render(&var_template("my key").0), "m");
}

#[test]
fn duplicate_step_ids_from_two_batches_are_made_unique() {
    let steps = vec![
        batch_step(0, "s1", "a", json!({})),
        batch_step(1, "s1", "a", json!({})),
        batch_step(2, "s1-1", "a", json!({})),
        batch_step(3, "s1", "a", json!({})),
    ];
    let (msg, needed) = batch(&recording(steps, true));
    let ids: Vec<&str> = msg["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["s1", "s1-1", "s1-1-2", "s1-3"]);
    assert!(needed.is_empty());
}

#[test]
fn recorded_variables_are_defaults_and_only_secrets_are_required() {
    // Two recorded batches: the first gave user and dir, the second user
    // again (another value) and mode; the templates also read a secret.
    let mut s0 = batch_step(
        0,
        "login",
        "login",
        json!({"user": "{{vars.user}}", "password": {"$redacted": "password"}, "dir": "{{vars.dir}}"}),
    );
    s0.variables = Some(
        json!({"user": "ann", "dir": "/srv"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let mut s1 = batch_step(
        1,
        "next",
        "call",
        json!({"m": "{{vars.mode}} {{vars.user}}"}),
    );
    s1.source.task_id = Some("task_2".into());
    s1.variables = Some(
        json!({"user": "bob", "mode": "fast"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let rec = recording(vec![s0, s1], true);
    assert_eq!(
        Value::Object(variable_defaults(&rec)),
        json!({"user": "ann", "dir": "/srv", "mode": "fast"}),
        "the first recorded value of a name wins"
    );
    let (msg, required) = batch(&rec);
    assert_eq!(required, ["password"]);
    assert_eq!(
        msg["options"],
        json!({"stopOnError": true, "variables": {"user": "ann", "dir": "/srv", "mode": "fast"}})
    );
    let md = markdown(&rec, None);
    assert!(
        md.contains(
            "| Variable defaults | `{\"dir\":\"/srv\",\"mode\":\"fast\",\"user\":\"ann\"}` |\n"
        ),
        "{md}"
    );
    assert!(md.contains("| Variables to give | password |\n"), "{md}");
    let page = html(&rec, None, &|_| None);
    assert!(
        page.contains("<dt>Variable defaults</dt><dd><code>{&quot;dir&quot;:&quot;/srv&quot;"),
        "{page}"
    );
    assert!(
        page.contains("<dt>Variables to give</dt><dd>password</dd>"),
        "{page}"
    );
    // Without recorded variables nothing changes: every name is required.
    let (msg, required) = batch(&recording(
        vec![batch_step(0, "a", "t", json!({"x": "{{vars.x}}"}))],
        true,
    ));
    assert_eq!(required, ["x"]);
    assert_eq!(msg["options"], json!({"stopOnError": true}));
}
