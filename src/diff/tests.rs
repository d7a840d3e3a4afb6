use serde_json::json;

use super::*;
use crate::errors::ErrorType;

fn ok(recorded: &Value, actual: &Value, ignore: &Ignore) -> Vec<Difference> {
    compare(true, recorded, None, true, actual, None, ignore)
}

fn paths(d: &[Difference]) -> Vec<&str> {
    d.iter().map(|d| d.path.as_str()).collect()
}

fn diff(path: &str, kind: DiffKind, recorded: Value, actual: Value) -> Difference {
    Difference {
        path: path.to_string(),
        kind,
        recorded,
        actual,
    }
}

#[test]
fn identical_outcomes_have_no_differences() {
    let v = json!({"a": [1, {"b": "x"}], "c": null});
    assert!(ok(&v, &v, &Ignore::defaults()).is_empty());
}

#[test]
fn success_flip_comes_first_with_the_new_error_type() {
    let err = HubError::new(ErrorType::Timeout, "took 30000ms");
    let d = compare(
        true,
        &json!({"z": 1}),
        None,
        false,
        &Value::Null,
        Some(&err),
        &Ignore::defaults(),
    );
    assert_eq!(
        d,
        vec![
            diff("", DiffKind::SuccessFlipped, json!(true), json!(false)),
            diff(
                "/error/errorType",
                DiffKind::Added,
                Value::Null,
                json!("TIMEOUT")
            ),
        ]
    );
    let back = compare(
        false,
        &Value::Null,
        Some(&err),
        true,
        &json!(1),
        None,
        &Ignore::defaults(),
    );
    assert_eq!(back[0].kind, DiffKind::SuccessFlipped);
    assert_eq!(
        back[1],
        diff(
            "/error/errorType",
            DiffKind::Removed,
            json!("TIMEOUT"),
            Value::Null
        )
    );
}

#[test]
fn both_failed_compares_the_error_type_only() {
    let a = HubError::new(ErrorType::NotFound, "no such file /tmp/a at 10:00");
    let b = HubError::new(ErrorType::NotFound, "no such file /tmp/b at 11:00");
    let i = Ignore::defaults();
    assert!(compare(false, &json!(1), Some(&a), false, &json!(2), Some(&b), &i).is_empty());
    let c = HubError::new(ErrorType::Permission, "denied");
    let d = compare(
        false,
        &Value::Null,
        Some(&a),
        false,
        &Value::Null,
        Some(&c),
        &i,
    );
    assert_eq!(
        d,
        vec![diff(
            "/error/errorType",
            DiffKind::Changed,
            json!("NOT_FOUND"),
            json!("PERMISSION")
        )]
    );
}

#[test]
fn nested_changes_added_and_removed_keys_are_sorted_pointers() {
    let rec = json!({"items": [{"id": 1, "name": "a"}], "gone": true, "same": "s"});
    let act = json!({"items": [{"id": 2, "name": "a", "new": 5}], "same": "s", "added": []});
    let d = ok(&rec, &act, &Ignore::defaults());
    assert_eq!(
        d,
        vec![
            diff("/result/added", DiffKind::Added, Value::Null, json!([])),
            diff("/result/gone", DiffKind::Removed, json!(true), Value::Null),
            diff("/result/items/0/id", DiffKind::Changed, json!(1), json!(2)),
            diff(
                "/result/items/0/new",
                DiffKind::Added,
                Value::Null,
                json!(5)
            ),
        ]
    );
}

#[test]
fn arrays_compare_by_index_with_numeric_order() {
    let rec: Vec<i32> = (0..12).collect();
    let mut act = rec.clone();
    act[2] = 20;
    act[10] = 100;
    act.pop();
    let d = ok(&json!(rec), &json!(act), &Ignore::defaults());
    assert_eq!(paths(&d), ["/result/2", "/result/10", "/result/11"]);
    assert_eq!(d[2].kind, DiffKind::Removed);
    let grown = ok(&json!([1]), &json!([1, 2]), &Ignore::defaults());
    assert_eq!(
        grown,
        vec![diff("/result/1", DiffKind::Added, Value::Null, json!(2))]
    );
}

#[test]
fn type_changes_and_equal_numbers() {
    let d = ok(
        &json!({"a": 1, "b": 1, "c": null}),
        &json!({"a": "1", "b": 1.0, "c": 0}),
        &Ignore::defaults(),
    );
    assert_eq!(
        d,
        vec![
            diff("/result/a", DiffKind::TypeChanged, json!(1), json!("1")),
            diff("/result/c", DiffKind::TypeChanged, Value::Null, json!(0)),
        ]
    );
}

