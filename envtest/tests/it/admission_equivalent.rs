//! Admission webhooks matched through another version of a custom resource
//! (`matchPolicy: Equivalent`, the default): the webhook's rule names
//! `example.com/v1 widgets`, the request writes `v1alpha1`. The webhook
//! gets the object (and old object) converted to v1, `kind`/`resource` in
//! v1 and `requestKind`/`requestResource` in v1alpha1; a mutating
//! webhook's v1 patch lands on the v1alpha1 object; `Exact` does not call
//! it; a failed conversion refuses the write with its reason.
//!
//! The CRD stores v1alpha1, so with `strategy: Webhook` the only conversion
//! a v1alpha1 write goes through is admission's.

use crate::admission_webhooks::{mutating, validating};
use crate::crd::widgets;
use crate::status;
use crate::webhook_server::{self, Reply, WebhookServer, allow, patch};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// v1alpha1 says `spec.colour`, v1 says `spec.color`.
fn convert(obj: &Value, desired: &str) -> Value {
    let mut o = obj.clone();
    if let Some(spec) = o["spec"].as_object_mut() {
        let renames = match desired {
            "example.com/v1" => ("colour", "color"),
            _ => ("color", "colour"),
        };
        if let Some(v) = spec.remove(renames.0) {
            spec.insert(renames.1.to_string(), v);
        }
    }
    o["apiVersion"] = json!(desired);
    o
}

/// Answers ConversionReviews (failing while `fail` is set) and hands
/// AdmissionReviews to `admit`.
async fn server(
    fail: Arc<AtomicBool>,
    admit: impl Fn(&Value) -> Reply + Send + Sync + 'static,
) -> WebhookServer {
    webhook_server::start(&[], move |review| {
        if review["kind"] != "ConversionReview" {
            return admit(review);
        }
        let req = &review["request"];
        let desired = req["desiredAPIVersion"].as_str().unwrap_or("");
        let result = if fail.load(Ordering::SeqCst) {
            json!({"status": "Failure", "message": "the converter is broken"})
        } else {
            json!({"status": "Success"})
        };
        let objects: Vec<Value> = req["objects"]
            .as_array()
            .map(|a| a.iter().map(|o| convert(o, desired)).collect())
            .unwrap_or_default();
        Reply::Json(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": req["uid"], "convertedObjects": objects, "result": result}}),
        )
    })
    .await
}

/// Widgets served in v1alpha1 (stored) and v1, converted by `server`'s
/// webhook, or by rewriting `apiVersion` without one.
fn crd(conversion: Option<&WebhookServer>) -> CustomResourceDefinition {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}})
    };
    let (conv, alpha, v1) = match conversion {
        Some(s) => (
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": s.client_config("/convert"),
                "conversionReviewVersions": ["v1"]}}),
            schema("colour"),
            schema("color"),
        ),
        None => (
            json!({"strategy": "None"}),
            schema("colour"),
            schema("colour"),
        ),
    };
    serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "conversion": conv,
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": true, "schema": alpha},
                {"name": "v1", "served": true, "storage": false, "schema": v1}
            ]
        }
    }))
    .unwrap()
}

async fn start(
    converting: bool,
    fail: Arc<AtomicBool>,
    admit: impl Fn(&Value) -> Reply + Send + Sync + 'static,
) -> (envtest::TestEnv, WebhookServer) {
    let server = server(fail, admit).await;
    let env = envtest::TestEnv::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &crd(converting.then_some(&server)))
        .await
        .unwrap();
    (env, server)
}

/// A webhook for `example.com/v1 widgets` on `ops`.
fn v1_hook(name: &str, server: &WebhookServer, ops: &[&str], extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "clientConfig": server.client_config("/admit"),
        "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                   "operations": ops, "resources": ["widgets"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    if let (Some(h), Some(extra)) = (h.as_object_mut(), extra.as_object()) {
        h.extend(extra.clone());
    }
    h
}

