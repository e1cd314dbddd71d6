//! Protobuf against a scripted server: lists, watch frames with a
//! streaming list's closing bookmark and an `ERROR` event, and each way of
//! falling back to JSON (refused, undecodable list, undecodable watch
//! frame), counted once.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http::{Request, Response, header};
use http_body_util::Full;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::client::Body;
use kube_client::{Api, Client};
use parking_lot::Mutex;
use serde_json::json;

use super::*;
use crate::list_watch::{
    ApiListerWatcher, ListRequest, ListWatchOptions, ListerWatcher, WatchRequest,
};

/// How the scripted server answers a protobuf request.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Protobuf.
    Serve,
    /// 406 Not Acceptable.
    Refuse,
    /// Protobuf bodies that do not decode.
    Garbage,
}

fn cm(name: &str, rv: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": rv},
        "data": {"k": name}})
}

fn list_json() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "9", "continue": ""},
        "items": [cm("a", "5"), cm("b", "6")]})
}

fn watch_events() -> Vec<serde_json::Value> {
    vec![
        json!({"type": "ADDED", "object": cm("c", "10")}),
        json!({"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"resourceVersion": "10",
                "annotations": {"k8s.io/initial-events-end": "true"}}}}),
        json!({"type": "ERROR", "object": {"apiVersion": "v1", "kind": "Status",
            "metadata": {}, "status": "Failure", "reason": "Expired", "code": 410,
            "message": "too old"}}),
    ]
}

struct Server {
    accepts: Arc<Mutex<Vec<String>>>,
    client: Client,
}

