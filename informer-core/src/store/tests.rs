//! Unit tests: one per Indexer rule.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_core::ObjectMeta;

use super::*;

mod bookkeeping;
mod props;

fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// Index by the comma-separated values of label "tags".
fn tags_index() -> (String, IndexFn<ConfigMap>) {
    let f: IndexFn<ConfigMap> = Arc::new(|c: &ConfigMap| {
        Ok(c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("tags"))
            .map(|t| t.split(',').map(str::to_owned).collect())
            .unwrap_or_default())
    });
    ("tags".to_owned(), f)
}

/// Index by label "app"; fails when the label "bad" is present.
fn app_index() -> (String, IndexFn<ConfigMap>) {
    let f: IndexFn<ConfigMap> = Arc::new(|c: &ConfigMap| {
        let labels = c.metadata.labels.clone().unwrap_or_default();
        if labels.contains_key("bad") {
            return Err("label 'bad' present".to_owned());
        }
        Ok(labels.get("app").cloned().into_iter().collect())
    });
    ("app".to_owned(), f)
}

fn keys(objs: &[Arc<ConfigMap>]) -> Vec<String> {
    let mut k: Vec<_> = objs.iter().map(|o| crate::key::object_key(&**o)).collect();
    k.sort();
    k
}

fn indexer() -> Indexer<ConfigMap> {
    let i = Indexer::new();
    i.add_indexers([app_index(), tags_index()]).unwrap();
    i
}

#[test]
fn add_get_list_len() {
    let i = indexer();
    assert!(i.is_empty());
    let a = cm("ns", "a", &[]);
    i.add(a.clone()).unwrap();
    i.add(cm("ns", "b", &[])).unwrap();
    assert_eq!(i.len(), 2);
    assert!(
        Arc::ptr_eq(&i.get_by_key("ns/a").unwrap(), &a),
        "stored once, as the same Arc"
    );
    assert!(Arc::ptr_eq(&i.get(&a).unwrap(), &a));
    let mut k = i.list_keys();
    k.sort();
    assert_eq!(k, ["ns/a", "ns/b"]);
    assert_eq!(keys(&i.list()), ["ns/a", "ns/b"]);
    assert!(i.get_by_key("ns/zzz").is_none());
}

#[test]
fn by_index_returns_the_stored_arc() {
    let i = indexer();
    let a = cm("ns", "a", &[("app", "web")]);
    i.add(a.clone()).unwrap();
    let found = i.by_index("app", "web").unwrap();
    assert_eq!(found.len(), 1);
    assert!(Arc::ptr_eq(&found[0], &a));
}

#[test]
fn update_moves_index_entries_and_drops_empty_values() {
    let i = indexer();
    i.add(cm("ns", "a", &[("app", "web")])).unwrap();
    i.update(cm("ns", "a", &[("app", "db")])).unwrap();
    assert_eq!(i.len(), 1);
    assert!(i.index_keys("app", "web").unwrap().is_empty());
    assert_eq!(i.index_keys("app", "db").unwrap(), ["ns/a"]);
    assert_eq!(
        i.list_index_func_values("app").unwrap(),
        ["db"],
        "empty value set must be removed"
    );
    assert_eq!(
        i.get_by_key("ns/a")
            .unwrap()
            .metadata
            .labels
            .as_ref()
            .unwrap()["app"],
        "db"
    );
}

