use serde_json::{json, Value};

use crate::errors::ErrorType;

use super::*;

fn ctx() -> Value {
    json!({
        "vars": {"name": "Ann", "n": 3, "list": ["a", "b"], "obj": {"k": "v"}},
        "fileA": {"success": true, "error": null,
                  "result": {"items": [{"id": 7}, {"id": 8}], "total": 2, "ok": true}},
        "textStep": {"success": true, "result": "hello {{vars.name}}"},
        "failed": {"success": false, "result": null, "error": {"message": "ENOENT: no such file"}}
    })
}

fn render(p: Value) -> Result<Value, TemplateError> {
    Templates::new().render_params(&p, &ctx())
}

#[test]
fn single_placeholder_keeps_json_type() {
    let out = render(json!({
        "obj": "{{fileA.result}}", "num": "{{fileA.result.total}}", "bool": "{{ fileA.success }}",
        "null": "{{fileA.error}}", "arr": "{{vars.list}}", "deep": "{{fileA.result.items.0.id}}",
        "bracket": "{{fileA.result.items.[1].id}}", "root": "{{@root.vars.n}}", "str": "{{{vars.name}}}"
    }))
    .unwrap();
    assert_eq!(out["obj"], ctx()["fileA"]["result"]);
    assert_eq!(out["num"], json!(2));
    assert_eq!(out["bool"], json!(true));
    assert_eq!(out["null"], Value::Null);
    assert_eq!(out["arr"], json!(["a", "b"]));
    assert_eq!(out["deep"], json!(7));
    assert_eq!(out["bracket"], json!(8));
    assert_eq!(out["root"], json!(3));
    assert_eq!(out["str"], json!("Ann"));
}

