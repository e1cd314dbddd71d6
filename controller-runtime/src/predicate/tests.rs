use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;

fn cm(generation: Option<i64>, rv: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some("c".into());
    c.metadata.generation = generation;
    c.metadata.resource_version = Some(rv.into());
    c
}

fn with_labels(mut c: ConfigMap, labels: &[(&str, &str)]) -> ConfigMap {
    c.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    c
}

fn passes_all_non_update<P: Predicate<ConfigMap>>(p: &P) {
    let c = cm(Some(1), "1");
    assert!(p.create(&c) && p.delete(&c) && p.generic(&c));
}

#[test]
fn generation_changed_passes_only_spec_changes() {
    let p = GenerationChanged;
    assert!(p.update(&cm(Some(1), "1"), &cm(Some(2), "2")));
    assert!(!p.update(&cm(Some(1), "1"), &cm(Some(1), "2")));
    assert!(!p.update(&cm(None, "1"), &cm(None, "2")));
    passes_all_non_update(&p);
}

#[test]
fn resource_version_changed_skips_resyncs() {
    let p = ResourceVersionChanged;
    assert!(p.update(&cm(Some(1), "1"), &cm(Some(1), "2")));
    assert!(!p.update(&cm(Some(1), "5"), &cm(Some(1), "5")));
    passes_all_non_update(&p);
}

#[test]
fn labels_changed_treats_absent_as_empty() {
    let p = LabelsChanged;
    let base = cm(Some(1), "1");
    assert!(!p.update(&base, &with_labels(base.clone(), &[])));
    assert!(p.update(&base, &with_labels(base.clone(), &[("a", "1")])));
    let a1 = with_labels(base.clone(), &[("a", "1")]);
    assert!(p.update(&a1, &with_labels(base.clone(), &[("a", "2")])));
    assert!(!p.update(&a1, &a1.clone()));
    passes_all_non_update(&p);
}

#[test]
fn annotations_changed() {
    let p = AnnotationsChanged;
    let base = cm(Some(1), "1");
    let mut annotated = base.clone();
    annotated.metadata.annotations = Some([("note".to_string(), "x".to_string())].into());
    assert!(p.update(&base, &annotated));
    assert!(!p.update(&annotated, &annotated.clone()));
    let mut empty = base.clone();
    empty.metadata.annotations = Some(Default::default());
    assert!(!p.update(&base, &empty));
    // Label changes do not count as annotation changes.
    assert!(!p.update(&base, &with_labels(base.clone(), &[("a", "1")])));
    passes_all_non_update(&p);
}

#[test]
fn combinators_follow_boolean_logic() {
    let yes = Funcs::<ConfigMap>::new();
    let no = || {
        Funcs::<ConfigMap>::new()
            .on_create(|_| false)
            .on_update(|_, _| false)
            .on_delete(|_| false)
            .on_generic(|_| false)
    };
    let c = cm(Some(1), "1");
    for (a, b) in [(true, true), (true, false), (false, true), (false, false)] {
        let pa: Box<dyn Predicate<ConfigMap>> = if a {
            Box::new(Funcs::new())
        } else {
            Box::new(no())
        };
        let pb: Box<dyn Predicate<ConfigMap>> = if b {
            Box::new(Funcs::new())
        } else {
            Box::new(no())
        };
        let both = and(pa, pb);
        assert_eq!(both.create(&c), a && b);
        assert_eq!(both.update(&c, &c), a && b);
        assert_eq!(both.delete(&c), a && b);
        assert_eq!(both.generic(&c), a && b);
        let either = or(both.0, both.1);
        assert_eq!(either.create(&c), a || b);
        assert_eq!(either.update(&c, &c), a || b);
        assert_eq!(either.delete(&c), a || b);
        assert_eq!(either.generic(&c), a || b);
    }
    assert!(!not(yes).create(&c));
    assert!(not(no()).generic(&c));
    let p = and(not(GenerationChanged), ResourceVersionChanged);
    // Metadata-only update: generation same, RV changed.
    assert!(p.update(&cm(Some(1), "1"), &cm(Some(1), "2")));
    assert!(!p.update(&cm(Some(1), "1"), &cm(Some(2), "2")));
}

