//! `x-kubernetes-validations` CEL rules: enforced on create, merge patch,
//! update and server-side apply with `self` bound where the rule is
//! declared; transition rules with `oldSelf` (and `optionalOldSelf`);
//! `message`, `messageExpression`, `reason` and `fieldPath` in the 422
//! causes; malformed rules and rules calling unsupported functions refused
//! when the CRD is written.

use crate::crd::{widget_crd, widgets};
use crate::status;
use envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube_client::core::response::StatusCause;
use serde_json::{Value, json};

async fn install(
    client: &Client,
    spec_schema: Value,
) -> Result<CustomResourceDefinition, kube_client::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    let schema =
        json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}});
    crd.spec.versions[0].schema = Some(serde_json::from_value(schema).unwrap());
    crd.spec.versions.truncate(1);
    crds.create(&PostParams::default(), &crd).await
}

fn obj(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

fn causes(e: kube_client::Error) -> Vec<StatusCause> {
    let s = status(e);
    assert_eq!(
        (s.code, s.reason.as_str()),
        (422, "Invalid"),
        "{}",
        s.message
    );
    s.details.unwrap().causes
}

fn scaling() -> Value {
    json!({"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas"}],
        "properties": {
            "replicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"},
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('w-')"}]},
            "tags": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 63},
                "x-kubernetes-validations": [{"rule": "self.all(t, t.matches('^[a-z]+$')) && self.isSorted()", "message": "tags are sorted lowercase words"}]}}})
}

#[tokio::test]
async fn rules_are_enforced_on_create_and_merge_patch() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, scaling()).await.unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let pp = PostParams::default();

    let e = api
        .create(&pp, &obj("big", json!({"replicas": 5, "maxReplicas": 3})))
        .await
        .unwrap_err();
    let c = causes(e);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        (c[0].field.as_str(), c[0].reason.as_str()),
        ("spec", "FieldValueInvalid")
    );
    assert_eq!(
        c[0].message,
        "Invalid value: \"object\": replicas must not exceed maxReplicas"
    );
    // A rule on a scalar, without a message, and one on a list.
    let e = api
        .create(
            &pp,
            &obj(
                "s",
                json!({"replicas": 1, "maxReplicas": 3, "name": "x", "tags": ["ok", "Not OK"]}),
            ),
        )
        .await
        .unwrap_err();
    let c = causes(e);
    let got: Vec<(&str, &str)> = c
        .iter()
        .map(|c| (c.field.as_str(), c.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "spec.name",
                "Invalid value: \"string\": failed rule: self.startsWith('w-')"
            ),
            (
                "spec.tags",
                "Invalid value: \"array\": tags are sorted lowercase words"
            ),
        ]
    );

    api.create(
        &pp,
        &obj(
            "w",
            json!({"replicas": 2, "maxReplicas": 3, "name": "w-1", "tags": ["a"]}),
        ),
    )
    .await
    .unwrap();
    let e = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap_err();
    assert_eq!(causes(e)[0].field, "spec");
    assert_eq!(
        api.get("w").await.unwrap().data["spec"]["replicas"],
        2,
        "a refused patch changes nothing"
    );
    let w = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["replicas"], 3);
}

