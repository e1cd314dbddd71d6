//! Sharding composed with the rest: a `#[derive(Controller)]` reconciler
//! with a finalizer runs sharded through its generated `setup_sharded`,
//! in label mode and in filter mode, under its derived role (RBAC enforced by envtest); label mode labels
//! only what the controller's cache selects (its selector and its
//! namespaces), and merges the shard's selector with the user's; owned
//! kinds are labelled whether declared before or after `.sharded(..)`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use controller_runtime::__test_support::Ring;
use controller_runtime::prelude::*;
use controller_runtime::sharding::config::ShardMode;
use controller_runtime::sharding::controller::ShardedExt;
use controller_runtime::sharding::membership::Membership;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_client::api::ListParams;
use parking_lot::Mutex;

use crate::fixture::{assert_nothing_forbidden, copy_into_secret, spawn_manager, stop_manager};
use crate::sharding::ring_config;
use crate::{config_map, eventually};

const NS: &str = "default";

/// Who reconciled and who cleaned up what: `(replica, ConfigMap)`.
#[derive(Default)]
struct Journal {
    reconciled: Mutex<Vec<(String, String)>>,
    cleaned: Mutex<Vec<(String, String)>>,
}

/// Keeps a Secret `<name>-copy` of each ConfigMap, sharded by label.
#[derive(Controller)]
#[controller(
    for = ConfigMap,
    owns(Secret),
    finalizer = "test.example.com/sharded",
    sharding(mode = "label"),
    name = "sharded-copier"
)]
struct ShardedCopier {
    identity: String,
    journal: Arc<Journal>,
}

/// The same sharded copier in filter mode (the derive's default mode).
#[derive(Controller)]
#[controller(
    for = ConfigMap,
    owns(Secret),
    finalizer = "test.example.com/sharded",
    sharding,
    name = "filter-copier"
)]
struct FilterCopier {
    identity: String,
    journal: Arc<Journal>,
}

/// Both copiers: copy into a Secret and journal who reconciled and who
/// cleaned up what.
macro_rules! journalled_copier {
    ($copier:ty) => {
        impl ObjectReconciler<ConfigMap> for $copier {
            type Error = kube_client::Error;

            async fn reconcile(
                &self,
                cm: Arc<ConfigMap>,
                ctx: &ObjectContext<ConfigMap>,
            ) -> Result<Action, Self::Error> {
                let action = copy_into_secret(&cm, ctx).await?;
                self.journal
                    .reconciled
                    .lock()
                    .push((self.identity.clone(), cm.name_any()));
                Ok(action)
            }
        }

        impl Cleanup<ConfigMap> for $copier {
            async fn cleanup(
                &self,
                cm: Arc<ConfigMap>,
                _ctx: &ObjectContext<ConfigMap>,
            ) -> Result<Action, Self::Error> {
                self.journal
                    .cleaned
                    .lock()
                    .push((self.identity.clone(), cm.name_any()));
                Ok(Action::done())
            }
        }
    };
}

journalled_copier!(ShardedCopier);
journalled_copier!(FilterCopier);

const RING: &str = "it-derived";

/// Ring settings for these tests: roomy timings, so that a loaded machine
/// does not fence a replica (handovers wait for acknowledgments, not for
/// lease expiry, so they take no longer).
fn config(id: &str) -> controller_runtime::sharding::config::ShardingConfig {
    roomy(RING, id)
}

/// [`config`]'s timings on the ring `ring`.
fn roomy(ring: &str, id: &str) -> controller_runtime::sharding::config::ShardingConfig {
    ring_config(ring, id)
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(4))
        .retry_period(Duration::from_millis(500))
}

fn shard_label() -> String {
    ring_config(RING, "x").shard_label()
}

fn labels_of(cm: &ConfigMap) -> (Option<String>, bool) {
    let labels = cm.metadata.labels.clone().unwrap_or_default();
    let drain = ring_config(RING, "x").drain_label();
    (
        labels.get(&shard_label()).cloned(),
        labels.contains_key(&drain),
    )
}

struct Replica {
    mgr: Manager,
    stop: tokio_util::sync::CancellationToken,
    run: tokio::task::JoinHandle<Result<(), ManagerError>>,
}

async fn replica(
    client: &kube_client::Client,
    id: &str,
    journal: &Arc<Journal>,
    selector: Option<&str>,
) -> Replica {
    let mut builder = Manager::builder(client.clone())
        .namespace(NS)
        .graceful_shutdown_timeout(Duration::from_secs(5));
    if let Some(selector) = selector {
        builder = builder.cache_options::<ConfigMap>(
            controller_runtime::informer_core::factory::InformerOptions::new()
                .label_selector(selector),
        );
    }
    let mgr = builder.build().await.unwrap();
    ShardedCopier {
        identity: id.to_string(),
        journal: Arc::clone(journal),
    }
    .setup_sharded(&mgr, config(id))
    .unwrap();
    let (stop, run) = spawn_manager(&mgr);
    Replica { mgr, stop, run }
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = config_map(NS, name);
    cm.data = Some(BTreeMap::from([("k".to_string(), name.to_string())]));
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    cm
}

