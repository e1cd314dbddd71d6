//! `/openapi/v3`: the index and per-group/version documents carry real
//! schemas, named as the API server names them and marked with their
//! group/version/kind, every `$ref` resolves inside its document, and a CRD
//! version's schema is published and followed when the CRD changes.

use crate::raw;
use envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// GET a path, answering (status, `ETag` header, body).
async fn get(client: &Client, path: &str) -> (u16, Option<String>, Value) {
    let req = http::Request::get(path)
        .body(Vec::new())
        .unwrap()
        .map(kube_client::client::Body::from);
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let etag = resp
        .headers()
        .get(http::header::ETAG)
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, etag, serde_json::from_slice(&bytes).unwrap())
}

/// The index's URL for a group/version.
async fn url_of(client: &Client, gv: &str) -> Option<String> {
    let (code, _, index) = get(client, "/openapi/v3").await;
    assert_eq!(code, 200);
    index["paths"][gv]["serverRelativeURL"]
        .as_str()
        .map(str::to_string)
}

/// The document of a group/version, fetched as kubectl does (through the
/// index's hashed URL), with its `ETag`.
async fn document(client: &Client, gv: &str) -> (String, Option<String>, Value) {
    let url = url_of(client, gv)
        .await
        .expect("group/version in the index");
    let (code, etag, doc) = get(client, &url).await;
    assert_eq!(code, 200, "{url}");
    (url, etag, doc)
}

/// Every `$ref` in `v`, recursively.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                out.push(r);
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

fn assert_refs_resolve(doc: &Value) {
    let mut all = Vec::new();
    refs(doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r} is not a component reference"));
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "{r} does not resolve"
        );
    }
}

/// The schema a property leads to: the property itself or what its
/// `$ref` / single `allOf` names.
fn follow<'a>(doc: &'a Value, prop: &'a Value) -> &'a Value {
    let r = prop["$ref"]
        .as_str()
        .or_else(|| prop["allOf"][0]["$ref"].as_str());
    match r {
        Some(r) => &doc["components"]["schemas"][r.trim_start_matches("#/components/schemas/")],
        None => prop,
    }
}

#[tokio::test]
async fn built_in_kinds_have_their_real_schemas() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let (url, etag, core) = document(&client, "api/v1").await;
    let hash = url.split("hash=").nth(1).expect("hashed URL");
    assert_eq!(etag.as_deref(), Some(format!("\"{hash}\"").as_str()));
    let cm = &core["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"];
    assert_eq!(
        cm["x-kubernetes-group-version-kind"],
        json!([{"group": "", "version": "v1", "kind": "ConfigMap"}])
    );
    assert!(
        cm["description"]
            .as_str()
            .unwrap()
            .contains("configuration data")
    );
    assert!(
        cm["properties"]["data"]["description"]
            .as_str()
            .unwrap()
            .starts_with("Data contains the configuration data")
    );
    assert_refs_resolve(&core);

    let (_, _, apps) = document(&client, "apis/apps/v1").await;
    let dep = &apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        dep["x-kubernetes-group-version-kind"][0]["kind"],
        "Deployment"
    );
    let spec = follow(&apps, &dep["properties"]["spec"]);
    assert!(
        spec["properties"]["replicas"]["description"]
            .as_str()
            .unwrap()
            .starts_with("Number of desired pods")
    );
    assert_refs_resolve(&apps);
    // The operations tell kubectl the server validates fields itself.
    let patch = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
}

fn gizmo_crd(size_doc: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.shop.example.com"},
        "spec": {
            "group": "shop.example.com", "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "description": "A small machine.",
                "properties": {"spec": {"type": "object", "properties": {
                    "size": {"type": "integer", "description": size_doc}}}}}}}]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn crd_versions_are_published_and_follow_changes() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let gv = "apis/shop.example.com/v1";
    assert_eq!(url_of(&client, gv).await, None);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &gizmo_crd("Cogs."))
        .await
        .unwrap();

    let (url, _, doc) = document(&client, gv).await;
    let name = "com.example.shop.v1.Gizmo";
    let gizmo = &doc["components"]["schemas"][name];
    assert_eq!(
        gizmo["x-kubernetes-group-version-kind"],
        json!([{"group": "shop.example.com", "version": "v1", "kind": "Gizmo"}])
    );
    assert_eq!(gizmo["description"], "A small machine.");
    assert_eq!(
        gizmo["properties"]["spec"]["properties"]["size"]["description"],
        "Cogs."
    );
    let meta = follow(&doc, &gizmo["properties"]["metadata"]);
    assert!(meta["properties"]["name"]["description"].is_string());
    assert_refs_resolve(&doc);

    // A changed schema gets a new hash, so a client's cache refetches it.
    let patch = json!({"spec": gizmo_crd("Cogs, counted.").spec});
    crds.patch(
        "gizmos.shop.example.com",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .unwrap();
    let (url2, _, doc2) = document(&client, gv).await;
    assert_ne!(url, url2, "the hash follows the schema");
    assert_eq!(
        doc2["components"]["schemas"][name]["properties"]["spec"]["properties"]["size"]["description"],
        "Cogs, counted."
    );

    crds.delete("gizmos.shop.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(url_of(&client, gv).await, None);
    let (code, _) = raw(&client, "GET", &format!("/openapi/v3/{gv}"), None, vec![]).await;
    assert_eq!(code, 404);
}