#[tokio::test]
async fn transition_rules_see_old_self_on_update_patch_and_apply() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(
        &client,
        json!({"type": "object", "properties": {
            "replicas": {"type": "integer",
                "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "replicas may not decrease"}]},
            "class": {"type": "string",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "class is immutable"}]},
            "mode": {"type": "string", "x-kubernetes-validations": [{"rule": "oldSelf.hasValue() || self == 'initial'",
                "optionalOldSelf": true, "message": "mode starts as initial"}]}}}),
    )
    .await
    .unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let pp = PostParams::default();

    // On create the rules with a plain oldSelf do not run; optionalOldSelf does.
    let e = api
        .create(
            &pp,
            &obj("w", json!({"replicas": 3, "class": "a", "mode": "later"})),
        )
        .await
        .unwrap_err();
    let c = causes(e);
    assert_eq!(
        (c.len(), c[0].field.as_str(), c[0].message.as_str()),
        (
            1,
            "spec.mode",
            "Invalid value: \"string\": mode starts as initial"
        )
    );
    api.create(
        &pp,
        &obj("w", json!({"replicas": 3, "class": "a", "mode": "initial"})),
    )
    .await
    .unwrap();

    let merge = |spec: Value| Patch::Merge(json!({"spec": spec}));
    let pp_patch = PatchParams::default();
    api.patch(
        "w",
        &pp_patch,
        &merge(json!({"replicas": 5, "mode": "later"})),
    )
    .await
    .unwrap();
    let e = api
        .patch("w", &pp_patch, &merge(json!({"replicas": 2})))
        .await
        .unwrap_err();
    let c = causes(e);
    assert_eq!(
        (c[0].field.as_str(), c[0].message.as_str()),
        (
            "spec.replicas",
            "Invalid value: \"integer\": replicas may not decrease"
        )
    );

    // Update (PUT) and server-side apply go through the same rules.
    let mut cur = api.get("w").await.unwrap();
    cur.data["spec"]["class"] = json!("b");
    let e = api.replace("w", &pp, &cur).await.unwrap_err();
    assert_eq!(causes(e)[0].field, "spec.class");
    let apply = PatchParams::apply("test").force();
    let e = api
        .patch(
            "w",
            &apply,
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"replicas": 1}})),
        )
        .await
        .unwrap_err();
    assert_eq!(causes(e)[0].field, "spec.replicas");
    let w = api.get("w").await.unwrap();
    assert_eq!(
        w.data["spec"],
        json!({"replicas": 5, "class": "a", "mode": "later"})
    );
}

#[tokio::test]
async fn message_expression_reason_and_field_path_shape_the_cause() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(
        &client,
        json!({"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max",
                 "messageExpression": "'min ' + string(self.min) + ' exceeds max ' + string(self.max)",
                 "reason": "FieldValueForbidden", "fieldPath": ".min"},
                {"rule": "has(self.owner)", "message": "owner is required", "reason": "FieldValueRequired",
                 "fieldPath": ".owner"}],
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}, "owner": {"type": "string"}}}),
    )
    .await
    .unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let e = api
        .create(
            &PostParams::default(),
            &obj("w", json!({"min": 5, "max": 3})),
        )
        .await
        .unwrap_err();
    let c = causes(e);
    let got: Vec<(&str, &str, &str)> = c
        .iter()
        .map(|c| (c.reason.as_str(), c.field.as_str(), c.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "FieldValueForbidden",
                "spec.min",
                "Forbidden: min 5 exceeds max 3"
            ),
            (
                "FieldValueRequired",
                "spec.owner",
                "Required value: owner is required"
            ),
        ]
    );
    api.create(
        &PostParams::default(),
        &obj("ok", json!({"min": 1, "max": 3, "owner": "me"})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_rule_that_cannot_be_evaluated_refuses_the_object() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(
        &client,
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.limit > 1"}],
            "properties": {"limit": {"type": "integer"}}}),
    )
    .await
    .unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let e = api
        .create(&PostParams::default(), &obj("w", json!({})))
        .await
        .unwrap_err();
    let c = causes(e);
    assert_eq!(c[0].field, "spec");
    assert!(c[0].message.contains("could not be evaluated"), "{c:?}");
}