fn server(script: Script) -> Server {
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
            let proto = accept.starts_with(PROTOBUF);
            let (code, ct, body): (u16, &str, Vec<u8>) = match (proto, script, watch) {
                (true, Script::Refuse, _) => (406, "application/json", b"{}".to_vec()),
                (true, Script::Garbage, false) => (200, PROTOBUF, b"k8s\0\x0a\xff".to_vec()),
                (true, Script::Garbage, true) => {
                    // One good frame, then one that does not decode.
                    let mut b = informer_codec::watch_frame(&watch_events()[0]).unwrap();
                    b.extend_from_slice(&[0, 0, 0, 2, 0x0a, 0xff]);
                    (200, "application/vnd.kubernetes.protobuf;stream=watch", b)
                }
                (true, Script::Serve, false) => (
                    200,
                    PROTOBUF,
                    informer_codec::to_protobuf(&list_json()).unwrap(),
                ),
                (true, Script::Serve, true) => {
                    let mut b = Vec::new();
                    for ev in watch_events() {
                        b.extend(informer_codec::watch_frame(&ev).unwrap());
                    }
                    (200, "application/vnd.kubernetes.protobuf;stream=watch", b)
                }
                (false, _, false) => (
                    200,
                    "application/json",
                    list_json().to_string().into_bytes(),
                ),
                (false, _, true) => {
                    let lines: String = watch_events().iter().map(|e| format!("{e}\n")).collect();
                    (200, "application/json", lines.into_bytes())
                }
            };
            let response = Response::builder()
                .status(code)
                .header(header::CONTENT_TYPE, ct)
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

/// Counts protobuf fallbacks by reason.
#[derive(Default)]
struct Fallbacks(Mutex<HashMap<String, usize>>);

impl InformerMetrics for Fallbacks {
    fn protobuf_fallback(&self, _informer: &str, reason: &str) {
        *self.0.lock().entry(reason.to_owned()).or_default() += 1;
    }
}

impl Fallbacks {
    fn counts(&self) -> Vec<(String, usize)> {
        let mut v: Vec<_> = self.0.lock().clone().into_iter().collect();
        v.sort();
        v
    }
}

fn lister_watcher(s: &Server, m: &Arc<Fallbacks>) -> ApiListerWatcher<ConfigMap> {
    ApiListerWatcher::new(
        Api::<ConfigMap>::namespaced(s.client.clone(), "default"),
        ListWatchOptions::default(),
    )
    .metrics(Arc::clone(m) as Arc<dyn InformerMetrics>)
}

fn names(page: &crate::list_watch::ListPage<ConfigMap>) -> Vec<String> {
    page.items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// The events of a watch until it ends: names, bookmarks and errors.
async fn watched(lw: &ApiListerWatcher<ConfigMap>) -> Vec<String> {
    let mut stream = lw.watch(WatchRequest::default()).await.unwrap();
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await {
        out.push(match ev {
            Ok(WatchEvent::Added(o)) => format!("added:{}", o.metadata.name.unwrap_or_default()),
            Ok(WatchEvent::Bookmark(b)) => {
                format!(
                    "bookmark:{}:{}",
                    b.resource_version,
                    b.is_initial_events_end()
                )
            }
            Ok(other) => format!("{other:?}"),
            Err(e) => format!("error:{}", e.code().unwrap_or_default()),
        });
    }
    out
}

const WATCHED: [&str; 3] = ["added:c", "bookmark:10:true", "error:410"];

#[tokio::test]
async fn a_protobuf_server_is_read_in_protobuf() {
    let s = server(Script::Serve);
    let m = Arc::new(Fallbacks::default());
    let lw = lister_watcher(&s, &m);
    assert!(lw.uses_protobuf());
    let page = lw.list(ListRequest::default()).await.unwrap();
    assert_eq!(names(&page), ["a", "b"]);
    assert_eq!(page.resource_version, "9");
    assert_eq!(page.items[0].data.as_ref().unwrap()["k"], "a");
    assert_eq!(watched(&lw).await, WATCHED);
    assert_eq!(*s.accepts.lock(), [PROTOBUF_ACCEPT, PROTOBUF_ACCEPT]);
    assert!(m.counts().is_empty() && !lw.fell_back_to_json());
}

#[tokio::test]
async fn a_refusal_falls_back_to_json_once_counted() {
    let s = server(Script::Refuse);
    let m = Arc::new(Fallbacks::default());
    let lw = lister_watcher(&s, &m);
    assert_eq!(
        names(&lw.list(ListRequest::default()).await.unwrap()),
        ["a", "b"]
    );
    assert!(lw.fell_back_to_json() && !lw.uses_protobuf());
    assert_eq!(watched(&lw).await, WATCHED);
    lw.list(ListRequest::default()).await.unwrap();
    let json = "application/json";
    assert_eq!(*s.accepts.lock(), [PROTOBUF_ACCEPT, json, json, json]);
    assert_eq!(m.counts(), [("refused".to_string(), 1)]);
}

#[tokio::test]
async fn an_undecodable_list_is_read_again_in_json() {
    let s = server(Script::Garbage);
    let m = Arc::new(Fallbacks::default());
    let lw = lister_watcher(&s, &m);
    assert_eq!(
        names(&lw.list(ListRequest::default()).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(*s.accepts.lock(), [PROTOBUF_ACCEPT, "application/json"]);
    assert_eq!(m.counts(), [("undecodable".to_string(), 1)]);
}

#[tokio::test]
async fn an_undecodable_watch_frame_ends_the_stream_and_the_next_watch_is_json() {
    let s = server(Script::Garbage);
    let m = Arc::new(Fallbacks::default());
    let lw = lister_watcher(&s, &m);
    // The good frame is delivered; the bad one ends the stream quietly.
    assert_eq!(watched(&lw).await, ["added:c"]);
    assert_eq!(m.counts(), [("undecodable".to_string(), 1)]);
    assert_eq!(watched(&lw).await, WATCHED);
    assert_eq!(*s.accepts.lock(), [PROTOBUF_ACCEPT, "application/json"]);
}

#[tokio::test]
async fn switched_off_it_asks_for_json_and_counts_no_fallback() {
    let s = server(Script::Serve);
    let m = Arc::new(Fallbacks::default());
    let lw = lister_watcher(&s, &m).protobuf(false);
    assert!(!lw.uses_protobuf());
    lw.list(ListRequest::default()).await.unwrap();
    assert_eq!(*s.accepts.lock(), ["application/json"]);
    assert!(m.counts().is_empty(), "switched off is not a fallback");
}

#[test]
fn custom_and_dynamic_types_are_json_only() {
    assert!(Target::<kube_core::DynamicObject>::of(false).is_none());
    assert!(Target::<ConfigMap>::of(false).is_some());
    assert!(Target::<kube_core::DynamicObject>::of(true).is_some());
}

#[tokio::test]
async fn on_by_default_for_built_in_kinds_and_never_for_dynamic_objects() {
    let s = server(Script::Serve);
    let m = Arc::new(Fallbacks::default());
    // No `.protobuf(..)` call: the default asks for protobuf first.
    let lw = lister_watcher(&s, &m);
    assert!(lw.uses_protobuf());
    lw.list(ListRequest::default()).await.unwrap();
    assert_eq!(*s.accepts.lock(), [PROTOBUF_ACCEPT]);
    // A dynamic object cannot be read in protobuf: on or off, JSON.
    let ar = kube_core::ApiResource::erase::<ConfigMap>(&());
    let dynamic = ApiListerWatcher::new(
        Api::<kube_core::DynamicObject>::namespaced_with(s.client.clone(), "default", &ar),
        ListWatchOptions::default(),
    );
    assert!(!dynamic.uses_protobuf());
    assert!(!dynamic.protobuf(true).uses_protobuf());
}
