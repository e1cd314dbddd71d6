//! `allOf`, `anyOf`, `oneOf` and `not` in CRD schemas: evaluated on writes
//! as value validations (422 with the API server's messages and paths),
//! and refused at CRD write when they try to shape the object.

use crate::crd::{widget_crd, widgets};
use crate::status;
use envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

async fn install(
    client: &Client,
    schema: Value,
) -> Result<CustomResourceDefinition, kube_client::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions.truncate(1);
    crd.spec.versions[0].schema =
        Some(serde_json::from_value(json!({"openAPIV3Schema": schema})).unwrap());
    crds.create(&PostParams::default(), &crd).await
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {
            "cron": {"type": "string"}, "interval": {"type": "integer"},
            "mode": {"type": "string"}, "replicas": {"type": "integer"}},
        "anyOf": [{"required": ["cron"]}, {"required": ["interval"]}],
        "oneOf": [{"properties": {"replicas": {"minimum": 10}}},
                  {"properties": {"replicas": {"maximum": 5}}}],
        "not": {"properties": {"mode": {"enum": ["legacy"]}}, "required": ["mode"]},
        "allOf": [{"properties": {"cron": {"maxLength": 20}}}]}}})
}

fn obj(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

/// (field, message) of each cause of a 422.
fn causes(e: kube_client::Error) -> Vec<(String, String)> {
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
        .map(|c| (c.field, c.message))
        .collect()
}

fn has(cs: &[(String, String)], field: &str, text: &str) -> bool {
    cs.iter().any(|(f, m)| f == field && m.contains(text))
}

#[tokio::test]
async fn junctors_are_checked_on_create_and_patch() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, schema()).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let pp = PostParams::default();

    api.create(&pp, &obj("ok", json!({"cron": "* * * * *", "replicas": 3})))
        .await
        .unwrap();

    let cs = causes(
        api.create(&pp, &obj("neither", json!({"replicas": 3})))
            .await
            .unwrap_err(),
    );
    assert!(
        has(
            &cs,
            "spec",
            "spec in body must validate at least one schema (anyOf)"
        ),
        "{cs:?}"
    );
    assert!(
        has(&cs, "spec.cron", "Required value"),
        "closest alternative listed: {cs:?}"
    );

    let cs = causes(
        api.create(&pp, &obj("seven", json!({"interval": 5, "replicas": 7})))
            .await
            .unwrap_err(),
    );
    assert!(
        has(
            &cs,
            "spec",
            "must validate one and only one schema (oneOf). Found none valid"
        ),
        "{cs:?}"
    );

    let cs = causes(
        api.create(
            &pp,
            &obj("legacy", json!({"interval": 5, "mode": "legacy"})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        has(
            &cs,
            "spec",
            "spec in body must not validate the schema (not)"
        ),
        "{cs:?}"
    );

    let cs = causes(
        api.create(&pp, &obj("long", json!({"cron": "x".repeat(21)})))
            .await
            .unwrap_err(),
    );
    assert!(
        has(&cs, "spec.cron", "may not be more than 20"),
        "allOf: {cs:?}"
    );

    // The same rules on a patch; the stored object is unchanged.
    let cs = causes(
        api.patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(has(&cs, "spec", "(oneOf)"), "{cs:?}");
    assert_eq!(api.get("ok").await.unwrap().data["spec"]["replicas"], 3);
}

#[tokio::test]
async fn junctors_that_shape_the_object_are_refused_on_crd_write() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let bad = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "string"}},
        "anyOf": [{"type": "object", "properties": {"a": {"default": "x"}}}],
        "not": {"properties": {"ghost": {"minLength": 1}}}}}});
    let cs = causes(install(&client, bad).await.unwrap_err());
    let p = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";
    assert!(
        has(
            &cs,
            &format!("{p}.anyOf[0].type"),
            "must be empty to be structural"
        ),
        "{cs:?}"
    );
    assert!(
        has(
            &cs,
            &format!("{p}.anyOf[0].properties[a].default"),
            "must be undefined to be structural"
        ),
        "{cs:?}"
    );
    assert!(
        has(
            &cs,
            &format!("{p}.not.properties[ghost]"),
            "outside of value validations"
        ),
        "{cs:?}"
    );

    // The int-or-string pattern is structural.
    let ok = json!({"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}}});
    install(&client, ok).await.unwrap();
}
