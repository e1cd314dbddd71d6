//! CRD structural schemas as the API server applies them: defaults,
//! `pattern`, `format`, `multipleOf`, `maxProperties`, list-type
//! uniqueness; non-structural schemas and malformed CEL rules refused when the CRD is
//! written; a CRD's own Age printer column shown once.

use crate::crd::{widget_crd, widgets};
use crate::status;
use envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn schema() -> Value {
    json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "default": {}, "properties": {
            "name": {"type": "string", "pattern": "^[a-z]+$"},
            "replicas": {"type": "integer", "default": 1, "multipleOf": 1},
            "mode": {"type": "string", "default": "auto"},
            "step": {"type": "number", "multipleOf": 0.5},
            "start": {"type": "string", "format": "date-time"},
            "address": {"type": "string", "format": "ipv4"},
            "labels": {"type": "object", "maxProperties": 2, "additionalProperties": {"type": "string"}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"},
                    "protocol": {"type": "string", "default": "TCP"}}}}
        }}
    }}})
}

async fn install(
    client: &Client,
    schema: Value,
) -> Result<CustomResourceDefinition, kube_client::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions[0].schema = Some(serde_json::from_value(schema).unwrap());
    crd.spec.versions.truncate(1);
    crds.create(&PostParams::default(), &crd).await
}

fn obj(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

fn fields(e: kube_client::Error) -> Vec<String> {
    let s = status(e);
    assert_eq!(
        (s.code, s.reason.as_str()),
        (422, "Invalid"),
        "{}",
        s.message
    );
    s.details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect()
}

#[tokio::test]
async fn defaults_are_applied_on_create_and_update() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, schema()).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let pp = PostParams::default();

    let bare: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1",
        "kind": "Widget", "metadata": {"name": "bare"}}))
    .unwrap();
    let w = api.create(&pp, &bare).await.unwrap();
    assert_eq!(w.data["spec"], json!({"replicas": 1, "mode": "auto"}));

    let w = api
        .create(
            &pp,
            &obj("w", json!({"replicas": 3, "ports": [{"name": "http"}]})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["replicas"], 3);
    assert_eq!(
        w.data["spec"]["ports"][0]["protocol"], "TCP",
        "defaults reach array items"
    );

    let w = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mode": null, "ports": [{"name": "a"}, {"name": "b", "protocol": "UDP"}]}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["mode"], "auto");
    assert_eq!(w.data["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(w.data["spec"]["ports"][1]["protocol"], "UDP");
    assert_eq!(api.get("w").await.unwrap().data["spec"]["mode"], "auto");
}

#[tokio::test]
async fn value_constraints_are_enforced_with_field_paths() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, schema()).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let pp = PostParams::default();
    let cases = [
        (json!({"name": "UPPER-123"}), "spec.name"),
        (json!({"step": 0.3}), "spec.step"),
        (json!({"start": "yesterday"}), "spec.start"),
        (json!({"address": "10.0.0.300"}), "spec.address"),
        (
            json!({"labels": {"a": "1", "b": "2", "c": "3"}}),
            "spec.labels",
        ),
        (json!({"tags": ["a", "b", "a"]}), "spec.tags[2]"),
        (
            json!({"ports": [{"name": "x"}, {"name": "x", "protocol": "UDP"}]}),
            "spec.ports[1]",
        ),
    ];
    for (i, (spec, field)) in cases.into_iter().enumerate() {
        let e = api
            .create(&pp, &obj(&format!("bad{i}"), spec.clone()))
            .await
            .unwrap_err();
        assert_eq!(fields(e), vec![field.to_string()], "{spec}");
    }
    api.create(
        &pp,
        &obj(
            "good",
            json!({"name": "lower", "step": 1.5, "start": "2024-01-01T00:00:00Z",
            "address": "10.0.0.1", "labels": {"a": "1"}, "tags": ["a", "b"],
            "ports": [{"name": "x"}, {"name": "y"}]}),
        ),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn non_structural_schemas_and_cel_rules_are_refused_at_crd_write() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let root = "spec.versions[0].schema.openAPIV3Schema";
    let cases = [
        (
            json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}}),
            format!("{root}.properties[spec].type"),
        ),
        (
            json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": "self.replicas <= "}]}}}}),
            format!("{root}.properties[spec].x-kubernetes-validations[0].rule"),
        ),
        (
            json!({"openAPIV3Schema": {"type": "object", "properties": {"name": {"type": "string", "pattern": "(unclosed"}}}}),
            format!("{root}.properties[name].pattern"),
        ),
        (
            json!({"openAPIV3Schema": {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}}),
            format!("{root}.properties[tags].uniqueItems"),
        ),
    ];
    for (schema, field) in cases {
        let e = install(&client, schema.clone()).await.unwrap_err();
        assert_eq!(fields(e), vec![field], "{schema}");
    }
    // Nothing was registered.
    let api = widgets(&client, "v1", Some("default"));
    assert_eq!(status(api.get("x").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn a_crd_age_column_is_shown_once() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions[0].additional_printer_columns = Some(
        serde_json::from_value(json!([
            {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]))
        .unwrap(),
    );
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));
    api.create(&PostParams::default(), &crate::crd::widget("w", "red"))
        .await
        .unwrap();
    let req = http::Request::get("/apis/example.com/v1/namespaces/default/widgets")
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;g=meta.k8s.io;v=v1",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(req).await.unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["Name", "Color", "Age"]);
    assert_eq!(table["rows"][0]["cells"].as_array().unwrap().len(), 3);
}
