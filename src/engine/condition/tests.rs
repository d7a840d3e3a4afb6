use serde_json::{json, Value};

use super::*;

fn vars() -> Value {
    json!({
        "vars": {"mode": "fast"},
        "fileA": {"success": false, "result": null,
                  "error": {"errorType": "NOT_FOUND", "message": "ENOENT: no such file /a.json"}},
        "step1": {"success": true, "result": "OK version 12", "error": null},
        "data": {"success": true, "result": {"status": "OK", "n": 1}}
    })
}

fn eval(when: Value, last: Option<bool>) -> Result<(bool, String), TemplateError> {
    let t = Templates::new();
    let c = parse(&when, &t).unwrap();
    let v = vars();
    c.evaluate(&EvalCtx {
        last_success: last,
        stopped_at: None,
        vars: &v,
        templates: &t,
    })
}

fn parse_err(when: Value) -> String {
    parse(&when, &Templates::new()).unwrap_err()
}

#[test]
fn success_and_failure_follow_the_last_step() {
    assert_eq!(
        eval(json!("success"), Some(true)).unwrap(),
        (
            true,
            "condition \"success\" met (the last step that ran succeeded)".to_string()
        )
    );
    assert!(!eval(json!("success"), Some(false)).unwrap().0);
    assert!(eval(json!("failure"), Some(false)).unwrap().0);
    assert!(!eval(json!("failure"), Some(true)).unwrap().0);
    let (met, reason) = eval(json!("success"), None).unwrap();
    assert!(!met);
    assert!(reason.contains("no previous step has run"), "{reason}");
    assert!(!eval(json!("failure"), None).unwrap().0);
}

#[test]
fn var_success_explains_the_failure() {
    let (met, reason) = eval(json!({"var": "fileA", "success": true}), Some(true)).unwrap();
    assert!(!met);
    assert_eq!(reason, "condition {\"var\":\"fileA\",\"success\":true} not met (fileA failed: ENOENT: no such file /a.json)");
    assert!(
        eval(json!({"var": "fileA", "success": false}), None)
            .unwrap()
            .0
    );
    assert!(
        eval(json!({"var": "step1", "success": true}), None)
            .unwrap()
            .0
    );
}

#[test]
fn var_contains_and_regex_test_the_result_text() {
    assert!(
        eval(json!({"var": "step1", "contains": "OK"}), None)
            .unwrap()
            .0
    );
    let (met, reason) = eval(json!({"var": "step1", "contains": "FAIL"}), None).unwrap();
    assert!(!met);
    assert!(
        reason.contains("step1.result does not contain \"FAIL\"; result: \"OK version 12\""),
        "{reason}"
    );
    assert!(
        eval(json!({"var": "step1", "regex": "version\\s+\\d+"}), None)
            .unwrap()
            .0
    );
    assert!(
        !eval(json!({"var": "step1", "regex": "^version"}), None)
            .unwrap()
            .0
    );
    // Structured results are tested as compact JSON.
    assert!(
        eval(
            json!({"var": "data", "contains": "\"status\":\"OK\""}),
            None
        )
        .unwrap()
        .0
    );
}

#[test]
fn unknown_var_is_a_template_error() {
    let err = eval(json!({"var": "nope", "success": true}), None).unwrap_err();
    assert!(err.to_string().contains("no variable \"nope\""), "{err}");
    assert!(err.to_string().contains("fileA"), "{err}");
}

#[test]
fn template_conditions_use_truthiness() {
    let (met, reason) = eval(json!("{{fileA.success}}"), None).unwrap();
    assert!(!met);
    assert!(
        reason.ends_with("(\"{{fileA.success}}\" rendered \"false\")"),
        "{reason}"
    );
    assert!(eval(json!("{{step1.success}}"), None).unwrap().0);
    assert!(
        eval(json!("{{#if (eq vars.mode \"fast\")}}yes{{/if}}"), None)
            .unwrap()
            .0
    );
    assert!(
        !eval(json!("{{#if (eq vars.mode \"slow\")}}yes{{/if}}"), None)
            .unwrap()
            .0
    );
    for (text, truthy) in [
        ("", false),
        ("  \n", false),
        ("false", false),
        ("0", false),
        ("null", false),
        ("undefined", false),
        (" FALSE ", false),
        ("true", true),
        ("1", true),
        ("no", true),
        ("[]", true),
    ] {
        assert_eq!(is_truthy(text), truthy, "{text:?}");
    }
    assert!(matches!(
        eval(json!("{{ghost.success}}"), None),
        Err(TemplateError::Unknown { .. })
    ));
}

#[test]
fn not_all_any_combine() {
    assert!(
        eval(json!({"not": {"var": "fileA", "success": true}}), None)
            .unwrap()
            .0
    );
    assert!(
        eval(
            json!({"all": ["success", {"var": "step1", "contains": "OK"}]}),
            Some(true)
        )
        .unwrap()
        .0
    );
    let (met, reason) = eval(
        json!({"all": ["success", {"var": "fileA", "success": true}]}),
        Some(true),
    )
    .unwrap();
    assert!(!met);
    assert!(reason.contains("fileA failed: ENOENT"), "{reason}");
    assert!(
        eval(
            json!({"any": [{"var": "fileA", "success": true}, "{{step1.success}}"]}),
            None
        )
        .unwrap()
        .0
    );
    assert!(
        !eval(json!({"any": ["failure", "{{fileA.success}}"]}), Some(true))
            .unwrap()
            .0
    );
}

