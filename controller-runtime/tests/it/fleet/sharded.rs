//! A sharded fleet controller: three replicas (three managers in this
//! process, each engaging the same two member clusters through a static
//! provider) share the `(cluster, namespace, name)`s of ConfigMaps that
//! have the same names in both clusters. Every change is reconciled once,
//! by the replica the ring gives `cluster/namespace/name`; a replica that
//! stops hands its share to the survivors; label mode is refused. With
//! `engage_local_cluster`, the manager's own cluster's keys
//! (`/namespace/name`) are sharded too and a stopped replica's share of
//! them is taken over without any change to the objects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use controller_runtime::__test_support::Ring;
use controller_runtime::cluster::StaticProvider;
use controller_runtime::controller::{BuilderError, FleetController};
use controller_runtime::manager::Manager;
use controller_runtime::predicate::from_fn;
use controller_runtime::prelude::*;
use controller_runtime::sharding::config::ShardMode;
use controller_runtime::sharding::fleet::ShardedFleetExt;
use controller_runtime::sharding::membership::Membership;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::LONG;
use super::fixture::{fleet_manager_builder, hub_and_member, servers};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};
use crate::sharding::ring_config;
use crate::sharding_fleet::{Span, Timeline, check_no_overlap, last_seen};

const RING: &str = "it-fleet-sharded";
const CONTROLLER: &str = "fleet-sharded";
const LABEL: &str = "fleet-sharded-test";
const CLUSTERS: [&str; 2] = ["c0", "c1"];

/// Ends a span when the reconcile ends (also when it is aborted).
struct Ends(Arc<Timeline>, usize);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.spans.lock()[self.1].end = Some(Instant::now());
    }
}

/// Records each reconcile as `cluster/namespace/name` (the ring key:
/// `/namespace/name` in the manager's own cluster), with the `v` the
/// cluster's cache showed.
struct Recorder {
    replica: String,
    timeline: Arc<Timeline>,
}

impl ObjectReconciler<ConfigMap> for Recorder {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let key = format!(
            "{}/{}/{}",
            ctx.cluster(),
            cm.namespace().unwrap_or_default(),
            cm.name_any()
        );
        let seen = cm.data.as_ref().and_then(|d| d.get("v").cloned());
        let index = {
            let mut spans = self.timeline.spans.lock();
            spans.push(Span {
                replica: self.replica.clone(),
                key,
                seen: None,
                start: Instant::now(),
                end: None,
            });
            spans.len() - 1
        };
        let _end = Ends(Arc::clone(&self.timeline), index);
        // Long enough for two replicas' reconciles of one key to meet.
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.timeline.spans.lock()[index].seen = Some(seen.unwrap_or_default());
        Ok(Action::done())
    }
}

struct Replica {
    id: String,
    mgr: Manager,
    membership: Membership,
    controller: FleetController,
    stop: CancellationToken,
    task: JoinHandle<Result<(), ManagerError>>,
}

/// A manager on `own` engaging `members` by a static provider, with the
/// sharded fleet controller (reconciling `own` too when `hub`).
async fn replica(
    own: &TestEnv,
    members: &[&TestEnv],
    id: &str,
    timeline: &Arc<Timeline>,
    hub: bool,
) -> Replica {
    let provider = CLUSTERS
        .iter()
        .zip(members)
        .fold(StaticProvider::new(), |p, (name, env)| {
            p.client(*name, env.client())
        });
    let mgr = fleet_manager_builder(own)
        .provider(provider)
        .build()
        .await
        .unwrap();
    let mut config = ring_config(RING, id);
    config.namespace = own.namespace().to_owned();
    let membership = Membership::new(own.client(), config).unwrap();
    let mut builder = mgr.fleet_controller::<ConfigMap>();
    if hub {
        builder = builder.engage_local_cluster();
    }
    let controller = builder
        .named(CONTROLLER)
        .max_concurrent_reconciles(4)
        // Never a busy cluster's delayed retry: nothing is reconciled late.
        .max_concurrent_reconciles_per_cluster(4)
        .for_event_filter(from_fn(|cm: &ConfigMap| cm.labels().contains_key(LABEL)))
        .sharded(&membership)
        .complete(Recorder {
            replica: id.to_string(),
            timeline: Arc::clone(timeline),
        })
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    Replica {
        id: id.to_string(),
        mgr,
        membership,
        controller,
        stop,
        task,
    }
}

