//! Server-side apply and field ownership (managedFields).

use crate::{cm, status};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn server_side_apply_tracks_managers_and_conflicts() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let cfg = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"v": v}});
    // Apply creates when absent; fieldManager is required.
    let c = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(cfg("1")))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["v"], "1");
    let mf = c.metadata.managed_fields.unwrap();
    assert_eq!(
        (mf[0].manager.as_deref(), mf[0].operation.as_deref()),
        (Some("alice"), Some("Apply"))
    );
    let e = status(
        api.patch("ssa", &PatchParams::default(), &Patch::Apply(cfg("1")))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    // Re-applying the same configuration writes nothing.
    let again = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(cfg("1")))
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version, c.metadata.resource_version);
    // Another manager setting a different value conflicts unless forced.
    let e = status(
        api.patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(cfg("2")))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.contains("conflict with \"alice\""),
        "{}",
        e.message
    );
    assert_eq!(e.details.unwrap().causes[0].field, ".data.v");
    let c = api
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(cfg("2")),
        )
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["v"], "2");
    // Alice now owns nothing she applied; her next apply without the field removes nothing of bob's.
    let c = api
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["v"], "2");
}

#[tokio::test]
async fn non_apply_writes_own_the_fields_they_change() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let cfg = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"v": v}});
    api.patch("m", &PatchParams::apply("alice"), &Patch::Apply(cfg("1")))
        .await
        .unwrap();
    // An editor changes the field with an ordinary patch: it now owns it.
    let pp = PatchParams {
        field_manager: Some("editor".into()),
        ..PatchParams::default()
    };
    let c = api
        .patch("m", &pp, &Patch::Merge(json!({"data": {"v": "2"}})))
        .await
        .unwrap();
    let mf = c.metadata.managed_fields.unwrap();
    assert!(
        mf.iter()
            .any(|e| e.manager.as_deref() == Some("editor")
                && e.operation.as_deref() == Some("Update")),
        "{mf:?}"
    );
    let e = status(
        api.patch("m", &PatchParams::apply("alice"), &Patch::Apply(cfg("1")))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert!(
        e.message.contains("conflict with \"editor\""),
        "{}",
        e.message
    );
    // Creates record their manager too.
    let created = api
        .create(
            &PostParams {
                field_manager: Some("creator".into()),
                ..PostParams::default()
            },
            &cm("n", &[], "1"),
        )
        .await
        .unwrap();
    let mf = created.metadata.managed_fields.unwrap();
    assert_eq!(
        (mf[0].manager.as_deref(), mf[0].operation.as_deref()),
        (Some("creator"), Some("Update"))
    );
}
