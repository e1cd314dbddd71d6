//! Metadata-only reads over HTTP, as controller-runtime's and kube-rs's
//! metadata clients ask for them: `as=PartialObjectMetadata` (get, watch)
//! and `as=PartialObjectMetadataList` (list) for ConfigMaps and a custom
//! resource, in JSON and protobuf (decoded with k8s-pb), with the
//! negotiation a cluster does (fallbacks, 406).

use crate::crd::{widget, widget_crd, widgets};
use crate::protobuf::{next_frame, send};
use crate::{WAIT, cm, take};
use envtest::TestEnv;
use envtest::codec::PROTOBUF;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube_client::Client;
use kube_client::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use prost::Message;
use serde_json::{Value, json};

const OBJ_JSON: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const LIST_JSON: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
/// What client-go's metadata client sends for a list.
const LIST_PB: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// What client-go's metadata client sends for a get and a watch.
const OBJ_PB: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

async fn get(client: &Client, path: &str, accept: &str) -> (u16, String, Value) {
    let (code, ct, body) = send(client, "GET", path, None, accept, vec![]).await;
    let v = if ct == PROTOBUF {
        envtest::codec::from_protobuf(&body).unwrap()
    } else {
        serde_json::from_slice(&body).unwrap()
    };
    (code, ct, v)
}

/// The envelope and message of a protobuf answer, read with k8s-pb alone.
fn unwrap_pb(body: &[u8]) -> (String, String, Vec<u8>) {
    let unknown = Unknown::decode(body.strip_prefix(b"k8s\0").unwrap()).unwrap();
    let tm = unknown.type_meta.unwrap();
    (
        tm.api_version.unwrap(),
        tm.kind.unwrap(),
        unknown.raw.unwrap(),
    )
}

async fn seed_config_maps(client: &Client, n: usize) -> Api<ConfigMap> {
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..n {
        api.create(
            &PostParams::default(),
            &cm(&format!("cm-{i}"), &[("app", "web")], "payload"),
        )
        .await
        .unwrap();
    }
    api
}

#[tokio::test]
async fn config_maps_get_and_list_as_partial_object_metadata_in_json() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let api = seed_config_maps(&client, 3).await;
    let path = "/api/v1/namespaces/default/configmaps";

    let (code, ct, one) = get(&client, &format!("{path}/cm-1"), OBJ_JSON).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    let full = api.get("cm-1").await.unwrap();
    assert_eq!(
        one,
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": serde_json::to_value(&full.metadata).unwrap()}),
        "the whole metadata and nothing else"
    );

    let (code, _, list) = get(&client, &format!("{path}?limit=2"), LIST_JSON).await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(list["metadata"]["remainingItemCount"], 1);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    for it in items {
        assert_eq!(it["kind"], "PartialObjectMetadata");
        assert_eq!(it["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(it["metadata"]["labels"]["app"], "web");
        assert!(it.get("data").is_none(), "{it}");
    }
    // The continue token pages on from the same snapshot.
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let token = list["metadata"]["continue"].as_str().unwrap();
    api.create(&PostParams::default(), &cm("cm-late", &[], "x"))
        .await
        .unwrap();
    let (_, _, rest) = get(
        &client,
        &format!("{path}?limit=2&continue={token}"),
        LIST_JSON,
    )
    .await;
    assert_eq!(rest["metadata"]["resourceVersion"], rv);
    let names: Vec<&str> = rest["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cm-2"]);

    // v1beta1 too, without remainingItemCount.
    let beta = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1";
    let (_, _, list) = get(&client, &format!("{path}?limit=1"), beta).await;
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(list["items"][0]["apiVersion"], "meta.k8s.io/v1beta1");
    assert!(list["metadata"].get("remainingItemCount").is_none());
    assert!(list["metadata"]["continue"].is_string());

    // kube-rs's metadata calls read the same answers.
    let meta = api.get_metadata("cm-0").await.unwrap();
    assert_eq!(meta.metadata.labels.unwrap()["app"], "web");
    let metas = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(metas.items.len(), 4);
}