/// Sets `v` on every named, labelled ConfigMap of `env`.
async fn write_all(env: &TestEnv, names: &[String], v: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    for name in names {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {LABEL: "yes"}},
            "data": {"v": v},
        });
        api.patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&cm),
        )
        .await
        .unwrap();
    }
}

/// The ring key of every object: `cluster/namespace/name`.
fn keys(members: &[&TestEnv], names: &[String]) -> Vec<String> {
    CLUSTERS
        .iter()
        .zip(members)
        .flat_map(|(cluster, env)| {
            names
                .iter()
                .map(move |n| format!("{cluster}/{}/{n}", env.namespace()))
        })
        .collect()
}

fn owners(replicas: &[&str], keys: &[String]) -> BTreeMap<String, String> {
    let ring = Ring::new(replicas.iter().copied());
    keys.iter()
        .map(|k| (k.clone(), ring.owner(k).unwrap_or_default().to_string()))
        .collect()
}

/// Waits until every replica serves a settled epoch of `members`.
async fn settled(replicas: &[&Replica], members: &[&str]) {
    let check = format!("shard-{CONTROLLER}");
    eventually(LONG, &format!("a settled ring of {members:?}"), || async {
        replicas
            .iter()
            .all(|r| {
                r.membership.view().members() == members
                    && r.mgr.readyz_checks().run_one(&check) == Some(Ok(()))
            })
            .then_some(())
    })
    .await;
}

