use super::*;

fn q(role: Option<Role>, name: &str) -> Query {
    Query {
        role,
        name: name.into(),
    }
}

fn el(role: &str, name: &str) -> Candidate {
    Candidate {
        role: role.into(),
        name: name.into(),
        text: name.into(),
        tag: "div".into(),
        in_viewport: true,
        ..Candidate::default()
    }
}

fn hidden(mut c: Candidate, why: &str) -> Candidate {
    c.hidden = Some(why.into());
    c
}

#[test]
fn descriptions_become_a_role_and_a_name() {
    let cases = [
        ("Submit button", Some(Role::Button), "Submit"),
        ("the Submit button", Some(Role::Button), "Submit"),
        ("button Submit", Some(Role::Button), "Submit"),
        ("the link 'Sign in'", Some(Role::Link), "Sign in"),
        ("\"Sign in\" link", Some(Role::Link), "Sign in"),
        ("Email field", Some(Role::Textbox), "Email"),
        ("search box", Some(Role::Textbox), "search"),
        ("Remember me check box", Some(Role::Checkbox), "Remember me"),
        ("Express radio button", Some(Role::Radio), "Express"),
        (
            "button labeled Save changes",
            Some(Role::Button),
            "Save changes",
        ),
        ("Select all button", Some(Role::Button), "Select all"),
        ("Welcome heading", Some(Role::Heading), "Welcome"),
        ("the dialog", Some(Role::Dialog), ""),
        ("Submit", None, "Submit"),
        ("  Don't   save  ", None, "Don't save"),
        ("「提交」按钮", Some(Role::Button), "提交"),
        ("提交按钮", Some(Role::Button), "提交"),
        ("邮箱 输入框", Some(Role::Textbox), "邮箱"),
        ("提交", None, "提交"),
    ];
    for (d, role, name) in cases {
        assert_eq!(Query::parse(d), q(role, name), "{d}");
    }
}

#[test]
fn needles_are_words_and_the_ends_of_long_words() {
    assert_eq!(q(None, "Sign in").needles(), ["sign", "in"]);
    assert_eq!(q(None, "Submit").needles(), ["subm", "bmit"]);
    assert_eq!(needles("a"), ["a"]);
    assert_eq!(needles("?!"), ["?!"]);
    assert!(needles("").is_empty());
    assert_eq!(needles("请输入邮箱地址"), ["请输入邮", "邮箱地址"]);
}

#[test]
fn tiers_go_exact_then_case_insensitive_then_fuzzy() {
    assert_eq!(tier_of("Submit", "Submit"), Some(Tier::Exact));
    assert_eq!(tier_of(" Submit\n", "Submit"), Some(Tier::Exact));
    assert_eq!(tier_of("SUBMIT", "submit"), Some(Tier::CaseInsensitive));
    assert_eq!(tier_of("Submit order", "submit"), Some(Tier::Fuzzy));
    assert_eq!(tier_of("Submit", "Submit the form"), Some(Tier::Fuzzy));
    assert_eq!(tier_of("Sbumit", "Submit"), None);
    assert_eq!(tier_of("Submti", "Submit"), None);
    assert_eq!(tier_of("Subnit", "Submit"), Some(Tier::Fuzzy));
    assert_eq!(tier_of("Cancel", "Submit"), None);
    assert_eq!(tier_of("", "Submit"), None);
    assert_eq!(
        tier_of("ok", "o"),
        None,
        "a one-letter field is not a match"
    );
    assert_eq!(tier_of("Google", "Go"), None, "words, not letters");
    assert_eq!(tier_of("提交订单", "提交"), Some(Tier::Fuzzy));
}