#[test]
fn referenced_vars_lists_every_variable() {
    let t = Templates::new();
    let c = parse(&json!({"all": [{"var": "step1", "success": true}, {"not": "{{fileA.result}} {{vars.x}}"}, "success"]}), &t).unwrap();
    assert_eq!(c.referenced_vars(), vec!["fileA", "step1", "vars"]);
}

#[test]
fn parse_errors_are_precise() {
    assert_eq!(parse_err(json!("succes")),
        "when: unknown condition form \"succes\"; expected \"success\", \"failure\", \"always\", {\"var\",\"success\"|\"contains\"|\"regex\"}, {\"not\"}, {\"all\"}, {\"any\"} or a template string");
    assert!(
        parse_err(json!({"if": "x"})).starts_with("when: unknown condition form {\"if\":\"x\"}")
    );
    assert!(parse_err(json!(3)).starts_with("when: unknown condition form 3"));
    assert_eq!(parse_err(json!({"var": "a"})),
        "when: {\"var\":\"a\"} needs exactly one of \"success\", \"contains\" or \"regex\", got {\"var\":\"a\"}");
    assert!(
        parse_err(json!({"var": "a", "success": true, "contains": "x"})).contains("exactly one of")
    );
    assert_eq!(
        parse_err(json!({"var": "a", "success": "yes"})),
        "when: \"success\" must be true or false, got \"yes\""
    );
    assert_eq!(
        parse_err(json!({"var": 1, "success": true})),
        "when: \"var\" must be a variable name (a saveAs), got 1"
    );
    assert!(parse_err(json!({"var": "a", "regexp": "x"})).contains("unknown key \"regexp\""));
    assert!(parse_err(json!({"all": []})).contains("\"all\" needs a non-empty array"));
    assert!(parse_err(json!({"any": "success"})).contains("\"any\" needs a non-empty array"));
    assert!(parse_err(json!("{{> partial}}"))
        .starts_with("when: template \"{{> partial}}\" is not allowed"));
    assert!(parse_err(json!("{{a.b")).contains("does not parse"));
}

#[test]
fn bad_and_huge_regexes_are_refused_at_parse() {
    let e = parse_err(json!({"var": "a", "regex": "(unclosed"}));
    assert!(
        e.starts_with("when: regex \"(unclosed\" is invalid: "),
        "{e}"
    );
    let e = parse_err(json!({"var": "a", "regex": "\\w{1000}\\w{1000}\\w{1000}"}));
    assert!(e.contains("is invalid") && e.contains("size limit"), "{e}");
}

#[test]
fn deep_nesting_is_refused() {
    let mut v = json!("success");
    for _ in 0..40 {
        v = json!({"not": v});
    }
    assert!(parse_err(v).contains("nested more than 32"));
}

#[test]
fn display_is_the_json_a_client_writes() {
    let t = Templates::new();
    let src = json!({"any": [{"not": {"var": "a", "regex": "x\\d"}}, "failure", "{{a.success}}", {"all": [{"var": "b", "contains": "\"q\""}]}]});
    let c = parse(&src, &t).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&c.to_string()).unwrap(), src);
    assert!(c
        .to_string()
        .starts_with(r#"{"any":[{"not":{"var":"a","regex":"#));
}

#[test]
fn always_holds_and_failure_holds_after_a_stop() {
    let t = Templates::new();
    let v = vars();
    let check = |when: Value, last: Option<bool>, stopped_at: Option<usize>| {
        let c = parse(&when, &t).unwrap();
        let ctx = EvalCtx {
            last_success: last,
            stopped_at,
            vars: &v,
            templates: &t,
        };
        (c.runs_after_stop(), c.evaluate(&ctx).unwrap())
    };
    let (after_stop, (met, why)) = check(json!("always"), None, None);
    assert!(after_stop && met, "{why}");
    assert_eq!(why, "condition \"always\" met (it always runs)");
    // After a stop the batch has failed, whatever the last cleanup step did.
    let (after_stop, (met, why)) = check(json!("failure"), Some(true), Some(2));
    assert!(after_stop && met, "{why}");
    assert!(
        why.contains("step 2 failed and stopOnError stopped the batch"),
        "{why}"
    );
    let (_, (met, _)) = check(json!("success"), Some(true), Some(2));
    assert!(met, "\"success\" still looks at the last step that ran");
    let (after_stop, (met, _)) = check(
        json!({"all": ["failure", {"var": "step1", "success": true}]}),
        Some(true),
        Some(0),
    );
    assert!(after_stop && met);
    for plain in [
        json!("success"),
        json!({"var": "step1", "success": true}),
        json!({"not": "failure"}),
        json!("{{vars.mode}}"),
    ] {
        assert!(!check(plain.clone(), Some(false), None).0, "{plain}");
    }
}
