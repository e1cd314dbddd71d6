//! Unit tests for label and field selectors.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use proptest::prelude::*;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parse(s: &str) -> LabelSelector {
    s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn syntax_at(s: &str) -> (usize, String) {
    match s.parse::<LabelSelector>() {
        Err(SelectorError::Syntax {
            position,
            message,
            input,
        }) => {
            assert_eq!(input, s);
            (position, message)
        }
        other => panic!("{s:?}: expected a syntax error, got {other:?}"),
    }
}

#[test]
fn empty_selector_is_everything() {
    for s in ["", "   "] {
        let sel = parse(s);
        assert!(sel.is_everything());
        assert!(sel.matches(&BTreeMap::new()));
        assert_eq!(sel.to_string(), "");
    }
    assert!(LabelSelector::everything().matches(&labels(&[("a", "b")])));
    assert!(!parse("a").is_everything());
}

#[test]
fn every_operator_matches_like_the_api_server() {
    let l = labels(&[("a", "b"), ("e", "x"), ("n", "7")]);
    let cases = [
        ("a=b", true),
        ("a==b", true),
        ("a=c", false),
        ("z=b", false),
        ("a!=c", true),
        ("a!=b", false),
        ("z!=b", true), // absent label satisfies !=
        ("e in (x,y)", true),
        ("e in (y)", false),
        ("z in (x)", false),
        ("e notin (y,z)", true),
        ("e notin (x)", false),
        ("z notin (x)", true), // absent label satisfies notin
        ("a", true),
        ("z", false),
        ("!z", true),
        ("!a", false),
        ("n>5", true),
        ("n>7", false),
        ("n<8", true),
        ("a>1", false), // not an integer
        ("z<1", false),
        ("a=b,e in (x),!z,n", true),
        ("a=b,e in (y)", false),
        ("a=", false),
        ("z=", false),
    ];
    for (s, want) in cases {
        assert_eq!(parse(s).matches(&l), want, "{s}");
    }
    assert!(parse("a=").matches(&labels(&[("a", "")])));
}

#[test]
fn matches_object_reads_metadata_labels() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let mut cm = ConfigMap::default();
    assert!(parse("!a").matches_object(&cm), "no labels at all");
    assert!(!parse("a").matches_object(&cm));
    cm.metadata.labels = Some(labels(&[("a", "1")]));
    assert!(parse("a=1").matches_object(&cm));
}

#[test]
fn display_is_canonical_and_round_trips() {
    let cases = [
        ("a=b", "a=b"),
        ("a==b", "a=b"),
        ("  tier in ( web , api ) ", "tier in (api,web)"),
        ("z, !y, x notin (3,1,2), w!=v", "w!=v,x notin (1,2,3),!y,z"),
        ("example.com/app=x,a=", "a=,example.com/app=x"),
        ("n>5,n<9", "n>5,n<9"),
        ("b=1,a=2,b=3", "a=2,b=1,b=3"),
    ];
    for (input, canonical) in cases {
        let sel = parse(input);
        assert_eq!(sel.to_string(), canonical, "{input}");
        assert_eq!(
            parse(canonical),
            sel,
            "{canonical} must parse back to the same selector"
        );
    }
    assert_eq!(parse("a=b"), parse("a==b"));
}

#[test]
fn syntax_errors_say_what_and_where() {
    assert_eq!(
        syntax_at("a=b,"),
        (
            4,
            "expected a label key or '!', found end of selector".into()
        )
    );
    assert_eq!(syntax_at("a in b").0, 5);
    assert!(syntax_at("a in b").1.contains("expected '(' after 'in'"));
    assert_eq!(
        syntax_at("a in ()"),
        (6, "'in' needs at least one value in its parentheses".into())
    );
    assert_eq!(syntax_at("a notin (x y)").0, 11);
    assert!(syntax_at("a notin (x y)").1.contains("expected ',' or ')'"));
    assert_eq!(syntax_at("a in (x,)").0, 8);
    assert_eq!(syntax_at("a in (x").0, 7);
    assert_eq!(syntax_at("!").0, 1);
    assert!(syntax_at("!").1.contains("after '!'"));
    assert_eq!(syntax_at("a b").0, 2);
    assert!(syntax_at("a b").1.contains("expected an operator"));
    assert_eq!(syntax_at("a=b c").0, 4);
    assert!(syntax_at("a=b c").1.contains("expected ',' or end"));
    assert_eq!(syntax_at(",a").0, 0);
    assert_eq!(syntax_at("a=(").0, 2);
    assert_eq!(syntax_at("a>x").0, 2);
    assert!(syntax_at("a>x").1.contains("integer"));
    assert_eq!(syntax_at("a=b,,c").0, 4);
    let msg = "a in b".parse::<LabelSelector>().unwrap_err().to_string();
    assert!(
        msg.contains("\"a in b\"") && msg.contains("position 5"),
        "{msg}"
    );
}

