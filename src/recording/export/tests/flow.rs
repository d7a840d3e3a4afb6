//! The reports' flowchart (issue 16.7) and their Servers row (issue 16.12).

use serde_json::json;

use super::*;

#[test]
fn markdown_servers_row_lists_the_servers_the_steps_called() {
    // The header names the servers configured when recording started
    // (`fs`); the steps called `hub` and `t`, `hub` twice.
    let mut a = step(0, "write_file", json!({}));
    a.server = Some("hub".into());
    let mut b = step(1, "echo", json!({}));
    b.server = Some("t".into());
    let mut c = step(2, "read_file", json!({}));
    c.server = Some("hub".into());
    let mut unresolved = failed(step(3, "nope", json!({})));
    unresolved.server = None;
    let mut rec = recording(vec![a, b, c, unresolved], true);
    rec.header.servers = vec![
        json!({"name": "fs", "state": "disabled"}),
        json!({"name": "t", "state": "running"}),
    ];
    let md = markdown(&rec, None);
    assert!(md.contains("| Servers | hub, t |\n"), "{md}");
    let page = html(&rec, None, &|_| None);
    assert!(page.contains("<dt>Servers</dt><dd>hub, t</dd>"), "{page}");
}

/// A recording whose tool names and conditions hold every character that
/// could break a Mermaid label, a Markdown fence or SVG text.
fn hostile_flow() -> Recording {
    let mut a = batch_step(0, "a", "read_file", json!({}));
    a.tool = "re\"ad]`x`[y]{z}(w)|v;u#t%s<b>&".into();
    let mut b = failed(batch_step(1, "b", "run_command", json!({})));
    b.when = Some(json!("failure"));
    let mut c = batch_step(2, "c", "echo", json!({}));
    c.when = Some(json!({"var": "v", "contains": "\"]) --> x[\"pwn"}));
    c.attempts = 2;
    recording(vec![a, b, c], true)
}

/// The fenced Mermaid block of a Markdown report.
fn mermaid_block(md: &str) -> String {
    let start = md
        .find("```mermaid\nflowchart TD\n")
        .expect("a mermaid block");
    let block = &md[start + "```mermaid\n".len()..];
    block[..block.find("```").expect("the fence closes")].to_string()
}

#[test]
fn markdown_starts_with_a_mermaid_flowchart_of_the_steps() {
    let md = markdown(&hostile_flow(), None);
    let start = md.find("```mermaid").expect("a mermaid block");
    // Right after the title and description, before the metadata table.
    assert!(start < md.find("| Field | Value |").expect("table"), "{md}");
    let block = mermaid_block(&md);
    // Every label, of a box `["…"]` or a decision `{"…"}`.
    let label = regex::Regex::new(r#"(s|c)(\d+)(\[|\{)"([^"]*)"(\]|\})"#).expect("regex");
    let labels: Vec<(String, String)> = label
        .captures_iter(&block)
        .map(|c| (format!("{}{}", &c[1], &c[2]), c[4].to_string()))
        .collect();
    let ids: Vec<&str> = labels.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["s0", "c1", "s1", "c2", "s2"], "{block}");
    let entity = regex::Regex::new("#[a-z0-9]+;").expect("regex");
    for (id, text) in &labels {
        // Nothing inside the label can end it or start Mermaid syntax.
        let bare = entity
            .replace_all(&text.replace("<br/>", ""), "")
            .into_owned();
        for bad in ['"', '[', ']', '{', '}', '(', ')', '|', ';', '`', '<', '>'] {
            assert!(!bare.contains(bad), "{bad} in {id}: {text}");
        }
    }
    let of = |id: &str| &labels.iter().find(|(i, _)| i == id).expect(id).1;
    assert!(of("s0").contains("#35;0 re#quot;ad#93;#96;x#96;#91;y#93;#123;z#125;#40;w#41;#124;v#59;u#35;t#37;s#lt;b#gt;#amp;"), "{}", of("s0"));
    assert!(of("s0").ends_with("<br/>ok"), "{}", of("s0"));
    // The conditions are decisions; the failed step is marked, with its class.
    assert_eq!(of("c1"), "when: failure");
    assert!(
        of("s1").ends_with("<br/>✗ failed: TIMEOUT #40;3 attempts#41;"),
        "{}",
        of("s1")
    );
    assert!(block.contains(":::failed\n"), "{block}");
    assert!(
        of("c2").contains("when: #123;#quot;contains#quot;:#quot;#92;#quot;#93;#41; --#gt; x#91;"),
        "{}",
        of("c2")
    );
    assert!(
        of("s2").ends_with("<br/>ok #40;2 attempts#41;"),
        "{}",
        of("s2")
    );
    for edge in [
        "    s0 --> c1\n",
        "    c1 -->|yes| s1[",
        "    c1 -->|no: skipped| c2\n",
        "    s1 --> c2\n",
        "    c2 -->|no: skipped| done\n",
        "    s2 --> done\n",
        "    done([end])\n",
    ] {
        assert!(block.contains(edge), "{edge:?} in {block}");
    }
    assert!(block.contains("classDef failed "), "{block}");
    // No steps, no chart.
    assert!(!markdown(&recording(vec![], true), None).contains("mermaid"));
}

