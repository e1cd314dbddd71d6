//! A sharded controller on three, then two, then three replicas: each
//! object is reconciled by its owner only, never by two replicas at once;
//! a dead replica's objects are reconciled elsewhere within about a lease
//! duration; a replica that joins takes over about 1/N of the keys, which
//! it reconciles without any change to them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use controller_runtime::sharding::config::ShardMode;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use tokio::time::Instant;

use crate::sharding::{HANDOVER_LIMIT, STEADY_LEASE};
use crate::sharding_fleet::{
    NS, Replica, Timeline, all_reconciled, check_no_overlap, last_seen, owners, start_steady,
    write_all,
};

const RING: &str = "it-sharded";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_object_is_reconciled_by_its_owner_and_handed_over_when_replicas_come_and_go() {
    let env = envtest::TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let names: Vec<String> = (0..30).map(|i| format!("s{i}")).collect();
    write_all(&api, &names, "0").await;
    let timeline = Arc::new(Timeline::default());
    let work = Duration::from_millis(20);
    let mut replicas = Vec::new();
    for id in ["r1", "r2", "r3"] {
        replicas.push(start_steady(&env, RING, id, &timeline, work, ShardMode::Filter).await);
    }
    all_reconciled(&timeline, &names, "0", Duration::from_secs(15))
        .await
        .unwrap();

    // A change to every object: each is reconciled by its owner alone.
    let mark = Instant::now();
    write_all(&api, &names, "1").await;
    all_reconciled(&timeline, &names, "1", Duration::from_secs(10))
        .await
        .unwrap();
    let expected = owners(&["r1", "r2", "r3"], &names);
    for s in timeline.spans.lock().iter().filter(|s| s.start >= mark) {
        assert_eq!(
            expected.get(&s.key),
            Some(&s.replica),
            "{} reconciled by a replica that does not own it",
            s.key
        );
    }
    let per_replica: BTreeMap<&String, usize> =
        expected.values().fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r).or_default() += 1;
            m
        });
    assert_eq!(
        per_replica.len(),
        3,
        "every replica owns some: {per_replica:?}"
    );

    // r2 dies: its objects are reconciled elsewhere after its lease expires.
    let r2 = replicas.remove(1);
    let r2_keys: Vec<String> = expected
        .iter()
        .filter(|(_, r)| *r == "r2")
        .map(|(k, _)| k.trim_start_matches("default/").to_string())
        .collect();
    r2.kill();
    let died = Instant::now();
    write_all(&api, &names, "2").await;
    all_reconciled(&timeline, &r2_keys, "2", HANDOVER_LIMIT)
        .await
        .unwrap();
    let handover = died.elapsed();
    all_reconciled(&timeline, &names, "2", Duration::from_secs(10))
        .await
        .unwrap();
    let now_owners = owners(&["r1", "r3"], &names);
    let last = last_seen(&timeline);
    for name in &r2_keys {
        let key = format!("{NS}/{name}");
        assert_eq!(last.get(&key).map(|(r, _)| r), now_owners.get(&key));
    }

    // r4 joins: the keys that move to it are reconciled by it, unchanged.
    let joined = Instant::now();
    replicas.push(start_steady(&env, RING, "r4", &timeline, work, ShardMode::Filter).await);
    let grown = owners(&["r1", "r3", "r4"], &names);
    let moved: BTreeSet<&String> = grown
        .iter()
        .filter(|(k, r)| now_owners.get(*k) != Some(*r))
        .map(|(k, _)| k)
        .collect();
    assert!(
        moved
            .iter()
            .all(|k| grown.get(*k).map(String::as_str) == Some("r4"))
    );
    crate::eventually(
        Duration::from_secs(10),
        "r4 reconciles the keys that moved to it",
        || async {
            let by_r4: BTreeSet<String> = timeline
                .spans
                .lock()
                .iter()
                .filter(|s| s.replica == "r4" && s.end.is_some() && s.start >= joined)
                .map(|s| s.key.clone())
                .collect();
            moved.iter().all(|k| by_r4.contains(*k)).then_some(())
        },
    )
    .await;
    let scale_up = joined.elapsed();
    let r4_foreign: Vec<String> = timeline
        .spans
        .lock()
        .iter()
        .filter(|s| s.replica == "r4" && !moved.contains(&s.key))
        .map(|s| s.key.clone())
        .collect();
    assert!(
        r4_foreign.is_empty(),
        "r4 reconciled keys it does not own: {r4_foreign:?}"
    );

    check_no_overlap(&timeline).unwrap();
    eprintln!(
        "sharded controller: {} objects; owners {per_replica:?}; after a replica died its \
         {} objects were reconciled elsewhere within {handover:?} (lease {STEADY_LEASE:?}); \
         a fourth replica took {} of {} keys ({:.0} %, expected about 33 %) within {scale_up:?}",
        names.len(),
        r2_keys.len(),
        moved.len(),
        names.len(),
        100.0 * moved.len() as f64 / names.len() as f64
    );
    for r in replicas {
        r.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), r.run).await;
    }
}