/// Deletes the ConfigMaps `names`, waits until they are gone (their
/// finalizer's cleanup done), and checks each was cleaned up, by its
/// `owner` alone.
async fn delete_and_check_cleanup(
    cms: &Api<ConfigMap>,
    names: &[String],
    journal: &Journal,
    owner: impl Fn(&str) -> String,
) {
    for n in names {
        cms.delete(n, &DeleteParams::default()).await.unwrap();
    }
    eventually(
        Duration::from_secs(30),
        "every ConfigMap cleaned up by its shard and gone",
        || async {
            let left = cms.list(&ListParams::default()).await.ok()?.items;
            left.iter()
                .all(|c| !names.contains(&c.name_any()))
                .then_some(())
        },
    )
    .await;
    let cleaned = journal.cleaned.lock().clone();
    for n in names {
        let by: Vec<&String> = cleaned
            .iter()
            .filter(|(_, c)| c == n)
            .map(|(id, _)| id)
            .collect();
        let expected = owner(n);
        assert!(
            !by.is_empty() && by.iter().all(|id| **id == expected),
            "{n} cleaned up by {by:?}, expected {expected}"
        );
    }
}

/// The derived RBAC has the shard rules; two replicas under it split the
/// ConfigMaps, each reconciling (and cleaning up, through the finalizer)
/// exactly those labelled with its identity; nothing is forbidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derived_controller_runs_sharded_with_its_finalizer_under_its_derived_role() {
    let role = ShardedCopier::rbac();
    let perms = ShardedCopier::permissions();
    assert!(perms.allows("coordination.k8s.io", "leases", "create"));
    assert!(perms.allows("coordination.k8s.io", "leases", "delete"));
    assert!(perms.allows("", "configmaps", "patch"));
    assert!(perms.allows("", "secrets", "patch"));
    let env = envtest::TestEnv::start().await.unwrap();
    let client = env
        .client_with_cluster_role(NS, "sharded-copier", &role)
        .await
        .unwrap();
    let journal = Arc::new(Journal::default());
    let names: Vec<String> = (0..8).map(|i| format!("d{i}")).collect();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let secrets: Api<Secret> = Api::namespaced(env.client(), NS);
    for n in &names {
        cms.create(&PostParams::default(), &labelled(n, &[]))
            .await
            .unwrap();
    }
    let a = replica(&client, "a", &journal, None).await;
    let b = replica(&client, "b", &journal, None).await;
    let ring = Ring::new(["a", "b"]);
    // The last state seen that was not the expected one, for the failure.
    let last = Arc::new(Mutex::new(String::new()));
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let mut wrong = None;
            for n in &names {
                let expected = ring.owner(&format!("{NS}/{n}")).unwrap_or_default();
                let cm = cms.get(n).await.unwrap();
                let (shard, draining) = labels_of(&cm);
                let secret = secrets.get_opt(&format!("{n}-copy")).await.unwrap();
                let secret_shard = secret.and_then(|s| s.labels().get(&shard_label()).cloned());
                let reconciled = journal
                    .reconciled
                    .lock()
                    .contains(&(expected.to_string(), n.clone()));
                if shard.as_deref() != Some(expected)
                    || draining
                    || cm.finalizers() != ["test.example.com/sharded"]
                    || secret_shard.as_deref() != Some(expected)
                    || !reconciled
                {
                    wrong = Some(format!(
                        "{n}: shard {shard:?} (expected {expected}), draining {draining}, \
                         finalizers {:?}, secret's shard {secret_shard:?}, reconciled there: \
                         {reconciled}",
                        cm.finalizers()
                    ));
                    break;
                }
            }
            match wrong {
                None => break,
                Some(w) => *last.lock() = w,
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        found.is_ok(),
        "each ConfigMap and its Secret on its ring shard, reconciled there; last: {}; journal {:?}",
        last.lock(),
        journal.reconciled.lock()
    );
    let shares: Vec<usize> = [&a, &b]
        .iter()
        .map(|r| r.mgr.cache().informer::<ConfigMap>().list().len())
        .collect();
    println!("derived sharded copier: ConfigMaps cached per replica {shares:?}");
    assert_eq!(shares.iter().sum::<usize>(), names.len(), "{shares:?}");

    delete_and_check_cleanup(&cms, &names, &journal, |n| {
        ring.owner(&format!("{NS}/{n}"))
            .unwrap_or_default()
            .to_string()
    })
    .await;
    assert_nothing_forbidden(&env, "the derived role");
    stop_manager(a.stop, a.run).await;
    stop_manager(b.stop, b.run).await;
}

