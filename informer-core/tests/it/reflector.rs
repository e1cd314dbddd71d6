//! The Reflector against envtest over HTTP (real clock): initial sync,
//! resume across dropped watches, relist after 410 with tombstones,
//! pagination, bookmarks, backoff on 429 and 500, streaming list.

use std::sync::Arc;
use std::time::Duration;

use envtest::{FailureRule, TestEnv};
use informer_core::delta_fifo::{DeltaFifo, DeltaType};
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::reflector::{Reflector, ReflectorBuilder, SyncedResourceVersion};
use informer_core::store::Indexer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::common::*;

pub(crate) struct Running {
    pub(crate) mirror: Arc<Mirror>,
    pub(crate) metrics: Arc<Counting>,
    synced: SyncedResourceVersion,
    errors: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    pub(crate) async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("the reflector stops when cancelled")
            .unwrap();
    }

    pub(crate) async fn until_synced(&self) {
        let mirror = self.mirror.clone();
        eventually("the first list was stored", move || mirror.replaces() >= 1).await;
    }
}

pub(crate) fn run(
    api: Api<ConfigMap>,
    configure: impl FnOnce(ReflectorBuilder<ConfigMap>) -> ReflectorBuilder<ConfigMap>,
) -> Running {
    let mirror = Mirror::new();
    let metrics = Counting::new();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = errors.clone();
    let lw = ApiListerWatcher::new(api, ListWatchOptions::default());
    let reflector = configure(
        Reflector::builder(lw, mirror.clone())
            .metrics(metrics.clone())
            .backoff(quick_backoff())
            .watch_error_handler(move |e| sink.lock().push(e.to_string())),
    )
    .build();
    let synced = reflector.synced_resource_version();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    Running {
        mirror,
        metrics,
        synced,
        errors,
        cancel,
        task,
    }
}

pub(crate) const DEFAULT_CMS: &str = "/api/v1/namespaces/default/configmaps";

pub(crate) async fn until_mirror_equals_list(r: &Running, api: &Api<ConfigMap>) {
    eventually_async("the store equals a fresh LIST", || async {
        r.mirror.snapshot() == list_snapshot(api).await
    })
    .await;
}

#[tokio::test]
async fn initial_sync_equals_a_list_and_uses_client_go_parameters() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "cm", 20).await;
    let r = run(api.clone(), |b| b);
    r.until_synced().await;
    assert_eq!(r.mirror.snapshot(), list_snapshot(&api).await);
    assert_eq!(r.mirror.snapshot().len(), 20);

    eventually("the watch is open", || {
        !watches_of(&env, DEFAULT_CMS).is_empty()
    })
    .await;
    let list = query_of(&lists_of(&env, DEFAULT_CMS)[0]);
    assert_eq!(list.get("resourceVersion").map(String::as_str), Some("0"));
    assert_eq!(list.get("limit").map(String::as_str), Some("500"));
    let Some(Op::Replace(_, list_rv)) = r.mirror.ops().first().cloned() else {
        panic!("the first store call is a replace: {:?}", r.mirror.ops());
    };
    let watch = query_of(&watches_of(&env, DEFAULT_CMS)[0]);
    assert_eq!(watch.get("resourceVersion"), Some(&list_rv));
    assert_eq!(
        watch.get("allowWatchBookmarks").map(String::as_str),
        Some("true")
    );
    let timeout: u32 = watch["timeoutSeconds"].parse().unwrap();
    assert!((300..600).contains(&timeout), "timeoutSeconds={timeout}");

    // Changes flow through the watch.
    api.create(&PostParams::default(), &cm("late", "1"))
        .await
        .unwrap();
    until_mirror_equals_list(&r, &api).await;
    assert_eq!(r.metrics.count("event:added"), 1);
    r.stop().await;
}

