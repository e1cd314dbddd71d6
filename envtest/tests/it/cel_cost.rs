//! The cost of CEL rules is bounded when their CRD is written, as the API
//! server bounds it: a rule whose estimated cost (from the schema's
//! `maxItems`/`maxLength`/`maxProperties`) is over the per-rule budget, or
//! a CRD whose rules together are over the per-CRD budget, is refused with
//! the rule's path; the server keeps answering meanwhile; the same rule
//! with bounds declared is accepted and enforced.

use crate::crd::{widget_crd, widgets};
use crate::status;
use envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

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

/// A list of strings (bounded or not) and a rule that compares every item
/// with every other, and a string blown up by `replace`.
fn spec(bounded: bool) -> Value {
    let mut items = json!({"type": "array", "items": {"type": "string"}});
    let mut text = json!({"type": "string"});
    if bounded {
        items["maxItems"] = json!(50);
        items["items"]["maxLength"] = json!(20);
        text["maxLength"] = json!(100);
    }
    json!({"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.names.all(a, self.names.exists_one(b, a == b))", "message": "names are unique"},
            {"rule": "self.note.replace('', self.note).size() < 100000"}],
        "properties": {"names": items, "note": text}})
}

#[tokio::test]
async fn over_budget_rules_are_refused_at_crd_write_while_the_server_answers() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();

    let start = Instant::now();
    let (refused, version) =
        tokio::join!(install(&client, spec(false)), client.apiserver_version());
    assert!(start.elapsed() < Duration::from_secs(5), "refused promptly");
    version.unwrap();
    let s = status(refused.unwrap_err());
    assert_eq!(
        (s.code, s.reason.as_str()),
        (422, "Invalid"),
        "{}",
        s.message
    );
    let causes = s.details.unwrap().causes;
    let p = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    for i in 0..2 {
        let field = format!("{p}[{i}].rule");
        let c = causes
            .iter()
            .find(|c| c.field == field)
            .unwrap_or_else(|| panic!("{field} not refused: {causes:?}"));
        assert_eq!(c.reason, "FieldValueForbidden");
        assert!(
            c.message
                .contains("estimated rule cost exceeds budget by factor of")
                && c.message.contains("maxItems"),
            "{}",
            c.message
        );
    }

    // With bounds declared the same rules are accepted and enforced.
    install(&client, spec(true)).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let w = |name: &str, names: Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name}, "spec": {"names": names, "note": "hi"}}))
        .unwrap()
    };
    let pp = PostParams::default();
    api.create(&pp, &w("unique", json!(["a", "b"])))
        .await
        .unwrap();
    let s = status(
        api.create(&pp, &w("twice", json!(["a", "a"])))
            .await
            .unwrap_err(),
    );
    assert!(s.message.contains("names are unique"), "{}", s.message);
}

#[tokio::test]
async fn rules_run_once_per_list_item_count_against_the_crd_budget() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    // Each rule is cheap, but it runs for every item of an unbounded list of
    // unbounded maps: together far over the per-CRD budget.
    let item = json!({"type": "object", "additionalProperties": {"type": "string",
        "x-kubernetes-validations": [{"rule": "self.startsWith('a')"}]}});
    let s = status(
        install(
            &client,
            json!({"type": "object", "properties": {
            "groups": {"type": "array", "items": item}}}),
        )
        .await
        .unwrap_err(),
    );
    let causes = s.details.unwrap().causes;
    assert!(
        causes
            .iter()
            .any(|c| c.field == "spec.versions[0].schema.openAPIV3Schema"
                && c.message.contains(
                    "estimated rule cost total for entire OpenAPIv3 schema exceeds budget"
                )),
        "{causes:?}"
    );
}