#[test]
fn delete_removes_object_and_index_entries() {
    let i = indexer();
    i.add(cm("ns", "a", &[("app", "web"), ("tags", "x,y")]))
        .unwrap();
    i.add(cm("ns", "b", &[("app", "web")])).unwrap();
    let gone = i.delete("ns/a").unwrap();
    assert_eq!(gone.metadata.name.as_deref(), Some("a"));
    assert!(i.get_by_key("ns/a").is_none());
    assert_eq!(i.index_keys("app", "web").unwrap(), ["ns/b"]);
    assert!(
        i.list_index_func_values("tags").unwrap().is_empty(),
        "values x and y must be removed"
    );
    assert!(i.delete("ns/a").is_none());
    i.delete("ns/b");
    assert!(i.list_index_func_values("app").unwrap().is_empty());
    assert!(
        i.list_index_func_values(NAMESPACE_INDEX)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn unknown_index_is_an_error() {
    let i = indexer();
    i.add(cm("ns", "a", &[])).unwrap();
    let unknown = StoreError::UnknownIndex {
        index: "nope".into(),
    };
    assert_eq!(i.by_index("nope", "x").unwrap_err(), unknown);
    assert_eq!(i.index_keys("nope", "x").unwrap_err(), unknown);
    assert_eq!(i.index("nope", &cm("ns", "a", &[])).unwrap_err(), unknown);
    assert_eq!(i.list_index_func_values("nope").unwrap_err(), unknown);
    // A known index with an unknown value is an empty answer, not an error.
    assert!(i.by_index("app", "nothing").unwrap().is_empty());
}

#[test]
fn adding_an_index_name_twice_is_an_error_and_changes_nothing() {
    let i = indexer();
    assert_eq!(
        i.add_indexers([app_index()]).unwrap_err(),
        StoreError::IndexExists {
            index: "app".into()
        }
    );
    let ns_again: IndexFn<ConfigMap> = Arc::new(|_| Ok(vec![]));
    assert!(matches!(
        i.add_indexers([(NAMESPACE_INDEX.to_owned(), ns_again)]),
        Err(StoreError::IndexExists { .. })
    ));
    // The same new name twice in one call: nothing is added.
    let (_, f) = app_index();
    let err = i.add_indexers([
        ("new".to_owned(), f.clone()),
        ("other".to_owned(), f.clone()),
        ("new".to_owned(), f),
    ]);
    assert_eq!(
        err.unwrap_err(),
        StoreError::IndexExists {
            index: "new".into()
        }
    );
    assert_eq!(i.index_names(), [NAMESPACE_INDEX, "app", "tags"]);
}

#[test]
fn adding_indexers_reindexes_existing_objects() {
    let i = Indexer::new();
    i.add(cm("ns", "a", &[("app", "web")])).unwrap();
    i.add(cm("ns", "b", &[("app", "web")])).unwrap();
    i.add(cm("ns", "c", &[("app", "db")])).unwrap();
    i.add_indexers([app_index()]).unwrap();
    assert_eq!(i.index_keys("app", "web").unwrap(), ["ns/a", "ns/b"]);
    assert_eq!(i.list_index_func_values("app").unwrap(), ["db", "web"]);
    // Later writes maintain the new index too.
    i.delete("ns/c");
    assert_eq!(i.list_index_func_values("app").unwrap(), ["web"]);
}

#[test]
fn replace_swaps_content_and_rebuilds_every_index() {
    let i = indexer();
    i.add(cm("ns", "a", &[("app", "web")])).unwrap();
    i.add(cm("old", "b", &[("tags", "t1")])).unwrap();
    i.replace(vec![
        cm("ns", "c", &[("app", "db")]),
        cm("new", "d", &[("tags", "t2,t3")]),
    ])
    .unwrap();
    assert_eq!(keys(&i.list()), ["new/d", "ns/c"]);
    assert_eq!(i.list_index_func_values("app").unwrap(), ["db"]);
    assert_eq!(i.list_index_func_values("tags").unwrap(), ["t2", "t3"]);
    assert_eq!(
        i.list_index_func_values(NAMESPACE_INDEX).unwrap(),
        ["new", "ns"]
    );
    i.replace(vec![]).unwrap();
    assert!(i.is_empty());
    for name in i.index_names() {
        assert!(
            i.list_index_func_values(&name).unwrap().is_empty(),
            "{name}"
        );
    }
}

#[test]
fn failing_index_function_is_an_error_and_loses_nothing() {
    let i = indexer();
    i.add(cm("ns", "a", &[("app", "web"), ("tags", "t")]))
        .unwrap();
    let err = i
        .update(cm("ns", "a", &[("app", "web"), ("tags", "u"), ("bad", "")]))
        .unwrap_err();
    assert_eq!(
        err,
        StoreError::IndexFunction {
            index: "app".into(),
            key: "ns/a".into(),
            message: "label 'bad' present".into()
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains("app") && msg.contains("ns/a") && msg.contains("label 'bad' present"),
        "{msg}"
    );
    // Stored, filed under the indexes that worked, absent from the failing one.
    assert!(
        i.get_by_key("ns/a")
            .unwrap()
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key("bad")
    );
    assert_eq!(i.index_keys("tags", "u").unwrap(), ["ns/a"]);
    assert!(i.index_keys("tags", "t").unwrap().is_empty());
    assert_eq!(i.index_keys(NAMESPACE_INDEX, "ns").unwrap(), ["ns/a"]);
    assert!(i.list_index_func_values("app").unwrap().is_empty());
    // A later successful update files it again.
    i.update(cm("ns", "a", &[("app", "web")])).unwrap();
    assert_eq!(i.index_keys("app", "web").unwrap(), ["ns/a"]);
}

#[test]
fn panicking_index_function_is_an_error_not_a_panic() {
    let i: Indexer<ConfigMap> = Indexer::new();
    let f: IndexFn<ConfigMap> = Arc::new(|c: &ConfigMap| {
        if c.metadata.name.as_deref() == Some("boom") {
            panic!("kaboom");
        }
        Ok(vec!["ok".into()])
    });
    i.add_indexers([("p".to_owned(), f)]).unwrap();
    let err = i.add(cm("ns", "boom", &[])).unwrap_err();
    assert!(
        matches!(&err, StoreError::IndexFunction { index, key, message } if index == "p" && key == "ns/boom" && message.contains("kaboom")),
        "{err}"
    );
    assert!(i.get_by_key("ns/boom").is_some());
    i.add(cm("ns", "fine", &[])).unwrap();
    assert_eq!(i.index_keys("p", "ok").unwrap(), ["ns/fine"]);
}

#[test]
fn replace_and_add_indexers_report_failures_but_store_everything() {
    let i = indexer();
    let err = i
        .replace(vec![
            cm("ns", "a", &[("bad", "")]),
            cm("ns", "b", &[("app", "x")]),
        ])
        .unwrap_err();
    assert!(matches!(err, StoreError::IndexFunction { ref key, .. } if key == "ns/a"));
    assert_eq!(i.len(), 2);
    assert_eq!(i.index_keys("app", "x").unwrap(), ["ns/b"]);

    let j: Indexer<ConfigMap> = Indexer::new();
    j.add(cm("ns", "a", &[("bad", "")])).unwrap();
    j.add(cm("ns", "b", &[("app", "x")])).unwrap();
    assert!(matches!(
        j.add_indexers([app_index()]),
        Err(StoreError::IndexFunction { .. })
    ));
    assert_eq!(
        j.index_names(),
        [NAMESPACE_INDEX, "app"],
        "index is registered despite the failure"
    );
    assert_eq!(j.index_keys("app", "x").unwrap(), ["ns/b"]);
}

#[test]
fn multi_valued_index_and_index_union() {
    let i = indexer();
    i.add(cm("ns", "a", &[("tags", "x,y")])).unwrap();
    i.add(cm("ns", "b", &[("tags", "y,z")])).unwrap();
    i.add(cm("ns", "c", &[("tags", "w")])).unwrap();
    i.add(cm("ns", "d", &[("tags", "x,x")])).unwrap();
    assert_eq!(i.index_keys("tags", "y").unwrap(), ["ns/a", "ns/b"]);
    assert_eq!(i.index_keys("tags", "x").unwrap(), ["ns/a", "ns/d"]);
    // index(): union over the probe's values, each object once.
    let probe = cm("other", "probe", &[("tags", "x,z")]);
    assert_eq!(
        keys(&i.index("tags", &probe).unwrap()),
        ["ns/a", "ns/b", "ns/d"]
    );
    let bad = cm("other", "probe", &[("bad", "")]);
    assert!(matches!(
        i.index("app", &bad),
        Err(StoreError::IndexFunction { .. })
    ));
}

#[test]
fn index_keys_are_sorted() {
    let i = indexer();
    for name in ["m", "c", "x", "a", "q"] {
        i.add(cm("ns", name, &[("app", "web")])).unwrap();
    }
    assert_eq!(
        i.index_keys("app", "web").unwrap(),
        ["ns/a", "ns/c", "ns/m", "ns/q", "ns/x"]
    );
}

#[test]
fn namespace_index_is_built_in() {
    let i: Indexer<ConfigMap> = Indexer::new();
    assert_eq!(i.index_names(), [NAMESPACE_INDEX]);
    i.add(cm("a", "x", &[])).unwrap();
    i.add(cm("a", "y", &[])).unwrap();
    i.add(cm("b", "x", &[])).unwrap();
    assert_eq!(i.index_keys(NAMESPACE_INDEX, "a").unwrap(), ["a/x", "a/y"]);
    assert_eq!(
        i.list_index_func_values(NAMESPACE_INDEX).unwrap(),
        ["a", "b"]
    );

    let n: Indexer<Namespace> = Indexer::new();
    n.add(Arc::new(Namespace {
        metadata: ObjectMeta {
            name: Some("kube-system".into()),
            ..Default::default()
        },
        ..Default::default()
    }))
    .unwrap();
    assert_eq!(n.list_keys(), ["kube-system"]);
    assert!(
        n.list_index_func_values(NAMESPACE_INDEX)
            .unwrap()
            .is_empty(),
        "cluster-scoped objects have no namespace entry"
    );
}

#[test]
fn namespace_index_follows_updates_and_deletes() {
    let i: Indexer<ConfigMap> = Indexer::new();
    i.add(cm("a", "x", &[])).unwrap();
    i.add(cm("a", "y", &[])).unwrap();
    let newer = cm("a", "x", &[("v", "2")]);
    i.update(newer.clone()).unwrap();
    let found = i.by_index(NAMESPACE_INDEX, "a").unwrap();
    assert_eq!(found.len(), 2, "an update does not file the object twice");
    assert!(
        found.iter().any(|o| Arc::ptr_eq(o, &newer)),
        "the index hands out the new version"
    );
    assert!(i.delete("a/x").is_some());
    assert_eq!(i.index_keys(NAMESPACE_INDEX, "a").unwrap(), ["a/y"]);
    assert!(i.delete("a/y").is_some());
    assert!(
        i.list_index_func_values(NAMESPACE_INDEX)
            .unwrap()
            .is_empty(),
        "a namespace with no objects left is removed"
    );
}

#[test]
fn upsert_shares_the_key_and_returns_the_old_version() {
    let i: Indexer<ConfigMap> = Indexer::new();
    let key: Arc<str> = Arc::from("a/x");
    let first = cm("a", "x", &[]);
    let (old, err) = i.upsert(&key, first.clone());
    assert!(old.is_none() && err.is_none());
    assert_eq!(
        Arc::strong_count(&key),
        3,
        "the items and the namespace index hold the caller's key string"
    );
    let (old, _) = i.upsert(&key, cm("a", "x", &[("v", "2")]));
    assert!(Arc::ptr_eq(&old.unwrap(), &first));
    assert_eq!(Arc::strong_count(&key), 3, "an update keeps the stored key");
    assert!(i.delete(&key).is_some());
    assert_eq!(Arc::strong_count(&key), 1, "a delete frees it");
}

#[test]
fn clones_share_state_and_known_objects_reads_it() {
    let i = indexer();
    let j = i.clone();
    j.add(cm("ns", "a", &[])).unwrap();
    let known: Arc<dyn KnownObjects<ConfigMap>> = Arc::new(i.clone());
    assert_eq!(known.list_keys(), ["ns/a"]);
    assert!(known.get_by_key("ns/a").is_some());
    assert!(known.get_by_key("ns/b").is_none());
    assert!(format!("{i:?}").contains("len: 1"));
}

#[test]
fn concurrent_writers_and_readers_stay_consistent() {
    let i = indexer();
    std::thread::scope(|s| {
        for t in 0..4 {
            let i = i.clone();
            s.spawn(move || {
                for n in 0..200 {
                    let app = if n % 2 == 0 { "even" } else { "odd" };
                    i.add(cm("ns", &format!("t{t}-{}", n % 50), &[("app", app)]))
                        .unwrap();
                    if n % 7 == 0 {
                        i.delete(&format!("ns/t{t}-{}", (n + 3) % 50));
                    }
                }
            });
        }
        for _ in 0..2 {
            let i = i.clone();
            s.spawn(move || {
                for _ in 0..200 {
                    for o in i.by_index("app", "even").unwrap() {
                        assert_eq!(o.metadata.labels.as_ref().unwrap()["app"], "even");
                    }
                    let _ = i.list();
                }
            });
        }
        // An index added while writers run must end up complete too.
        let i2 = i.clone();
        s.spawn(move || {
            i2.add_indexers([("late".to_owned(), app_index().1)])
                .unwrap()
        });
    });
    for (name, index) in [("app", "app"), ("late", "late")] {
        let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for o in i.list() {
            let app = o.metadata.labels.as_ref().unwrap()["app"].clone();
            expected
                .entry(app)
                .or_default()
                .push(crate::key::object_key(&*o));
        }
        assert_eq!(
            i.list_index_func_values(index).unwrap(),
            expected.keys().cloned().collect::<Vec<_>>(),
            "{name}"
        );
        for (v, mut ks) in expected {
            ks.sort();
            assert_eq!(i.index_keys(index, &v).unwrap(), ks);
        }
    }
}

#[test]
fn index_functions_run_outside_the_lock_so_readers_are_not_blocked() {
    use std::sync::Mutex;
    use std::sync::mpsc::{Receiver, channel};
    use std::time::Duration;

    let (entered_tx, entered_rx) = channel::<()>();
    let (release_tx, release_rx) = channel::<()>();
    let release_rx = Arc::new(Mutex::new(release_rx));
    let gate: IndexFn<ConfigMap> = {
        let entered_tx = Mutex::new(entered_tx);
        let release_rx: Arc<Mutex<Receiver<()>>> = release_rx.clone();
        Arc::new(move |c: &ConfigMap| {
            if c.metadata.name.as_deref() == Some("slow") {
                entered_tx.lock().unwrap().send(()).unwrap();
                release_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10))
                    .unwrap();
            }
            Ok(vec![])
        })
    };
    let i: Indexer<ConfigMap> = Indexer::new();
    i.add_indexers([("gate".to_owned(), gate)]).unwrap();
    i.add(cm("ns", "present", &[])).unwrap();
    std::thread::scope(|s| {
        let writer = s.spawn(|| i.add(cm("ns", "slow", &[])).unwrap());
        entered_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        // The writer is inside its index function: readers must get through.
        let (read_tx, read_rx) = channel();
        let reader = i.clone();
        s.spawn(move || {
            read_tx
                .send((
                    reader.len(),
                    reader.by_index(NAMESPACE_INDEX, "ns").unwrap().len(),
                ))
                .unwrap()
        });
        let read = read_rx.recv_timeout(Duration::from_secs(10));
        release_tx.send(()).unwrap();
        assert_eq!(
            read,
            Ok((1, 1)),
            "a reader was blocked while an index function ran"
        );
        writer.join().unwrap();
    });
    assert_eq!(i.len(), 2);
}

#[test]
fn writes_after_add_indexers_file_under_the_new_index_from_every_handle() {
    let i: Indexer<ConfigMap> = Indexer::new();
    let other_handle = i.clone();
    let key: Arc<str> = Arc::from("a/x");
    other_handle.upsert(&key, cm("a", "x", &[("tags", "one")]));
    i.add_indexers([tags_index()]).unwrap();
    assert_eq!(i.index_keys("tags", "one").unwrap(), ["a/x"]);
    // The clone sees the new index too: its next write moves the entry.
    let (old, err) = other_handle.upsert(&key, cm("a", "x", &[("tags", "two")]));
    assert!(old.is_some() && err.is_none());
    assert!(i.index_keys("tags", "one").unwrap().is_empty());
    assert_eq!(i.index_keys("tags", "two").unwrap(), ["a/x"]);
    assert_eq!(i.index_keys(NAMESPACE_INDEX, "a").unwrap(), ["a/x"]);
}