#[tokio::test]
async fn pagination_over_500_objects_lists_every_page() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "many", 1203).await;
    let r = run(api.clone(), |b| b);
    r.until_synced().await;
    assert_eq!(r.mirror.snapshot().len(), 1203);
    assert_eq!(r.mirror.snapshot(), list_snapshot(&api).await);
    let lists = lists_of(&env, DEFAULT_CMS);
    let first = query_of(&lists[0]);
    assert_eq!(first.get("limit").map(String::as_str), Some("500"));
    let continued: Vec<_> = lists[1..3].iter().map(query_of).collect();
    for q in &continued {
        assert!(q.contains_key("continue"), "{q:?}");
        assert!(!q.contains_key("resourceVersion"), "{q:?}");
    }
    assert_eq!(r.metrics.count("pages"), 3);
    r.stop().await;
}

#[tokio::test]
async fn watch_resumes_across_dropped_watches_without_loss_or_duplication() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "seed", 5).await;
    let r = run(api.clone(), |b| b);
    r.until_synced().await;

    // Every write's resource version must reach the store exactly once.
    let mut written = Vec::new();
    for round in 0..6 {
        let name = format!("obj-{round}");
        let created = api
            .create(&PostParams::default(), &cm(&name, "0"))
            .await
            .unwrap();
        written.push(Op::Add(format!("default/{name}"), rv_of(&created)));
        env.faults().drop_watches();
        let patch = serde_json::json!({"data": {"v": (round + 1).to_string()}});
        let patched = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        written.push(Op::Update(format!("default/{name}"), rv_of(&patched)));
        if round % 2 == 0 {
            let seed = format!("seed-{round:05}");
            let gone = api.delete(&seed, &Default::default()).await.unwrap();
            let last = gone.left().map(|o| rv_of(&o)).unwrap_or_default();
            written.push(Op::Delete(format!("default/{seed}"), last));
        }
        env.faults().drop_watches();
    }
    until_mirror_equals_list(&r, &api).await;
    let watch_ops: Vec<Op> = r.mirror.ops().into_iter().skip(1).collect();
    let deletes_with_rv: Vec<Op> = watch_ops
        .iter()
        .map(|op| match op {
            // The delete event carries the deletion's resource version, not
            // the last one the object had: compare by key for deletes.
            Op::Delete(k, _) => Op::Delete(k.clone(), String::new()),
            other => other.clone(),
        })
        .collect();
    let expected: Vec<Op> = written
        .iter()
        .map(|op| match op {
            Op::Delete(k, _) => Op::Delete(k.clone(), String::new()),
            other => other.clone(),
        })
        .collect();
    assert_eq!(deletes_with_rv, expected, "every change once, in order");
    assert_eq!(r.mirror.replaces(), 1, "no relist was needed");
    assert_eq!(lists_of(&env, DEFAULT_CMS).len(), 1);
    assert!(
        watches_of(&env, DEFAULT_CMS).len() >= 2,
        "watches were reopened"
    );
    r.stop().await;
}

#[tokio::test]
async fn relist_after_410_yields_tombstones_for_objects_deleted_while_disconnected() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "keep", 3).await;
    create_many(&api, "doomed", 2).await;

    // A minimal informer: reflector -> DeltaFifo -> indexer, recording deletes.
    let indexer: Indexer<ConfigMap> = Indexer::new();
    let fifo = Arc::new(DeltaFifo::new(Some(Arc::new(indexer.clone()))));
    let deletes: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let metrics = Counting::new();
    let lw = ApiListerWatcher::new(api.clone(), ListWatchOptions::default());
    let reflector = Reflector::builder(lw, fifo.clone())
        .metrics(metrics.clone())
        .backoff(quick_backoff())
        .build();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    let pop_task = {
        let (fifo, indexer, deletes) = (fifo.clone(), indexer.clone(), deletes.clone());
        tokio::spawn(async move {
            while let Ok(()) = fifo
                .pop(|d| {
                    for delta in d.deltas {
                        match delta.kind {
                            DeltaType::Deleted => {
                                indexer.delete(&d.key);
                                deletes
                                    .lock()
                                    .push((d.key.to_string(), delta.object.is_tombstone()));
                            }
                            _ => indexer.update(delta.object.object().clone()).unwrap(),
                        }
                    }
                })
                .await
            {}
        })
    };
    eventually("the cache is filled", || indexer.len() == 5).await;
    eventually("the watch is open", || {
        !watches_of(&env, DEFAULT_CMS).is_empty()
    })
    .await;

    // Disconnect: watches fail with 429 (back off and re-watch, no relist).
    env.faults()
        .fail_next(FailureRule::new(1_000_000, 429).watch(true).retry_after(0));
    env.faults().drop_watches();
    eventually("a watch was refused", || {
        metrics.count("watch_restart:too_many_requests") >= 1
    })
    .await;
    delete(&api, "doomed-00000").await;
    delete(&api, "doomed-00001").await;
    env.faults().compact();
    env.faults().clear_failures();

    eventually("the cache lost the deleted objects", || indexer.len() == 3).await;
    let mut seen = deletes.lock().clone();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("default/doomed-00000".to_owned(), true),
            ("default/doomed-00001".to_owned(), true)
        ],
        "deletes missed while disconnected arrive as tombstones"
    );
    assert_eq!(
        metrics.count("relist:expired"),
        1,
        "the resumed watch got 410 Expired"
    );
    assert_eq!(lists_of(&env, DEFAULT_CMS).len(), 2);
    let cached: std::collections::BTreeMap<String, String> = indexer
        .list()
        .iter()
        .map(|o| (informer_core::key::object_key(&**o), rv_of(&**o)))
        .collect();
    assert_eq!(cached, list_snapshot(&api).await);

    cancel.cancel();
    task.await.unwrap();
    fifo.close();
    pop_task.await.unwrap();
}

