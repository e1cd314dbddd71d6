//! Custom resources: a typed custom resource and a field selector through
//! the reflector, against a CRD served by envtest.

use std::borrow::Cow;
use std::time::Duration;

use envtest::TestEnv;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::reflector::Reflector;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_core::{NamespaceResourceScope, ObjectMeta, Resource};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::common::*;

/// What `#[derive(CustomResource)]` would generate for `example.com/v1 Widget`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Widget {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    metadata: ObjectMeta,
    spec: WidgetSpec,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct WidgetSpec {
    color: String,
}

impl Resource for Widget {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "Widget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "example.com".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "widgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn widget(name: &str, color: &str) -> Widget {
    Widget {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: WidgetSpec {
            color: color.into(),
        },
    }
}

async fn install_widget_crd(client: &kube_client::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "selectableFields": [{"jsonPath": ".spec.color"}]
            }]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
}

#[tokio::test]
async fn a_typed_custom_resource_with_a_field_selector_across_namespaces() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install_widget_crd(&client).await;
    create_namespace(&client, "team-b").await;
    let a: Api<Widget> = Api::namespaced(client.clone(), "default");
    let b: Api<Widget> = Api::namespaced(client.clone(), "team-b");
    a.create(&PostParams::default(), &widget("w1", "red"))
        .await
        .unwrap();
    a.create(&PostParams::default(), &widget("w2", "blue"))
        .await
        .unwrap();
    b.create(&PostParams::default(), &widget("w3", "red"))
        .await
        .unwrap();

    let all: Api<Widget> = Api::all(client.clone());
    let lw = ApiListerWatcher::new(all, ListWatchOptions::default().fields("spec.color=red"));
    let mirror = Mirror::new();
    let reflector = Reflector::builder(lw, mirror.clone()).build();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    let keys = |m: &Mirror| m.snapshot().into_keys().collect::<Vec<_>>();
    eventually("the red widgets are listed", || mirror.replaces() == 1).await;
    assert_eq!(keys(&mirror), ["default/w1", "team-b/w3"]);

    // Objects entering and leaving the selection arrive as adds and deletes.
    let paint = |color: &str| Patch::Merge(json!({"spec": {"color": color}}));
    a.patch("w2", &PatchParams::default(), &paint("red"))
        .await
        .unwrap();
    b.patch("w3", &PatchParams::default(), &paint("green"))
        .await
        .unwrap();
    eventually("w2 entered and w3 left the selection", || {
        keys(&mirror) == ["default/w1", "default/w2"]
    })
    .await;
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}
