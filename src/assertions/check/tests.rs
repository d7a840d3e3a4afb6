use super::super::browser::{TextFound, TextHidden};
use super::super::locator::Candidate;
use super::*;
use crate::errors::ErrorType;

fn text(t: &str) -> Assertion {
    Assertion::Text {
        text: t.into(),
        exact: false,
    }
}

fn element(d: &str) -> Assertion {
    Assertion::Element {
        description: d.into(),
        query: Query::parse(d),
    }
}

fn miss_of(j: Judgement) -> Miss {
    match j {
        Judgement::Miss(m) => m,
        Judgement::Pass(ev) => panic!("expected a miss, got {ev:?}"),
    }
}

#[test]
fn plans_carry_needles_and_roles_not_page_text() {
    let p = text("Saved").plan();
    assert_eq!(p["mode"], "text");
    assert_eq!(p["needles"], json!(["save", "aved"]));
    let p = element("Submit button").plan();
    assert_eq!(p["roles"], json!(["button"]));
    assert_eq!(p["needles"], json!(["subm", "bmit"]));
    assert_eq!(element("Submit").plan()["roles"], json!([]));
}

#[test]
fn text_found_gives_short_evidence() {
    let probe = Probe {
        found: Some(TextFound {
            tag: "p".into(),
            context: "x".repeat(500),
            in_viewport: true,
        }),
        ..Probe::default()
    };
    match text("Saved").judge(&probe) {
        Judgement::Pass(ev) => {
            assert_eq!(ev["text"], "Saved");
            assert_eq!(ev["element"], "<p>");
            assert_eq!(ev["match"], "case-insensitive");
            let ctx = ev["context"].as_str().expect("context");
            assert!(ctx.chars().count() <= CONTEXT_MAX);
            let whole = ok(ev.clone());
            assert_eq!(whole["ok"], true);
            assert!(whole.to_string().len() < 400, "{whole}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn text_misses_say_hidden_or_nearest() {
    let hidden = Probe {
        hidden: vec![TextHidden {
            tag: "div".into(),
            hidden: "display:none".into(),
            context: "Saved".into(),
        }],
        ..Probe::default()
    };
    let m = miss_of(text("Saved").judge(&hidden));
    assert!(m.hidden);
    assert_eq!(
        m.message,
        "text \"Saved\" is on the page only in hidden elements: <div> (display:none)"
    );
    let near = Probe {
        near: vec!["Save draft".into(), "Welcome".into()],
        ..Probe::default()
    };
    let m = miss_of(text("Saved").judge(&near));
    assert!(!m.hidden);
    assert_eq!(
        m.message,
        "text \"Saved\" is not on the page; nearest text: \"Save draft\""
    );
    let m = miss_of(text("Zebra").judge(&Probe::default()));
    assert_eq!(
        m.message,
        "text \"Zebra\" is not on the page (nothing similar either)"
    );
    let long = "y".repeat(1000);
    let m = miss_of(text(&long).judge(&Probe::default()));
    assert!(m.message.len() < 200, "{}", m.message);
}

#[test]
fn element_verdicts_become_evidence_or_messages() {
    let button = |hidden: Option<&str>| Candidate {
        role: "button".into(),
        name: "Submit".into(),
        tag: "button".into(),
        hidden: hidden.map(String::from),
        in_viewport: hidden.is_none(),
        ..Candidate::default()
    };
    let seen = Probe {
        candidates: vec![button(None)],
        ..Probe::default()
    };
    match element("the Submit button").judge(&seen) {
        Judgement::Pass(ev) => {
            assert_eq!(ev["role"], "button");
            assert_eq!(ev["name"], "Submit");
            assert_eq!(ev["matchedBy"], "role and name");
            assert_eq!(ev["match"], "exact");
            assert_eq!(ev["inViewport"], true);
        }
        other => panic!("{other:?}"),
    }
    let gone = Probe {
        candidates: vec![button(Some("visibility:hidden"))],
        more: true,
        ..Probe::default()
    };
    let m = miss_of(element("Submit button").judge(&gone));
    assert!(m.hidden);
    assert_eq!(m.message, "no visible element matches \"Submit button\"; found a hidden button \"Submit\" (visibility:hidden); only the first 200 possible elements were checked");
    let m = miss_of(element("Sumbit button").judge(&seen));
    assert_eq!(
        m.message,
        "no element matches \"Sumbit button\"; nearest: button \"Submit\""
    );
    let m = miss_of(element("Checkout").judge(&Probe::default()));
    assert_eq!(
        m.message,
        "no element matches \"Checkout\" and nothing on the page resembles it"
    );
}

#[test]
fn misses_and_failures_follow_the_tool_result_contract() {
    let m = Assertion::after_wait(
        Miss {
            message: "gone".into(),
            hidden: false,
        },
        Some(500),
    );
    assert_eq!(m.message, "gone (waited 500 ms)");
    let e = miss_error(&text("x"), &m);
    assert_eq!(e.error_type, ErrorType::AssertionFailed);
    assert!(e.recoverable);
    assert!(e.suggestion.contains("timeout"), "{}", e.suggestion);
    let v = failure(&e);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "ASSERTION_FAILED");
    assert_eq!(v["error"]["retriable"], true);
    assert_eq!(v["error"]["message"], "gone (waited 500 ms)");
    let closed = failure(&HubError::new(ErrorType::PageClosed, "closed"));
    assert_eq!(closed["error"]["code"], "PAGE_CLOSED");
    // The call layer reads it back as the same failure.
    let (r, raw) = crate::hub::local::tool_result(Ok(v));
    assert_eq!(r.expect_err("failure"), e);
    assert!(raw.is_some());
}