/// The shard label of `cm` in ring `ring`.
fn shard_label(cm: &ConfigMap, ring: &str) -> Option<String> {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(&format!("sharding.informer-rs.io/{ring}")))
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn label_mode_each_replica_caches_and_reconciles_its_share_and_moves_objects_by_handshake() {
    use controller_runtime::cache::ScopedInformer;
    use kube_client::api::ListParams;

    const RING: &str = "it-labelled";
    let env = envtest::TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let names: Vec<String> = (0..30).map(|i| format!("l{i}")).collect();
    write_all(&api, &names, "0").await;
    let timeline = Arc::new(Timeline::default());
    let work = Duration::from_millis(20);
    let start = |id: &'static str| start_steady(&env, RING, id, &timeline, work, ShardMode::Label);
    let mut replicas = vec![start("r1").await, start("r2").await, start("r3").await];
    let members = |rs: &[Replica]| {
        let mut ids: Vec<String> = rs.iter().map(|r| r.id.clone()).collect();
        ids.sort();
        ids
    };
    // Every object ends up labelled with its owner, and each replica's cache
    // holds exactly the objects labelled with its shard.
    let settled = |rs: Vec<(String, ScopedInformer<ConfigMap>)>, want: Vec<String>| {
        let api = api.clone();
        async move {
            let listed = api.list(&ListParams::default()).await.ok()?.items;
            let ids: Vec<&str> = want.iter().map(String::as_str).collect();
            let all: Vec<String> = listed
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            let expected = owners(&ids, &all);
            for c in &listed {
                let key = format!("{NS}/{}", c.metadata.name.clone()?);
                if shard_label(c, RING).as_ref() != expected.get(&key) {
                    return None;
                }
            }
            let mut sizes = BTreeMap::new();
            for (id, informer) in &rs {
                let cached: BTreeSet<String> = informer
                    .list()
                    .iter()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect();
                let share: BTreeSet<String> = listed
                    .iter()
                    .filter(|c| shard_label(c, RING).as_ref() == Some(id))
                    .filter_map(|c| c.metadata.name.clone())
                    .collect();
                if cached != share {
                    return None;
                }
                sizes.insert(id.clone(), cached.len());
            }
            Some(sizes)
        }
    };
    let informers = |rs: &[Replica]| -> Vec<(String, ScopedInformer<ConfigMap>)> {
        rs.iter()
            .map(|r| (r.id.clone(), r.mgr.cache().informer()))
            .collect()
    };
    let sizes = crate::eventually(
        Duration::from_secs(20),
        "objects labelled, caches split",
        || settled(informers(&replicas), members(&replicas)),
    )
    .await;
    assert_eq!(sizes.values().sum::<usize>(), names.len(), "{sizes:?}");
    assert!(sizes.values().all(|n| *n < names.len()), "{sizes:?}");
    all_reconciled(&timeline, &names, "0", Duration::from_secs(15))
        .await
        .unwrap();

    // A change to every object is reconciled by its owner alone.
    let mark = Instant::now();
    write_all(&api, &names, "1").await;
    all_reconciled(&timeline, &names, "1", Duration::from_secs(10))
        .await
        .unwrap();
    let expected = owners(&["r1", "r2", "r3"], &names);
    for s in timeline.spans.lock().iter().filter(|s| s.start >= mark) {
        assert_eq!(expected.get(&s.key), Some(&s.replica), "{}", s.key);
    }

    // r2 dies: its objects are relabelled once its Lease expired, and
    // reconciled by their new owners.
    let r2 = replicas.remove(1);
    let r2_keys: Vec<String> = expected
        .iter()
        .filter(|(_, r)| *r == "r2")
        .map(|(k, _)| k.trim_start_matches("default/").to_string())
        .collect();
    r2.kill();
    let died = Instant::now();
    write_all(&api, &names, "2").await;
    all_reconciled(&timeline, &r2_keys, "2", HANDOVER_LIMIT)
        .await
        .unwrap();
    let handover = died.elapsed();
    crate::eventually(Duration::from_secs(20), "relabelled after r2 died", || {
        settled(informers(&replicas), members(&replicas))
    })
    .await;

    // r4 joins: about a third of the objects are drained from their shard
    // and relabelled to r4, which reconciles them without any change.
    let joined = Instant::now();
    replicas.push(start("r4").await);
    let sizes = crate::eventually(Duration::from_secs(20), "r4 takes its share", || {
        settled(informers(&replicas), members(&replicas))
    })
    .await;
    let moved = sizes.get("r4").copied().unwrap_or_default();
    assert!(moved > 0 && moved < names.len() / 2, "{sizes:?}");
    crate::eventually(
        Duration::from_secs(10),
        "r4 reconciles its share",
        || async {
            let by_r4 = timeline
                .spans
                .lock()
                .iter()
                .filter(|s| s.replica == "r4" && s.end.is_some() && s.start >= joined)
                .map(|s| s.key.clone())
                .collect::<BTreeSet<_>>()
                .len();
            (by_r4 >= moved).then_some(())
        },
    )
    .await;
    let scale_up = joined.elapsed();
    check_no_overlap(&timeline).unwrap();
    let metrics = replicas
        .iter()
        .filter_map(|r| r.mgr.metrics().encode().ok())
        .collect::<Vec<_>>()
        .join("\n");
    for family in [
        "sharding_owned_objects",
        "sharding_moves_total",
        "sharding_drains_total",
    ] {
        assert!(metrics.contains(family), "{family} missing:\n{metrics}");
    }
    // r2's relabelling was timed by the sharder (one replica's registry).
    let reassigned: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("sharding_reassign_seconds_count{") && l.contains(r#"mode="label""#)
        })
        .filter(|l| !l.ends_with(" 0"))
        .collect();
    assert_eq!(reassigned.len(), 1, "{metrics}");
    eprintln!(
        "label mode: {} objects; caches {sizes:?}; after a replica died its {} objects were \
         reconciled elsewhere within {handover:?} (lease {STEADY_LEASE:?}); a third live replica took {moved} \
         of {} ({:.0} %, expected about 33 %) within {scale_up:?}",
        names.len(),
        r2_keys.len(),
        names.len(),
        100.0 * moved as f64 / names.len() as f64
    );
    for r in replicas {
        r.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), r.run).await;
    }
}

