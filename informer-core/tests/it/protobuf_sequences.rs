//! Same caches on both paths, over sequences of watch events: generated
//! sequences of creates, updates, relabels and deletes of ConfigMaps and
//! Pods run against envtest while a protobuf informer and a JSON informer
//! watch side by side, with the same label selector (or none), the same
//! managedFields stripping and the same initial list (streaming or LIST).
//! Part of each sequence runs before the informers start (their list sees
//! it), the rest while they watch. Once it settled, both caches hold
//! exactly what the server lists, object for object.

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};

use informer_core::key::object_key;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube_client::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_client::{Api, Client};
use kube_core::Resource;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::common::*;
use crate::protobuf_props::{config_map, pod};

/// Objects a sequence works on: `o-0` to `o-3`.
const SLOTS: usize = 4;
/// How long the caches may take to hold what the server lists.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(10);
/// The label the selector reads.
const KEEP: &str = "keep";

/// One write of a sequence, to object slot `.0`.
#[derive(Debug, Clone)]
enum Op {
    /// Created (a 409 when it exists is part of the sequence).
    Create(usize, bool),
    /// An annotation set to a new value.
    Update(usize, String),
    /// Label `keep` set: into or out of the selection.
    Relabel(usize, bool),
    /// Deleted (a 404 when it is gone is part of the sequence).
    Delete(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..SLOTS, any::<bool>()).prop_map(|(i, keep)| Op::Create(i, keep)),
        (0..SLOTS, "[a-z]{0,12}").prop_map(|(i, v)| Op::Update(i, v)),
        (0..SLOTS, any::<bool>()).prop_map(|(i, keep)| Op::Relabel(i, keep)),
        (0..SLOTS).prop_map(Op::Delete),
    ]
}

/// One generated case: the objects' contents, the writes before and after
/// the informers start, and the informers' settings.
#[derive(Debug, Clone)]
struct Case {
    config_map: ConfigMap,
    pod: Pod,
    before: Vec<Op>,
    after: Vec<Op>,
    selector: bool,
    strip: bool,
    streaming: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        config_map(),
        pod(),
        vec(op(), 0..8),
        vec(op(), 1..12),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(config_map, pod, before, after, selector, strip, streaming)| Case {
                config_map,
                pod,
                before,
                after,
                selector,
                strip,
                streaming,
            },
        )
}

/// `template` as object slot `i` of `ns`: what only the server sets is
/// cleared, finalizers too (they would hold a deletion), and the writes
/// must be allowed (not immutable).
fn object<K: Resource + Clone>(template: &K, ns: &str, i: usize, keep: bool) -> K {
    let mut o = template.clone();
    let meta = o.meta_mut();
    meta.name = Some(format!("o-{i}"));
    meta.namespace = Some(ns.to_owned());
    meta.finalizers = None;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(KEEP.to_owned(), keep.to_string());
    o
}