#[tokio::test]
async fn bookmarks_move_the_resource_version_without_touching_the_store() {
    let env = TestEnv::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    create_namespace(&env.client(), "elsewhere").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let other: Api<ConfigMap> = Api::namespaced(env.client(), "elsewhere");
    let r = run(api.clone(), |b| b);
    r.until_synced().await;
    let listed: u64 = r.synced.get().unwrap().parse().unwrap();

    // Writes elsewhere move the global revision; our watch learns it from bookmarks only.
    let written = other
        .create(&PostParams::default(), &cm("x", "1"))
        .await
        .unwrap();
    let target: u64 = rv_of(&written).parse().unwrap();
    assert!(target > listed);
    let synced = r.synced.clone();
    eventually("a bookmark moved the resource version", move || {
        synced.get().and_then(|v| v.parse::<u64>().ok()) >= Some(target)
    })
    .await;
    assert!(r.metrics.count("event:bookmark") >= 1);
    assert_eq!(
        r.mirror.ops().len(),
        1,
        "only the initial replace: {:?}",
        r.mirror.ops()
    );

    // The next watch resumes from the bookmark's resource version.
    let rv_now = r.synced.get().unwrap();
    env.faults().drop_watches();
    eventually("the watch was reopened from the bookmark", || {
        watches_of(&env, DEFAULT_CMS).iter().skip(1).any(|w| {
            query_of(w)
                .get("resourceVersion")
                .map(|v| v.parse::<u64>().unwrap_or(0))
                >= rv_now.parse::<u64>().ok()
        })
    })
    .await;
    r.stop().await;
}

#[tokio::test]
async fn list_500s_and_watch_429s_back_off_then_recover() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "cm", 3).await;
    env.faults().fail_next(
        FailureRule::new(3, 500)
            .watch(false)
            .path_contains("configmaps"),
    );
    let r = run(api.clone(), |b| b);
    r.until_synced().await;
    let lists = lists_of(&env, DEFAULT_CMS);
    let statuses: Vec<u16> = lists.iter().map(|l| l.status).collect();
    assert_eq!(statuses, vec![500, 500, 500, 200]);
    assert_eq!(r.metrics.count("list_failed:InternalError"), 3);
    assert_eq!(
        r.metrics.backoffs.lock().clone(),
        [50, 100, 200].map(Duration::from_millis).to_vec(),
        "backoff doubles from its initial value"
    );

    eventually("the watch is open", || {
        !watches_of(&env, DEFAULT_CMS).is_empty()
    })
    .await;
    env.faults()
        .fail_next(FailureRule::new(2, 429).watch(true).retry_after(1));
    env.faults().drop_watches();
    let metrics = r.metrics.clone();
    eventually("two 429s were retried", move || {
        metrics.count("watch_restart:too_many_requests") == 2
    })
    .await;
    api.create(&PostParams::default(), &cm("after", "1"))
        .await
        .unwrap();
    until_mirror_equals_list(&r, &api).await;
    let waits = r.metrics.backoffs.lock().clone();
    let honoured = waits[3..]
        .iter()
        .filter(|w| **w >= Duration::from_secs(1))
        .count();
    assert_eq!(
        honoured, 2,
        "Retry-After: 1 is honoured for both 429s: {waits:?}"
    );
    assert_eq!(
        lists_of(&env, DEFAULT_CMS).len(),
        4,
        "a 429 re-watches without a relist"
    );
    assert_eq!(r.mirror.replaces(), 1);
    assert!(r.errors.lock().iter().any(|e| e.contains("429")));
    r.stop().await;
}

