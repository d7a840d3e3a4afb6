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

#[test]
fn markdown_starts_with_a_mermaid_flowchart_of_the_steps() {
    let md = markdown(&hostile_flow(), None);
    let start = md
        .find("```mermaid\nflowchart TD\n")
        .expect("a mermaid block");
    // Right after the title and description, before the metadata table.
    assert!(start < md.find("| Field | Value |").expect("table"), "{md}");
    let block = &md[start + "```mermaid\n".len()..];
    let block = &block[..block.find("```").expect("the fence closes")];
    let nodes: Vec<&str> = block.lines().filter(|l| l.contains("[\"")).collect();
    assert_eq!(nodes.len(), 3, "{block}");
    let entity = regex::Regex::new("#[a-z0-9]+;").expect("regex");
    for (i, line) in nodes.iter().enumerate() {
        let line = line.trim();
        let prefix = format!("s{i}[\"");
        assert!(line.starts_with(&prefix), "{line}");
        let close = line.rfind("\"]").expect("label closes");
        let label = &line[prefix.len()..close];
        // Nothing inside the label can end it or start Mermaid syntax.
        let bare = entity
            .replace_all(&label.replace("<br/>", ""), "")
            .into_owned();
        for bad in ['"', '[', ']', '{', '}', '(', ')', '|', ';', '`', '<', '>'] {
            assert!(!bare.contains(bad), "{bad} in {label}");
        }
        let rest = &line[close + 2..];
        assert!(rest.is_empty() || rest == ":::failed", "{line}");
    }
    assert!(nodes[0].contains("#35;0 re#quot;ad#93;#96;x#96;#91;y#93;#123;z#125;#40;w#41;#124;v#59;u#35;t#37;s#lt;b#gt;#amp;"), "{}", nodes[0]);
    assert!(nodes[0].ends_with("<br/>ok\"]"), "{}", nodes[0]);
    // The failed step is marked, with its class; conditions are shown.
    assert!(nodes[1].ends_with(":::failed"), "{}", nodes[1]);
    assert!(
        nodes[1].contains("when: failure<br/>✗ failed: TIMEOUT #40;3 attempts#41;"),
        "{}",
        nodes[1]
    );
    assert!(
        nodes[2].contains("when: #123;#quot;contains#quot;:#quot;#92;#quot;#93;#41; --#gt; x#91;"),
        "{}",
        nodes[2]
    );
    assert!(
        nodes[2].contains("<br/>ok #40;2 attempts#41;"),
        "{}",
        nodes[2]
    );
    assert!(block.contains("    s0 --> s1\n    "), "{block}");
    assert!(block.contains("    s1 --> s2\n"), "{block}");
    assert!(block.contains("classDef failed "), "{block}");
    // No steps, no chart.
    assert!(!markdown(&recording(vec![], true), None).contains("mermaid"));
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
    assert_eq!(svg.matches("<line").count(), 2, "{svg}");
    assert_eq!(svg.matches("class=\"step failed\"").count(), 1, "{svg}");
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
        .match_indices("<rect x=\"40\" y=\"")
        .map(|(i, m)| {
            let rest = &svg[i + m.len()..];
            rest[..rest.find('"').expect("quote")].parse().expect("y")
        })
        .collect();
    assert!(ys.windows(2).all(|w| w[0] < w[1]), "{ys:?}");
}