#[tokio::test]
async fn negotiation_falls_back_and_refuses_as_a_cluster_does() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    seed_config_maps(&client, 1).await;
    let path = "/api/v1/namespaces/default/configmaps";

    // The wrong shape for the endpoint is 406 with the cluster's message.
    let (code, _, st) = get(&client, path, OBJ_JSON).await;
    assert_eq!((code, st["reason"].as_str()), (406, Some("NotAcceptable")));
    assert_eq!(
        st["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*v1.ConfigMapList)"
    );
    let (code, _, st) = get(&client, &format!("{path}/cm-0"), LIST_JSON).await;
    assert_eq!(code, 406);
    assert!(
        st["message"].as_str().unwrap().contains("is not a list"),
        "{st}"
    );
    // A version or kind that does not exist: 406 alone, the fallback otherwise.
    for bad in [
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2",
        "application/json;as=PartialObjectMetadataList;g=apps;v=v1",
        "application/json;as=ConfigMapList;g=meta.k8s.io;v=v1",
    ] {
        let (code, _, st) = get(&client, path, bad).await;
        assert_eq!(
            (code, st["reason"].as_str()),
            (406, Some("NotAcceptable")),
            "{bad}"
        );
        let (code, _, list) = get(&client, path, &format!("{bad},application/json")).await;
        assert_eq!(
            (code, list["kind"].as_str()),
            (200, Some("ConfigMapList")),
            "{bad}"
        );
        assert_eq!(list["items"][0]["data"]["v"], "payload");
    }
    // Errors are Status objects, not reshaped.
    let (code, _, st) = get(&client, &format!("{path}/missing"), OBJ_JSON).await;
    assert_eq!((code, st["kind"].as_str()), (404, Some("Status")));
    // Writes answer in the shape asked for too.
    let body = serde_json::to_vec(&cm("written", &[], "v")).unwrap();
    let (code, _, bytes) = send(
        &client,
        "POST",
        path,
        Some("application/json"),
        OBJ_JSON,
        body,
    )
    .await;
    let created: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        (code, created["kind"].as_str()),
        (201, Some("PartialObjectMetadata"))
    );
    assert!(created.get("data").is_none());
}

#[tokio::test]
async fn config_maps_in_protobuf_decode_with_k8s_pb() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let api = seed_config_maps(&client, 2).await;
    let path = "/api/v1/namespaces/default/configmaps";

    let (code, ct, body) = send(&client, "GET", path, None, LIST_PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    let (av, kind, raw) = unwrap_pb(&body);
    assert_eq!(
        (av.as_str(), kind.as_str()),
        ("meta.k8s.io/v1", "PartialObjectMetadataList")
    );
    let list = pb_meta::PartialObjectMetadataList::decode(raw.as_slice()).unwrap();
    assert_eq!(list.items.len(), 2);
    let first = list.items[0].metadata.as_ref().unwrap();
    assert_eq!(first.name.as_deref(), Some("cm-0"));
    assert_eq!(first.labels["app"], "web");
    let full = api.get("cm-0").await.unwrap();
    assert_eq!(first.uid, full.metadata.uid);
    assert_eq!(first.resource_version, full.metadata.resource_version);
    assert_eq!(
        list.metadata.unwrap().resource_version.unwrap(),
        env.current_revision().to_string()
    );

    let (code, ct, body) = send(
        &client,
        "GET",
        &format!("{path}/cm-1"),
        None,
        OBJ_PB,
        vec![],
    )
    .await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    let (av, kind, raw) = unwrap_pb(&body);
    assert_eq!(
        (av.as_str(), kind.as_str()),
        ("meta.k8s.io/v1", "PartialObjectMetadata")
    );
    let one = pb_meta::PartialObjectMetadata::decode(raw.as_slice()).unwrap();
    assert_eq!(one.metadata.unwrap().name.as_deref(), Some("cm-1"));

    // v1beta1's list message has its fields the other way round.
    let beta =
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1";
    let (_, _, body) = send(&client, "GET", path, None, beta, vec![]).await;
    let (av, _, raw) = unwrap_pb(&body);
    assert_eq!(av, "meta.k8s.io/v1beta1");
    let list = k8s_pb::apimachinery::pkg::apis::meta::v1beta1::PartialObjectMetadataList::decode(
        raw.as_slice(),
    )
    .unwrap();
    assert_eq!(list.items.len(), 2);

    // A 406 in protobuf is a protobuf Status.
    let (code, ct, body) = send(&client, "GET", path, None, OBJ_PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (406, PROTOBUF));
    let (_, kind, _) = unwrap_pb(&body);
    assert_eq!(kind, "Status");
}

/// Read a JSON watch body line by line.
async fn next_line(body: &mut kube_client::client::Body, buf: &mut Vec<u8>) -> Value {
    use http_body_util::BodyExt;
    loop {
        if let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            return serde_json::from_slice(&line).unwrap();
        }
        let chunk = tokio::time::timeout(WAIT, body.frame())
            .await
            .expect("timed out waiting for a watch event")
            .expect("watch ended")
            .unwrap();
        if let Ok(data) = chunk.into_data() {
            buf.extend_from_slice(&data);
        }
    }
}