/// The AdmissionReviews the server received.
fn admissions(server: &WebhookServer) -> Vec<Value> {
    server
        .reviews
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "AdmissionReview")
        .cloned()
        .collect()
}

fn widget(version: &str, name: &str, field: &str, value: &str) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget",
        "metadata": {"name": name}, "spec": {field: value}}),
    )
    .unwrap()
}

fn gvk(version: &str) -> Value {
    json!({"group": "example.com", "version": version, "kind": "Widget"})
}

fn gvr(version: &str) -> Value {
    json!({"group": "example.com", "version": version, "resource": "widgets"})
}

#[tokio::test]
async fn a_validating_webhook_for_v1_sees_a_v1alpha1_write_in_v1() {
    let (env, server) = start(true, Arc::new(AtomicBool::new(false)), allow).await;
    let hook = v1_hook("v1.example.com", &server, &["CREATE", "UPDATE"], json!({}));
    validating(&env.client(), "widgets-v1", vec![hook]).await;
    let alpha = widgets(&env.client(), "v1alpha1", Some("default"));

    alpha
        .create(
            &PostParams::default(),
            &widget("v1alpha1", "a", "colour", "red"),
        )
        .await
        .unwrap();
    let seen = admissions(&server);
    assert_eq!(seen.len(), 1);
    let req = &seen[0]["request"];
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(req["kind"], gvk("v1"));
    assert_eq!(req["resource"], gvr("v1"));
    assert_eq!(req["requestKind"], gvk("v1alpha1"));
    assert_eq!(req["requestResource"], gvr("v1alpha1"));
    assert_eq!(req["object"]["apiVersion"], "example.com/v1");
    assert_eq!(req["object"]["spec"], json!({"color": "red"}));

    alpha
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"colour": "green"}})),
        )
        .await
        .unwrap();
    let seen = admissions(&server);
    assert_eq!(seen.len(), 2);
    let req = &seen[1]["request"];
    assert_eq!(req["operation"], "UPDATE");
    assert_eq!(req["kind"], gvk("v1"));
    assert_eq!(req["requestKind"], gvk("v1alpha1"));
    assert_eq!(req["object"]["spec"], json!({"color": "green"}));
    assert_eq!(req["oldObject"]["apiVersion"], "example.com/v1");
    assert_eq!(req["oldObject"]["spec"], json!({"color": "red"}));
    // Stored as written.
    let got = alpha.get("a").await.unwrap();
    assert_eq!(got.data["spec"], json!({"colour": "green"}));

    // A write in v1 matches exactly: kind and requestKind agree.
    widgets(&env.client(), "v1", Some("default"))
        .create(&PostParams::default(), &widget("v1", "b", "color", "blue"))
        .await
        .unwrap();
    let seen = admissions(&server);
    let req = &seen[2]["request"];
    assert_eq!(
        (&req["kind"], &req["requestKind"]),
        (&gvk("v1"), &gvk("v1"))
    );
}

#[tokio::test]
async fn a_mutating_webhook_patches_v1_paths_of_a_v1alpha1_write() {
    let (env, server) = start(true, Arc::new(AtomicBool::new(false)), |r| {
        patch(
            r,
            json!([{"op": "replace", "path": "/spec/color", "value": "blue"}]),
        )
    })
    .await;
    let hook = v1_hook("paint.example.com", &server, &["CREATE"], json!({}));
    mutating(&env.client(), "paint", vec![hook]).await;
    let alpha = widgets(&env.client(), "v1alpha1", Some("default"));

    let created = alpha
        .create(
            &PostParams::default(),
            &widget("v1alpha1", "a", "colour", "red"),
        )
        .await
        .unwrap();
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "example.com/v1alpha1"
    );
    assert_eq!(created.data["spec"], json!({"colour": "blue"}));
    let got = alpha.get("a").await.unwrap();
    assert_eq!(got.data["spec"], json!({"colour": "blue"}));
    let seen = admissions(&server);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["request"]["kind"], gvk("v1"));
    assert_eq!(seen[0]["request"]["requestKind"], gvk("v1alpha1"));
}

