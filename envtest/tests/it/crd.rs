//! CustomResourceDefinitions make their resources servable.

use crate::{raw, status};
use envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use serde_json::json;

pub fn widget_crd(scope: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": scope,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                 "subresources": {"status": {}},
                 "selectableFields": [{"jsonPath": ".spec.color"}]},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    }))
    .unwrap()
}

pub fn widgets(client: &Client, version: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "Widget"),
        "widgets",
    );
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

pub fn widget(name: &str, color: &str) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"color": color}})).unwrap()
}

#[tokio::test]
async fn crd_creation_makes_the_resource_servable() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let api = widgets(&client, "v1", Some("default"));
    assert_eq!(
        status(api.list(&ListParams::default()).await.unwrap_err()).code,
        404,
        "not served before the CRD exists"
    );

    let crd = crds
        .create(&PostParams::default(), &widget_crd("Namespaced"))
        .await
        .unwrap();
    let conds = crd.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let w = api
        .create(&PostParams::default(), &widget("w1", "red"))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    api.create(&PostParams::default(), &widget("w2", "blue"))
        .await
        .unwrap();
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );

    // Selectable fields.
    let red = api
        .list(&ListParams::default().fields("spec.color=red"))
        .await
        .unwrap();
    assert_eq!(red.items.len(), 1);
    assert_eq!(red.items[0].metadata.name.as_deref(), Some("w1"));
    assert_eq!(
        status(
            api.list(&ListParams::default().fields("spec.size=1"))
                .await
                .unwrap_err()
        )
        .code,
        400
    );

    // Every served version reads the same objects.
    let beta = widgets(&client, "v1beta1", Some("default"));
    let got = beta.get("w1").await.unwrap();
    assert_eq!(got.types.unwrap().api_version, "example.com/v1beta1");

    // Discovery shows it.
    let rl = client
        .list_api_group_resources("example.com/v1")
        .await
        .unwrap();
    assert!(
        rl.resources
            .iter()
            .any(|r| r.name == "widgets" && r.namespaced)
    );
    assert!(rl.resources.iter().any(|r| r.name == "widgets/status"));

    // PUT without resourceVersion is 422 for custom resources; PUT does not create.
    let mut no_rv = widget("w1", "green");
    no_rv.metadata.resource_version = None;
    let e = status(
        api.replace("w1", &PostParams::default(), &no_rv)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status(
            api.replace("w9", &PostParams::default(), &widget("w9", "x"))
                .await
                .unwrap_err()
        )
        .code,
        404
    );

    // Status subresource: main endpoint ignores status, /status changes only status.
    let pp = PatchParams::default();
    let w = api
        .patch("w1", &pp, &Patch::Merge(json!({"status": {"ready": true}})))
        .await
        .unwrap();
    assert!(w.data.get("status").is_none());
    let w = api
        .patch_status(
            "w1",
            &pp,
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"color": "x"}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["status"]["ready"], true);
    assert_eq!(w.data["spec"]["color"], "red");
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "status writes leave generation alone"
    );
    let w = api
        .patch(
            "w1",
            &pp,
            &Patch::Merge(json!({"spec": {"color": "green"}})),
        )
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(2));

    // Deleting the CRD removes its objects and stops serving it.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        status(api.list(&ListParams::default()).await.unwrap_err()).code,
        404
    );
    crds.create(&PostParams::default(), &widget_crd("Namespaced"))
        .await
        .unwrap();
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn cluster_scoped_crd_and_invalid_crds() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd("Cluster"))
        .await
        .unwrap();
    let api = widgets(&client, "v1", None);
    api.create(&PostParams::default(), &widget("global", "red"))
        .await
        .unwrap();
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let (code, _) = raw(
        &client,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        None,
        vec![],
    )
    .await;
    assert_eq!(
        code, 404,
        "a cluster-scoped resource has no namespaced path"
    );

    let mut bad = widget_crd("Namespaced");
    bad.metadata.name = Some("gadgets.example.com".into());
    let e = status(crds.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert_eq!(e.details.unwrap().causes[0].field, "metadata.name");
}

