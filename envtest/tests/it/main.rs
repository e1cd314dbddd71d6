//! Integration tests for envtest: every behaviour is exercised through
//! kube-client over real HTTP against a server on a random loopback port.

// Helpers outside #[test] functions panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod admission_crd_updates;
mod admission_equivalent;
mod admission_policies;
mod admission_webhook_config;
mod admission_webhook_failures;
mod admission_webhooks;
mod apply;
mod apply_granular;
mod auth_review;
mod authz;
mod cel;
mod cel_checks;
mod cel_cost;
mod conversion_webhooks;
mod crd;
mod crd_install;
mod crud;
mod errors;
mod existing;
mod faults;
mod gc;
mod go_wire;
mod impersonation;
mod junctors;
mod limits;
mod metadata;
mod metadata_identity;
mod metadata_only;
mod metadata_watcher;
mod module_graph;
mod openapi;
mod persist;
mod props;
mod protobuf;
mod protobuf_crd;
mod read_defaults;
mod reads;
mod schemas;
mod tables;
mod tls;
mod typed;
mod typed_props;
mod watch;
mod webhook_server;
mod yaml;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::Client;
use kube_client::api::{Api, PostParams, WatchEvent};
use std::collections::BTreeMap;
use std::time::Duration;

/// Generous bound for anything that should happen "soon".
pub const WAIT: Duration = Duration::from_secs(10);

/// A Deployment's spec, under every Kubernetes version: the field is an
/// `Option` up to 1.36 and not from 1.37.
pub fn spec_of(d: &Deployment) -> &DeploymentSpec {
    Option::from(&d.spec).expect("a Deployment with a spec")
}

/// [`spec_of`], to change.
pub fn spec_mut(d: &mut Deployment) -> &mut DeploymentSpec {
    Option::from(&mut d.spec).expect("a Deployment with a spec")
}

/// A ConfigMap with a name, labels and one data entry.
pub fn cm(name: &str, labels: &[(&str, &str)], v: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    if !labels.is_empty() {
        c.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    c.data = Some(BTreeMap::from([("v".to_string(), v.to_string())]));
    c
}

/// Create a namespace.
pub async fn namespace(client: &Client, name: &str) {
    let ns: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(name.into());
    ns.create(&PostParams::default(), &n).await.unwrap();
}

/// The kube error's Status, or panic.
pub fn status(e: kube_client::Error) -> kube_client::core::Status {
    match e {
        kube_client::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Take `n` events from a watch stream (panics after [`WAIT`]).
pub async fn take<K, S>(stream: &mut S, n: usize) -> Vec<WatchEvent<K>>
where
    S: Stream<Item = Result<WatchEvent<K>, kube_client::Error>> + Unpin,
{
    let mut out = Vec::new();
    while out.len() < n {
        let ev = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("timed out waiting for watch events")
            .expect("watch stream ended early")
            .expect("watch stream error");
        out.push(ev);
    }
    out
}

/// A short name for an event: (type, object name or "").
pub fn describe(ev: &WatchEvent<ConfigMap>) -> (String, String) {
    match ev {
        WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(o) => (
            "MODIFIED".into(),
            o.metadata.name.clone().unwrap_or_default(),
        ),
        WatchEvent::Deleted(o) => (
            "DELETED".into(),
            o.metadata.name.clone().unwrap_or_default(),
        ),
        WatchEvent::Bookmark(_) => ("BOOKMARK".into(), String::new()),
        WatchEvent::Error(e) => ("ERROR".into(), e.reason.clone()),
    }
}

/// Raw HTTP request through the client, answering (status code, body JSON).
pub async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let (code, _, v) = raw_full(client, method, path, content_type, body).await;
    (code, v)
}

/// Raw HTTP request through the client, answering (status code, `Warning`
/// header values, body JSON).
pub async fn raw_full(
    client: &Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, Vec<String>, serde_json::Value) {
    let mut b = http::Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        b = b.header(http::header::CONTENT_TYPE, ct);
    }
    let req = b.body(body).unwrap();
    let req = req.map(kube_client::client::Body::from);
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::String(
        String::from_utf8_lossy(&bytes).into_owned(),
    ));
    (code, warnings, v)
}
