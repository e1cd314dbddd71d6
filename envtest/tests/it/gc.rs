//! Owner-reference garbage collection: background, foreground, orphan.

use crate::{cm, status};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube_client::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn owned_by(name: &str, owners: &[&ConfigMap]) -> ConfigMap {
    let mut c = cm(name, &[], "1");
    c.metadata.owner_references = Some(
        owners
            .iter()
            .map(|o| OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: o.metadata.name.clone().unwrap(),
                uid: o.metadata.uid.clone().unwrap(),
                ..OwnerReference::default()
            })
            .collect(),
    );
    c
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let pp = PostParams::default();
    let owner = api.create(&pp, &cm("owner", &[], "1")).await.unwrap();
    let other = api.create(&pp, &cm("other", &[], "1")).await.unwrap();
    api.create(&pp, &owned_by("child", &[&owner]))
        .await
        .unwrap();
    let grandchild_owner = api.get("child").await.unwrap();
    api.create(&pp, &owned_by("grandchild", &[&grandchild_owner]))
        .await
        .unwrap();
    api.create(&pp, &owned_by("shared", &[&owner, &other]))
        .await
        .unwrap();

    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert!(api.get_opt("child").await.unwrap().is_none());
    assert!(
        api.get_opt("grandchild").await.unwrap().is_none(),
        "collection cascades"
    );
    let shared = api.get("shared").await.unwrap();
    let refs = shared.metadata.owner_references.unwrap();
    assert_eq!(
        refs.len(),
        1,
        "a dependent with another owner only loses the dangling reference"
    );
    assert_eq!(refs[0].name, "other");
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let pp = PostParams::default();
    let owner = api.create(&pp, &cm("owner", &[], "1")).await.unwrap();
    let mut held = owned_by("held", &[&owner]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&pp, &held).await.unwrap();
    api.create(&pp, &owned_by("free", &[&owner])).await.unwrap();

    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let o = api.get("owner").await.unwrap();
    assert!(o.metadata.deletion_timestamp.is_some());
    assert_eq!(
        o.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    assert!(api.get_opt("free").await.unwrap().is_none());
    assert!(
        api.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        status(api.get("owner").await.unwrap_err()).code,
        404,
        "the owner goes with its last dependent"
    );
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let pp = PostParams::default();
    let owner = api.create(&pp, &cm("owner", &[], "1")).await.unwrap();
    api.create(&pp, &owned_by("child", &[&owner]))
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::orphan()).await.unwrap();
    let child = api.get("child").await.unwrap();
    assert!(child.metadata.owner_references.is_none());
    assert!(api.get_opt("owner").await.unwrap().is_none());
}

/// Wait (up to [`crate::WAIT`]) until `cond` holds for the object `name`.
async fn eventually(api: &Api<ConfigMap>, name: &str, cond: impl Fn(Option<&ConfigMap>) -> bool) {
    let deadline = std::time::Instant::now() + crate::WAIT;
    loop {
        let now = api.get_opt(name).await.unwrap();
        if cond(now.as_ref()) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} never reached the expected state: {now:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn dependents_whose_owner_does_not_exist_are_collected() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let pp = PostParams::default();
    let owner = api.create(&pp, &cm("owner", &[], "1")).await.unwrap();
    let mut ghost = cm("ghost", &[], "1");
    ghost.metadata.uid = Some("00000000-0000-0000-0000-000000000000".into());
    let mut impostor = owner.clone();
    impostor.metadata.uid = Some("11111111-1111-1111-1111-111111111111".into());

    api.create(&pp, &owned_by("no-such-owner", &[&ghost]))
        .await
        .unwrap();
    api.create(&pp, &owned_by("wrong-uid", &[&impostor]))
        .await
        .unwrap();
    api.create(&pp, &owned_by("half-real", &[&owner, &ghost]))
        .await
        .unwrap();
    api.create(&pp, &owned_by("real", &[&owner])).await.unwrap();

    eventually(&api, "no-such-owner", |c| c.is_none()).await;
    eventually(&api, "wrong-uid", |c| c.is_none()).await;
    eventually(&api, "half-real", |c| {
        c.and_then(|c| c.metadata.owner_references.as_ref())
            .is_some_and(|r| r.len() == 1 && r[0].name == "owner")
    })
    .await;
    let real = api.get("real").await.unwrap();
    assert_eq!(real.metadata.owner_references.unwrap().len(), 1);
}
