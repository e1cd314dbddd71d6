//! Providers engage clusters while the manager runs: a static list (a
//! client, kubeconfigs) and kubeconfigs in labelled Secrets of the
//! manager's own cluster, watched. A cluster that is unreachable, refuses
//! the credentials or forbids the informers' lists is retried and reported
//! without stopping the manager or the others.

use controller_runtime::cluster::{ClusterHealth, SecretProvider, StaticProvider};
use controller_runtime::prelude::*;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube_client::api::{DeleteParams, PostParams};
use kube_client::config::Kubeconfig;

use super::fixture::{
    Nothing, configmap_controller, fleet_manager_builder, hub_and_member, hub_member_manager,
    kubeconfig_secret, servers,
};
use super::{LONG, failures, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

#[tokio::test]
async fn static_clusters_are_engaged_and_failing_ones_retried_and_reported() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let (own, member) = hub_and_member().await;
    let guarded = TestEnv::builder()
        .bearer_token("right")
        .start()
        .await
        .unwrap();
    let wrong_token = envtest::kubeconfig_yaml_with_token(guarded.base_url(), Some("wrong"));
    let dead = TestEnv::start().await.unwrap();
    let dead_client = dead.client();
    drop(dead);

    let mgr = fleet_manager_builder(&own)
        .provider(
            StaticProvider::new()
                .client("member", member.client())
                .kubeconfig("unauthorized", Kubeconfig::from_yaml(&wrong_token).unwrap())
                .client("dead", dead_client),
        )
        .build()
        .await
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);

    eventually(LONG, "member answers, the others failed twice", || async {
        (ready(&mgr, "member")
            && failures(&mgr, "unauthorized") >= 2
            && failures(&mgr, "dead") >= 2)
            .then_some(())
    })
    .await;
    assert_eq!(mgr.fleet().names(), ["dead", "member", "unauthorized"]);
    assert_eq!(
        mgr.readyz_checks().run_one("fleet clusters"),
        None,
        "members' health stays out of /readyz unless asked"
    );
    mgr.fleet().readyz_threshold(2);
    assert_eq!(
        mgr.readyz_checks().run_one("fleet clusters"),
        Some(Ok(())),
        "two members down, two allowed"
    );
    mgr.fleet().readyz_threshold(1);
    let readiness = mgr.readyz_checks().run_one("fleet clusters").unwrap();
    let message = readiness.unwrap_err();
    assert!(
        message.contains("unauthorized (") && message.contains("dead ("),
        "{message}"
    );
    assert!(!message.contains("member"), "{message}");
    assert!(message.contains("401"), "the 401 is named: {message}");
    let metrics = mgr.metrics().encode().unwrap();
    assert!(
        metrics.contains("controller_runtime_fleet_cluster_ready{cluster=\"member\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("controller_runtime_fleet_cluster_ready{cluster=\"dead\"} 0"));
    assert!(metrics.contains("controller_runtime_fleet_clusters_engaged 3"));
    assert!(
        !task.is_finished(),
        "failing clusters do not stop the manager"
    );

    stop_manager(stop, task).await;
    assert!(mgr.fleet().names().is_empty(), "stopping disengages all");
    let metrics = mgr.metrics().encode().unwrap();
    assert!(
        !metrics.contains("cluster=\"member\""),
        "a disengaged cluster's series are removed: {metrics}"
    );
}

fn cluster_secret(name: &str, labelled: bool, kubeconfig: &str) -> Secret {
    let labels: &[(&str, &str)] = if labelled {
        &[("fleet", "member")]
    } else {
        &[]
    };
    kubeconfig_secret(name, labels, "kubeconfig", kubeconfig)
}

