//! A fleet controller over five envtest clusters engaged and disengaged
//! while their objects change: each change is reconciled in its own
//! cluster, through that cluster's client, and nothing leaks across (an
//! owned object deleted in one cluster is made again there); a
//! disengaged cluster's informers stop; a cluster whose API server dies
//! never stops the manager, and the others keep converging.

use std::collections::BTreeMap;
use std::sync::Arc;

use controller_runtime::cluster::ClusterHealth;
use controller_runtime::manager::Manager;
use controller_runtime::predicate::from_fn;
use controller_runtime::prelude::*;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use serde_json::json;

use super::fixture::{Seen, fleet_manager, hub_member_manager, servers};
use super::{LONG, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

const LABEL: &str = "fleet-test";

/// Mirrors each labelled ConfigMap `x` into `mirror-x` in the same cluster,
/// adding the cluster's name, and notes where it reconciled what.
#[derive(Default)]
struct Mirror {
    seen: Mutex<Vec<(String, String)>>,
}

impl ObjectReconciler<ConfigMap> for Mirror {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let cluster = match ctx.cluster() {
            "" => "none",
            member => member,
        }
        .to_string();
        self.seen.lock().push((cluster.clone(), cm.name_any()));
        let mut data = cm.data.clone().unwrap_or_default();
        data.insert("cluster".into(), cluster);
        let owner = json!({
            "apiVersion": "v1", "kind": "ConfigMap", "name": cm.name_any(),
            "uid": cm.uid().unwrap_or_default(), "controller": true,
        });
        let mirror = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("mirror-{}", cm.name_any()), "ownerReferences": [owner]},
            "data": data,
        });
        ctx.api()
            .patch(
                &format!("mirror-{}", cm.name_any()),
                &PatchParams::apply("fleet-test").force(),
                &Patch::Apply(&mirror),
            )
            .await?;
        Ok(Action::done())
    }
}

fn source(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {LABEL: "src"}},
        "data": {"v": value},
    }))
    .unwrap()
}

/// Creates or updates the labelled ConfigMap `name` with `v: value`.
async fn put(env: &TestEnv, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let cm = source(name, value);
    api.patch(
        name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": cm.metadata, "data": cm.data,
        })),
    )
    .await
    .unwrap();
}

/// The data of `mirror-<name>` in `env`, if it exists.
async fn mirror(env: &TestEnv, name: &str) -> Option<BTreeMap<String, String>> {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let cm = api.get_opt(&format!("mirror-{name}")).await.unwrap()?;
    Some(cm.data.unwrap_or_default())
}

/// Waits until `mirror-<name>` in `env` says `v: value` from `cluster`.
async fn converged(env: &TestEnv, cluster: &str, name: &str, value: &str) {
    eventually(
        LONG,
        &format!("{cluster}: mirror-{name} = {value}"),
        || async {
            let data = mirror(env, name).await?;
            (data.get("v").map(String::as_str) == Some(value)
                && data.get("cluster").map(String::as_str) == Some(cluster))
            .then_some(())
        },
    )
    .await;
}

/// A manager on `own` with the fleet controller `mirror`.
async fn mirror_manager(own: &TestEnv) -> (Manager, Arc<Mirror>) {
    let mgr = fleet_manager(own).await;
    let journal = Arc::new(Mirror::default());
    mgr.fleet_controller::<ConfigMap>()
        .named("mirror")
        .max_concurrent_reconciles(4)
        .for_event_filter(from_fn(|cm: &ConfigMap| cm.labels().contains_key(LABEL)))
        .owns::<ConfigMap>()
        .complete(Arc::clone(&journal))
        .unwrap();
    (mgr, journal)
}

fn name(i: usize) -> String {
    format!("c{i}")
}