async fn open_watch(client: &Client, path: &str, accept: &str) -> kube_client::client::Body {
    let req = http::Request::builder()
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .body(kube_client::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.into_body()
}

#[tokio::test]
async fn watches_carry_partial_object_metadata_in_json_and_protobuf() {
    let env = TestEnv::builder()
        .bookmark_interval(std::time::Duration::from_millis(50))
        .start()
        .await
        .unwrap();
    let client = env.client();
    let api = seed_config_maps(&client, 1).await;
    let path = "/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true";
    let mut json_body = open_watch(&client, path, OBJ_JSON).await;
    let mut pb_body = open_watch(&client, path, OBJ_PB).await;
    let (mut jb, mut pbuf) = (Vec::new(), Vec::new());

    let ev = next_line(&mut json_body, &mut jb).await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(ev["object"]["metadata"]["name"], "cm-0");
    assert!(ev["object"].get("data").is_none());
    let ev = next_frame(&mut pb_body, &mut pbuf).await;
    assert_eq!(
        (ev["type"].as_str(), ev["object"]["kind"].as_str()),
        (Some("ADDED"), Some("PartialObjectMetadata"))
    );

    api.create(&PostParams::default(), &cm("next", &[("k", "v")], "x"))
        .await
        .unwrap();
    api.delete("cm-0", &Default::default()).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let ev = next_line(&mut json_body, &mut jb).await;
        assert_eq!(ev["object"]["apiVersion"], "meta.k8s.io/v1", "{ev}");
        assert_eq!(ev["object"]["kind"], "PartialObjectMetadata", "{ev}");
        if ev["type"] != "BOOKMARK" {
            seen.push((ev["type"].clone(), ev["object"]["metadata"]["name"].clone()));
        }
    }
    assert_eq!(
        seen,
        [
            (json!("ADDED"), json!("next")),
            (json!("DELETED"), json!("cm-0"))
        ]
    );
    // The protobuf stream: WatchEvent frames whose objects are
    // PartialObjectMetadata envelopes, bookmarks included.
    let mut types = Vec::new();
    while types.len() < 3 {
        let ev = next_frame(&mut pb_body, &mut pbuf).await;
        assert_eq!(ev["object"]["kind"], "PartialObjectMetadata", "{ev}");
        let t = ev["type"].as_str().unwrap().to_string();
        if !types.contains(&t) {
            types.push(t);
        }
    }
    types.sort();
    assert_eq!(types, ["ADDED", "BOOKMARK", "DELETED"]);

    // kube-rs's metadata watch reads the JSON stream.
    let mut stream = api
        .watch_metadata(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let evs = take(&mut stream, 1).await;
    match &evs[0] {
        WatchEvent::Added(m) => assert_eq!(m.metadata.name.as_deref(), Some("next")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn custom_resources_answer_metadata_only_in_json_and_protobuf() {
    let env = TestEnv::builder()
        .crds([widget_crd("Namespaced")])
        .start()
        .await
        .unwrap();
    let client = env.client();
    let api = widgets(&client, "v1", Some("default"));
    for (name, color) in [("w1", "red"), ("w2", "blue")] {
        api.create(&PostParams::default(), &widget(name, color))
            .await
            .unwrap();
    }
    let path = "/apis/example.com/v1/namespaces/default/widgets";

    let (code, _, list) = get(&client, path, LIST_JSON).await;
    assert_eq!(
        (code, list["kind"].as_str()),
        (200, Some("PartialObjectMetadataList"))
    );
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert!(list["items"][0].get("spec").is_none());
    // Protobuf, which custom resources do not speak otherwise, is served
    // for metadata-only answers, as on a cluster.
    let (code, ct, body) = send(&client, "GET", path, None, LIST_PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    let (_, kind, raw) = unwrap_pb(&body);
    assert_eq!(kind, "PartialObjectMetadataList");
    let list = pb_meta::PartialObjectMetadataList::decode(raw.as_slice()).unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .map(|i| i.metadata.as_ref().unwrap().name.clone().unwrap())
        .collect();
    assert_eq!(names, ["w1", "w2"]);
    let (code, ct, body) = send(&client, "GET", &format!("{path}/w2"), None, OBJ_PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    let (_, kind, raw) = unwrap_pb(&body);
    assert_eq!(kind, "PartialObjectMetadata");
    let one = pb_meta::PartialObjectMetadata::decode(raw.as_slice()).unwrap();
    assert_eq!(one.metadata.unwrap().name.as_deref(), Some("w2"));
    let (code, _, st) = get(&client, path, OBJ_JSON).await;
    assert_eq!(code, 406);
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .ends_with("(*unstructured.UnstructuredList)"),
        "{st}"
    );
    // A plain protobuf Accept is still refused for custom resources.
    let (code, _, _) = send(&client, "GET", path, None, PROTOBUF, vec![]).await;
    assert_eq!(code, 406);

    // A protobuf watch of a custom resource, metadata only.
    let mut body = open_watch(&client, &format!("{path}?watch=true"), OBJ_PB).await;
    let mut buf = Vec::new();
    let ev = next_frame(&mut body, &mut buf).await;
    assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
    assert!(ev["object"].get("spec").is_none());
}