#[tokio::test]
async fn exact_match_policy_does_not_call_the_webhook_for_another_version() {
    let (env, server) = start(true, Arc::new(AtomicBool::new(false)), allow).await;
    let hook = v1_hook(
        "exact.example.com",
        &server,
        &["CREATE"],
        json!({"matchPolicy": "Exact"}),
    );
    validating(&env.client(), "exact", vec![hook]).await;

    widgets(&env.client(), "v1alpha1", Some("default"))
        .create(
            &PostParams::default(),
            &widget("v1alpha1", "a", "colour", "red"),
        )
        .await
        .unwrap();
    assert_eq!(admissions(&server).len(), 0, "not called for v1alpha1");

    widgets(&env.client(), "v1", Some("default"))
        .create(&PostParams::default(), &widget("v1", "b", "color", "red"))
        .await
        .unwrap();
    let seen = admissions(&server);
    assert_eq!(seen.len(), 1, "called for v1");
    assert_eq!(seen[0]["request"]["requestKind"], gvk("v1"));
}

#[tokio::test]
async fn a_failed_conversion_refuses_the_write_with_its_reason() {
    let fail = Arc::new(AtomicBool::new(true));
    let (env, server) = start(true, fail.clone(), allow).await;
    let alpha = widgets(&env.client(), "v1alpha1", Some("default"));
    // Written in the storage version, nothing converts.
    alpha
        .create(
            &PostParams::default(),
            &widget("v1alpha1", "before", "colour", "red"),
        )
        .await
        .unwrap();
    // `Ignore` covers calling the webhook, not converting for it.
    let hook = v1_hook(
        "paint.example.com",
        &server,
        &["CREATE"],
        json!({"failurePolicy": "Ignore"}),
    );
    mutating(&env.client(), "paint", vec![hook]).await;

    let e = alpha
        .create(
            &PostParams::default(),
            &widget("v1alpha1", "a", "colour", "red"),
        )
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 500);
    assert_eq!(
        s.message,
        "Internal error occurred: conversion webhook for example.com/v1alpha1, Kind=Widget failed: the converter is broken"
    );
    assert_eq!(admissions(&server).len(), 0, "the webhook is not called");
    assert!(
        alpha.get_opt("a").await.unwrap().is_none(),
        "nothing stored"
    );

    fail.store(false, Ordering::SeqCst);
    alpha
        .create(
            &PostParams::default(),
            &widget("v1alpha1", "a", "colour", "red"),
        )
        .await
        .unwrap();
    assert_eq!(admissions(&server).len(), 1);
}

#[tokio::test]
async fn without_a_conversion_webhook_the_object_is_sent_with_the_rules_api_version() {
    let (env, server) = start(false, Arc::new(AtomicBool::new(false)), allow).await;
    let hook = v1_hook("v1.example.com", &server, &["CREATE", "UPDATE"], json!({}));
    validating(&env.client(), "widgets-v1", vec![hook]).await;
    let alpha = widgets(&env.client(), "v1alpha1", Some("default"));

    alpha
        .create(
            &PostParams::default(),
            &widget("v1alpha1", "a", "colour", "red"),
        )
        .await
        .unwrap();
    alpha
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"colour": "green"}})),
        )
        .await
        .unwrap();
    let seen = admissions(&server);
    assert_eq!(seen.len(), 2);
    for (review, colour) in seen.iter().zip(["red", "green"]) {
        let req = &review["request"];
        assert_eq!(req["kind"], gvk("v1"));
        assert_eq!(req["requestResource"], gvr("v1alpha1"));
        assert_eq!(req["object"]["apiVersion"], "example.com/v1");
        assert_eq!(req["object"]["spec"]["colour"], colour);
    }
    assert_eq!(
        seen[1]["request"]["oldObject"]["apiVersion"],
        "example.com/v1"
    );
    assert_eq!(server.calls(), 2, "no conversion webhook");
}