#[tokio::test]
async fn labelled_secrets_engage_clusters_and_deleting_one_disengages_it() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let [own, a, b] = servers().await;
    let ns = own.namespace().to_string();
    let secrets: Api<Secret> = Api::namespaced(own.client(), &ns);
    let mgr = fleet_manager_builder(&own)
        .provider(SecretProvider::new(own.client(), &ns, "fleet=member"))
        .build()
        .await
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);

    let pp = PostParams::default();
    for secret in [
        cluster_secret("a", true, &a.kubeconfig_yaml()),
        cluster_secret("b", true, &b.kubeconfig_yaml()),
        cluster_secret("broken", true, "{not: a kubeconfig"),
        cluster_secret("unlabelled", false, &a.kubeconfig_yaml()),
    ] {
        secrets.create(&pp, &secret).await.unwrap();
    }
    eventually(LONG, "a and b engaged and answering", || async {
        (ready(&mgr, "a") && ready(&mgr, "b")).then_some(())
    })
    .await;
    assert_eq!(
        mgr.fleet().names(),
        ["a", "b"],
        "broken and unlabelled skipped"
    );

    // Cluster a's informers run (one asked for here), then stop with it.
    let cluster_a = mgr.fleet().get("a").unwrap();
    let _informer = cluster_a.cache().informer::<ConfigMap>();
    cluster_a.informer_factory().start();
    eventually(LONG, "a's informer synced", || async {
        let synced = cluster_a.informer_factory().synced();
        (!synced.is_empty() && synced.values().all(|s| *s)).then_some(())
    })
    .await;
    secrets.delete("a", &DeleteParams::default()).await.unwrap();
    eventually(LONG, "a disengaged", || async {
        (mgr.fleet().names() == ["b"]).then_some(())
    })
    .await;
    assert!(
        cluster_a.informer_factory().synced().is_empty(),
        "a's informers stopped"
    );
    assert!(!cluster_a.cache().is_started());
    assert!(ready(&mgr, "b"), "b goes on");

    // b's Secret now holds a's kubeconfig: b is engaged anew, reaching a.
    let marker = Api::<ConfigMap>::namespaced(a.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("only-in-a".into());
    marker.create(&pp, &cm).await.unwrap();
    let old_b = mgr.fleet().get("b").unwrap();
    let mut moved = cluster_secret("b", true, &a.kubeconfig_yaml());
    moved.metadata.resource_version = secrets.get("b").await.unwrap().metadata.resource_version;
    secrets.replace("b", &pp, &moved).await.unwrap();
    eventually(LONG, "b engaged anew, reaching a", || async {
        let b = mgr.fleet().get("b")?;
        let reached = Api::<ConfigMap>::namespaced(b.client(), "default");
        reached.get_opt("only-in-a").await.ok()?.map(|_| ())
    })
    .await;
    assert!(!old_b.cache().is_started(), "the old b stopped");

    stop_manager(stop, task).await;
}

/// A ClusterRole granting `verbs` on ConfigMaps.
fn configmaps_role(verbs: &[&str]) -> ClusterRole {
    let mut role = ClusterRole::default();
    role.metadata.name = Some("fleet-test-configmaps".into());
    role.rules = Some(vec![PolicyRule {
        api_groups: Some(vec!["".into()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }]);
    role
}

#[tokio::test]
async fn a_member_that_forbids_listing_is_failing_until_it_permits_it() {
    let Some((_own, member, mgr)) = hub_member_manager().await else {
        return;
    };
    // The member's identity may get ConfigMaps, not list or watch them.
    let restricted = member
        .client_with_cluster_role("default", "fleet-test", &configmaps_role(&["get"]))
        .await
        .unwrap();
    configmap_controller(&mgr, "nothing", Nothing);
    mgr.fleet().readyz_threshold(0);
    let (stop, task) = spawn_manager(&mgr);
    mgr.fleet().engage("member", restricted).unwrap();

    let error = eventually(LONG, "member failing for the 403", || async {
        match mgr.fleet().health("member") {
            Some(ClusterHealth::Failing { error, .. }) => Some(error),
            _ => None,
        }
    })
    .await;
    assert!(error.contains("forbidden (403) to list"), "{error}");
    let readiness = mgr.readyz_checks().run_one("fleet clusters").unwrap();
    assert!(readiness.unwrap_err().contains("member (forbidden"));
    let metrics = mgr.metrics().encode().unwrap();
    assert!(
        metrics.contains("controller_runtime_fleet_cluster_ready{cluster=\"member\"} 0"),
        "{metrics}"
    );

    // Permitted: its informer lists, and the member is ready again.
    let roles: Api<ClusterRole> = Api::all(member.client());
    roles
        .patch(
            "fleet-test-configmaps",
            &PatchParams::apply("fleet-test").force(),
            &Patch::Apply(&configmaps_role(&["get", "list", "watch"])),
        )
        .await
        .unwrap();
    eventually(LONG, "member ready once permitted", || async {
        ready(&mgr, "member").then_some(())
    })
    .await;
    assert_eq!(mgr.readyz_checks().run_one("fleet clusters"), Some(Ok(())));
    stop_manager(stop, task).await;
}