/// Filter mode through the derive: two replicas under the derived role
/// (the shard Leases, no label rules needed) each reconcile and clean up
/// the ConfigMaps the ring gives them; nothing is labelled, nothing is
/// forbidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derived_controller_runs_sharded_in_filter_mode_under_its_derived_role() {
    let perms = FilterCopier::permissions();
    assert!(perms.allows("coordination.k8s.io", "leases", "create"));
    assert!(perms.allows("coordination.k8s.io", "leases", "delete"));
    let env = envtest::TestEnv::start().await.unwrap();
    let client = env
        .client_with_cluster_role(NS, "filter-copier", &FilterCopier::rbac())
        .await
        .unwrap();
    let journal = Arc::new(Journal::default());
    let names: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    for n in &names {
        cms.create(&PostParams::default(), &labelled(n, &[]))
            .await
            .unwrap();
    }
    let mut replicas = Vec::new();
    for id in ["a", "b"] {
        let mgr = Manager::builder(client.clone())
            .namespace(NS)
            .graceful_shutdown_timeout(Duration::from_secs(5))
            .build()
            .await
            .unwrap();
        FilterCopier {
            identity: id.to_string(),
            journal: Arc::clone(&journal),
        }
        .setup_sharded(&mgr, roomy("it-derived-filter", id))
        .unwrap();
        replicas.push(spawn_manager(&mgr));
    }
    let ring = Ring::new(["a", "b"]);
    let owner = |n: &str| {
        ring.owner(&format!("{NS}/{n}"))
            .unwrap_or_default()
            .to_string()
    };
    // Both replicas are in the ring once each has reconciled a ConfigMap
    // the two-replica ring gives it.
    eventually(
        Duration::from_secs(30),
        "every ConfigMap reconciled by its owner in the ring of a and b",
        || async {
            let reconciled = journal.reconciled.lock().clone();
            names
                .iter()
                .all(|n| reconciled.contains(&(owner(n), n.clone())))
                .then_some(())
        },
    )
    .await;
    let labelled_any = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|c| {
            c.labels()
                .keys()
                .any(|k| k.contains("sharding.informer-rs.io"))
        });
    assert!(!labelled_any, "filter mode labels nothing");
    delete_and_check_cleanup(&cms, &names, &journal, owner).await;
    assert_nothing_forbidden(&env, "the derived role");
    for (stop, run) in replicas {
        stop_manager(stop, run).await;
    }
}