/// open, fill, submit only if x succeeded, check, then two cleanup steps:
/// close (always) and report (on failure).
fn branching_flow() -> Recording {
    let open = batch_step(0, "open", "navigate", json!({}));
    let fill = batch_step(1, "fill", "type", json!({}));
    let mut submit = batch_step(2, "submit", "click", json!({}));
    submit.when = Some(json!({"var": "x", "success": true}));
    let check = failed(batch_step(3, "check", "assert", json!({})));
    let mut close = batch_step(4, "close", "close", json!({}));
    close.when = Some(json!("always"));
    let mut report = batch_step(5, "report", "notify", json!({}));
    report.when = Some(json!({"any": ["failure", "{{vars.force}}"]}));
    recording(vec![open, fill, submit, check, close, report], true)
}

#[test]
fn the_flowchart_shows_where_conditions_and_cleanup_steps_branch() {
    let block = mermaid_block(&markdown(&branching_flow(), None));
    for edge in [
        // A plain chain, then a decision: yes runs the step, no skips it.
        "    s0 --> s1\n",
        "    s1 --> c2\n",
        "    c2{\"when: #123;#quot;success#quot;:true,#quot;var#quot;:#quot;x#quot;#125;\"}\n",
        "    c2 -->|yes| s2[\"#35;2 click<br/>ok\"]\n",
        "    c2 -->|no: skipped| s3\n",
        "    s2 --> s3\n",
        // `always` is no decision: the cleanup step is entered directly.
        "    s3 --> s4\n",
        "    s4[\"#35;4 close<br/>when: always<br/>ok\"]:::cleanup\n",
        "    s4 --> c5\n",
        "    c5 -->|yes| s5[",
        "    c5 -->|no: skipped| done\n",
        "    s5 --> done\n",
        // A failure before the cleanup steps jumps to the first of them
        // (from step 3 the plain arrow already leads there).
        "    s0 -.->|on failure, stopOnError| s4\n",
        "    s1 -.->|on failure, stopOnError| s4\n",
        "    s2 -.->|on failure, stopOnError| s4\n",
        "    classDef cleanup ",
    ] {
        assert!(block.contains(edge), "{edge:?} in {block}");
    }
    assert!(
        block.contains("    c5 -->|yes| s5[\"#35;5 notify<br/>ok\"]:::cleanup\n"),
        "{block}"
    );
    assert_eq!(block.matches("-.->").count(), 3, "{block}");
    assert!(block.contains(":::failed\n    s3 --> s4"), "{block}");

    // The SVG draws the same: two decisions with their skip paths, three
    // failure edges into one head, the cleanup boxes dashed, an end.
    let page = html(&branching_flow(), None, &|_| None);
    let start = page.find("<svg class=\"flow\"").expect("an inline svg");
    let svg = &page[start..page.find("</svg>").expect("svg ends") + 6];
    assert_eq!(svg.matches("<rect").count(), 6, "{svg}");
    assert_eq!(svg.matches("<polygon").count(), 2, "{svg}");
    assert_eq!(svg.matches("class=\"skip\"").count(), 2, "{svg}");
    assert_eq!(svg.matches("class=\"on-failure\"").count(), 3, "{svg}");
    assert_eq!(
        svg.matches("fill=\"#d92d20\"/>").count(),
        1,
        "one head: {svg}"
    );
    assert_eq!(svg.matches("stroke-dasharray=\"5 3\"").count(), 2, "{svg}");
    assert_eq!(svg.matches("class=\"step cleanup\"").count(), 2, "{svg}");
    assert!(
        svg.contains(">yes</text>") && svg.contains(">no</text>"),
        "{svg}"
    );
    assert!(svg.contains("<g class=\"end\">"), "{svg}");
    assert!(svg.contains(">when: always</text>"), "{svg}");
    for bad in ["<script", "href", "url(", "onload", "<foreignObject"] {
        assert!(!svg.contains(bad), "{bad} in {svg}");
    }
    // A chain without conditions has none of it.
    let plain = recording(vec![step(0, "a", json!({})), step(1, "b", json!({}))], true);
    let block = mermaid_block(&markdown(&plain, None));
    assert!(
        !block.contains("-.->") && !block.contains("{\"") && !block.contains("done"),
        "{block}"
    );
}