/// One replica of a label-mode Widget controller owning ConfigMaps.
async fn widget_replica(
    env: &envtest::TestEnv,
    id: &str,
    journal: &Arc<crate::widget::Journal>,
) -> (
    controller_runtime::manager::Manager,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<(), controller_runtime::manager::ManagerError>>,
    Arc<crate::chaos::gate::GateState>,
) {
    use controller_runtime::manager::Manager;
    use controller_runtime::sharding::controller::ShardedExt;
    use controller_runtime::sharding::membership::Membership;

    use crate::chaos::gate::{GateLayer, GateState};
    use crate::widget::{Widget, WidgetReconciler};

    let gate = Arc::new(GateState::default());
    let client = kube_client::client::ClientBuilder::try_from(env.client_config())
        .unwrap()
        .with_layer(&GateLayer(Arc::clone(&gate)))
        .build();
    let config = crate::sharding::steady_ring_config("it-widgets", id).mode(ShardMode::Label);
    // The sharded controller makes the caches select the shard's label.
    let mgr = Manager::builder(client.clone())
        .graceful_shutdown_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let membership = Membership::new(client, config).unwrap();
    let builder = mgr.controller::<Widget>().max_concurrent_reconciles(2);
    // The owned kind is declared before `.sharded(..)` on one replica and
    // after it on the others: both are labelled and selected.
    let sharded = if id == "b" {
        builder.owns::<ConfigMap>().sharded(&membership)
    } else {
        builder.sharded(&membership).owns::<ConfigMap>()
    };
    sharded
        .complete(WidgetReconciler::new(&mgr, Arc::clone(journal)))
        .unwrap();
    let (stop, run) = crate::widget::spawn_manager(&mgr);
    (mgr, stop, run, gate)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn label_mode_owned_objects_follow_their_owner_shard() {
    use kube_client::api::{ListParams, PostParams};

    use crate::widget::{Journal, cm_data, cm_name, env_with_crd, widget, widgets};

    let env = env_with_crd().await;
    let client = env.client();
    let journal = Arc::new(Journal::default());
    let names: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
    for n in &names {
        widgets(&client)
            .create(&PostParams::default(), &widget(n, &[("v", "0")]))
            .await
            .unwrap();
    }
    let mut replicas = Vec::new();
    for id in ["a", "b", "c"] {
        replicas.push((id, widget_replica(&env, id, &journal).await));
    }
    // Each widget's ConfigMap exists, carries its widget's shard label, and
    // each replica caches exactly the ConfigMaps labelled with its shard.
    let all_caches: Vec<(&str, controller_runtime::cache::ScopedInformer<ConfigMap>)> = replicas
        .iter()
        .map(|(id, r)| (*id, r.0.cache().informer()))
        .collect();
    let together = |live: Vec<&'static str>, v: &'static str| {
        let client = client.clone();
        let names = names.clone();
        let caches: Vec<_> = all_caches
            .iter()
            .filter(|(id, _)| live.contains(id))
            .cloned()
            .collect();
        async move {
            let label = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                m.labels
                    .as_ref()
                    .and_then(|l| l.get("sharding.informer-rs.io/it-widgets"))
                    .cloned()
            };
            let expected = owners(&live, &names);
            let ws = widgets(&client)
                .list(&ListParams::default())
                .await
                .ok()?
                .items;
            let cms = Api::<ConfigMap>::namespaced(client.clone(), NS)
                .list(&ListParams::default())
                .await
                .ok()?
                .items;
            for w in &ws {
                let name = w.metadata.name.clone()?;
                let shard = label(&w.metadata);
                if shard.as_ref() != expected.get(&format!("{NS}/{name}")) {
                    return None;
                }
                let cm = cms
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(cm_name(&name).as_str()))?;
                if label(&cm.metadata) != shard || cm_data(&client, &name).await?.get("v")? != v {
                    return None;
                }
            }
            for (id, cache) in &caches {
                let cached: BTreeSet<String> = cache
                    .list()
                    .iter()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect();
                let share: BTreeSet<String> = cms
                    .iter()
                    .filter(|c| label(&c.metadata).as_deref() == Some(*id))
                    .filter_map(|c| c.metadata.name.clone())
                    .collect();
                if cached != share {
                    return None;
                }
            }
            Some(())
        }
    };
    crate::eventually(
        Duration::from_secs(20),
        "widgets and their ConfigMaps on one shard",
        || together(vec!["a", "b", "c"], "0"),
    )
    .await;

    // b dies; the widgets change: each widget and its ConfigMap move
    // together and the ConfigMaps follow the change.
    let (_, (_, _, run_b, gate_b)) = replicas.remove(1);
    gate_b
        .partitioned
        .store(true, std::sync::atomic::Ordering::SeqCst);
    run_b.abort();
    for n in &names {
        let api = widgets(&client);
        for _ in 0..10 {
            let mut w = api.get(n).await.unwrap();
            w.spec.data = BTreeMap::from([("v".to_string(), "1".to_string())]);
            if api.replace(n, &PostParams::default(), &w).await.is_ok() {
                break;
            }
        }
    }
    crate::eventually(
        HANDOVER_LIMIT,
        "b's widgets and ConfigMaps moved together",
        || together(vec!["a", "c"], "1"),
    )
    .await;
    assert_eq!(
        *journal.overlap.lock(),
        None,
        "a widget reconciled twice at once"
    );
    for (_, (_, stop, run, _)) in replicas {
        stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    }
}

