//! CEL rules checked against the schema when their CRD is written (a field
//! the schema does not declare, a field selected on a scalar: 422 at the
//! rule's path), and the Kubernetes sets library evaluated on writes.

use crate::crd::{widget_crd, widgets};
use crate::status;
use envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

async fn install(
    client: &Client,
    spec: Value,
) -> Result<CustomResourceDefinition, kube_client::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions.truncate(1);
    crd.spec.versions[0].schema = Some(
        serde_json::from_value(json!({"openAPIV3Schema": {"type": "object",
            "properties": {"spec": spec}}}))
        .unwrap(),
    );
    crds.create(&PostParams::default(), &crd).await
}

fn props() -> Value {
    json!({
        "replicas": {"type": "integer"},
        "name": {"type": "string", "maxLength": 20},
        "allowed": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 20}},
        "chosen": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 20}}
    })
}

#[tokio::test]
async fn rules_selecting_undeclared_fields_are_refused_at_crd_write() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let spec = json!({"type": "object", "properties": props(), "x-kubernetes-validations": [
        {"rule": "self.replicas >= 0"},
        {"rule": "self.replicaz >= 0"},
        {"rule": "self.name.first == 'a'"},
        {"rule": "self.allowed.all(a, a.size() > 0)"}]});
    let s = status(install(&client, spec).await.unwrap_err());
    assert_eq!(
        (s.code, s.reason.as_str()),
        (422, "Invalid"),
        "{}",
        s.message
    );
    let causes = s.details.unwrap().causes;
    let p = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [format!("{p}[1].rule"), format!("{p}[2].rule")],
        "{causes:?}"
    );
    assert!(
        causes[0].message.contains("undefined field 'replicaz'"),
        "{}",
        causes[0].message
    );
    assert!(
        causes[1]
            .message
            .contains("type 'string' does not support field selection"),
        "{}",
        causes[1].message
    );
}

#[tokio::test]
async fn sets_library_rules_are_enforced() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let spec = json!({"type": "object", "properties": props(), "x-kubernetes-validations": [
        {"rule": "sets.contains(self.allowed, self.chosen)", "message": "chosen must be allowed"},
        {"rule": "!sets.intersects(self.chosen, ['root'])", "message": "root is reserved"}]});
    install(&client, spec).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let w: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1",
        "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"allowed": ["a", "b", "root"], "chosen": ["b"]}}))
    .unwrap();
    api.create(&PostParams::default(), &w).await.unwrap();
    for (chosen, message) in [
        (json!(["b", "c"]), "chosen must be allowed"),
        (json!(["root"]), "root is reserved"),
    ] {
        let s = status(
            api.patch(
                "w",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"chosen": chosen}})),
            )
            .await
            .unwrap_err(),
        );
        assert_eq!(s.code, 422);
        assert!(s.message.contains(message), "{}", s.message);
    }
}