#[test]
fn long_recordings_draw_the_first_steps_and_count_the_rest() {
    let steps = (0..crate::recording::export::flow::MAX_NODES + 7)
        .map(|i| step(i, "echo", json!({})))
        .collect();
    let rec = recording(steps, true);
    let md = markdown(&rec, None);
    assert!(md.contains("more[\"… 7 more steps\"]"), "{md}");
    let page = html(&rec, None, &|_| None);
    assert!(page.contains("… 7 more steps</text>"));
    assert_eq!(
        page.matches("<rect").count(),
        crate::recording::export::flow::MAX_NODES
    );
}

#[test]
fn html_draws_the_flowchart_as_inline_svg() {
    let page = html(&hostile_flow(), None, &|_| None);
    let start = page.find("<svg class=\"flow\"").expect("an inline svg");
    let svg = &page[start..page.find("</svg>").expect("svg ends") + 6];
    assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
    assert_eq!(svg.matches("<polygon").count(), 2, "{svg}");
    // a → decision, decision → b, b → decision, decision → c, c → end.
    assert_eq!(svg.matches("<line").count(), 5, "{svg}");
    assert_eq!(
        svg.matches("class=\"step failed cleanup\"").count(),
        1,
        "{svg}"
    );
    assert!(
        svg.contains("#0 re&quot;ad]`x`[y]{z}(w)|v;u#t%s&lt;b&gt;&amp;"),
        "{svg}"
    );
    assert!(svg.contains(">when: failure</text>"), "{svg}");
    assert!(
        svg.contains(">✗ failed: TIMEOUT (3 attempts)</text>"),
        "{svg}"
    );
    assert!(
        svg.contains("when: {&quot;contains&quot;:&quot;\\&quot;]) --&gt; x[\\&quot;pwn"),
        "{svg}"
    );
    for bad in ["<script", "href", "url(", "onload", "<foreignObject"] {
        assert!(!svg.contains(bad), "{bad} in {svg}");
    }
    // The boxes go down the page: each rect starts below the one before.
    let ys: Vec<usize> = svg
        .match_indices("<rect x=\"70\" y=\"")
        .map(|(i, m)| {
            let rest = &svg[i + m.len()..];
            rest[..rest.find('"').expect("quote")].parse().expect("y")
        })
        .collect();
    assert_eq!(ys.len(), 3, "{svg}");
    assert!(ys.windows(2).all(|w| w[0] < w[1]), "{ys:?}");
}
