//! Property tests: random add/update/delete/replace/add_indexers sequences
//! against a model; after every step each index must equal a recomputation
//! from scratch over the model's objects, with no empty value sets left.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;
use proptest::prelude::*;

use super::*;
use crate::key::object_key;

/// Index functions the sequences may register (by position).
const EXTRA_INDEXES: [&str; 3] = ["app", "tags", "name-length"];

fn index_fn(name: &str) -> IndexFn<ConfigMap> {
    match name {
        // Fails when label "bad" is present.
        "app" => Arc::new(|c: &ConfigMap| {
            let labels = c.metadata.labels.clone().unwrap_or_default();
            if labels.contains_key("bad") {
                return Err("bad label".into());
            }
            Ok(labels.get("app").cloned().into_iter().collect())
        }),
        // Several values per object, possibly repeated.
        "tags" => Arc::new(|c: &ConfigMap| {
            let tags = c
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("tags"))
                .cloned()
                .unwrap_or_default();
            Ok(tags
                .split('.')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect())
        }),
        _ => Arc::new(|c: &ConfigMap| {
            Ok(vec![
                c.metadata
                    .name
                    .as_deref()
                    .unwrap_or_default()
                    .len()
                    .to_string(),
            ])
        }),
    }
}

#[derive(Debug, Clone)]
struct Spec {
    ns: u8,
    name: u8,
    app: Option<u8>,
    tags: Vec<u8>,
    bad: bool,
}

impl Spec {
    fn build(&self) -> Arc<ConfigMap> {
        let mut labels = BTreeMap::new();
        if let Some(app) = self.app {
            labels.insert("app".to_string(), format!("app{app}"));
        }
        let tags: Vec<String> = self.tags.iter().map(|t| format!("t{t}")).collect();
        labels.insert("tags".to_string(), tags.join("."));
        if self.bad {
            labels.insert("bad".to_string(), String::new());
        }
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some("n".repeat(usize::from(self.name % 3) + 1) + &self.name.to_string()),
                namespace: Some(format!("ns{}", self.ns)),
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        })
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..3u8,
        0..6u8,
        proptest::option::of(0..3u8),
        proptest::collection::vec(0..4u8, 0..3),
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(ns, name, app, tags, bad)| Spec {
            ns,
            name,
            app,
            tags,
            bad,
        })
}

#[derive(Debug, Clone)]
enum Op {
    Add(Spec),
    Delete(u8, u8),
    Replace(Vec<Spec>),
    AddIndexer(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => spec().prop_map(Op::Add),
        3 => (0..3u8, 0..6u8).prop_map(|(ns, name)| Op::Delete(ns, name)),
        1 => proptest::collection::vec(spec(), 0..8).prop_map(Op::Replace),
        1 => (0..EXTRA_INDEXES.len()).prop_map(Op::AddIndexer),
    ]
}

/// Recomputes every registered index from the model's objects and compares.
fn check(
    indexer: &Indexer<ConfigMap>,
    model: &BTreeMap<String, Arc<ConfigMap>>,
    registered: &[String],
) -> Result<(), TestCaseError> {
    let mut keys = indexer.list_keys();
    keys.sort();
    prop_assert_eq!(keys, model.keys().cloned().collect::<Vec<_>>());
    for (key, obj) in model {
        prop_assert!(
            Arc::ptr_eq(&indexer.get_by_key(key).unwrap(), obj),
            "stored Arc for {}",
            key
        );
    }
    prop_assert_eq!(indexer.index_names(), registered.to_vec());
    for name in registered {
        let f = if name == NAMESPACE_INDEX {
            namespace_index_fn::<ConfigMap>()
        } else {
            index_fn(name)
        };
        let mut expected: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (key, obj) in model {
            for value in f(obj).unwrap_or_default() {
                expected.entry(value).or_default().insert(key.clone());
            }
        }
        // No value without keys (empty sets removed), no value missing.
        prop_assert_eq!(
            indexer.list_index_func_values(name).unwrap(),
            expected.keys().cloned().collect::<Vec<_>>(),
            "index {}",
            name
        );
        for (value, keys) in &expected {
            let keys: Vec<String> = keys.iter().cloned().collect();
            prop_assert_eq!(
                indexer.index_keys(name, value).unwrap(),
                keys.clone(),
                "index {} value {}",
                name,
                value
            );
            let found = indexer.by_index(name, value).unwrap();
            for o in &found {
                let current = &model[&object_key(&**o)];
                prop_assert!(Arc::ptr_eq(o, current), "by_index gives the current Arc");
            }
            let mut by_index: Vec<String> = found.iter().map(|o| object_key(&**o)).collect();
            by_index.sort();
            prop_assert_eq!(by_index, keys);
        }
        prop_assert!(indexer.by_index(name, "no-such-value").unwrap().is_empty());
    }
    for name in EXTRA_INDEXES
        .iter()
        .filter(|n| !registered.iter().any(|r| r == *n))
    {
        let unknown = matches!(
            indexer.by_index(name, "x"),
            Err(StoreError::UnknownIndex { .. })
        );
        prop_assert!(unknown, "index {} is not registered", name);
    }
    Ok(())
}

proptest! {
    #[test]
    fn indexes_always_equal_a_recomputation(ops in proptest::collection::vec(op(), 1..40)) {
        let indexer: Indexer<ConfigMap> = Indexer::new();
        let mut model: BTreeMap<String, Arc<ConfigMap>> = BTreeMap::new();
        let mut registered = vec![NAMESPACE_INDEX.to_string()];
        for op in ops {
            let app_registered = registered.iter().any(|r| r == "app");
            match op {
                Op::Add(spec) => {
                    let obj = spec.build();
                    let result = indexer.add(obj.clone());
                    prop_assert_eq!(result.is_err(), spec.bad && app_registered);
                    model.insert(object_key(&*obj), obj);
                }
                Op::Delete(ns, name) => {
                    let key = object_key(&*Spec { ns, name, app: None, tags: vec![], bad: false }.build());
                    let gone = indexer.delete(&key);
                    prop_assert_eq!(gone.is_some(), model.remove(&key).is_some());
                }
                Op::Replace(specs) => {
                    let objs: Vec<_> = specs.iter().map(Spec::build).collect();
                    let result = indexer.replace(objs.clone());
                    prop_assert_eq!(result.is_err(), app_registered && specs.iter().any(|s| s.bad));
                    model = objs.into_iter().map(|o| (object_key(&*o), o)).collect();
                }
                Op::AddIndexer(i) => {
                    let name = EXTRA_INDEXES[i].to_string();
                    let result = indexer.add_indexers([(name.clone(), index_fn(&name))]);
                    if registered.contains(&name) {
                        prop_assert_eq!(result, Err(StoreError::IndexExists { index: name }));
                    } else {
                        let fails = name == "app" && model.values().any(|o| o.metadata.labels.as_ref().is_some_and(|l| l.contains_key("bad")));
                        prop_assert_eq!(result.is_err(), fails);
                        registered.push(name);
                    }
                }
            }
            check(&indexer, &model, &registered)?;
        }
    }
}