#[test]
fn the_first_visible_match_wins_in_strategy_then_document_order() {
    let mut by_label = el("button", "");
    by_label.text = String::new();
    by_label.aria_label = "Submit".into();
    let cands = [el("", "Submit now"), by_label, el("button", "Submit")];
    match pick(&q(Some(Role::Button), "Submit"), &cands) {
        Pick::Found(h) => {
            assert_eq!(h.candidate.name, "Submit");
            assert_eq!((h.strategy, h.tier), (Strategy::RoleName, Tier::Exact));
        }
        other => panic!("{other:?}"),
    }
    // Without a role, an exact text match beats a fuzzy one.
    match pick(&q(None, "Submit now"), &cands) {
        Pick::Found(h) => assert_eq!(
            (h.candidate.text.as_str(), h.strategy, h.tier),
            ("Submit now", Strategy::Text, Tier::Exact)
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_attribute_strategy_finds_its_element() {
    let with = |f: fn(&mut Candidate)| {
        let mut c = Candidate {
            tag: "input".into(),
            ..Candidate::default()
        };
        f(&mut c);
        c
    };
    let cases = [
        (
            with(|c| c.placeholder = "Email".into()),
            Strategy::Placeholder,
        ),
        (with(|c| c.title = "Email".into()), Strategy::Title),
        (with(|c| c.alt = "Email".into()), Strategy::Alt),
        (with(|c| c.aria_label = "Email".into()), Strategy::AriaLabel),
    ];
    for (c, strategy) in cases {
        let cands = [c];
        match pick(&q(None, "email"), &cands) {
            Pick::Found(h) => {
                assert_eq!((h.strategy, h.tier), (strategy, Tier::CaseInsensitive))
            }
            other => panic!("{strategy:?}: {other:?}"),
        }
    }
}

#[test]
fn a_hidden_exact_match_is_a_miss_even_if_a_fuzzy_one_is_visible() {
    let cands = [
        el("", "Submit your form below"),
        hidden(el("button", "Submit"), "display:none"),
    ];
    match pick(&q(None, "Submit"), &cands) {
        Pick::Hidden(h) => {
            assert_eq!(h.candidate.hidden.as_deref(), Some("display:none"));
            assert_eq!(h.candidate.describe(), "button \"Submit\"");
        }
        other => panic!("{other:?}"),
    }
    // The same with a role: the paragraph may not stand in for the button.
    assert!(matches!(
        pick(&q(Some(Role::Button), "Submit"), &cands),
        Pick::Hidden(_)
    ));
}

#[test]
fn another_role_counts_only_by_a_close_name() {
    let cands = [el("", "Submit"), el("", "Submit it all")];
    match pick(&q(Some(Role::Button), "submit"), &cands) {
        Pick::Found(h) => assert_eq!(
            (h.candidate.text.as_str(), h.tier),
            ("Submit", Tier::CaseInsensitive)
        ),
        other => panic!("{other:?}"),
    }
    let only_fuzzy = [el("", "Submit it all")];
    assert!(matches!(
        pick(&q(Some(Role::Button), "submit"), &only_fuzzy),
        Pick::Nearest(_)
    ));
}

#[test]
fn a_role_alone_matches_any_element_of_that_role() {
    let cands = [
        hidden(el("dialog", "Old"), "opacity:0"),
        el("dialog", "Cookies"),
    ];
    match pick(&q(Some(Role::Dialog), ""), &cands) {
        Pick::Found(h) => assert_eq!(h.candidate.name, "Cookies"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        pick(&q(Some(Role::Dialog), ""), &[el("button", "x")]),
        Pick::Nothing
    );
}

#[test]
fn a_miss_names_the_nearest_candidate() {
    let cands = [
        el("link", "Help"),
        el("button", "Sign in"),
        el("", "Register"),
    ];
    match pick(&q(Some(Role::Button), "Log in"), &cands) {
        Pick::Nearest(c) => assert_eq!(c.describe(), "button \"Sign in\""),
        other => panic!("{other:?}"),
    }
    assert_eq!(pick(&q(None, "Checkout"), &cands), Pick::Nothing);
    assert_eq!(pick(&q(None, "Checkout"), &[]), Pick::Nothing);
}

#[test]
fn nearest_text_finds_a_near_miss_inside_a_longer_text() {
    let texts = vec![
        "Welcome back".to_string(),
        "Your order was sent on Monday".to_string(),
    ];
    assert_eq!(
        nearest_text("order was send", &texts),
        Some(texts[1].as_str())
    );
    assert_eq!(nearest_text("zzzz", &texts), None);
    assert!(closeness("Sign in", "Please sign in to continue") > 0.99);
}

#[test]
fn describe_and_clip_keep_summaries_short() {
    let mut c = el("", &"x".repeat(500));
    c.tag = "p".into();
    let d = c.describe();
    assert!(d.starts_with("<p> \"xxx"), "{d}");
    assert!(d.chars().count() < 80, "{d}");
    assert_eq!(clip("abc", 3), "abc");
    assert_eq!(clip("abcd", 3), "ab…");
}
