//! Server-side apply with per-item ownership over HTTP: several managers
//! sharing one list by its keys (a CRD's `status.conditions` as a map-list,
//! a set, granular and atomic maps; a Deployment's containers by name), as
//! controllers do on a cluster, with conflicts per item path and `force`
//! taking only the conflicting item.

use crate::{spec_of, status};
use envtest::TestEnv;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

fn gizmo_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                            "items": {"type": "string"}},
                        "settings": {"type": "object", "x-kubernetes-map-type": "granular",
                            "additionalProperties": {"type": "string"}},
                        "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                            "additionalProperties": {"type": "string"}}}},
                    "status": {"type": "object", "properties": {
                        "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["type"],
                            "items": {"type": "object", "required": ["type"],
                                "properties": {"type": {"type": "string"},
                                    "status": {"type": "string"},
                                    "reason": {"type": "string"}}}}}}}}}}]}}))
    .unwrap()
}

async fn gizmos() -> (TestEnv, Api<DynamicObject>) {
    let env = TestEnv::builder()
        .crds([gizmo_crd()])
        .start()
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gizmo"),
        "gizmos",
    );
    let api = Api::namespaced_with(env.client(), "default", &ar);
    (env, api)
}

fn gizmo(body: Value) -> Value {
    let mut g = json!({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}});
    if let (Some(g), Some(b)) = (g.as_object_mut(), body.as_object()) {
        g.extend(b.clone());
    }
    g
}

fn conditions(conds: Value) -> Value {
    gizmo(json!({"status": {"conditions": conds}}))
}

fn pp(manager: &str, force: bool) -> PatchParams {
    let p = PatchParams::apply(manager);
    if force { p.force() } else { p }
}

/// Each manager's `fieldsV1`, keyed by manager name.
fn owned(obj: &DynamicObject) -> Vec<(String, Option<String>, Value)> {
    obj.metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            (
                e.manager.unwrap_or_default(),
                e.subresource,
                e.fields_v1.map(|f| f.0).unwrap_or_default(),
            )
        })
        .collect()
}

async fn create_gizmo(api: &Api<DynamicObject>) {
    let g: DynamicObject = serde_json::from_value(gizmo(json!({"spec": {}}))).unwrap();
    api.patch("g", &pp("creator", false), &Patch::Apply(&g))
        .await
        .unwrap();
}

#[tokio::test]
async fn managers_of_different_condition_types_merge_and_conflict_per_item() {
    let (_env, api) = gizmos().await;
    create_gizmo(&api).await;
    let ready = conditions(json!([{"type": "Ready", "status": "True"}]));
    let synced = conditions(json!([{"type": "Synced", "status": "True", "reason": "Ok"}]));
    api.patch_status("g", &pp("ready-ctl", false), &Patch::Apply(&ready))
        .await
        .unwrap();
    let g = api
        .patch_status("g", &pp("sync-ctl", false), &Patch::Apply(&synced))
        .await
        .unwrap();
    assert_eq!(
        g.data["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"},
               {"type": "Synced", "status": "True", "reason": "Ok"}]),
        "two managers' items merge by key"
    );
    let sync = owned(&g)
        .into_iter()
        .find(|(m, _, _)| m == "sync-ctl")
        .unwrap();
    assert_eq!(sync.1.as_deref(), Some("status"));
    assert_eq!(
        sync.2,
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Synced\"}":
            {".": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}}),
        "per-item ownership as a cluster writes it"
    );

    // The same key with another value conflicts, on that item's field only.
    let steal = conditions(json!([{"type": "Synced", "status": "True", "reason": "Ok"},
        {"type": "Ready", "status": "False"}]));
    let e = status(
        api.patch_status("g", &pp("sync-ctl", false), &Patch::Apply(&steal))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"ready-ctl\" with subresource \"status\": .status.conditions[type=\"Ready\"].status"
    );
    let causes = e.details.unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, ".status.conditions[type=\"Ready\"].status");

    // Force takes that field of that item, nothing else.
    let g = api
        .patch_status("g", &pp("sync-ctl", true), &Patch::Apply(&steal))
        .await
        .unwrap();
    let ready_owned = owned(&g)
        .into_iter()
        .find(|(m, _, _)| m == "ready-ctl")
        .unwrap();
    assert_eq!(
        ready_owned.2,
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:type": {}}}}})
    );
    // Removing Ready from sync-ctl's configuration keeps the item (ready-ctl
    // still owns it) but drops the field only sync-ctl owned.
    let g = api
        .patch_status("g", &pp("sync-ctl", false), &Patch::Apply(&synced))
        .await
        .unwrap();
    assert_eq!(
        g.data["status"]["conditions"],
        // (in the order of the forced configuration, which listed Synced first)
        json!([{"type": "Synced", "status": "True", "reason": "Ok"}, {"type": "Ready"}])
    );
    // ready-ctl sets its condition again and then drops it: it goes.
    api.patch_status("g", &pp("ready-ctl", true), &Patch::Apply(&ready))
        .await
        .unwrap();
    let g = api
        .patch_status(
            "g",
            &pp("ready-ctl", false),
            &Patch::Apply(&conditions(json!([]))),
        )
        .await
        .unwrap();
    assert_eq!(
        g.data["status"]["conditions"],
        json!([{"type": "Synced", "status": "True", "reason": "Ok"}])
    );
}

