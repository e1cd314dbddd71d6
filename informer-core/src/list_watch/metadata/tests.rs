//! Metadata-only requests against a scripted server that either serves
//! `PartialObjectMetadata` or refuses it with 406 (as some aggregated API
//! servers do).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use bytes::Bytes;
use futures::StreamExt;
use http::{Request, Response, header};
use http_body_util::Full;
use k8s_openapi::api::core::v1::Secret;
use kube_client::client::Body;
use kube_client::{Api, Client};
use kube_core::metadata::PartialObjectMeta;
use parking_lot::Mutex;

use super::*;
use crate::list_watch::{
    ApiListerWatcher, ListRequest, ListWatchOptions, ListerWatcher, WatchEvent, WatchRequest,
};

/// A full Secret with data, as JSON.
fn secret(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"{name}","namespace":"default","resourceVersion":"5"}},"data":{{"key":"c2VjcmV0"}}}}"#
    )
}

/// The same Secret as the server's metadata-only answer.
fn partial(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{{"name":"{name}","namespace":"default","resourceVersion":"5"}}}}"#
    )
}

/// A scripted server: answers LIST and WATCH of Secrets, in metadata form
/// when asked unless it `refuses` (406), and records each request's Accept.
struct Server {
    accepts: Arc<Mutex<Vec<String>>>,
    client: Client,
}

fn server(refuses: bool) -> Server {
    let accepts = Arc::new(Mutex::new(Vec::new()));
    let svc = tower::service_fn({
        let accepts = Arc::clone(&accepts);
        move |req: Request<Body>| {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            accepts.lock().push(accept.clone());
            let watch = req.uri().query().unwrap_or_default().contains("watch=true");
            let meta = accept.contains("as=PartialObjectMetadata");
            let (code, body) = if meta && refuses {
                (
                    406,
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotAcceptable","code":406}"#.to_owned(),
                )
            } else {
                let obj = |n: &str| if meta { partial(n) } else { secret(n) };
                if watch {
                    (
                        200,
                        format!("{{\"type\":\"ADDED\",\"object\":{}}}\n", obj("b")),
                    )
                } else {
                    let kind = if meta {
                        "PartialObjectMetadataList"
                    } else {
                        "SecretList"
                    };
                    (
                        200,
                        format!(
                            r#"{{"kind":"{kind}","apiVersion":"v1","metadata":{{"resourceVersion":"5"}},"items":[{}]}}"#,
                            obj("a")
                        ),
                    )
                }
            };
            let response = Response::builder()
                .status(code)
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| e.to_string());
            async move { response }
        }
    });
    Server {
        accepts,
        client: Client::new(svc, "default"),
    }
}

/// Counts metadata fallbacks.
#[derive(Default)]
struct Fallbacks(AtomicUsize);

impl InformerMetrics for Fallbacks {
    fn metadata_fallback(&self, _informer: &str) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn list_req() -> ListRequest {
    ListRequest {
        resource_version: "0".into(),
        ..ListRequest::default()
    }
}

async fn watched_name<K: kube_core::Resource>(lw: &impl ListerWatcher<K>) -> String {
    let mut stream = lw.watch(WatchRequest::default()).await.unwrap();
    match stream.next().await {
        Some(Ok(WatchEvent::Added(obj))) => obj.meta().name.clone().unwrap_or_default(),
        other => panic!(
            "expected an ADDED event, got {:?}",
            other.map(|r| r.is_ok())
        ),
    }
}

#[tokio::test]
async fn a_metadata_lister_watcher_asks_for_partial_object_metadata() {
    let s = server(false);
    let lw = ApiListerWatcher::metadata(
        Api::<Secret>::namespaced(s.client.clone(), "default"),
        ListWatchOptions::default(),
    )
    // The JSON path; protobuf with metadata is tested in `protobuf::tests`.
    .protobuf(false);
    assert!(lw.is_metadata_only());
    assert!(lw.describe().ends_with("metadata-only"));
    let page = lw.list(list_req()).await.unwrap();
    assert_eq!(page.items[0].metadata.name.as_deref(), Some("a"));
    assert_eq!(watched_name(&lw).await, "b");
    assert_eq!(
        *s.accepts.lock(),
        [METADATA_LIST_ACCEPT, METADATA_WATCH_ACCEPT]
    );
    assert!(!lw.fell_back_to_full_objects());
}

#[tokio::test]
async fn an_api_of_partial_object_meta_is_metadata_only_too() {
    let s = server(false);
    let lw = ApiListerWatcher::new(
        Api::<PartialObjectMeta<Secret>>::namespaced(s.client.clone(), "default"),
        ListWatchOptions::default(),
    )
    // The JSON path; protobuf with metadata is tested in `protobuf::tests`.
    .protobuf(false);
    lw.list(list_req()).await.unwrap();
    assert_eq!(*s.accepts.lock(), [METADATA_LIST_ACCEPT]);
}

#[tokio::test]
async fn a_full_lister_watcher_asks_for_plain_json() {
    let s = server(false);
    let lw = ApiListerWatcher::new(
        Api::<Secret>::namespaced(s.client.clone(), "default"),
        ListWatchOptions::default(),
    )
    // The JSON path; protobuf with metadata is tested in `protobuf::tests`.
    .protobuf(false);
    assert!(!lw.is_metadata_only());
    let page = lw.list(list_req()).await.unwrap();
    assert!(page.items[0].data.is_some());
    assert_eq!(*s.accepts.lock(), [JSON]);
}

#[tokio::test]
async fn a_refusing_server_gets_full_objects_asked_for_once_counted() {
    let s = server(true);
    let fallbacks = Arc::new(Fallbacks::default());
    let lw = ApiListerWatcher::metadata(
        Api::<Secret>::namespaced(s.client.clone(), "default"),
        ListWatchOptions::default(),
    )
    // The JSON path; protobuf with metadata is tested in `protobuf::tests`.
    .protobuf(false)
    .metrics(fallbacks.clone());

    let page = lw.list(list_req()).await.unwrap();
    assert_eq!(page.items[0].metadata.name.as_deref(), Some("a"));
    assert!(lw.fell_back_to_full_objects());
    assert!(!lw.is_metadata_only());
    // Later requests go straight to full objects; the switch counts once.
    lw.list(list_req()).await.unwrap();
    assert_eq!(watched_name(&lw).await, "b");
    assert_eq!(*s.accepts.lock(), [METADATA_LIST_ACCEPT, JSON, JSON, JSON]);
    assert_eq!(fallbacks.0.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_watch_refused_first_falls_back_too() {
    let s = server(true);
    let fallbacks = Arc::new(Fallbacks::default());
    let lw = ApiListerWatcher::metadata(
        Api::<Secret>::namespaced(s.client.clone(), "default"),
        ListWatchOptions::default(),
    )
    // The JSON path; protobuf with metadata is tested in `protobuf::tests`.
    .protobuf(false)
    .metrics(fallbacks.clone());
    assert_eq!(watched_name(&lw).await, "b");
    assert_eq!(*s.accepts.lock(), [METADATA_WATCH_ACCEPT, JSON]);
    assert_eq!(fallbacks.0.load(Ordering::Relaxed), 1);
}

#[test]
fn full_objects_decode_to_their_metadata_alone() {
    let obj: PartialObjectMeta<Secret> = serde_json::from_str(&secret("x")).unwrap();
    assert_eq!(obj.metadata.name.as_deref(), Some("x"));
    let back = serde_json::to_value(&obj).unwrap();
    assert!(back.get("data").is_none(), "{back}");
}
