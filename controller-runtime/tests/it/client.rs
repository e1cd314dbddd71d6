//! Owner-reference, status and server-side-apply helpers on a real server.

use controller_runtime::client::{
    ClientError, apply, apply_status, patch_status, replace_status, set_controller_reference,
};
use envtest::TestEnv;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStatus};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_client::Api;
use kube_client::api::PostParams;

use crate::config_map;

// `spec` is an `Option` up to Kubernetes 1.36 and not from 1.37: `.into()`
// writes it under both.
#[allow(clippy::useless_conversion)]
fn deployment(name: &str) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = Some(name.into());
    d.metadata.namespace = Some("default".into());
    d.spec = DeploymentSpec {
        replicas: Some(2),
        selector: LabelSelector {
            match_labels: Some([("app".to_string(), name.to_string())].into()),
            ..Default::default()
        },
        template: Default::default(),
        ..Default::default()
    }
    .into();
    d
}

/// A fresh server holding Deployment `default/web`: (the server, an Api for
/// Deployments in `default`, the created Deployment).
async fn with_web() -> (TestEnv, Api<Deployment>, Deployment) {
    let env = TestEnv::start().await.unwrap();
    let deploys: Api<Deployment> = Api::namespaced(env.client(), "default");
    let created = deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    (env, deploys, created)
}

#[tokio::test]
async fn controller_reference_round_trips_and_second_controller_is_refused() {
    let (env, deploys, owner) = with_web().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let other = deploys
        .create(&PostParams::default(), &deployment("api"))
        .await
        .unwrap();
    let mut cm = config_map("default", "web-config");
    set_controller_reference(&owner, &mut cm).unwrap();
    let stored = cms.create(&PostParams::default(), &cm).await.unwrap();
    let refs = stored.metadata.owner_references.clone().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].uid, owner.metadata.uid.clone().unwrap());
    assert_eq!(refs[0].controller, Some(true));
    let mut again = stored.clone();
    let err = set_controller_reference(&other, &mut again).unwrap_err();
    assert!(matches!(err, ClientError::AlreadyControlled { .. }));
    assert!(
        err.to_string()
            .contains("default/web-config is already controlled by Deployment web"),
        "{err}"
    );
}

#[tokio::test]
async fn status_helpers_touch_only_status_and_detect_stale_writes() {
    let (_env, deploys, created) = with_web().await;
    let status = DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(2),
        ..Default::default()
    };
    let patched = patch_status(&deploys, "web", &status).await.unwrap();
    assert_eq!(patched.status.as_ref().unwrap().replicas, Some(2));
    assert_eq!(patched.spec, created.spec);
    assert_eq!(patched.metadata.generation, created.metadata.generation);

    let mut fresh = patched.clone();
    fresh.status.as_mut().unwrap().ready_replicas = Some(1);
    let replaced = replace_status(&deploys, &fresh).await.unwrap();
    assert_eq!(replaced.status.as_ref().unwrap().ready_replicas, Some(1));
    // `fresh` now carries an old resourceVersion.
    fresh.status.as_mut().unwrap().ready_replicas = Some(2);
    let err = replace_status(&deploys, &fresh).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
}

#[tokio::test]
async fn server_side_apply_creates_updates_and_forces_as_the_named_manager() {
    let env = TestEnv::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut desired = config_map("default", "applied");
    desired.data = Some([("mode".to_string(), "fast".to_string())].into());
    let created = apply(&cms, &desired, "operator-a", false).await.unwrap();
    assert_eq!(created.data.as_ref().unwrap()["mode"], "fast");

    // Re-applying what is already there is fine and idempotent in content.
    let again = apply(&cms, &created, "operator-a", false).await.unwrap();
    assert_eq!(again.data, created.data);

    // Another manager takes the field over with force; the requests carry
    // the field manager and the force flag the server needs to arbitrate.
    let mut theirs = config_map("default", "applied");
    theirs.data = Some([("mode".to_string(), "safe".to_string())].into());
    let forced = apply(&cms, &theirs, "operator-b", true).await.unwrap();
    assert_eq!(forced.data.unwrap()["mode"], "safe");
    let patches: Vec<_> = env
        .request_log()
        .into_iter()
        .filter(|r| r.method == http::Method::PATCH && r.path.ends_with("/configmaps/applied"))
        .map(|r| r.query)
        .collect();
    assert_eq!(patches.len(), 3, "{patches:?}");
    assert!(
        patches[0].contains("fieldManager=operator-a") && !patches[0].contains("force=true"),
        "{patches:?}"
    );
    assert!(
        patches[2].contains("fieldManager=operator-b") && patches[2].contains("force=true"),
        "{patches:?}"
    );
}

#[tokio::test]
async fn status_apply_sets_status_only() {
    let (_env, deploys, created) = with_web().await;
    let mut desired = Deployment::default();
    desired.metadata.name = Some("web".into());
    desired.metadata.namespace = Some("default".into());
    desired.status = Some(DeploymentStatus {
        available_replicas: Some(2),
        ..Default::default()
    });
    let out = apply_status(&deploys, &desired, "operator-a", true)
        .await
        .unwrap();
    assert_eq!(out.status.unwrap().available_replicas, Some(2));
    assert_eq!(out.spec, created.spec);
}