#[tokio::test]
async fn custom_resources_are_pruned_and_validated_against_the_schema() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions[0].schema = Some(
        serde_json::from_value(json!({"openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {"type": "object", "required": ["color"], "properties": {
                    "color": {"type": "string", "enum": ["red", "green"]},
                    "size": {"type": "integer", "minimum": 1}
                }},
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        }}))
        .unwrap(),
    );
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));

    let mut w = widget("w1", "red");
    w.data["spec"]["undeclared"] = json!("dropped");
    w.data["extra"] = json!(1);
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert!(
        created.data["spec"].get("undeclared").is_none(),
        "unknown fields are pruned"
    );
    assert!(created.data.get("extra").is_none());

    let e = status(
        api.create(&PostParams::default(), &widget("w2", "purple"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(e.details.unwrap().causes[0].field, "spec.color");

    let pp = PatchParams::default();
    let e = status(
        api.patch(
            "w1",
            &pp,
            &Patch::Merge(json!({"spec": {"size": 0, "color": null}})),
        )
        .await
        .unwrap_err(),
    );
    let fields: Vec<String> = e
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert!(
        fields.contains(&"spec.size".to_string()) && fields.contains(&"spec.color".to_string()),
        "{fields:?}"
    );

    // A status field the schema does not declare is pruned, as in a real cluster.
    let w = api
        .patch_status(
            "w1",
            &pp,
            &Patch::Merge(json!({"status": {"ready": true, "phase": "Gone"}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["status"], json!({"ready": true}));
    // Pruned-only changes do not bump the generation.
    let w = api
        .patch("w1", &pp, &Patch::Merge(json!({"spec": {"undeclared": 1}})))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1));
}

#[tokio::test]
async fn crd_scale_subresource_uses_the_declared_paths() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions[0].subresources = Some(
        serde_json::from_value(json!({"status": {}, "scale": {
            "specReplicasPath": ".spec.count", "statusReplicasPath": ".status.count", "labelSelectorPath": ".status.selector"
        }}))
        .unwrap(),
    );
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let mut w = widget("w", "red");
    w.data["spec"]["count"] = json!(3);
    api.create(&PostParams::default(), &w).await.unwrap();
    api.patch_status(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"count": 2, "selector": "app=w"}})),
    )
    .await
    .unwrap();
    let s = api.get_scale("w").await.unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(3));
    let st = s.status.unwrap();
    assert_eq!((st.replicas, st.selector.as_deref()), (2, Some("app=w")));
    api.patch_scale(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 7}})),
    )
    .await
    .unwrap();
    assert_eq!(api.get("w").await.unwrap().data["spec"]["count"], 7);
}

/// Removing a CRD removes its objects as any removal does: a ConfigMap one
/// of them owned is collected, and a Terminating namespace one of them held
/// up (by its finalizer) finishes and goes.
#[tokio::test]
async fn removing_a_crd_collects_dependents_and_finishes_a_namespace_its_objects_held() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let pp = PostParams::default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());

    // A cluster-scoped widget owns a ConfigMap.
    crds.create(&pp, &widget_crd("Cluster")).await.unwrap();
    let w = widgets(&client, "v1", None)
        .create(&pp, &widget("w", "red"))
        .await
        .unwrap();
    let mut owned = ConfigMap::default();
    owned.metadata.name = Some("owned".into());
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        name: "w".into(),
        uid: w.metadata.uid.clone().unwrap(),
        ..OwnerReference::default()
    }]);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    configmaps.create(&pp, &owned).await.unwrap();
    assert!(configmaps.get_opt("owned").await.unwrap().is_some());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        configmaps.get_opt("owned").await.unwrap().is_none(),
        "the removed widget's dependent is collected"
    );

    // A namespaced widget with a finalizer holds its namespace up.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("held".into());
    namespaces.create(&pp, &ns).await.unwrap();
    crds.create(&pp, &widget_crd("Namespaced")).await.unwrap();
    let mut w = widget("w", "red");
    w.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    widgets(&client, "v1", Some("held"))
        .create(&pp, &w)
        .await
        .unwrap();
    namespaces
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = namespaces.get("held").await.unwrap();
    assert!(
        terminating.metadata.deletion_timestamp.is_some(),
        "the widget's finalizer holds the namespace"
    );
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        namespaces.get_opt("held").await.unwrap().is_none(),
        "the namespace finishes once the CRD took its last object"
    );
}
