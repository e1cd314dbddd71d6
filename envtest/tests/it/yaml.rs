//! `application/yaml` request bodies wherever JSON is accepted: create,
//! update, and server-side apply; malformed YAML is a clear 400.

use crate::raw;
use envtest::TestEnv;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn yaml_bodies_create_and_update() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\n  labels: {tier: web}\ndata:\n  port: \"8080\"\n  motd: |\n    hello\n    world\n";
    let (code, created) = raw(
        &client,
        "POST",
        CMS,
        Some("application/yaml"),
        body.to_vec(),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["data"],
        json!({"port": "8080", "motd": "hello\nworld\n"})
    );
    assert_eq!(created["metadata"]["labels"]["tier"], "web");

    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let update = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\n  resourceVersion: \"{rv}\"\ndata:\n  port: \"9090\"\n"
    );
    let path = format!("{CMS}/from-yaml");
    let (code, updated) = raw(
        &client,
        "PUT",
        &path,
        Some("application/yaml; charset=utf-8"),
        update.clone().into_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"], json!({"port": "9090"}));
    // The same YAML again carries a stale resourceVersion: 409 as for JSON.
    let (code, _) = raw(
        &client,
        "PUT",
        &path,
        Some("application/yaml"),
        update.into_bytes(),
    )
    .await;
    assert_eq!(code, 409);

    // A YAML type mismatch is the typed 400 of a JSON one.
    let bad = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: [1, 2]\n";
    let (code, st) = raw(&client, "POST", CMS, Some("application/yaml"), bad.to_vec()).await;
    assert_eq!(code, 400, "{st}");
    let (code, st) = raw(
        &client,
        "POST",
        CMS,
        Some("application/yaml"),
        b"metadata: {name: [unclosed".to_vec(),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    assert!(st["message"].as_str().unwrap().contains("YAML"), "{st}");
}

#[tokio::test]
async fn yaml_apply_creates_then_updates() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let path = "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=yaml-test";
    let doc = |replicas: u32| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: nginx\n"
        )
    };
    let (code, v) = raw(
        &client,
        "PATCH",
        path,
        Some("application/apply-patch+yaml"),
        doc(1).into_bytes(),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let (code, v) = raw(
        &client,
        "PATCH",
        path,
        Some("application/apply-patch+yaml"),
        doc(3).into_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["spec"]["replicas"], 3);
    assert_eq!(v["metadata"]["managedFields"][0]["manager"], "yaml-test");
}

#[tokio::test]
async fn yaml_creates_custom_resources_too() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: kube_client::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube_client::Api::all(client.clone());
    crds.create(&Default::default(), &crate::crd::widget_crd("Namespaced"))
        .await
        .unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let body =
        b"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {color: blue}\n";
    let deadline = tokio::time::Instant::now() + crate::WAIT;
    loop {
        let (code, v) = raw(
            &client,
            "POST",
            path,
            Some("application/yaml"),
            body.to_vec(),
        )
        .await;
        if code == 201 {
            assert_eq!(v["spec"]["color"], "blue");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "widget never created: {code} {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
