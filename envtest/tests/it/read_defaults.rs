//! CRD `default`s are applied on reads too, as the API server applies them
//! when it decodes from storage: objects stored before their CRD gained a
//! default show it on the next GET, LIST and watch event.

use crate::crd::{widget_crd, widgets};
use crate::take;
use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

fn schema(with_default: bool) -> Value {
    let mut size = json!({"type": "integer"});
    if with_default {
        size["default"] = json!(3);
    }
    json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "color": {"type": "string"},
            "size": size,
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"},
                "protocol": if with_default { json!({"type": "string", "default": "TCP"}) }
                            else { json!({"type": "string"}) }}}}
        }}
    }}})
}

fn obj(name: &str) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"color": "red", "ports": [{"name": "http"}]}}))
    .unwrap()
}

fn spec(ev: &WatchEvent<DynamicObject>) -> Value {
    match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => o.data["spec"].clone(),
        other => panic!("unexpected event {other:?}"),
    }
}

#[tokio::test]
async fn defaults_added_by_a_crd_update_show_on_get_list_and_watch() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions.truncate(1);
    crd.spec.versions[0].schema = Some(serde_json::from_value(schema(false)).unwrap());
    crds.create(&PostParams::default(), &crd).await.unwrap();

    let api = widgets(&client, "v1", Some("default"));
    let pp = PostParams::default();
    let first = api.create(&pp, &obj("first")).await.unwrap();
    let second = api.create(&pp, &obj("second")).await.unwrap();
    assert!(second.data["spec"].get("size").is_none(), "no default yet");
    let since = first.metadata.resource_version.clone().unwrap();

    let mut crd = crds.get("widgets.example.com").await.unwrap();
    crd.spec.versions[0].schema = Some(serde_json::from_value(schema(true)).unwrap());
    crds.replace("widgets.example.com", &pp, &crd)
        .await
        .unwrap();

    let want = json!({"color": "red", "size": 3, "ports": [{"name": "http", "protocol": "TCP"}]});
    assert_eq!(api.get("first").await.unwrap().data["spec"], want, "GET");
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    for w in &list.items {
        assert_eq!(w.data["spec"], want, "LIST");
    }

    // Synthetic ADDED events of a fresh watch.
    let mut fresh = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    for ev in take(&mut fresh, 2).await {
        assert_eq!(spec(&ev), want, "watch from 0");
    }
    // Events replayed from history, written before the default existed.
    let mut replay = api
        .watch(&WatchParams::default(), &since)
        .await
        .unwrap()
        .boxed();
    let ev = take(&mut replay, 1).await;
    assert_eq!(spec(&ev[0]), want, "watch replay");

    // A value the object sets is never overwritten by a default on read.
    let mut third = obj("third");
    third.data["spec"]["size"] = json!(7);
    api.create(&pp, &third).await.unwrap();
    assert_eq!(api.get("third").await.unwrap().data["spec"]["size"], 7);
}
