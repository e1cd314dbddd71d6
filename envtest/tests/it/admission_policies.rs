//! ValidatingAdmissionPolicy with bindings: a policy denying with its
//! message (and messageExpression, reason), match constraints and
//! conditions, variables, params through paramRef, and the Warn action.

use crate::{cm, raw_full, status};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_client::{Api, Client};
use serde_json::{Value, json};

async fn policy(client: &Client, name: &str, spec: Value) {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let p = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    api.create(&PostParams::default(), &p).await.unwrap();
}

async fn binding(client: &Client, name: &str, spec: Value) {
    let api: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let b = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    api.create(&PostParams::default(), &b).await.unwrap();
}

fn configmaps(ops: &[&str]) -> Value {
    json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ops, "resources": ["configmaps"]}]})
}

#[tokio::test]
async fn a_bound_policy_denies_with_its_message() {
    let env = envtest::TestEnv::start().await.unwrap();
    policy(
        &env.client(),
        "small-configmaps",
        json!({
            "matchConstraints": configmaps(&["CREATE", "UPDATE"]),
            "matchConditions": [{"name": "not-exempt", "expression": "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}],
            "variables": [{"name": "entries", "expression": "has(object.data) ? size(object.data) : 0"}],
            "validations": [
                {"expression": "variables.entries <= 2", "message": "at most two entries",
                 "reason": "Forbidden"},
                {"expression": "!object.metadata.name.startsWith('tmp-')",
                 "messageExpression": "'name ' + object.metadata.name + ' is temporary'"},
            ],
        }),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    // Not bound yet: nothing is checked.
    cms.create(&PostParams::default(), &cm("tmp-unbound", &[], "1"))
        .await
        .unwrap();
    binding(
        &env.client(),
        "small-configmaps-binding",
        json!({"policyName": "small-configmaps", "validationActions": ["Deny"]}),
    )
    .await;
    let mut big = cm("big", &[], "1");
    big.data = Some(
        [("a", "1"), ("b", "2"), ("c", "3")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let s = status(cms.create(&PostParams::default(), &big).await.unwrap_err());
    assert_eq!(s.code, 403);
    assert_eq!(s.reason, "Forbidden");
    assert_eq!(
        s.message,
        "ValidatingAdmissionPolicy 'small-configmaps' with binding 'small-configmaps-binding' denied request: at most two entries"
    );
    assert!(cms.get_opt("big").await.unwrap().is_none());
    let s = status(
        cms.create(&PostParams::default(), &cm("tmp-x", &[], "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .ends_with("denied request: name tmp-x is temporary"),
        "{}",
        s.message
    );
    // The match condition exempts labelled objects.
    cms.create(
        &PostParams::default(),
        &cm("tmp-y", &[("exempt", "yes")], "1"),
    )
    .await
    .unwrap();
    // Updates are checked too.
    cms.create(&PostParams::default(), &cm("ok", &[], "1"))
        .await
        .unwrap();
    let p = Patch::Merge(json!({"data": {"x": "1", "y": "2"}}));
    let s = status(
        cms.patch("ok", &PatchParams::default(), &p)
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 403);
    // Other resources are not.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(env.client(), "default");
    let mut sec = k8s_openapi::api::core::v1::Secret::default();
    sec.metadata.name = Some("tmp-secret".into());
    secrets.create(&PostParams::default(), &sec).await.unwrap();
}

#[tokio::test]
async fn params_and_warn_actions() {
    let env = envtest::TestEnv::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    // The limit lives in a ConfigMap in kube-system.
    let system: Api<ConfigMap> = Api::namespaced(env.client(), "kube-system");
    let mut limits = cm("limits", &[], "x");
    limits.data = Some([("max".to_string(), "3".to_string())].into());
    system
        .create(&PostParams::default(), &limits)
        .await
        .unwrap();
    policy(
        &env.client(),
        "max-length",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": configmaps(&["CREATE"]),
            "validations": [{"expression": "size(object.data.v) <= int(params.data.max)",
                "messageExpression": "'v is longer than ' + params.data.max"}],
        }),
    )
    .await;
    binding(
        &env.client(),
        "max-length-warn",
        json!({"policyName": "max-length", "validationActions": ["Warn"],
            "paramRef": {"name": "limits", "namespace": "kube-system", "parameterNotFoundAction": "Deny"},
            "matchResources": {"objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}}}),
    )
    .await;
    let body = serde_json::to_vec(&cm("long", &[], "abcdef")).unwrap();
    let (code, warnings, _) = raw_full(
        &env.client(),
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        body,
    )
    .await;
    assert_eq!(code, 201, "Warn does not deny");
    assert_eq!(
        warnings,
        [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'max-length' with binding 'max-length-warn': v is longer than 3\""
        ]
    );
    // The binding's matchResources leave this one out.
    let body = serde_json::to_vec(&cm("skipped", &[("skip", "1")], "abcdef")).unwrap();
    let (code, warnings, _) = raw_full(
        &env.client(),
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        body,
    )
    .await;
    assert_eq!((code, warnings.len()), (201, 0));
    // A binding whose params are missing denies (parameterNotFoundAction: Deny).
    binding(
        &env.client(),
        "max-length-missing",
        json!({"policyName": "max-length", "validationActions": ["Deny"],
            "paramRef": {"name": "nope", "namespace": "kube-system", "parameterNotFoundAction": "Deny"}}),
    )
    .await;
    let s = status(
        cms.create(&PostParams::default(), &cm("short", &[], "a"))
            .await
            .unwrap_err(),
    );
    assert!(s.message.contains("no params found"), "{}", s.message);
}