#[test]
fn and_short_circuits() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = {
        let calls = calls.clone();
        from_fn(move |_: &ConfigMap| {
            calls.fetch_add(1, Ordering::SeqCst);
            true
        })
    };
    let p = and(Funcs::<ConfigMap>::new().on_create(|_| false), counted);
    assert!(!p.create(&cm(None, "1")));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(p.delete(&cm(None, "1")));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn all_and_any_lists() {
    let c = cm(Some(1), "1");
    let empty_all = All::<ConfigMap>(vec![]);
    let empty_any = Any::<ConfigMap>(vec![]);
    assert!(empty_all.create(&c));
    assert!(!empty_any.create(&c));
    let all = All(vec![
        Box::new(GenerationChanged) as Box<dyn Predicate<ConfigMap>>,
        Box::new(ResourceVersionChanged),
    ]);
    assert!(!all.update(&cm(Some(1), "1"), &cm(Some(1), "2")));
    let any = Any(vec![
        Box::new(GenerationChanged) as Box<dyn Predicate<ConfigMap>>,
        Box::new(ResourceVersionChanged),
    ]);
    assert!(any.update(&cm(Some(1), "1"), &cm(Some(1), "2")));
}

#[test]
fn from_fn_tests_new_object_on_update() {
    let p = from_fn(|c: &ConfigMap| c.metadata.resource_version.as_deref() == Some("2"));
    assert!(p.update(&cm(None, "1"), &cm(None, "2")));
    assert!(!p.update(&cm(None, "2"), &cm(None, "1")));
    let shared: Arc<dyn Predicate<ConfigMap>> = Arc::new(p);
    assert!(shared.create(&cm(None, "2")));
}

#[test]
fn label_selector_tests_labels_of_every_event() {
    let p = LabelSelectorPredicate::new("app=web,tier notin (cache)".parse().unwrap());
    let plain = cm(Some(1), "1");
    let web = with_labels(plain.clone(), &[("app", "web")]);
    let web_cache = with_labels(plain.clone(), &[("app", "web"), ("tier", "cache")]);
    assert!(!p.create(&plain));
    assert!(p.create(&web) && p.delete(&web) && p.generic(&web));
    assert!(!p.delete(&web_cache));
    // Updates are judged by the new object.
    assert!(p.update(&plain, &web));
    assert!(!p.update(&web, &web_cache));
    let everything = LabelSelectorPredicate::new(LabelSelector::everything());
    assert!(everything.create(&plain));
}

mod props {
    use proptest::prelude::*;

    use super::*;

    /// A predicate answering from a fixed table: [create, update, delete, generic].
    fn table(t: [bool; 4]) -> Funcs<ConfigMap> {
        Funcs::new()
            .on_create(move |_| t[0])
            .on_update(move |_, _| t[1])
            .on_delete(move |_| t[2])
            .on_generic(move |_| t[3])
    }

    fn answers<P: Predicate<ConfigMap>>(p: &P) -> [bool; 4] {
        let c = cm(Some(1), "1");
        [p.create(&c), p.update(&c, &c), p.delete(&c), p.generic(&c)]
    }

    proptest! {
        #[test]
        fn combinators_are_pointwise_boolean(a in any::<[bool; 4]>(), b in any::<[bool; 4]>()) {
            let and_ = answers(&and(table(a), table(b)));
            let or_ = answers(&or(table(a), table(b)));
            let not_a = answers(&not(table(a)));
            for i in 0..4 {
                prop_assert_eq!(and_[i], a[i] && b[i]);
                prop_assert_eq!(or_[i], a[i] || b[i]);
                prop_assert_eq!(not_a[i], !a[i]);
            }
            // De Morgan through the combinators.
            prop_assert_eq!(answers(&not(and(table(a), table(b)))), answers(&or(not(table(a)), not(table(b)))));
        }
    }
}