/// Waits until each key's last reconcile saw `v`, by its owner in `owners`,
/// and nothing is queued or running any more.
async fn converged(
    timeline: &Timeline,
    replicas: &[&Replica],
    owners: &BTreeMap<String, String>,
    v: &str,
) {
    eventually(LONG, &format!("every key reconciled at v={v}"), || async {
        let last = last_seen(timeline);
        let done = owners
            .iter()
            .all(|(k, owner)| last.get(k) == Some(&(owner.clone(), v.to_string())));
        let idle = replicas.iter().all(|r| r.controller.is_idle())
            && timeline.spans.lock().iter().all(|s| s.end.is_some());
        (done && idle).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_share_two_clusters_same_names_and_survivors_take_over() {
    if envtest::skip_on_existing_cluster("in-process member API servers") {
        return;
    }
    let [own, m0, m1] = servers().await;
    let members = [&m0, &m1];
    let names: Vec<String> = (0..12).map(|i| format!("same-{i}")).collect();
    let keys = keys(&members, &names);
    for env in members {
        write_all(env, &names, "0").await;
    }
    let timeline = Arc::new(Timeline::default());
    let mut replicas = Vec::new();
    for id in ["r1", "r2", "r3"] {
        replicas.push(replica(&own, &members, id, &timeline, false).await);
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    settled(&all, &["r1", "r2", "r3"]).await;
    let three = owners(&["r1", "r2", "r3"], &keys);
    converged(&timeline, &all, &three, "0").await;

    // One change to every object of both clusters: reconciled exactly once,
    // by its owner.
    let mark = timeline.spans.lock().len();
    for env in members {
        write_all(env, &names, "1").await;
    }
    converged(&timeline, &all, &three, "1").await;
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in &timeline.spans.lock()[mark..] {
        by_key
            .entry(s.key.clone())
            .or_default()
            .push(s.replica.clone());
    }
    for key in &keys {
        assert_eq!(
            by_key.get(key),
            Some(&vec![three[key].clone()]),
            "{key}: reconciled once, by its owner"
        );
    }
    assert_eq!(by_key.len(), keys.len(), "nothing else reconciled");
    let mut per_replica: BTreeMap<&str, usize> = BTreeMap::new();
    for owner in three.values() {
        *per_replica.entry(owner).or_default() += 1;
    }
    assert_eq!(
        per_replica.len(),
        3,
        "every replica owns some: {per_replica:?}"
    );
    let split = names.iter().any(|n| {
        three[&format!("c0/{}/{n}", m0.namespace())] != three[&format!("c1/{}/{n}", m1.namespace())]
    });
    assert!(
        split,
        "some name is owned by different replicas in c0 and c1"
    );

    // r2 stops: after a change, the survivors reconcile its share.
    let r2 = replicas.remove(1);
    assert_eq!(r2.id, "r2");
    stop_manager(r2.stop, r2.task).await;
    let stopped = Instant::now();
    for env in members {
        write_all(env, &names, "2").await;
    }
    let survivors: Vec<&Replica> = replicas.iter().collect();
    let two = owners(&["r1", "r3"], &keys);
    converged(&timeline, &survivors, &two, "2").await;
    settled(&survivors, &["r1", "r3"]).await;
    let moved = three.iter().filter(|(_, r)| *r == "r2").count();
    assert!(moved > 0);
    assert!(
        timeline
            .spans
            .lock()
            .iter()
            .all(|s| s.replica != "r2" || s.start < stopped),
        "a stopped replica reconciles nothing"
    );
    check_no_overlap(&timeline).unwrap();
    eprintln!(
        "sharded fleet controller: {} keys in 2 clusters over 3 replicas {per_replica:?}; \
         r2's {moved} keys taken over by r1 and r3",
        keys.len()
    );
    for r in replicas {
        stop_manager(r.stop, r.task).await;
    }
}

/// With `engage_local_cluster`, the manager's own cluster's keys are part
/// of the ring: when a replica stops, the survivor queues again, from its
/// caches, every key that moved to it, the hub's as well as the member's,
/// and reconciles them with no change to the objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_replicas_hub_keys_are_taken_over_too() {
    if envtest::skip_on_existing_cluster("in-process member API servers") {
        return;
    }
    let (own, member) = hub_and_member().await;
    let names: Vec<String> = (0..12).map(|i| format!("hub-{i}")).collect();
    write_all(&own, &names, "0").await;
    write_all(&member, &names, "0").await;
    let mut keys = keys(&[&member], &names);
    keys.extend(names.iter().map(|n| format!("/{}/{n}", own.namespace())));
    let timeline = Arc::new(Timeline::default());
    let mut replicas = Vec::new();
    for id in ["r1", "r2"] {
        replicas.push(replica(&own, &[&member], id, &timeline, true).await);
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    settled(&all, &["r1", "r2"]).await;
    let both = owners(&["r1", "r2"], &keys);
    converged(&timeline, &all, &both, "0").await;
    let hub_keys_of_r2 = both
        .iter()
        .filter(|(k, r)| k.starts_with('/') && *r == "r2")
        .count();
    assert!(
        hub_keys_of_r2 > 0,
        "r2 owns some of the hub's keys: {both:?}"
    );

    // r2 stops; nothing changes: r1 reconciles r2's share from its caches.
    let mark = timeline.spans.lock().len();
    let r2 = replicas.remove(1);
    stop_manager(r2.stop, r2.task).await;
    let survivor: Vec<&Replica> = replicas.iter().collect();
    settled(&survivor, &["r1"]).await;
    let taken: Vec<&String> = both
        .iter()
        .filter(|(_, r)| *r == "r2")
        .map(|(k, _)| k)
        .collect();
    eventually(LONG, "r1 reconciles every key r2 had", || async {
        let spans = timeline.spans.lock();
        taken
            .iter()
            .all(|k| {
                spans[mark..]
                    .iter()
                    .any(|s| &&s.key == k && s.replica == "r1")
            })
            .then_some(())
    })
    .await;
    for r in replicas {
        stop_manager(r.stop, r.task).await;
    }
}

#[tokio::test]
async fn a_fleet_controller_sharded_in_label_mode_is_refused() {
    let own = TestEnv::start().await.unwrap();
    let mgr = Manager::builder(own.client()).build().await.unwrap();
    let mut config = ring_config("it-fleet-label", "r1").mode(ShardMode::Label);
    config.namespace = own.namespace().to_owned();
    let membership = Membership::new(own.client(), config).unwrap();
    let timeline = Arc::new(Timeline::default());
    let result = mgr
        .fleet_controller::<ConfigMap>()
        .named("labelled")
        .sharded(&membership)
        .complete(Recorder {
            replica: "r1".into(),
            timeline,
        });
    match result {
        Err(ManagerError::Controller(BuilderError::FleetLabelMode { controller, ring })) => {
            assert_eq!(
                (controller.as_str(), ring.as_str()),
                ("labelled", "it-fleet-label")
            );
        }
        other => panic!("expected FleetLabelMode, got {other:?}"),
    }
    // Nothing was registered: the name is free for a filter-mode one.
    let filter = Membership::new(own.client(), ring_config("it-fleet-label-f", "r1")).unwrap();
    mgr.fleet_controller::<ConfigMap>()
        .named("labelled")
        .sharded(&filter)
        .complete(Recorder {
            replica: "r1".into(),
            timeline: Arc::new(Timeline::default()),
        })
        .unwrap();
}
