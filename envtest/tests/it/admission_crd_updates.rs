//! Updates of CustomResourceDefinitions while admission webhooks are
//! configured: they are admitted like any other write and stored, whether
//! or not a webhook matches CRDs. Regression: a write through admission
//! committed the dry run's result with the store's revision stamped in as
//! its `resourceVersion`, so every update of an object that was not the
//! last one written (here: the CRD, written before the webhook
//! configuration) answered 409 Conflict.

use crate::admission_webhooks::{hook, validating};
use crate::crd::widget_crd;
use crate::webhook_server::{self, allow};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The printer columns of the CRD's first version.
fn columns(crd: &CustomResourceDefinition) -> Value {
    let v = serde_json::to_value(crd).unwrap();
    v["spec"]["versions"][0]["additionalPrinterColumns"].clone()
}

#[tokio::test]
async fn a_crd_replace_succeeds_while_a_webhook_for_other_resources_exists() {
    let env = envtest::TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd("Namespaced"))
        .await
        .unwrap();
    // Written after the CRD: the CRD is no longer the last object written.
    let server = webhook_server::start(&[], allow).await;
    // Matches configmaps only.
    validating(
        &client,
        "configmaps-only",
        vec![hook(
            "cm.example.com",
            server.client_config("/validate"),
            &["CREATE", "UPDATE"],
        )],
    )
    .await;

    let mut crd = crds.get("widgets.example.com").await.unwrap();
    crd.spec.versions[0].additional_printer_columns = Some(vec![
        serde_json::from_value(
            json!({"name": "Color", "type": "string", "jsonPath": ".spec.color"}),
        )
        .unwrap(),
    ]);
    let replaced = crds
        .replace("widgets.example.com", &PostParams::default(), &crd)
        .await
        .unwrap();
    let want = json!([{"name": "Color", "type": "string", "jsonPath": ".spec.color"}]);
    assert_eq!(columns(&replaced), want);
    assert_eq!(
        columns(&crds.get("widgets.example.com").await.unwrap()),
        want,
        "the change is stored"
    );
    assert_eq!(server.calls(), 0, "the webhook does not match CRDs");
}

#[tokio::test]
async fn a_crd_patch_passes_a_webhook_that_matches_crds() {
    let env = envtest::TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd("Cluster"))
        .await
        .unwrap();
    let server = webhook_server::start(&[], allow).await;
    let mut h = hook("crd.example.com", server.client_config("/validate"), &[]);
    h["rules"] = json!([{
        "apiGroups": ["apiextensions.k8s.io"], "apiVersions": ["v1"],
        "operations": ["UPDATE"], "resources": ["customresourcedefinitions"],
    }]);
    validating(&client, "crds", vec![h]).await;

    let before = crds.get("widgets.example.com").await.unwrap();
    let p = Patch::Merge(json!({"spec": {"names": {"shortNames": ["wd", "wdg"]}}}));
    let patched = crds
        .patch("widgets.example.com", &PatchParams::default(), &p)
        .await
        .unwrap();
    assert_eq!(
        patched.spec.names.short_names,
        Some(vec!["wd".to_string(), "wdg".to_string()])
    );
    assert_ne!(
        patched.metadata.resource_version,
        before.metadata.resource_version
    );
    let stored = crds.get("widgets.example.com").await.unwrap();
    assert_eq!(
        stored.spec.names.short_names,
        patched.spec.names.short_names
    );
    let review = server.last();
    assert_eq!(review["request"]["operation"], "UPDATE");
    assert_eq!(
        review["request"]["object"]["spec"]["names"]["shortNames"],
        json!(["wd", "wdg"])
    );
}