#[test]
fn json_inside_text_is_compared_structurally() {
    let rec = json!({"content": [{"type": "text", "text": "{\"a\":1,\"b\":{\"c\":[1,2]}}"}]});
    let reordered =
        json!({"content": [{"type": "text", "text": "{ \"b\": {\"c\": [1, 2]}, \"a\": 1 }"}]});
    assert!(ok(&rec, &reordered, &Ignore::defaults()).is_empty());
    let changed = json!({"content": [{"type": "text", "text": "{\"a\":1,\"b\":{\"c\":[1,3]}}"}]});
    assert_eq!(
        ok(&rec, &changed, &Ignore::defaults()),
        vec![diff(
            "/result/content/0/text/b/c/1",
            DiffKind::Changed,
            json!(2),
            json!(3)
        )]
    );
    // Plain text that differs is one change of the whole string.
    let plain = ok(
        &json!("{not json"),
        &json!("{not json!"),
        &Ignore::defaults(),
    );
    assert_eq!(
        plain,
        vec![diff(
            "/result",
            DiffKind::Changed,
            json!("{not json"),
            json!("{not json!")
        )]
    );
}

#[test]
fn ignore_paths_with_a_star_segment_and_subtrees() {
    let rec = json!({"items": [{"id": 1, "updatedAt": "mon"}, {"id": 2, "updatedAt": "tue"}], "meta": {"x": 1}});
    let act = json!({"items": [{"id": 1, "updatedAt": "wed"}, {"id": 3, "updatedAt": "thu"}], "meta": {"x": 2, "y": 1}});
    let i = Ignore::new(
        &["/result/items/*/updatedAt".into(), "/result/meta".into()],
        &[],
    )
    .unwrap();
    assert_eq!(paths(&ok(&rec, &act, &i)), ["/result/items/1/id"]);
    assert!(i.ignores_path("/result/items/7/updatedAt"));
    assert!(i.ignores_path("/result/meta/deep/er"));
    assert!(!i.ignores_path("/result/items/7/id"));
    // An added key under an ignored pattern is skipped too.
    let added = ok(
        &json!({"items": [{}]}),
        &json!({"items": [{"updatedAt": "x"}]}),
        &i,
    );
    assert!(added.is_empty());
}

#[test]
fn ignore_path_keys_use_pointer_escapes() {
    let i = Ignore::new(&["/result/a~1b/c~0d".into()], &[]).unwrap();
    assert!(ok(&json!({"a/b": {"c~d": 1}}), &json!({"a/b": {"c~d": 2}}), &i).is_empty());
    let d = ok(&json!({"a/b": 1}), &json!({"a/b": 2}), &Ignore::defaults());
    assert_eq!(d[0].path, "/result/a~1b");
}

#[test]
fn timestamps_and_uuids_are_ignored_by_default() {
    let i = Ignore::defaults();
    let pairs = [
        ("2026-11-22T03:49:36.123Z", "2027-01-02T10:00:00.000Z"),
        ("2026-11-22T03:49:36+02:00", "2026-11-23T04:00:01-05:30"),
        ("2026-11-22 03:49:36", "2026-11-22 03:50:00"),
        (
            "saved at 2026-11-22T03:49:36Z.",
            "saved at 2026-12-01T00:00:00Z.",
        ),
        (
            "3F2504E0-4F89-11D3-9A0C-0305E82C3301",
            "0190a3c2-7b1e-7cc4-9b0e-1c2d3e4f5a6b",
        ),
        (
            "id 0190a3c2-7b1e-7cc4-9b0e-1c2d3e4f5a6b ok",
            "id 11111111-2222-4333-8444-555555555555 ok",
        ),
    ];
    for (a, b) in pairs {
        assert!(ok(&json!(a), &json!(b), &i).is_empty(), "{a} vs {b}");
    }
    // The text around a volatile part still counts, and so do bare dates.
    assert_eq!(
        ok(
            &json!("saved 2026-11-22T03:49:36Z"),
            &json!("lost 2026-11-22T03:49:37Z"),
            &i
        )
        .len(),
        1
    );
    assert_eq!(ok(&json!("2026-11-22"), &json!("2026-11-23"), &i).len(), 1);
    // A timestamp is not a UUID: different patterns never compare equal.
    assert_eq!(
        ok(
            &json!("2026-11-22T03:49:36Z"),
            &json!("0190a3c2-7b1e-7cc4-9b0e-1c2d3e4f5a6b"),
            &i
        )
        .len(),
        1
    );
}

