//! CRD conversion webhooks: objects stored in the storage version (v1),
//! served in v1alpha1 through a ConversionReview for get, list (one review
//! per page), watch and every write; a failing conversion is a 500.

use crate::crd::widgets;
use crate::webhook_server::{self, Reply, WebhookServer};
use crate::{status, take};
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// v1alpha1 says `spec.colour`, v1 says `spec.color`.
fn convert(obj: &Value, desired: &str) -> Value {
    let mut o = obj.clone();
    let spec = o["spec"].as_object_mut().cloned().unwrap_or_default();
    let mut out = serde_json::Map::new();
    for (k, v) in spec {
        let k = match (desired, k.as_str()) {
            ("example.com/v1", "colour") => "color".to_string(),
            ("example.com/v1alpha1", "color") => "colour".to_string(),
            _ => k,
        };
        out.insert(k, v);
    }
    o["spec"] = Value::Object(out);
    o["apiVersion"] = json!(desired);
    o
}

fn crd(server: &WebhookServer) -> CustomResourceDefinition {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}})
    };
    serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": server.client_config("/convert"),
                "conversionReviewVersions": ["v1"]}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("color")},
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema("colour")}
            ]
        }
    }))
    .unwrap()
}

async fn start(fail: Arc<AtomicBool>) -> (envtest::TestEnv, WebhookServer) {
    let server = webhook_server::start(&[], move |review| {
        let req = &review["request"];
        let desired = req["desiredAPIVersion"].as_str().unwrap_or("");
        let result = if fail.load(Ordering::SeqCst) {
            json!({"status": "Failure", "message": "the converter is broken"})
        } else {
            json!({"status": "Success"})
        };
        let objects: Vec<Value> = req["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| convert(o, desired))
            .collect();
        Reply::Json(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": req["uid"], "convertedObjects": objects, "result": result}}),
        )
    })
    .await;
    let env = envtest::TestEnv::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &crd(&server))
        .await
        .unwrap();
    (env, server)
}

fn alpha(name: &str, colour: &str) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "example.com/v1alpha1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"colour": colour}}),
    )
    .unwrap()
}

fn spec(o: &DynamicObject, field: &str) -> Option<String> {
    o.data["spec"][field].as_str().map(str::to_string)
}

#[tokio::test]
async fn objects_round_trip_between_v1alpha1_and_v1_through_the_webhook() {
    let (env, server) = start(Arc::new(AtomicBool::new(false))).await;
    let old = widgets(&env.client(), "v1alpha1", Some("default"));
    let new = widgets(&env.client(), "v1", Some("default"));

    // Write in v1alpha1: converted to v1 for storage, answered in v1alpha1.
    let created = old
        .create(&PostParams::default(), &alpha("a", "red"))
        .await
        .unwrap();
    assert_eq!(spec(&created, "colour").as_deref(), Some("red"));
    let reviews = server.reviews.lock().unwrap().clone();
    assert_eq!(reviews[0]["kind"], "ConversionReview");
    assert_eq!(reviews[0]["request"]["desiredAPIVersion"], "example.com/v1");
    assert_eq!(reviews[0]["request"]["objects"][0]["spec"]["colour"], "red");
    let stored = new.get("a").await.unwrap();
    assert_eq!(stored.types.as_ref().unwrap().api_version, "example.com/v1");
    assert_eq!(spec(&stored, "color").as_deref(), Some("red"));
    assert_eq!(spec(&stored, "colour"), None, "stored in v1's shape");

    // Read in v1alpha1.
    let got = old.get("a").await.unwrap();
    assert_eq!(spec(&got, "colour").as_deref(), Some("red"));
    assert_eq!(got.metadata.uid, stored.metadata.uid);
    assert_eq!(
        got.metadata.resource_version,
        stored.metadata.resource_version
    );

    // A list page goes through one review with all its objects.
    for n in ["b", "c"] {
        new.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": n}, "spec": {"color": "blue"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    }
    let before = server.calls();
    let list = old.list(&ListParams::default()).await.unwrap();
    assert_eq!(server.calls(), before + 1);
    assert_eq!(
        server.last()["request"]["objects"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let colours: Vec<_> = list.items.iter().map(|o| spec(o, "colour")).collect();
    assert_eq!(
        colours,
        [Some("red".into()), Some("blue".into()), Some("blue".into())]
    );
    // Reading in the storage version calls nothing.
    new.list(&ListParams::default()).await.unwrap();
    assert_eq!(server.calls(), before + 1);

    // Watch in v1alpha1: events are converted.
    let rv = list.metadata.resource_version.clone().unwrap();
    let mut stream = old
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    // Patch in v1alpha1: the stored object is converted, patched, converted back.
    let patched = old
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"colour": "green"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec(&patched, "colour").as_deref(), Some("green"));
    assert_eq!(
        spec(&new.get("a").await.unwrap(), "color").as_deref(),
        Some("green")
    );
    let events = take(&mut stream, 1).await;
    match &events[0] {
        WatchEvent::Modified(o) => {
            assert_eq!(
                o.types.as_ref().unwrap().api_version,
                "example.com/v1alpha1"
            );
            assert_eq!(spec(o, "colour").as_deref(), Some("green"));
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    // PUT in v1alpha1.
    let mut put = old.get("b").await.unwrap();
    put.data["spec"]["colour"] = json!("black");
    old.replace("b", &PostParams::default(), &put)
        .await
        .unwrap();
    assert_eq!(
        spec(&new.get("b").await.unwrap(), "color").as_deref(),
        Some("black")
    );
}

#[tokio::test]
async fn a_failing_conversion_is_an_internal_error() {
    let fail = Arc::new(AtomicBool::new(false));
    let (env, _server) = start(fail.clone()).await;
    let old = widgets(&env.client(), "v1alpha1", Some("default"));
    let new = widgets(&env.client(), "v1", Some("default"));
    new.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"color": "red"}}))
        .unwrap(),
    )
    .await
    .unwrap();
    fail.store(true, Ordering::SeqCst);
    let s = status(old.get("w").await.unwrap_err());
    assert_eq!(s.code, 500);
    assert_eq!(
        s.message,
        "Internal error occurred: conversion webhook for example.com/v1, Kind=Widget failed: the converter is broken"
    );
    let s = status(old.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(s.code, 500);
    let s = status(
        old.create(&PostParams::default(), &alpha("x", "blue"))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 500);
    assert!(new.get_opt("x").await.unwrap().is_none(), "nothing stored");
    // The storage version needs no conversion.
    assert_eq!(
        spec(&new.get("w").await.unwrap(), "color").as_deref(),
        Some("red")
    );
}
