//! An object's identity cannot be changed by an update, patch or apply, as
//! on a cluster: a different `name` or `namespace` than the URL is 400
//! (the API server's name check), a `creationTimestamp` sent back is
//! ignored (the stored one is kept, as the API server's `BeforeUpdate`
//! does), a `deletionTimestamp` is set only by DELETE (422 field is
//! immutable) — and nothing is stored by a refused write.

use crate::{cm, raw, status};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, Patch, PatchParams};
use serde_json::json;

#[tokio::test]
async fn identity_fields_survive_patch_and_apply() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let created = api
        .create(&Default::default(), &cm("c", &[], "1"))
        .await
        .unwrap();
    let pp = PatchParams::default();

    let e = status(
        api.patch("c", &pp, &Patch::Merge(json!({"metadata": {"name": "d"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.reason.as_str()),
        (400, "BadRequest"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("does not match the name on the URL"),
        "{}",
        e.message
    );

    let (code, body) = raw(
        &env.client(),
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c",
        Some("application/json-patch+json"),
        br#"[{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}]"#.to_vec(),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("namespace"),
        "{body}"
    );

    let ssa = PatchParams::apply("me").force();
    let e = status(
        api.patch(
            "c",
            &ssa,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "deletionTimestamp": "2030-01-01T00:00:00Z"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422, "{}", e.message);
    assert!(e.message.contains("field is immutable"), "{}", e.message);

    let kept = api
        .patch(
            "c",
            &pp,
            &Patch::Merge(
                json!({"metadata": {"creationTimestamp": "2001-01-01T00:00:00Z"},
                "data": {"v": "2"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        kept.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );
    assert_eq!(kept.data.unwrap()["v"], "2");

    let now = api.get("c").await.unwrap();
    assert_eq!(now.metadata.name.as_deref(), Some("c"));
    assert_eq!(now.metadata.namespace.as_deref(), Some("default"));
    assert!(now.metadata.deletion_timestamp.is_none());
    assert_eq!(now.metadata.uid, created.metadata.uid);
}