#[test]
fn custom_regexes_mask_volatile_parts() {
    let i = Ignore::new(&[], &[r"req-\d+".into(), r"^tmp\w+$".into()]).unwrap();
    assert!(ok(
        &json!({"r": "call req-17 done"}),
        &json!({"r": "call req-9 done"}),
        &i
    )
    .is_empty());
    assert_eq!(
        ok(
            &json!({"r": "call req-17 done"}),
            &json!({"r": "fail req-9 done"}),
            &i
        )
        .len(),
        1
    );
    assert!(ok(&json!("tmpAbC"), &json!("tmpXyz1"), &i).is_empty());
    assert_eq!(ok(&json!("x tmpAbC"), &json!("x tmpXyz1"), &i).len(), 1);
    // The defaults are still there.
    assert!(ok(
        &json!("2026-11-22T03:49:36Z"),
        &json!("2026-11-22T03:49:37Z"),
        &i
    )
    .is_empty());
}

#[test]
fn bad_regexes_and_paths_are_errors_naming_them() {
    let e = Ignore::new(&[], &["(unclosed".into()]).unwrap_err();
    assert!(e.contains("\"(unclosed\""), "{e}");
    let e = Ignore::new(&[], &[r"\w{1000}{1000}".into()]).unwrap_err();
    assert!(e.contains("1 MiB"), "{e}");
    let e = Ignore::new(&["result/x".into()], &[]).unwrap_err();
    assert!(e.contains("\"result/x\""), "{e}");
    assert_eq!(
        Ignore::defaults().regexes.len(),
        2,
        "the default patterns compile"
    );
}

#[test]
fn the_list_is_capped_with_a_count_of_the_rest() {
    let rec: Vec<i32> = (0..150).collect();
    let act: Vec<i32> = (0..150).map(|n| n + 1).collect();
    let d = ok(&json!(rec), &json!(act), &Ignore::defaults());
    assert_eq!(d.len(), MAX_DIFFERENCES + 1);
    assert_eq!(d[99].path, "/result/99");
    assert_eq!(
        d[100],
        diff(
            "/…",
            DiffKind::Changed,
            Value::Null,
            json!("50 more differences")
        )
    );
}

#[test]
fn deep_nesting_does_not_overflow() {
    let mut a = json!(1);
    let mut b = json!(2);
    // Deeper than MAX_DEPTH, as JSON inside text inside JSON can get.
    for _ in 0..600 {
        a = json!([a]);
        b = json!([b]);
    }
    let d = ok(&a, &b, &Ignore::defaults());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].kind, DiffKind::Changed);
}

#[test]
fn differences_serialize_in_wire_shape() {
    let d = diff("", DiffKind::SuccessFlipped, json!(true), json!(false));
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({"path": "", "kind": "success_flipped", "recorded": true, "actual": false})
    );
    assert_eq!(
        serde_json::to_value(DiffKind::TypeChanged).unwrap(),
        json!("type_changed")
    );
}

#[test]
fn nearest_picks_the_fewest_differing_fields() {
    let a = json!({"path": "/a.txt", "encoding": "utf8"});
    let b = json!({"path": "/b.txt", "encoding": "utf8"});
    let c = json!({"path": "/b.txt", "encoding": "latin1", "extra": {"x": 1}});
    let wanted = json!({"path": "/b.txt", "encoding": "utf8", "head": 3});
    let cands = [(4, &a), (7, &c), (9, &b)];
    assert_eq!(
        nearest(&wanted, &cands),
        Some((9, vec!["/head".to_string()]))
    );
    // Nested fields count one by one, and timestamps are not ignored here.
    let t1 = json!({"q": {"at": "2026-11-22T03:49:36Z", "n": 1}});
    let t2 = json!({"q": {"at": "2026-11-22T03:49:37Z", "n": 1}});
    assert_eq!(
        nearest(&t2, &[(0, &t1)]),
        Some((0, vec!["/q/at".to_string()]))
    );
    assert_eq!(nearest(&wanted, &[]), None);
}

#[test]
fn nearest_breaks_ties_by_the_first_candidate() {
    let a = json!({"x": 1});
    let b = json!({"x": 2});
    let wanted = json!({"x": 3});
    assert_eq!(
        nearest(&wanted, &[(5, &a), (2, &b)]),
        Some((5, vec!["/x".to_string()]))
    );
}