/// Label mode: an object deleted while its shard still reconciles it, and
/// created again at once under the same name while the ring gives the name
/// to another shard, goes back to the old shard first and moves by the
/// drain handshake, so the two shards never reconcile the name at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn label_mode_a_name_created_again_waits_for_the_shard_that_reconciles_its_deletion() {
    use kube_client::api::{DeleteParams, PostParams};

    use crate::sharding_fleet::object;

    const RING: &str = "it-recreated";
    let env = envtest::TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    // A name the two-member ring gives to r2.
    let candidates: Vec<String> = (0..64).map(|i| format!("again{i}")).collect();
    let two = owners(&["r1", "r2"], &candidates);
    let name = candidates
        .iter()
        .find(|n| two[&format!("{NS}/{n}")] == "r2")
        .unwrap()
        .clone();
    let key = format!("{NS}/{name}");
    let timeline = Arc::new(Timeline::default());
    // Long reconciles: r1 is still reconciling when the name comes back.
    let work = Duration::from_secs(6);
    let start = |id: &'static str| start_steady(&env, RING, id, &timeline, work, ShardMode::Label);
    let r1 = start("r1").await;
    api.create(&PostParams::default(), &object(&name, "first"))
        .await
        .unwrap();
    // r1 (alone in the ring) gets it and starts a reconcile.
    crate::eventually(Duration::from_secs(20), "r1 reconciling", || {
        let running = timeline
            .spans
            .lock()
            .iter()
            .any(|s| s.key == key && s.replica == "r1" && s.end.is_none());
        async move { running.then_some(()) }
    })
    .await;
    // r2 joins: the sharder asks r1 to let go, which waits for the reconcile.
    let r2 = start("r2").await;
    crate::eventually(Duration::from_secs(20), "drain asked", || {
        let api = api.clone();
        let name = name.clone();
        async move {
            let cm = api.get(&name).await.ok()?;
            let labels = cm.metadata.labels?;
            labels
                .contains_key(&format!("drain.sharding.informer-rs.io/{RING}"))
                .then_some(())
        }
    })
    .await;
    // Deleted and created again while r1's reconcile still runs.
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &object(&name, "again"))
        .await
        .unwrap();
    let still_running = timeline
        .spans
        .lock()
        .iter()
        .any(|s| s.key == key && s.replica == "r1" && s.end.is_none());
    assert!(
        still_running,
        "the test needs r1's reconcile to outlast the recreate"
    );
    // The new object ends on r2 and is reconciled there, after r1 is done.
    crate::eventually(
        Duration::from_secs(60),
        "recreated object reconciled by r2",
        || {
            let done =
                timeline.spans.lock().iter().any(|s| {
                    s.key == key && s.replica == "r2" && s.seen.as_deref() == Some("again")
                });
            async move { done.then_some(()) }
        },
    )
    .await;
    check_no_overlap(&timeline).unwrap();
    for r in [r1, r2] {
        r.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), r.run).await;
    }
}
