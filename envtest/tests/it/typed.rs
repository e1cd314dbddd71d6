//! Built-in kinds are decoded through their types on every write (a JSON
//! type mismatch is 400 naming the field), and `fieldValidation`
//! Strict/Warn/Ignore governs unknown and duplicate fields, for built-in
//! kinds, custom resources and server-side apply.

use crate::crd::{widget_crd, widgets};
use crate::{raw, raw_full, status};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, ListParams, Patch, PatchParams, PostParams, ValidationDirective};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const JSON: Option<&str> = Some("application/json");

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

async fn post(client: &kube_client::Client, path: &str, v: Value) -> (u16, Value) {
    raw(client, "POST", path, JSON, body(v)).await
}

#[tokio::test]
async fn type_mismatches_on_builtin_kinds_are_400_with_the_field_path() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let cases = [
        (
            CMS,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 5}}),
            "data.n",
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "nginx"}}),
            "spec.containers",
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"replicas": "three", "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            "spec.replicas",
        ),
        (
            CMS,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}, "data": {"flag": true}}),
            "data.flag",
        ),
    ];
    for (path, obj, field) in cases {
        let (code, st) = post(&client, path, obj).await;
        assert_eq!(code, 400, "{field}: {st}");
        assert_eq!(st["reason"], "BadRequest");
        let msg = st["message"].as_str().unwrap();
        assert!(msg.contains(&format!("{field}: invalid type")), "{msg}");
    }
    // Nothing was stored, and every typed reader still reads the kinds.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // A patch that would store a mistyped value is refused the same way.
    let mut c = ConfigMap::default();
    c.metadata.name = Some("ok".into());
    cms.create(&PostParams::default(), &c).await.unwrap();
    let e = status(
        cms.patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": 5}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    assert!(e.message.contains("data.n"), "{}", e.message);
    cms.list(&ListParams::default()).await.unwrap();
}

fn typo_body() -> Vec<u8> {
    // `dta` is unknown, `data` is given twice.
    br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t","labelz":{"a":"b"}},"dta":{"a":"b"},"data":{"x":"1"},"data":{"y":"2"}}"#
        .to_vec()
}

#[tokio::test]
async fn field_validation_strict_warn_and_ignore() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());

    let (code, _, st) = raw_full(
        &client,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        JSON,
        typo_body(),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        r#"strict decoding error: unknown field "dta", unknown field "metadata.labelz", duplicate field "data""#
    );
    assert_eq!(status(cms.get("t").await.unwrap_err()).code, 404);

    // Warn is the default: stored without the unknown field, one Warning each.
    let (code, warnings, v) = raw_full(&client, "POST", CMS, JSON, typo_body()).await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(
        warnings,
        vec![
            r#"299 - "unknown field \"dta\"""#,
            r#"299 - "unknown field \"metadata.labelz\"""#,
            r#"299 - "duplicate field \"data\"""#,
        ]
    );
    assert!(v.get("dta").is_none());
    assert_eq!(v["data"], json!({"y": "2"}), "the last duplicate wins");
    let stored = cms.get("t").await.unwrap();
    assert_eq!(stored.data.unwrap().len(), 1);

    // Ignore: dropped, no warnings.
    let (code, warnings, v) = raw_full(
        &client,
        "PUT",
        &format!("{CMS}/t?fieldValidation=Ignore"),
        JSON,
        body(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"}, "dta": 1, "data": {"z": "3"}})),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(v.get("dta").is_none());

    // A bad directive is 400.
    let (code, _) = raw(
        &client,
        "POST",
        &format!("{CMS}?fieldValidation=Loose"),
        JSON,
        typo_body(),
    )
    .await;
    assert_eq!(code, 400);

    // Strict patches and server-side apply see the unknown fields of the result.
    let strict = PatchParams::default().validation(ValidationDirective::Strict);
    let e = status(
        cms.patch("t", &strict, &Patch::Merge(json!({"dta": {"a": "b"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.message, r#"strict decoding error: unknown field "dta""#);
    let apply = PatchParams::apply("tester").validation(ValidationDirective::Strict);
    let e = status(
        cms.patch(
            "t",
            &apply,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"}, "spec": {"x": 1}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    assert!(
        e.message.contains(r#"unknown field "spec""#),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn field_validation_applies_to_custom_resources() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions[0].schema = Some(
        serde_json::from_value(json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"color": {"type": "string"}}}}}}))
        .unwrap(),
    );
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "bogus": 1}, "spec": {"color": "red", "colour": "red"}});
    let (code, _, st) = raw_full(
        &client,
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        JSON,
        body(w.clone()),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        r#"strict decoding error: unknown field "metadata.bogus", unknown field "spec.colour""#
    );
    let (code, warnings, v) = raw_full(&client, "POST", path, JSON, body(w)).await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(v["spec"].get("colour").is_none());
    assert!(v["metadata"].get("bogus").is_none());
    let api = widgets(&client, "v1", Some("default"));
    let e = status(
        api.patch(
            "w",
            &PatchParams::default().validation(ValidationDirective::Strict),
            &Patch::Merge(json!({"spec": {"size": 3}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        e.message,
        r#"strict decoding error: unknown field "spec.size""#
    );
}
