//! Golden CRDs: the generated definition of a few representative kinds is
//! checked in under `tests/golden/` and compared; each is accepted by
//! envtest, which then refuses objects that break the schema (422 with the
//! field path) and prunes unknown fields. Set `UPDATE_GOLDEN=1` to rewrite
//! the files after an intended change (and review the diff).
//! `default`s, `pattern`s and CEL rules against envtest are in `rules`;
//! envtest checks `oneOf` too (`envtest/tests/it/junctors.rs`; `docs/macros.md`
//! shows an externally tagged enum with two variants set refused).

use std::path::PathBuf;

use ::envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, DynamicObject, PostParams};
use kube_client::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::envtest::install;
use crate::types::{Foo, Gadget, Pool, Route};

fn golden(name: &str, crd: &CustomResourceDefinition) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    let actual = serde_json::to_string_pretty(crd).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(
        actual, expected,
        "{name}: the generated CRD differs from the checked-in one"
    );
}

#[test]
fn generated_crds_match_the_checked_in_ones() {
    golden("foos.samplecontroller.k8s.io", &Foo::crd().unwrap());
    golden("gadgets.example.com", &Gadget::crd().unwrap());
    golden("routes.example.com", &Route::crd().unwrap());
    golden("pools.example.com", &Pool::crd().unwrap());
}

fn dynamic(
    client: &kube_client::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), "default", &ar)
}

/// Creates `obj` and returns the 422's causes as (field, reason).
async fn refused(api: &Api<DynamicObject>, obj: Value) -> Vec<(String, String)> {
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    match api.create(&PostParams::default(), &obj).await {
        Err(kube_client::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            s.details
                .map(|d| d.causes)
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.field, c.reason))
                .collect()
        }
        other => panic!("expected a 422, got {other:?}"),
    }
}

#[tokio::test]
async fn golden_crds_are_accepted_and_enforced_by_envtest() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    for crd in [
        Foo::crd().unwrap(),
        Gadget::crd().unwrap(),
        Route::crd().unwrap(),
    ] {
        install(&client, &crd).await;
    }
    let foos = dynamic(
        &client,
        "samplecontroller.k8s.io",
        "v1alpha1",
        "Foo",
        "foos",
    );
    let foo = |spec: Value| json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "f"}, "spec": spec});

    // Wrong type.
    let causes = refused(
        &foos,
        foo(json!({"deploymentName": "web", "replicas": "three"})),
    )
    .await;
    assert!(
        causes.contains(&("spec.replicas".into(), "FieldValueTypeInvalid".into())),
        "{causes:?}"
    );
    // Missing required field.
    let causes = refused(&foos, foo(json!({"replicas": 1}))).await;
    assert!(
        causes.contains(&("spec.deploymentName".into(), "FieldValueRequired".into())),
        "{causes:?}"
    );
    // Out of range (from #[resource(maximum = 10)]).
    let causes = refused(&foos, foo(json!({"deploymentName": "web", "replicas": 11}))).await;
    assert!(
        causes.contains(&("spec.replicas".into(), "FieldValueInvalid".into())),
        "{causes:?}"
    );
    // Too long (from #[resource(max_length = 63)]).
    let causes = refused(&foos, foo(json!({"deploymentName": "w".repeat(64)}))).await;
    assert!(
        causes.contains(&("spec.deploymentName".into(), "FieldValueTooLong".into())),
        "{causes:?}"
    );
    // Missing spec altogether.
    let causes = refused(&foos, json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "f"}})).await;
    assert!(
        causes.contains(&("spec".into(), "FieldValueRequired".into())),
        "{causes:?}"
    );

    // Bad enum value (a unit-variant enum).
    let routes = dynamic(&client, "example.com", "v1", "Route", "routes");
    let route = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Route", "metadata": {"name": "r"}, "spec": spec});
    let causes = refused(&routes, route(json!({"host": "a", "policy": "Sometimes", "backend": {"type": "Service", "name": "s", "port": 80}}))).await;
    assert!(
        causes.contains(&("spec.policy".into(), "FieldValueNotSupported".into())),
        "{causes:?}"
    );

    // Unknown fields are pruned, known ones kept.
    let obj: DynamicObject =
        serde_json::from_value(foo(json!({"deploymentName": "web", "surprise": true}))).unwrap();
    let created = foos.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.data["spec"], json!({"deploymentName": "web"}));
}
