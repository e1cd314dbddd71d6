//! Helpers shared by the informer integration tests: object builders, a
//! recording handler and condition waits (real clock).

use std::sync::Arc;
use std::time::Duration;

use informer_core::key::ObjectOrTombstone;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::{ResourceEventHandler, SharedIndexInformer};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_client::{Api, Client};
use kube_core::ObjectMeta;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Generous limit for conditions over HTTP on a busy 2-core machine.
pub const LIMIT: Duration = Duration::from_secs(30);

/// Polls `cond` every 10 ms until it holds; panics with `what` after `LIMIT`.
pub async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + LIMIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {LIMIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_string(), "0".to_string())].into()),
        ..ConfigMap::default()
    }
}

pub async fn ensure_namespace(client: &Client, ns: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let obj = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    // Already existing is fine.
    let _ = api.create(&PostParams::default(), &obj).await;
}

pub async fn create(client: &Client, ns: &str, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &cm(ns, name, labels))
        .await
        .unwrap()
}

pub async fn set_value(client: &Client, ns: &str, name: &str, value: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({ "data": { "v": value } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap()
}

pub async fn delete(client: &Client, ns: &str, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

/// `ns/name@rv` of every ConfigMap the server lists now, sorted.
pub async fn fresh_list(client: &Client) -> Vec<String> {
    let api: Api<ConfigMap> = Api::all(client.clone());
    let list = api.list(&ListParams::default()).await.unwrap();
    let mut keys: Vec<String> = list.items.iter().map(key_rv).collect();
    keys.sort();
    keys
}

pub fn key_rv(cm: &ConfigMap) -> String {
    format!(
        "{}/{}@{}",
        cm.metadata.namespace.as_deref().unwrap_or(""),
        cm.metadata.name.as_deref().unwrap_or(""),
        cm.metadata.resource_version.as_deref().unwrap_or("")
    )
}

pub fn name(cm: &ConfigMap) -> String {
    cm.metadata.name.clone().unwrap_or_default()
}

/// An informer on ConfigMaps of all namespaces.
pub fn informer(client: &Client, resync: Duration) -> SharedIndexInformer<ConfigMap> {
    let api: Api<ConfigMap> = Api::all(client.clone());
    SharedIndexInformer::new(
        ApiListerWatcher::new(api, ListWatchOptions::default()),
        resync,
    )
}

/// Runs `informer` in a task until the returned token is cancelled.
pub fn spawn(informer: &SharedIndexInformer<ConfigMap>) -> CancellationToken {
    let token = CancellationToken::new();
    let informer = informer.clone();
    let run_token = token.clone();
    tokio::spawn(async move { informer.run(run_token).await });
    token
}

/// Records every call as "add:name:initial", "update:name:oldrv->newrv" or
/// "delete:name[:tombstone]".
#[derive(Default)]
pub struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl Recorder {
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().clone()
    }
    pub fn count(&self, prefix: &str) -> usize {
        self.seen
            .lock()
            .iter()
            .filter(|s| s.starts_with(prefix))
            .count()
    }
    pub fn len(&self) -> usize {
        self.seen.lock().len()
    }
}

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: Arc<ConfigMap>, initial: bool) {
        self.seen
            .lock()
            .push(format!("add:{}:{initial}", name(&obj)));
    }
    fn on_update(&self, old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        self.seen.lock().push(format!(
            "update:{}:{}->{}",
            name(&new),
            old.metadata.resource_version.as_deref().unwrap_or(""),
            new.metadata.resource_version.as_deref().unwrap_or("")
        ));
    }
    fn on_delete(&self, obj: ObjectOrTombstone<ConfigMap>) {
        let tomb = if obj.is_tombstone() { ":tombstone" } else { "" };
        self.seen
            .lock()
            .push(format!("delete:{}{tomb}", name(obj.object())));
    }
}