#[tokio::test]
async fn five_clusters_engaged_and_disengaged_while_objects_change() {
    if envtest::skip_on_existing_cluster("five in-process API servers") {
        return;
    }
    let own = TestEnv::start().await.unwrap();
    let mut envs = Vec::new();
    for _ in 0..5 {
        envs.push(TestEnv::start().await.unwrap());
    }
    let (mgr, journal) = mirror_manager(&own).await;
    let (stop, task) = spawn_manager(&mgr);

    // Three engaged; objects in all five, one name shared by every cluster.
    for (i, env) in envs.iter().enumerate().take(3) {
        mgr.fleet().engage(&name(i), env.client()).unwrap();
    }
    for (i, env) in envs.iter().enumerate() {
        put(env, "shared", &format!("{i}-1")).await;
        put(env, &format!("only-{i}"), "x").await;
    }
    for (i, env) in envs.iter().enumerate().take(3) {
        converged(env, &name(i), "shared", &format!("{i}-1")).await;
        converged(env, &name(i), &format!("only-{i}"), "x").await;
    }
    for env in &envs[3..] {
        assert_eq!(mirror(env, "shared").await, None, "not engaged: untouched");
    }

    // The other two join; every cluster changes at once.
    for (i, env) in envs.iter().enumerate().skip(3) {
        mgr.fleet().engage(&name(i), env.client()).unwrap();
        converged(env, &name(i), "shared", &format!("{i}-1")).await;
    }
    futures::future::join_all(
        envs.iter()
            .enumerate()
            .map(|(i, env)| async move { put(env, "shared", &format!("{i}-2")).await }),
    )
    .await;
    for (i, env) in envs.iter().enumerate() {
        converged(env, &name(i), "shared", &format!("{i}-2")).await;
    }
    // Nothing leaked: each cluster holds its own objects' mirrors alone.
    for (i, env) in envs.iter().enumerate() {
        for j in (0..5).filter(|j| *j != i) {
            assert_eq!(
                mirror(env, &format!("only-{j}")).await,
                None,
                "c{j} leaked into c{i}"
            );
        }
    }
    for (cluster, object) in journal.seen.lock().iter() {
        if let Some(j) = object.strip_prefix("only-") {
            assert_eq!(
                cluster,
                &format!("c{j}"),
                "{object} reconciled in {cluster}"
            );
        }
    }
    let metrics = mgr.metrics().encode().unwrap();
    assert!(
        metrics.contains(
            "controller_runtime_fleet_reconcile_total{cluster=\"c1\",controller=\"mirror\",result=\"success\"}"
        ),
        "{metrics}"
    );

    // `owns` watches each cluster: a mirror deleted in c2 is made again
    // there, by c2's reconcile.
    let mirrors: Api<ConfigMap> = Api::namespaced(envs[2].client(), envs[2].namespace());
    mirrors
        .delete("mirror-shared", &DeleteParams::default())
        .await
        .unwrap();
    converged(&envs[2], "c2", "shared", "2-2").await;

    // c1 leaves: its informers stop, its series go, its changes are not seen.
    let c1 = mgr.fleet().get("c1").unwrap();
    assert!(!c1.informer_factory().synced().is_empty());
    assert!(mgr.fleet().disengage("c1").await);
    assert!(
        c1.informer_factory().synced().is_empty(),
        "c1's informers stopped"
    );
    assert!(!c1.cache().is_started());
    let metrics = mgr.metrics().encode().unwrap();
    assert!(!metrics.contains("cluster=\"c1\""), "c1's series removed");
    put(&envs[1], "shared", "1-3").await;
    put(&envs[0], "shared", "0-3").await;
    converged(&envs[0], "c0", "shared", "0-3").await;
    assert_eq!(
        mirror(&envs[1], "shared")
            .await
            .unwrap()
            .get("v")
            .map(String::as_str),
        Some("1-2"),
        "a disengaged cluster is not reconciled"
    );

    // c1 comes back and catches up.
    mgr.fleet().engage("c1", envs[1].client()).unwrap();
    converged(&envs[1], "c1", "shared", "1-3").await;

    stop_manager(stop, task).await;
}

#[tokio::test]
async fn a_cluster_whose_server_dies_never_stops_the_manager() {
    if envtest::skip_on_existing_cluster("in-process API servers that die") {
        return;
    }
    let [own, c0, c1] = servers().await;
    let doomed = TestEnv::start().await.unwrap();
    let (mgr, _) = mirror_manager(&own).await;
    mgr.fleet().readyz_threshold(0);
    let (stop, task) = spawn_manager(&mgr);
    mgr.fleet().engage("c0", c0.client()).unwrap();
    mgr.fleet().engage("c1", c1.client()).unwrap();
    mgr.fleet().engage("doomed", doomed.client()).unwrap();
    for (env, cluster) in [(&c0, "c0"), (&c1, "c1"), (&doomed, "doomed")] {
        put(env, "shared", "1").await;
        converged(env, cluster, "shared", "1").await;
    }

    drop(doomed);
    eventually(LONG, "the dead cluster reported failing", || async {
        matches!(
            mgr.fleet().health("doomed"),
            Some(ClusterHealth::Failing { .. })
        )
        .then_some(())
    })
    .await;
    for (env, cluster) in [(&c0, "c0"), (&c1, "c1")] {
        put(env, "shared", "2").await;
        converged(env, cluster, "shared", "2").await;
    }
    assert!(ready(&mgr, "c0") && ready(&mgr, "c1"));
    let readiness = mgr.readyz_checks().run_one("fleet clusters").unwrap();
    assert!(readiness.unwrap_err().contains("doomed ("));
    assert!(!task.is_finished(), "the manager runs on");

    // Disengaging the dead cluster stops it cleanly; then all is ready.
    assert!(mgr.fleet().disengage("doomed").await);
    assert_eq!(mgr.readyz_checks().run_one("fleet clusters"), Some(Ok(())));
    put(&c1, "shared", "3").await;
    converged(&c1, "c1", "shared", "3").await;

    stop_manager(stop, task).await;
}

/// `owns_metadata` on the fleet builder: a Secret made in a member with a
/// ConfigMap as its controller owner reconciles that ConfigMap there.
#[tokio::test]
async fn a_fleet_controller_owns_by_metadata_in_each_member() {
    use k8s_openapi::api::core::v1::Secret;
    let Some((_own, member, mgr)) = hub_member_manager().await else {
        return;
    };
    let seen = Arc::new(Seen::default());
    mgr.fleet_controller::<ConfigMap>()
        .named("meta-owner")
        .owns_metadata::<Secret>()
        .complete(Arc::clone(&seen))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    mgr.fleet().engage("m", member.client()).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(member.client(), member.namespace());
    let owner = cms
        .create(&PostParams::default(), &source("owner", "1"))
        .await
        .unwrap();
    let reconciles = || seen.count("owner");
    eventually(LONG, "the owner reconciled", || async {
        (reconciles() > 0).then_some(())
    })
    .await;
    let before = reconciles();
    let mut secret = Secret::default();
    secret.metadata.name = Some("owned".into());
    secret.metadata.owner_references = owner.controller_owner_ref(&()).map(|o| vec![o]);
    Api::<Secret>::namespaced(member.client(), member.namespace())
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    eventually(LONG, "the owner reconciled for its Secret", || async {
        (reconciles() > before).then_some(())
    })
    .await;
    stop_manager(stop, task).await;
}