#[test]
fn invalid_keys_and_values_are_rejected_with_position() {
    match "a=b,-bad=c".parse::<LabelSelector>() {
        Err(SelectorError::InvalidKey {
            position: 4, key, ..
        }) => assert_eq!(key, "-bad"),
        other => panic!("{other:?}"),
    }
    match "a=b,!Foo.com/x".parse::<LabelSelector>() {
        Err(SelectorError::InvalidKey {
            position: 5,
            key,
            reason,
            ..
        }) => {
            assert_eq!(key, "Foo.com/x");
            assert!(reason.contains("prefix"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let long = "x".repeat(64);
    match format!("k in (ok, {long})").parse::<LabelSelector>() {
        Err(SelectorError::InvalidValue {
            position: 10,
            key,
            value,
            reason,
            ..
        }) => {
            assert_eq!((key.as_str(), value.as_str()), ("k", long.as_str()));
            assert!(reason.contains("63"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        format!("{long}=a").parse::<LabelSelector>(),
        Err(SelectorError::InvalidKey { .. })
    ));
    assert!(matches!(
        "a=b/c".parse::<LabelSelector>(),
        Err(SelectorError::InvalidValue { .. })
    ));
    assert!(matches!(
        "a/b/c".parse::<LabelSelector>(),
        Err(SelectorError::InvalidKey { .. })
    ));
}

#[test]
fn in_and_notin_can_be_label_keys() {
    // Keywords are only operators after a key.
    assert!(parse("in=x").matches(&labels(&[("in", "x")])));
    assert_eq!(parse("notin").to_string(), "notin");
}

#[test]
fn converts_structured_selectors() {
    let meta = metav1::LabelSelector {
        match_labels: Some([("app".to_string(), "web".to_string())].into()),
        match_expressions: Some(vec![
            metav1::LabelSelectorRequirement {
                key: "env".into(),
                operator: "In".into(),
                values: Some(vec!["prod".into(), "stage".into()]),
            },
            metav1::LabelSelectorRequirement {
                key: "canary".into(),
                operator: "DoesNotExist".into(),
                values: None,
            },
        ]),
    };
    let sel = LabelSelector::try_from(&meta).unwrap();
    assert_eq!(sel.to_string(), "app=web,!canary,env in (prod,stage)");
    assert!(sel.matches(&labels(&[("app", "web"), ("env", "prod")])));
    assert!(
        LabelSelector::try_from(&metav1::LabelSelector::default())
            .unwrap()
            .is_everything()
    );
    assert_eq!(
        LabelSelector::from_labels([("a", "b")]).unwrap(),
        parse("a=b")
    );

    let bad = |op: &str, values: Option<Vec<String>>| metav1::LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![metav1::LabelSelectorRequirement {
            key: "k".into(),
            operator: op.into(),
            values,
        }]),
    };
    for (op, values, needle) in [
        ("Equals", None, "unknown operator"),
        ("In", None, "at least one value"),
        ("NotIn", Some(vec![]), "at least one value"),
        ("Exists", Some(vec!["x".to_string()]), "take no values"),
        ("In", Some(vec!["-x".to_string()]), "invalid value"),
    ] {
        match LabelSelector::try_from(&bad(op, values)) {
            Err(e @ SelectorError::InvalidLabelSelector { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("matchExpressions[0]") && msg.contains(needle),
                    "{msg}"
                );
            }
            other => panic!("{op}: {other:?}"),
        }
    }
    let bad_label = metav1::LabelSelector {
        match_labels: Some([("a".to_string(), "-".to_string())].into()),
        match_expressions: None,
    };
    assert!(
        LabelSelector::try_from(&bad_label)
            .unwrap_err()
            .to_string()
            .contains("matchLabels[\"a\"]")
    );
}

#[test]
fn field_selector_parses_matches_and_displays() {
    let sel: FieldSelector = "metadata.name=a,metadata.namespace!=kube-system"
        .parse()
        .unwrap();
    let get = |ns: &'static str| {
        move |f: &str| match f {
            "metadata.name" => Some("a".to_string()),
            "metadata.namespace" => Some(ns.to_string()),
            _ => None,
        }
    };
    assert!(sel.matches(get("default")));
    assert!(!sel.matches(get("kube-system")));
    assert_eq!(
        sel.to_string(),
        "metadata.name=a,metadata.namespace!=kube-system"
    );
    // `==` reads as `=`; an unknown field reads as "".
    let eq: FieldSelector = "spec.nodeName==".parse().unwrap();
    assert_eq!(eq.to_string(), "spec.nodeName=");
    assert!(eq.matches(|_| None));
    assert!(FieldSelector::everything().matches(|_| None));
    assert!("".parse::<FieldSelector>().unwrap().is_everything());
}

#[test]
fn field_selector_escapes() {
    let sel: FieldSelector = r"a=x\,y\=z\\w,b!=c".parse().unwrap();
    assert_eq!(sel.terms()[0].value, r"x,y=z\w");
    assert_eq!(sel.terms()[1].operator, FieldOperator::NotEquals);
    assert_eq!(sel.to_string(), r"a=x\,y\=z\\w,b!=c");
    assert_eq!(sel.to_string().parse::<FieldSelector>().unwrap(), sel);
}

#[test]
fn field_selector_errors_say_what_and_where() {
    let err = |s: &str| match s.parse::<FieldSelector>() {
        Err(SelectorError::Syntax {
            position, message, ..
        }) => (position, message),
        other => panic!("{s:?}: {other:?}"),
    };
    assert_eq!(err("a=b,c").0, 5);
    assert!(err("a=b,c").1.contains("expected an operator"));
    assert_eq!(err("=b").0, 0);
    assert!(err("=b").1.contains("missing field name"));
    assert_eq!(err(r"a=b\q").0, 3);
    assert!(err(r"a=b\q").1.contains("invalid escape"));
    assert_eq!(err(r"a=b\").0, 3);
    assert_eq!(err("a=b=c").0, 3);
    assert_eq!(err("a=b,").0, 4);
    // Positions count characters, not bytes.
    assert_eq!(err("a=é,c").0, 5);
}

fn key_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]",
        "[a-z][a-z0-9-]{0,5}[a-z0-9]",
        "[a-z]{1,4}\\.io/[a-z]{1,3}"
    ]
}

fn value_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9]",
        "[A-Za-z0-9][A-Za-z0-9_.-]{0,4}[A-Za-z0-9]"
    ]
}