#[tokio::test]
async fn streaming_list_syncs_without_a_list_request() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "cm", 7).await;
    let r = run(api.clone(), |b| b.streaming_list(true));
    r.until_synced().await;
    assert_eq!(r.mirror.snapshot(), list_snapshot(&api).await);
    assert!(
        lists_of(&env, DEFAULT_CMS).is_empty(),
        "no LIST request: {:?} {:?}",
        env.request_log(),
        r.errors.lock()
    );
    let first = query_of(&watches_of(&env, DEFAULT_CMS)[0]);
    assert_eq!(
        first.get("sendInitialEvents").map(String::as_str),
        Some("true")
    );
    assert_eq!(
        first.get("resourceVersionMatch").map(String::as_str),
        Some("NotOlderThan")
    );
    api.create(&PostParams::default(), &cm("late", "1"))
        .await
        .unwrap();
    until_mirror_equals_list(&r, &api).await;
    assert_eq!(
        watches_of(&env, DEFAULT_CMS).len(),
        1,
        "the streaming watch goes on"
    );
    r.stop().await;
}

#[tokio::test]
async fn streaming_list_refused_falls_back_to_list() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "cm", 2).await;
    env.faults().fail_next(FailureRule::new(1, 400).watch(true));
    let r = run(api.clone(), |b| b.streaming_list(true));
    r.until_synced().await;
    assert_eq!(r.mirror.snapshot(), list_snapshot(&api).await);
    assert_eq!(lists_of(&env, DEFAULT_CMS).len(), 1);
    assert_eq!(r.metrics.count("streaming_fallback"), 1);
    r.stop().await;
}

/// The server goes away and another one, with a lower revision and other
/// objects, comes up on the same address (an etcd restore): the reflector
/// rides out the refused connections, gets "too large resource version" for
/// what it had synced, relists with `resourceVersion=""` and ends up with
/// exactly the new server's objects.
#[tokio::test]
async fn a_server_restored_to_a_lower_revision_is_relisted_from_scratch() {
    let old = TestEnv::start().await.unwrap();
    let port: u16 = old.base_url().rsplit(':').next().unwrap().parse().unwrap();
    let old_api: Api<ConfigMap> = Api::namespaced(old.client(), "default");
    create_many(&old_api, "old", 30).await;
    let r = run(old_api, |b| b);
    r.until_synced().await;
    eventually("the watch is open", || {
        !watches_of(&old, DEFAULT_CMS).is_empty()
    })
    .await;
    drop(old);

    // The old server lets go of the port once its shutdown has run.
    let start_new = async {
        loop {
            match TestEnv::builder().port(port).start().await {
                Ok(env) => return env,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    };
    let new = tokio::time::timeout(LIMIT, start_new)
        .await
        .expect("the port is free again");
    let new_api: Api<ConfigMap> = Api::namespaced(new.client(), "default");
    create_many(&new_api, "new", 3).await;
    until_mirror_equals_list(&r, &new_api).await;
    assert_eq!(r.mirror.snapshot().len(), 3);
    let lists = lists_of(&new, DEFAULT_CMS);
    assert!(
        lists.iter().any(|l| l.status == 504),
        "the old resource version was too large: {lists:?}"
    );
    let last = query_of(lists.last().unwrap());
    assert!(
        !last.contains_key("resourceVersion"),
        "relisted from scratch: {last:?}"
    );
    r.stop().await;
}