#[tokio::test]
async fn sets_and_granular_maps_are_shared_atomic_maps_are_not() {
    let (_env, api) = gizmos().await;
    let a = gizmo(
        json!({"spec": {"tags": ["a", "shared"], "settings": {"color": "red"},
        "selector": {"app": "x"}}}),
    );
    let b = gizmo(json!({"spec": {"tags": ["b", "shared"], "settings": {"size": "L"}}}));
    api.patch("g", &pp("alice", false), &Patch::Apply(&a))
        .await
        .unwrap();
    let g = api
        .patch("g", &pp("bob", false), &Patch::Apply(&b))
        .await
        .unwrap();
    assert_eq!(g.data["spec"]["tags"], json!(["a", "b", "shared"]));
    assert_eq!(
        g.data["spec"]["settings"],
        json!({"color": "red", "size": "L"})
    );
    let bob = owned(&g).into_iter().find(|(m, _, _)| m == "bob").unwrap();
    assert_eq!(
        bob.2["f:spec"],
        json!({"f:settings": {"f:size": {}}, "f:tags": {"v:\"b\"": {}, "v:\"shared\"": {}}})
    );
    // A granular map's key set to another value conflicts on that key.
    let e = status(
        api.patch(
            "g",
            &pp("bob", false),
            &Patch::Apply(&gizmo(json!({"spec": {"settings": {"color": "blue"}}}))),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.details.unwrap().causes[0].field, ".spec.settings.color");
    // An atomic map conflicts as a whole.
    let e = status(
        api.patch(
            "g",
            &pp("bob", false),
            &Patch::Apply(&gizmo(
                json!({"spec": {"selector": {"app": "x", "tier": "y"}}}),
            )),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.details.unwrap().causes[0].field, ".spec.selector");
    // Alice drops her tags: "a" goes, "shared" stays (bob owns it too).
    let g = api
        .patch(
            "g",
            &pp("alice", false),
            &Patch::Apply(&gizmo(json!({"spec": {"settings": {"color": "red"}}}))),
        )
        .await
        .unwrap();
    assert_eq!(g.data["spec"]["tags"], json!(["b", "shared"]));
    assert!(g.data["spec"].get("selector").is_none());
}

fn deployment(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": containers}}}})
}

async fn apply_deployment(
    client: &Client,
    manager: &str,
    containers: Value,
    force: bool,
) -> Result<Deployment, kube_client::Error> {
    let api: Api<Deployment> = Api::default_namespaced(client.clone());
    api.patch(
        "web",
        &pp(manager, force),
        &Patch::Apply(deployment(containers)),
    )
    .await
}

#[tokio::test]
async fn deployment_containers_are_owned_by_name() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    apply_deployment(
        &client,
        "team",
        json!([{"name": "app", "image": "app:1", "ports": [{"containerPort": 8080}],
            "env": [{"name": "MODE", "value": "fast"}]}]),
        false,
    )
    .await
    .unwrap();
    // An injector adds a sidecar and an env var to the app container.
    let d = apply_deployment(
        &client,
        "injector",
        json!([{"name": "app", "env": [{"name": "PROXY", "value": "on"}]},
               {"name": "proxy", "image": "proxy:1"}]),
        false,
    )
    .await
    .unwrap();
    let spec = spec_of(&d).template.spec.clone().unwrap();
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app", "proxy"]);
    let env_names: Vec<&str> = spec.containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(env_names, ["MODE", "PROXY"]);
    let mf = d.metadata.managed_fields.unwrap();
    let team = mf
        .iter()
        .find(|e| e.manager.as_deref() == Some("team"))
        .unwrap();
    let app = &team.fields_v1.as_ref().unwrap().0["f:spec"]["f:template"]["f:spec"]["f:containers"]
        ["k:{\"name\":\"app\"}"];
    assert_eq!(
        app["f:ports"]["k:{\"containerPort\":8080,\"protocol\":\"TCP\"}"],
        json!({".": {}, "f:containerPort": {}}),
        "ports are keyed by containerPort and protocol (defaulted)"
    );

    // The injector changing the team's image conflicts on that container only.
    let e = status(
        apply_deployment(
            &client,
            "injector",
            json!([{"name": "app", "image": "app:2", "env": [{"name": "PROXY", "value": "on"}]},
                   {"name": "proxy", "image": "proxy:1"}]),
            false,
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(
        e.details.unwrap().causes[0].field,
        ".spec.template.spec.containers[name=\"app\"].image"
    );
    // The injector withdraws: its sidecar and env var go, the app stays whole.
    let d = apply_deployment(&client, "injector", json!([]), false)
        .await
        .unwrap();
    let spec = spec_of(&d).template.spec.clone().unwrap();
    assert_eq!(spec.containers.len(), 1);
    assert_eq!(spec.containers[0].image.as_deref(), Some("app:1"));
    let env_names: Vec<&str> = spec.containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(env_names, ["MODE"]);
}
