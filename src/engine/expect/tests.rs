use serde_json::{json, Value};

use super::*;
use crate::errors::{ErrorType, HubError};

fn exp(v: Value) -> Expectations {
    Expectations::parse(&v).unwrap()
}

fn ok(e: &Expectations, result: Value) -> Result<(), String> {
    e.check(true, &result, None)
}

#[test]
fn contains_and_regex_test_text() {
    assert!(ok(&exp(json!({"contains": "OK"})), json!("all OK")).is_ok());
    assert_eq!(
        ok(&exp(json!({"contains": "OK"})), json!("FAIL")).unwrap_err(),
        "expected result to contain \"OK\"; actual result: \"FAIL\""
    );
    // Structured results are tested as compact JSON.
    assert!(ok(&exp(json!({"contains": "\"id\":7"})), json!({"id": 7})).is_ok());
    assert!(ok(&exp(json!({"regex": "^v\\d+$"})), json!("v12")).is_ok());
    assert_eq!(
        ok(&exp(json!({"regex": "^v\\d+$"})), json!(12)).unwrap_err(),
        "expected result to match /^v\\d+$/; actual result: 12"
    );
}

#[test]
fn equals_compares_values_and_json_text() {
    assert!(ok(&exp(json!({"equals": {"a": [1, 2]}})), json!({"a": [1, 2]})).is_ok());
    assert!(ok(&exp(json!({"equals": {"a": 1}})), json!("{\"a\": 1}\n")).is_ok());
    assert!(ok(&exp(json!({"equals": "x"})), json!("x")).is_ok());
    assert!(ok(&exp(json!({"equals": "1"})), json!(1)).is_err());
    assert_eq!(
        ok(&exp(json!({"equals": 3})), json!(4)).unwrap_err(),
        "expected result to equal 3; actual result: 4"
    );
}

#[test]
fn path_checks_reach_inside_results_and_json_text() {
    let r = json!({"items": [{"id": 7, "name": "a/b"}]});
    assert!(ok(&exp(json!({"path": "/items/0/id", "equals": 7})), r.clone()).is_ok());
    assert!(ok(&exp(json!({"path": "items.0.id", "equals": 7})), r.clone()).is_ok());
    assert!(ok(
        &exp(json!({"path": "items.0.name", "regex": "^a/"})),
        r.clone()
    )
    .is_ok());
    assert!(ok(&exp(json!({"path": "items.1", "exists": false})), r.clone()).is_ok());
    assert!(ok(
        &exp(json!({"path": "/items/0/id", "equals": 7})),
        json!(r.to_string())
    )
    .is_ok());
    assert_eq!(
        ok(&exp(json!({"path": "items.0.id", "equals": 8})), r.clone()).unwrap_err(),
        "expected result at \"/items/0/id\" to equal 8; actual: 7"
    );
    assert_eq!(
        ok(&exp(json!({"path": "/items/3", "exists": true})), r.clone()).unwrap_err(),
        "expected result at \"/items/3\" to exist; actual: nothing there"
    );
    assert!(ok(&exp(json!({"path": "/nope", "regex": "x"})), r).is_err());
}

#[test]
fn failure_expectation_passes_only_on_failure() {
    let e = exp(json!({"success": false}));
    assert!(e.expects_failure());
    let err = HubError::new(ErrorType::NotFound, "ENOENT");
    assert!(e.check(false, &Value::Null, Some(&err)).is_ok());
    assert_eq!(
        e.check(true, &json!("fine"), None).unwrap_err(),
        "expected the step to fail, but it succeeded; actual result: \"fine\""
    );
}

#[test]
fn other_checks_need_success_first() {
    let e = exp(json!({"contains": "OK"}));
    let err = HubError::new(ErrorType::Timeout, "timed out after 30000 ms");
    assert_eq!(
        e.check(false, &Value::Null, Some(&err)).unwrap_err(),
        "expected result to contain \"OK\", but the step failed: TIMEOUT: timed out after 30000 ms"
    );
}

#[test]
fn arrays_need_every_expectation_and_report_every_miss() {
    let e = exp(json!([{"contains": "a"}, {"contains": "b"}, {"regex": "c"}]));
    assert!(ok(&e, json!("abc")).is_ok());
    let miss = ok(&e, json!("a")).unwrap_err();
    assert!(
        miss.contains("contain \"b\"") && miss.contains("match /c/"),
        "{miss}"
    );
    assert!(ok(&exp(json!([])), json!("anything")).is_ok());
}

#[test]
fn actual_value_is_truncated() {
    let long = "x".repeat(5000);
    let miss = ok(&exp(json!({"contains": "y"})), json!(long)).unwrap_err();
    assert!(miss.len() < 450, "{}", miss.len());
    assert!(miss.ends_with("(5002 bytes in all)"), "{miss}");
}

#[test]
fn parse_errors_are_precise() {
    let err = |v: Value| Expectations::parse(&v).unwrap_err();
    assert!(err(json!("OK"))
        .starts_with("expect: \"OK\" is not an expectation; expected {\"contains\"}"));
    assert!(err(json!({"contains": "a", "regex": "b"})).contains("use an array for several"));
    assert_eq!(
        err(json!({"contains": 1})),
        "expect: \"contains\" must be a string, got 1"
    );
    assert!(err(json!({"success": true})).contains("use {\"success\":false}"));
    assert!(err(json!({"matches": "x"})).starts_with("expect: unknown check \"matches\""));
    assert!(err(json!({"path": "/a"}))
        .contains("needs exactly one of \"equals\", \"exists\" or \"regex\""));
    assert!(
        err(json!({"path": "/a", "exists": "yes"})).contains("\"exists\" must be true or false")
    );
    assert!(err(json!({"path": 3, "exists": true})).contains("\"path\" must be a string"));
    assert!(err(json!({"regex": "(x"})).starts_with("expect: regex \"(x\" is invalid"));
    assert!(err(json!([{"contains": "a"}, 5])).contains("5 is not an expectation"));
}

#[test]
fn dotted_paths_escape_pointer_characters() {
    assert_eq!(to_pointer("a.b~c/d.0"), "/a/b~0c~1d/0");
    assert_eq!(to_pointer("/a/b"), "/a/b");
    assert_eq!(to_pointer(""), "");
}