#[test]
fn text_interpolates_objects_as_compact_json() {
    let out = render(json!({
        "a": "echo {{fileA.result.items}}", "b": "n={{vars.n}} ok={{fileA.success}} e={{fileA.error}}",
        "c": " {{vars.name}}", "d": "{{vars.obj}}!", "e": "{{json vars.name}}"
    }))
    .unwrap();
    assert_eq!(out["a"], json!(r#"echo [{"id":7},{"id":8}]"#));
    assert_eq!(out["b"], json!("n=3 ok=true e=null"));
    assert_eq!(out["c"], json!(" Ann"));
    assert_eq!(out["d"], json!(r#"{"k":"v"}!"#));
    assert_eq!(out["e"], json!(r#""Ann""#));
}

#[test]
fn substituted_values_are_never_rendered_again() {
    let out = render(json!({"a": "{{textStep.result}}", "b": "x {{textStep.result}}"})).unwrap();
    assert_eq!(out["a"], json!("hello {{vars.name}}"));
    assert_eq!(out["b"], json!("x hello {{vars.name}}"));
}

#[test]
fn plain_strings_keys_and_scalars_are_untouched() {
    let p = json!({"{{vars.name}}": "plain $(id) }}", "n": 1, "b": [true, null, "a{b}"]});
    assert_eq!(render(p.clone()).unwrap(), p);
}

#[test]
fn no_html_escaping_and_escaped_braces() {
    let c = json!({"vars": {"s": "<a href=\"x\">&'"}});
    let t = Templates::new();
    let out = t
        .render_params(&json!("{{vars.s}} and {{{vars.s}}}"), &c)
        .unwrap();
    assert_eq!(out, json!("<a href=\"x\">&' and <a href=\"x\">&'"));
    assert_eq!(t.render_text(r"\{{vars.s}}", &c).unwrap(), "{{vars.s}}");
}

#[test]
fn unknown_root_variable_names_it_and_lists_defined_ones() {
    let err = render(json!({"a": "{{fileB.result}}"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown variable \"fileB.result\": no variable \"fileB\" is defined; \
         defined variables: failed, fileA, textStep, vars"
    );
    let err = render(json!({"a": "x {{nope}} y"})).unwrap_err();
    assert!(matches!(err, TemplateError::Unknown { ref variable, .. } if variable == "nope"));
}

#[test]
fn unknown_nested_field_lists_fields_at_that_level() {
    let err = render(json!("{{fileA.result.itemz}}")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown variable \"fileA.result.itemz\": \"fileA.result\" has no \"itemz\"; it has: items, ok, total"
    );
    let err = render(json!("id {{fileA.result.items.5.id}}")).unwrap_err();
    assert!(err
        .to_string()
        .contains("\"fileA.result.items\" has no \"5\"; it has: indexes 0 to 1"));
    let err = render(json!("{{textStep.result.x}}")).unwrap_err();
    assert!(
        err.to_string().contains("it has: nothing (a string)"),
        "{err}"
    );
}

#[test]
fn unknown_variable_inside_each_is_reported() {
    let err = render(json!("{{#each fileA.result.items}}{{this.name}}{{/each}}")).unwrap_err();
    match err {
        TemplateError::Unknown { variable, .. } => assert_eq!(variable, "this.name"),
        other => panic!("expected Unknown, got {other:?}"),
    }
}

#[test]
fn tested_value_of_a_block_may_be_absent_but_its_root_must_exist() {
    let t = Templates::new();
    let out = t
        .render_text("{{#if fileA.result.missing}}yes{{else}}no{{/if}}", &ctx())
        .unwrap();
    assert_eq!(out, "no");
    let err = t
        .render_text("{{#if nosuch.x}}y{{/if}}", &ctx())
        .unwrap_err();
    assert!(matches!(err, TemplateError::Unknown { ref missing, .. } if missing == "nosuch"));
}

#[test]
fn helpers_work() {
    let t = Templates::new();
    let c = ctx();
    let cases = [
        (
            "{{#each fileA.result.items}}{{@index}}:{{id}}{{#unless @last}},{{/unless}}{{/each}}",
            "0:7,1:8",
        ),
        ("{{#each vars.obj}}{{@key}}={{this}}{{/each}}", "k=v"),
        (
            "{{#each vars.list as |x i|}}{{i}}{{x}}{{../vars.name}}{{/each}}",
            "0aAnn1bAnn",
        ),
        ("{{#each vars.nothing}}x{{else}}empty{{/each}}", "empty"),
        (
            "{{#with fileA.result}}{{total}}/{{@root.vars.n}}{{/with}}",
            "2/3",
        ),
        ("{{#if (eq vars.n 3)}}three{{/if}}", "three"),
        (
            "{{len vars.list}} {{ne vars.n 2}} {{not fileA.success}}",
            "2 true false",
        ),
        (
            "{{lookup vars.list 1}} {{#if (and fileA.success (gt vars.n 1))}}ok{{/if}}",
            "b ok",
        ),
        (
            "{{#if 0 includeZero=true}}zero{{/if}}{{! a comment }}",
            "zero",
        ),
        (
            "{{#if failed.success}}a{{else if fileA.success}}b{{else}}c{{/if}}",
            "b",
        ),
        ("{{json fileA.result.items.0}}", r#"{"id":7}"#),
    ];
    for (src, want) in cases {
        assert_eq!(t.render_text(src, &c).unwrap(), want, "template {src}");
    }
}

#[test]
fn check_returns_root_variables() {
    let t = Templates::new();
    let names = t
        .check("{{fileA.result}} {{#each vars.list}}{{this}}{{x.y}}{{../step2.result}}{{@root.s3.a}}{{/each}}{{#if (eq step4.success true)}}{{/if}}")
        .unwrap();
    assert_eq!(names, vec!["fileA", "s3", "step2", "step4", "vars"]);
    assert_eq!(t.check("no template").unwrap(), Vec::<String>::new());
    let all = t
        .check_params(&json!({"a": ["{{x.result}}", {"b": "{{vars.k}}"}], "c": 1}))
        .unwrap();
    assert_eq!(all, vec!["vars", "x"]);
}

#[test]
fn check_reports_parse_errors() {
    let err = Templates::new().check("echo {{fileA.result").unwrap_err();
    assert!(matches!(err, TemplateError::Parse { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("template \"echo {{fileA.result\" does not parse: "),
        "{err}"
    );
    assert!(err.to_string().contains("line 1"), "{err}");
    let err = Templates::new().check("{{#if a}}x{{/each}}").unwrap_err();
    assert!(matches!(err, TemplateError::Parse { .. }), "{err:?}");
}

#[test]
fn partials_decorators_and_other_helpers_are_forbidden() {
    let t = Templates::new();
    for (src, needle) in [
        ("{{> self}}", "partials"),
        ("{{#> layout}}x{{/layout}}", "partials"),
        (
            "{{#*inline \"self\"}}{{> self}}{{/inline}}{{> self}}",
            "decorators",
        ),
        ("{{*inline}}", "decorators"),
        ("{{log vars.name}}", "unknown helper \"log\""),
        (
            "{{{{raw}}}}{{x}}{{{{/raw}}}}",
            "only if, unless, each and with take a block",
        ),
        (
            "{{foo vars.name}}",
            "allowed helpers: if, unless, each, with, eq",
        ),
        (
            "{{#eq a b}}x{{/eq}}",
            "only if, unless, each and with take a block",
        ),
        ("{{if vars.name}}", "needs a block"),
        ("{{json (bogus x)}}", "unknown helper \"bogus\""),
        ("{{__text vars.name}}", "unknown helper"),
    ] {
        let err = t.check(src).unwrap_err();
        assert!(
            matches!(err, TemplateError::Forbidden { .. }),
            "{src}: {err:?}"
        );
        assert!(err.to_string().contains(needle), "{src}: {err}");
        assert!(t.render_text(src, &ctx()).is_err(), "{src} rendered");
    }
}

#[test]
fn limits_are_errors_not_panics_or_hangs() {
    let t = Templates::new();
    let c = ctx();
    // A huge template string.
    let huge = "{{vars.name}}".repeat(MAX_TEMPLATE_BYTES);
    assert!(matches!(
        t.render_text(&huge, &c),
        Err(TemplateError::Limit { .. })
    ));
    assert!(matches!(t.check(&huge), Err(TemplateError::Limit { .. })));
    // Deep nesting, which a recursive parser could overflow the stack on.
    let deep = format!("{}x{}", "{{#if vars}}".repeat(5000), "{{/if}}".repeat(5000));
    assert!(matches!(t.check(&deep), Err(TemplateError::Limit { .. })));
    let parens = format!(
        "{{{{eq {}1{} 1}}}}",
        "(eq ".repeat(3000),
        " 1)".repeat(3000)
    );
    assert!(matches!(t.check(&parens), Err(TemplateError::Limit { .. })));
    // A deep params tree.
    let mut p = json!("{{vars.name}}");
    for _ in 0..MAX_PARAMS_DEPTH + 1 {
        p = json!([p]);
    }
    assert!(matches!(
        t.render_params(&p, &c),
        Err(TemplateError::Limit { .. })
    ));
    assert!(matches!(
        t.check_params(&p),
        Err(TemplateError::Limit { .. })
    ));
}

#[test]
fn output_and_work_are_bounded() {
    let t = Templates::new();
    let big = "x".repeat(1024 * 1024);
    let items: Vec<u32> = (0..1000).collect();
    let c = json!({"vars": {"big": big, "items": items}});
    let err = t
        .render_text("{{#each vars.items}}{{@root.vars.big}}{{/each}}", &c)
        .unwrap_err();
    assert!(
        matches!(err, TemplateError::Limit { ref what } if what.contains("bytes")),
        "{err:?}"
    );
    // A million empty iterations produce no output but are still bounded.
    let err = t
        .render_text(
            "{{#each vars.items}}{{#each ../vars.items}}{{/each}}{{/each}}",
            &c,
        )
        .unwrap_err();
    assert!(
        matches!(err, TemplateError::Limit { ref what } if what.contains("steps")),
        "{err:?}"
    );
    // The output budget is shared by the leaves of one params tree.
    let leaf = "{{#each vars.items}}{{#if @first}}{{@root.vars.big}}{{/if}}{{/each}}";
    let p = Value::Array(vec![json!(leaf); 11]);
    assert!(matches!(
        t.render_params(&p, &c),
        Err(TemplateError::Limit { .. })
    ));
    // ... and is fresh for the next call.
    assert!(t.render_params(&json!([leaf, leaf]), &c).is_ok());
}

#[test]
fn to_hub_error_is_a_template_error_with_a_suggestion() {
    let err = render(json!("{{fileB.result}}"))
        .unwrap_err()
        .to_hub_error();
    assert_eq!(err.error_type, ErrorType::TemplateError);
    assert!(!err.recoverable);
    assert!(err.message.contains("fileB"));
    assert!(err.suggestion.contains("fileA"), "{}", err.suggestion);
    let forbidden = Templates::new()
        .check("{{> x}}")
        .unwrap_err()
        .to_hub_error();
    assert!(forbidden.suggestion.contains("lookup"));
}

#[test]
fn templates_can_be_shared_across_tasks() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Templates>();
    assert!(Templates::is_reserved("json") && !Templates::is_reserved("fileA"));
}

/// A small deterministic PRNG (xorshift64*) so the property test needs no deps.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn any_string_value_is_inserted_byte_for_byte() {
    let alphabet = [
        "\"",
        "\\",
        "{{",
        "}}",
        "{{{",
        "$(id)",
        "\u{0}",
        "é",
        "日本",
        "🦀",
        "\n",
        "\r\n",
        "\t",
        " ",
        "a",
        "Z",
        "0",
        "{{vars.s}}",
        "{{> x}}",
        "[object]",
        "&lt;",
        "<",
        ">",
        "&",
        "'",
        "`",
        "~",
        "\\{{",
        "{{!",
        "null",
        "@index",
        "..",
        "/",
    ];
    let t = Templates::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..500 {
        let len = (rng.next() % 24) as usize;
        let s: String = (0..len)
            .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
            .collect();
        let c = json!({"vars": {"s": s}});
        let out = t
            .render_params(&json!({"a": "{{vars.s}}", "b": "x{{vars.s}}y"}), &c)
            .unwrap();
        assert_eq!(out["a"], json!(s), "exact placeholder for {s:?}");
        assert_eq!(out["b"], json!(format!("x{s}y")), "text for {s:?}");
    }
}

#[test]
fn render_value_and_render_text_differ_only_for_single_placeholders() {
    let t = Templates::new();
    let c = ctx();
    assert_eq!(
        t.render_value("{{fileA.result.total}}", &c).unwrap(),
        json!(2)
    );
    assert_eq!(t.render_text("{{fileA.result.total}}", &c).unwrap(), "2");
    assert_eq!(t.render_value("plain", &c).unwrap(), json!("plain"));
    let err = t.render_text("{{lookup vars.list 9}}", &c).unwrap_err();
    assert_eq!(
        err.to_string(),
        "template \"{{lookup vars.list 9}}\" failed to render: lookup found nothing at that key or index"
    );
}

#[test]
fn only_templated_params_need_the_context_and_literal_ones_render_to_themselves() {
    // The runner skips copying the context (and rendering) for literal
    // params; that is only right if rendering a literal tree is a copy.
    let literal = json!({"message": "x", "n": [1, {"k": "a { b } c"}], "ok": true, "none": null});
    assert!(!Templates::is_templated(&literal));
    assert_eq!(
        Templates::new()
            .render_params(&literal, &Value::Null)
            .unwrap(),
        literal
    );
    for templated in [
        json!({"a": "{{vars.name}}"}),
        json!({"a": [1, {"b": "hi {{vars.n}}"}]}),
        json!("{{vars.n}}"),
    ] {
        assert!(Templates::is_templated(&templated), "{templated}");
    }
    // Too deep for rendering: sent to the renderer, which refuses it.
    let mut deep = json!("plain");
    for _ in 0..MAX_PARAMS_DEPTH + 1 {
        deep = json!([deep]);
    }
    assert!(Templates::is_templated(&deep));
    assert!(Templates::new().render_params(&deep, &ctx()).is_err());
}