/// Runs `ops` on the objects of `api` made from `template`.
async fn apply<K>(api: &Api<K>, template: &K, ns: &str, ops: &[Op])
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    for op in ops {
        let result = match op {
            Op::Create(i, keep) => api
                .create(&PostParams::default(), &object(template, ns, *i, *keep))
                .await
                .map(drop),
            Op::Update(i, value) => {
                let patch = serde_json::json!({"metadata": {"annotations": {"seq": value}}});
                api.patch(
                    &format!("o-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map(drop)
            }
            Op::Relabel(i, keep) => {
                let patch = serde_json::json!({"metadata": {"labels": {KEEP: keep.to_string()}}});
                api.patch(
                    &format!("o-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map(drop)
            }
            Op::Delete(i) => api
                .delete(&format!("o-{i}"), &DeleteParams::default().grace_period(0))
                .await
                .map(drop),
        };
        match result {
            Ok(()) => {}
            // Writes to an object that is not there, or a second create:
            // refused by the server, as the sequence made them.
            Err(kube_client::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => panic!("{op:?} failed: {e}"),
        }
    }
}

/// The informer of one path, and its lister-watcher (a clone shares its
/// protobuf state).
fn informer<K>(
    api: &Api<K>,
    case: &Case,
    protobuf: bool,
) -> (SharedIndexInformer<K>, ApiListerWatcher<K>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let mut opts = ListWatchOptions::default();
    if case.selector {
        opts = opts.labels(format!("{KEEP}=true"));
    }
    let lw = ApiListerWatcher::new(api.clone(), opts).protobuf(protobuf);
    assert_eq!(lw.uses_protobuf(), protobuf);
    let informer = SharedIndexInformer::builder(lw.clone())
        .strip_managed_fields(case.strip)
        .streaming_list(case.streaming)
        .build()
        .unwrap();
    (informer, lw)
}

/// One kind through one case: both informers end holding what the server
/// lists, and the same objects.
async fn check<K>(api: Api<K>, template: &K, ns: &str, case: &Case)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + PartialEq
        + Send
        + Sync
        + 'static,
{
    apply(&api, template, ns, &case.before).await;
    let ((pb, pb_lw), (json, _)) = (informer(&api, case, true), informer(&api, case, false));
    let stop = CancellationToken::new();
    for inf in [&pb, &json] {
        let (inf, stop) = (inf.clone(), stop.clone());
        tokio::spawn(async move { inf.run(stop).await });
    }
    for inf in [&pb, &json] {
        inf.wait_for_cache_sync(LIMIT).await.unwrap();
    }
    apply(&api, template, ns, &case.after).await;
    let mut params = ListParams::default();
    if case.selector {
        params = params.labels(&format!("{KEEP}=true"));
    }
    let listed: Vec<K> = api.list(&params).await.unwrap().items;
    let want: Vec<(String, String)> = listed.iter().map(|o| (object_key(o), rv_of(o))).collect();
    let keys = |inf: &SharedIndexInformer<K>| {
        let mut keys: Vec<(String, String)> = inf
            .indexer()
            .list()
            .iter()
            .map(|o| (object_key(o.as_ref()), rv_of(o.as_ref())))
            .collect();
        keys.sort();
        keys
    };
    let mut want_sorted = want.clone();
    want_sorted.sort();
    // Settles in milliseconds; the bound keeps a failing case (and each
    // of its shrinking steps) short.
    let settled = tokio::time::timeout(SETTLE, async {
        while keys(&pb) != want_sorted || keys(&json) != want_sorted {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        settled.is_ok(),
        "the caches never held what the server lists: {want_sorted:?}\nprotobuf: {:?}\nJSON: {:?}",
        keys(&pb),
        keys(&json)
    );
    for o in &listed {
        let key = object_key(o);
        let (a, b) = (
            pb.indexer().get_by_key(&key).unwrap(),
            json.indexer().get_by_key(&key).unwrap(),
        );
        assert_eq!(a, b, "{key}: the two paths cached different objects");
        let mut stored = o.clone();
        if case.strip {
            stored.meta_mut().managed_fields = None;
        }
        assert_eq!(*a, stored, "{key}: the cache differs from the server");
    }
    assert!(
        !pb_lw.fell_back_to_json(),
        "the protobuf informer fell back to JSON"
    );
    stop.cancel();
}

#[test]
fn both_paths_cache_the_same_objects_over_generated_sequences() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_env, client): (_, Client) = rt.block_on(env_with(&[]));
    let next = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 12,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&case(), |case| {
        let ns = format!("seq-{}", next.fetch_add(1, Ordering::Relaxed));
        rt.block_on(async {
            create_namespace(&client, &ns).await;
            check(
                Api::<ConfigMap>::namespaced(client.clone(), &ns),
                &ConfigMap {
                    immutable: None,
                    ..case.config_map.clone()
                },
                &ns,
                &case,
            )
            .await;
            check(
                Api::<Pod>::namespaced(client.clone(), &ns),
                &case.pod,
                &ns,
                &case,
            )
            .await;
        });
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