/// Label mode with a user selector (`probe=1`): objects outside it are
/// never labelled, each replica's cache applies both selectors, an object
/// that leaves the selection loses its shard labels, and after a replica
/// joins no drain label stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_mode_labels_only_what_the_controller_selects_and_leaves_no_drain() {
    let env = envtest::TestEnv::start().await.unwrap();
    let client = env.client();
    let journal = Arc::new(Journal::default());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let probed: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    let others: Vec<String> = (0..10).map(|i| format!("q{i}")).collect();
    for n in &probed {
        cms.create(&PostParams::default(), &labelled(n, &[("probe", "1")]))
            .await
            .unwrap();
    }
    for n in &others {
        cms.create(&PostParams::default(), &labelled(n, &[("probe", "0")]))
            .await
            .unwrap();
    }
    // Selected by the label, but in a namespace the cache does not watch.
    let unwatched = "it-unwatched";
    let mut namespace = k8s_openapi::api::core::v1::Namespace::default();
    namespace.metadata.name = Some(unwatched.to_string());
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), unwatched);
    for n in &probed[..3] {
        let mut cm = labelled(n, &[("probe", "1")]);
        cm.metadata.namespace = Some(unwatched.to_string());
        elsewhere.create(&PostParams::default(), &cm).await.unwrap();
    }
    let a = replica(&client, "a", &journal, Some("probe=1")).await;
    let all_labelled = |owners: Ring, names: Vec<String>| {
        let cms = cms.clone();
        async move {
            let items = cms.list(&ListParams::default()).await.ok()?.items;
            for n in &names {
                let cm = items.iter().find(|c| &c.name_any() == n)?;
                let (shard, draining) = labels_of(cm);
                if shard.as_deref() != owners.owner(&format!("{NS}/{n}")) || draining {
                    return None;
                }
            }
            Some(items)
        }
    };
    let unlabelled = |items: &[ConfigMap], names: &[String]| {
        for cm in items.iter().filter(|c| names.contains(&c.name_any())) {
            assert_eq!(
                labels_of(cm),
                (None, false),
                "{} is outside the selection but labelled",
                cm.name_any()
            );
        }
    };
    let items = eventually(
        Duration::from_secs(20),
        "the probed ConfigMaps on a",
        || all_labelled(Ring::new(["a"]), probed.clone()),
    )
    .await;
    unlabelled(&items, &others);
    let outside_namespace = elsewhere.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(outside_namespace.len(), 3);
    unlabelled(&outside_namespace, &probed);

    // p0 leaves the selection: it leaves a's cache, and its labels go.
    let patch = serde_json::json!({"metadata": {"labels": {"probe": "0"}}});
    cms.patch("p0", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "p0 unlabelled", || async {
        let cm = cms.get("p0").await.ok()?;
        (labels_of(&cm) == (None, false)).then_some(())
    })
    .await;

    // b joins: objects move by the drain handshake; no drain stays.
    let b = replica(&client, "b", &journal, Some("probe=1")).await;
    let moved = probed[1..].to_vec();
    let items = eventually(
        Duration::from_secs(30),
        "the probed ConfigMaps on a and b, none draining",
        || all_labelled(Ring::new(["a", "b"]), moved.clone()),
    )
    .await;
    let mut outside = others.clone();
    outside.push("p0".to_string());
    unlabelled(&items, &outside);
    let outside_namespace = elsewhere.list(&ListParams::default()).await.unwrap().items;
    unlabelled(&outside_namespace, &probed);
    // Each replica caches what both selectors select: probe=1 and its shard.
    let ring = Ring::new(["a", "b"]);
    for (id, r) in [("a", &a), ("b", &b)] {
        let expected: std::collections::BTreeSet<String> = moved
            .iter()
            .filter(|n| ring.owner(&format!("{NS}/{n}")) == Some(id))
            .cloned()
            .collect();
        eventually(Duration::from_secs(10), "caches follow the labels", || {
            let now: std::collections::BTreeSet<String> = r
                .mgr
                .cache()
                .informer::<ConfigMap>()
                .list()
                .iter()
                .map(|c| c.name_any())
                .collect();
            let ok = now == expected;
            async move { ok.then_some(()) }
        })
        .await;
    }
    stop_manager(a.stop, a.run).await;
    stop_manager(b.stop, b.run).await;
}

/// Label mode labels and selects the owned kinds whether they are declared
/// on the controller builder before `.sharded(..)` or after it; the
/// shard's selector is merged with the user's own selector of a kind.
#[tokio::test]
async fn label_mode_takes_owned_kinds_declared_before_or_after_sharded() {
    use k8s_openapi::api::core::v1::Service;
    let env = envtest::TestEnv::start().await.unwrap();
    for (ring, before) in [("it-order-before", true), ("it-order-after", false)] {
        let mgr = Manager::builder(env.client())
            .cache_options::<Secret>(
                controller_runtime::informer_core::factory::InformerOptions::new()
                    .label_selector("team=a"),
            )
            .build()
            .await
            .unwrap();
        let config = ring_config(ring, "a").mode(ShardMode::Label);
        let shard = config.informer_options().label_selector.unwrap();
        // The user's selector and the shard's: both apply.
        let expected = |kind: &str| {
            if kind == "Secret" {
                format!("team=a,{shard}")
            } else {
                shard.clone()
            }
        };
        let membership = Membership::new(env.client(), config.clone()).unwrap();
        let copier = ShardedCopier {
            identity: "a".into(),
            journal: Arc::default(),
        };
        let builder = mgr.controller::<ConfigMap>().named(ring);
        let sharded = if before {
            builder
                .owns::<Secret>()
                .owns_metadata::<Service>()
                .sharded(&membership)
        } else {
            builder.sharded(&membership).owns::<Secret>()
        };
        sharded.complete(copier).unwrap();
        // The shard's selector was merged into the cache options of each kind.
        let kinds: &[&str] = if before {
            &["ConfigMap", "Secret", "Service"]
        } else {
            &["ConfigMap", "Secret"]
        };
        for kind in kinds {
            let options = mgr.cache().options_for_kind("", kind);
            assert_eq!(
                options.label_selector,
                Some(expected(kind)),
                "{ring}: {kind}"
            );
        }
        // And into the informers the controller watches through.
        mgr.informer_factory().start();
        let informers: Vec<String> = mgr.informer_factory().synced().into_keys().collect();
        mgr.informer_factory().shutdown().await;
        for kind in kinds {
            let plural = format!("/api/v1/{}s", kind.to_lowercase());
            let of_kind: Vec<&String> = informers.iter().filter(|k| k.contains(&plural)).collect();
            assert!(
                !of_kind.is_empty()
                    && of_kind
                        .iter()
                        .all(|k| k.ends_with(&format!("labels={}", expected(kind)))),
                "{ring}: {plural}: {informers:?}"
            );
        }
    }
}