fn requirement_strategy() -> impl Strategy<Value = String> {
    let nonempty = "[a-z0-9]{1,3}";
    (
        key_strategy(),
        value_strategy(),
        proptest::collection::vec(nonempty, 1..4),
        0..8u8,
    )
        .prop_map(|(k, v, vs, op)| match op {
            0 => format!("{k}={v}"),
            1 => format!("{k}=={v}"),
            2 => format!("{k} != {v}"),
            3 => format!("{k} in ({})", vs.join(", ")),
            4 => format!("{k} notin ({})", vs.join(",")),
            5 => k,
            6 => format!("!{k}"),
            _ => format!("{k}>{}", vs.len()),
        })
}

proptest! {
    /// Display then parse gives the same selector, and both match the same labels.
    #[test]
    fn label_selector_display_round_trips(reqs in proptest::collection::vec(requirement_strategy(), 0..6),
                                          ls in proptest::collection::btree_map(key_strategy(), value_strategy(), 0..6)) {
        let sel: LabelSelector = reqs.join(",").parse().unwrap();
        let again: LabelSelector = sel.to_string().parse().unwrap();
        prop_assert_eq!(&again, &sel);
        prop_assert_eq!(again.matches(&ls), sel.matches(&ls));
        // The conjunction matches iff each requirement does.
        let each = reqs.iter().all(|r| r.parse::<LabelSelector>().unwrap().matches(&ls));
        prop_assert_eq!(sel.matches(&ls), each);
    }

    /// Parsing never panics, whatever the input.
    #[test]
    fn parsing_arbitrary_input_never_panics(s in "[a-z!=,() <>\\\\.é/-]{0,16}") {
        let _ = s.parse::<LabelSelector>();
        let _ = s.parse::<FieldSelector>();
    }

    /// Field selector values survive escaping.
    #[test]
    fn field_selector_round_trips(v in "[a-z,=\\\\!]{0,8}") {
        let sel = FieldSelector::from_terms([FieldTerm { field: "f".into(), operator: FieldOperator::Equals, value: v.clone() }]);
        let again: FieldSelector = sel.to_string().parse().unwrap();
        prop_assert_eq!(&again.terms()[0].value, &v);
    }
}