#[tokio::test]
async fn malformed_and_unsupported_rules_are_refused_at_crd_write() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]";
    let spec = |rule: Value| {
        json!({"type": "object", "x-kubernetes-validations": [rule],
            "properties": {"memory": {"type": "string"}, "items": {"type": "array", "items": {"type": "string"}}}})
    };
    let cases = [
        (
            json!({"rule": "self.memory == "}),
            format!("{at}.rule"),
            "compilation failed",
        ),
        (
            json!({"rule": "isCIDR(self.memory)"}),
            format!("{at}.rule"),
            "isCIDR",
        ),
        (
            json!({"rule": "self.memory.isSemver()"}),
            format!("{at}.rule"),
            "isSemver",
        ),
        (
            json!({"rule": "self.memory.isIPv4()"}),
            format!("{at}.rule"),
            "isIPv4",
        ),
        (
            json!({"rule": "other == 1"}),
            format!("{at}.rule"),
            "'other'",
        ),
        (
            json!({"rule": "true", "messageExpression": "'a' +"}),
            format!("{at}.messageExpression"),
            "compilation failed",
        ),
        (
            json!({"rule": "true", "reason": "FieldValueBogus"}),
            format!("{at}.reason"),
            "Unsupported value",
        ),
        (
            json!({"rule": "true", "optionalOldSelf": true}),
            format!("{at}.optionalOldSelf"),
            "oldSelf",
        ),
    ];
    for (rule, field, says) in cases {
        let e = install(&client, spec(rule.clone())).await.unwrap_err();
        let c = causes(e);
        assert_eq!(c.len(), 1, "{rule}: {c:?}");
        assert_eq!(c[0].field, field, "{rule}");
        assert!(c[0].message.contains(says), "{rule}: {}", c[0].message);
    }
    // Nothing was registered.
    let api = widgets(&client, "v1", Some("default"));
    assert_eq!(status(api.get("x").await.unwrap_err()).code, 404);

    // A transition rule inside an atomic list has no old value to compare.
    let e = install(
        &client,
        json!({"type": "object", "properties": {"list": {"type": "array",
            "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        causes(e)[0].field,
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].items.x-kubernetes-validations[0].rule"
    );

    // Updating an accepted CRD to a malformed rule is refused too.
    let crd = install(&client, spec(json!({"rule": "size(self.memory) > 0"})))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut bad = crd.clone();
    bad.spec.versions[0].schema = Some(
        serde_json::from_value(json!({"openAPIV3Schema": {"type": "object",
            "properties": {"spec": spec(json!({"rule": "self.memory ="}))}}}))
        .unwrap(),
    );
    let e = crds
        .replace("widgets.example.com", &PostParams::default(), &bad)
        .await
        .unwrap_err();
    assert_eq!(causes(e)[0].field, format!("{at}.rule"));
}

#[tokio::test]
async fn quantity_and_url_libraries_are_enforced() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(
        &client,
        json!({"type": "object",
            "properties": {
                "memory": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "quantity(self).isLessThan(quantity('1Gi'))", "message": "memory must be under 1Gi"}]},
                "endpoint": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "url(self).getScheme() == 'https'", "message": "endpoint must be https"}]}}}),
    )
    .await
    .unwrap();
    let api = widgets(&client, "v1", Some("default"));
    let pp = PostParams::default();

    // 1023Mi < 1Gi <= 1024Mi: compared by value, not as strings.
    api.create(
        &pp,
        &obj(
            "ok",
            json!({"memory": "1023Mi", "endpoint": "HTTPS://example.com:8443/x?y=1"}),
        ),
    )
    .await
    .unwrap();
    let e = api
        .create(
            &pp,
            &obj(
                "big",
                json!({"memory": "1024Mi", "endpoint": "http://example.com/"}),
            ),
        )
        .await
        .unwrap_err();
    let mut got: Vec<(String, String)> = causes(e)
        .into_iter()
        .map(|c| (c.field, c.message))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (
                "spec.endpoint".to_string(),
                "Invalid value: \"string\": endpoint must be https".to_string()
            ),
            (
                "spec.memory".to_string(),
                "Invalid value: \"string\": memory must be under 1Gi".to_string()
            ),
        ]
    );

    // A value that does not parse refuses the object with the parse error.
    for (name, spec, says) in [
        ("badq", json!({"memory": "12 G"}), "quantities must match"),
        (
            "badu",
            json!({"endpoint": "example.com/x"}),
            "URL parse error",
        ),
    ] {
        let e = api.create(&pp, &obj(name, spec)).await.unwrap_err();
        let c = causes(e);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].message.contains(says), "{name}: {}", c[0].message);
    }
    assert_eq!(api.list(&Default::default()).await.unwrap().items.len(), 1);
}
