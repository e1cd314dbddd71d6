//! What decides that a cluster enters the fleet: the fleet's filter (by
//! name, and by the labels a provider gives: a `SecretProvider`'s are the
//! Secret's), engage hooks (one that fails keeps the member out, reported
//! `Failing` and retried, until it succeeds), and a provider of one's own
//! written as an `async fn` that makes its clients with
//! `MemberClientOptions`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use controller_runtime::BoxError;
use controller_runtime::CancellationToken;
use controller_runtime::cluster::{
    ClusterHealth, ClusterInfo, Fleet, FleetError, MemberClientOptions, Provider, SecretProvider,
    StaticProvider,
};
use controller_runtime::prelude::*;
use k8s_openapi::api::core::v1::Secret;
use kube_client::api::PostParams;

use super::fixture::{
    Seen, configmap_controller, create, fleet_manager_builder, hub_and_member, hub_member_manager,
    kubeconfig_secret, servers, version_looks,
};
use super::{LONG, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

#[tokio::test]
async fn a_failing_engage_hook_keeps_the_member_out_until_it_succeeds() {
    let Some((_own, member, mgr)) = hub_member_manager().await else {
        return;
    };
    let seen = Arc::new(Seen::default());
    configmap_controller(&mgr, "seen", Arc::clone(&seen));
    let calls = Arc::new(AtomicUsize::new(0));
    let allow = Arc::new(AtomicBool::new(false));
    mgr.fleet().on_engage("gate", {
        let (calls, allow) = (Arc::clone(&calls), Arc::clone(&allow));
        move |cluster| {
            let (calls, allow) = (Arc::clone(&calls), Arc::clone(&allow));
            async move {
                assert_eq!(cluster.name(), "member");
                assert!(
                    !cluster.cache().is_started(),
                    "hooked before it is attached"
                );
                // The hook reaches the member through its client.
                cluster.client().apiserver_version().await?;
                calls.fetch_add(1, Ordering::SeqCst);
                if allow.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err::<(), BoxError>("the member is not prepared yet".into())
                }
            }
        }
    });
    let (stop, task) = spawn_manager(&mgr);
    let cluster = mgr.fleet().engage("member", member.client()).unwrap();
    create(&member, "early").await;

    let error = eventually(LONG, "the hook failed three times", || async {
        match mgr.fleet().health("member") {
            Some(ClusterHealth::Failing { failures, error }) if failures >= 3 => Some(error),
            _ => None,
        }
    })
    .await;
    assert!(
        error.contains("engage hook \"gate\" failed: the member is not prepared yet"),
        "{error}"
    );
    assert!(calls.load(Ordering::SeqCst) >= 3, "retried");
    assert!(!cluster.cache().is_started(), "kept out: not attached");
    // The controller's informers are requested in it (warm on every
    // replica), none started.
    assert!(
        cluster.informer_factory().synced().is_empty(),
        "no informer started in it"
    );
    assert!(!seen.has("early"));

    allow.store(true, Ordering::SeqCst);
    eventually(
        LONG,
        "the member reconciled once the hook succeeds",
        || async { (ready(&mgr, "member") && seen.has("early")).then_some(()) },
    )
    .await;
    // Once per engagement: later looks do not run it again.
    let (hooked, looks) = (calls.load(Ordering::SeqCst), version_looks(&member));
    eventually(LONG, "five more looks", || async {
        (version_looks(&member) >= looks + 5).then_some(())
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), hooked);
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn the_filter_decides_by_name_and_by_the_secrets_labels() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let [own, eu, us, listed] = servers().await;
    let secrets: Api<Secret> = Api::namespaced(own.client(), own.namespace());
    for (name, region, env) in [("edge-eu", "eu", &eu), ("edge-us", "us", &us)] {
        secrets
            .create(
                &PostParams::default(),
                &kubeconfig_secret(
                    name,
                    &[("fleet", "member"), ("region", region)],
                    "kubeconfig",
                    &env.kubeconfig_yaml(),
                ),
            )
            .await
            .unwrap();
    }
    let mgr = fleet_manager_builder(&own)
        .provider(SecretProvider::new(
            own.client(),
            own.namespace(),
            "fleet=member",
        ))
        .provider(
            StaticProvider::new()
                .client("static-in", listed.client())
                .client("static-out", listed.client()),
        )
        .build()
        .await
        .unwrap();
    mgr.fleet()
        .filter(|c| c.label("region") == Some("eu") || c.name() == "static-in");
    let (stop, task) = spawn_manager(&mgr);

    eventually(LONG, "the admitted clusters ready", || async {
        (ready(&mgr, "edge-eu") && ready(&mgr, "static-in")).then_some(())
    })
    .await;
    assert_eq!(mgr.fleet().names(), ["edge-eu", "static-in"]);
    assert!(!task.is_finished(), "a filtered cluster stops no provider");
    assert!(matches!(
        mgr.fleet().engage("by-hand", listed.client()),
        Err(FleetError::Filtered(name)) if name == "by-hand"
    ));

    // The Secret's labels change: the filter decides again.
    let mut moved = secrets.get("edge-us").await.unwrap();
    moved
        .metadata
        .labels
        .get_or_insert_default()
        .insert("region".into(), "eu".into());
    secrets
        .replace("edge-us", &PostParams::default(), &moved)
        .await
        .unwrap();
    eventually(LONG, "the relabelled cluster engaged", || async {
        ready(&mgr, "edge-us").then_some(())
    })
    .await;
    stop_manager(stop, task).await;
}

/// A provider of one's own, its `run` an `async fn`: engages one cluster
/// from a kubeconfig through `MemberClientOptions`, with a label.
struct OneKubeconfig {
    name: String,
    yaml: String,
}

impl Provider for OneKubeconfig {
    fn name(&self) -> String {
        format!("one kubeconfig {}", self.name)
    }

    async fn run(&self, fleet: Fleet, stop: CancellationToken) -> Result<(), BoxError> {
        let client = MemberClientOptions::new()
            .client_from_yaml(&self.name, self.yaml.as_bytes())
            .await?;
        let labels = BTreeMap::from([("source".to_string(), "mine".to_string())]);
        fleet.engage_with(ClusterInfo::new(&self.name).with_labels(labels), client)?;
        stop.cancelled().await;
        Ok(())
    }
}

#[tokio::test]
async fn a_provider_of_ones_own_is_an_async_fn() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let (own, member) = hub_and_member().await;
    let mgr = fleet_manager_builder(&own)
        .provider(OneKubeconfig {
            name: "mine".into(),
            yaml: member.kubeconfig_yaml(),
        })
        .build()
        .await
        .unwrap();
    let labelled = Arc::new(AtomicBool::new(false));
    mgr.fleet().filter({
        let labelled = Arc::clone(&labelled);
        move |c| {
            labelled.store(c.label("source") == Some("mine"), Ordering::SeqCst);
            true
        }
    });
    let seen = Arc::new(Seen::default());
    configmap_controller(&mgr, "seen", Arc::clone(&seen));
    let (stop, task) = spawn_manager(&mgr);
    create(&member, "from-mine").await;
    eventually(LONG, "the provider's cluster reconciled", || async {
        seen.has("from-mine").then_some(())
    })
    .await;
    assert!(
        labelled.load(Ordering::SeqCst),
        "its labels reached the filter"
    );
    stop_manager(stop, task).await;
}
