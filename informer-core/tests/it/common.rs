//! Helpers shared by the integration tests: a server with namespaces,
//! object builders and changes, condition waits (real clock), a running
//! informer with a recording handler, a mirroring store and counting metrics.

#![allow(dead_code)] // each test module uses its own subset

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use envtest::TestEnv;
use futures::{StreamExt, TryStreamExt};
use informer_core::key::ObjectOrTombstone;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::metrics::{InformerMetrics, RelistCause, WatchEventType, WatchRestartCause};
use informer_core::reflector::{BackoffConfig, ReflectorStore};
use informer_core::shared_informer::{ResourceEventHandler, SharedIndexInformer};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_client::{Api, Client};
use kube_core::{ObjectMeta, Resource};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// How long any condition may take before a test fails: generous, for
/// HTTP on a busy 2-core machine.
pub const LIMIT: Duration = Duration::from_secs(30);

/// A fast backoff so retry paths finish quickly over real time.
pub fn quick_backoff() -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(400),
        jitter: 0.0,
        ..BackoffConfig::default()
    }
}

pub fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_owned(), value.to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// Creates a namespace (envtest starts with `default` only); one that
/// already exists is fine.
pub async fn create_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube_client::Error::Api(status)) if status.code == 409 => {}
        Err(err) => panic!("creating namespace {name} failed: {err}"),
    }
}

/// A fresh envtest server holding `namespaces`, and a client for it.
pub async fn env_with(namespaces: &[&str]) -> (TestEnv, Client) {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    for ns in namespaces {
        create_namespace(&client, ns).await;
    }
    (env, client)
}

/// Creates `n` ConfigMaps named `{prefix}-{i}`, 16 at a time.
pub async fn create_many(api: &Api<ConfigMap>, prefix: &str, n: usize) -> Vec<ConfigMap> {
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let obj = cm(&format!("{prefix}-{i:05}"), "0");
            async move { api.create(&PostParams::default(), &obj).await }
        })
        .buffer_unordered(16)
        .try_collect()
        .await
        .unwrap()
}

pub async fn delete(api: &Api<ConfigMap>, name: &str) {
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

/// `key -> resourceVersion` of a fresh LIST.
pub async fn list_snapshot<K>(api: &Api<K>) -> BTreeMap<String, String>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| (informer_core::key::object_key(o), rv_of(o)))
        .collect()
}

pub fn rv_of<K: Resource>(o: &K) -> String {
    o.meta().resource_version.clone().unwrap_or_default()
}

/// Waits until `cond` holds, checking every 10 ms, for at most [`LIMIT`].
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let wait = async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    if tokio::time::timeout(LIMIT, wait).await.is_err() {
        panic!("timed out waiting until {what}");
    }
}

/// Like [`eventually`] for conditions that need to call the server.
pub async fn eventually_async<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let wait = async {
        while !cond().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(LIMIT, wait).await.is_err() {
        panic!("timed out waiting until {what}");
    }
}

/// A ConfigMap `ns/name` with `labels` and data `v=0`.
pub fn labeled_cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
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

/// Creates [`labeled_cm`]`(ns, name, labels)`.
pub async fn create(client: &Client, ns: &str, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &labeled_cm(ns, name, labels))
        .await
        .unwrap()
}

/// Sets data `v` of ConfigMap `ns/name`.
pub async fn set_value(client: &Client, ns: &str, name: &str, value: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({ "data": { "v": value } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap()
}

/// Deletes ConfigMap `ns/name`.
pub async fn delete_cm(client: &Client, ns: &str, name: &str) {
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

/// `ns/name@rv` of a ConfigMap.
pub fn key_rv(cm: &ConfigMap) -> String {
    format!(
        "{}/{}@{}",
        cm.metadata.namespace.as_deref().unwrap_or(""),
        cm.metadata.name.as_deref().unwrap_or(""),
        cm.metadata.resource_version.as_deref().unwrap_or("")
    )
}

/// The name of a ConfigMap.
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

/// [`informer`] with streaming lists off: every (re)list is a LIST.
pub fn listing_informer(client: &Client, resync: Duration) -> SharedIndexInformer<ConfigMap> {
    let api: Api<ConfigMap> = Api::all(client.clone());
    SharedIndexInformer::builder(ApiListerWatcher::new(api, ListWatchOptions::default()))
        .default_resync(resync)
        .streaming_list(false)
        .build()
        .unwrap()
}

/// Runs `informer` in a task until the returned token is cancelled.
pub fn spawn(informer: &SharedIndexInformer<ConfigMap>) -> CancellationToken {
    let token = CancellationToken::new();
    let informer = informer.clone();
    let run_token = token.clone();
    tokio::spawn(async move { informer.run(run_token).await });
    token
}

/// [`spawn`]s `informer` and waits until its cache synced.
pub async fn run_synced(informer: &SharedIndexInformer<ConfigMap>) -> CancellationToken {
    let stop = spawn(informer);
    informer.wait_for_cache_sync(LIMIT).await.unwrap();
    stop
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

/// What a [`Mirror`] was told, with object keys and resource versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add(String, String),
    Update(String, String),
    Delete(String, String),
    Replace(usize, String),
    Resync,
}

/// A store that keeps `key -> resourceVersion` like an informer cache
/// would and records every call.
#[derive(Default)]
pub struct Mirror {
    objects: Mutex<BTreeMap<String, String>>,
    ops: Mutex<Vec<Op>>,
}

impl Mirror {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn snapshot(&self) -> BTreeMap<String, String> {
        self.objects.lock().clone()
    }

    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().clone()
    }

    pub fn replaces(&self) -> usize {
        self.ops
            .lock()
            .iter()
            .filter(|o| matches!(o, Op::Replace(..)))
            .count()
    }
}

impl<K: Resource> ReflectorStore<K> for Mirror {
    fn add(&self, obj: K) {
        let (key, rv) = (informer_core::key::object_key(&obj), rv_of(&obj));
        self.objects.lock().insert(key.clone(), rv.clone());
        self.ops.lock().push(Op::Add(key, rv));
    }
    fn update(&self, obj: K) {
        let (key, rv) = (informer_core::key::object_key(&obj), rv_of(&obj));
        self.objects.lock().insert(key.clone(), rv.clone());
        self.ops.lock().push(Op::Update(key, rv));
    }
    fn delete(&self, obj: K) {
        let (key, rv) = (informer_core::key::object_key(&obj), rv_of(&obj));
        self.objects.lock().remove(&key);
        self.ops.lock().push(Op::Delete(key, rv));
    }
    fn replace(&self, list: Vec<K>, resource_version: &str) {
        let n = list.len();
        *self.objects.lock() = list
            .iter()
            .map(|o| (informer_core::key::object_key(o), rv_of(o)))
            .collect();
        self.ops
            .lock()
            .push(Op::Replace(n, resource_version.to_owned()));
    }
    fn resync(&self) {
        self.ops.lock().push(Op::Resync);
    }
}

/// Counts metrics calls by label (`list`, `relist:expired`, `event:added`, ...).
#[derive(Default)]
pub struct Counting {
    counts: Mutex<HashMap<String, usize>>,
    pub backoffs: Mutex<Vec<Duration>>,
}

impl Counting {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn count(&self, label: &str) -> usize {
        self.counts.lock().get(label).copied().unwrap_or(0)
    }

    fn inc(&self, label: String) {
        *self.counts.lock().entry(label).or_default() += 1;
    }
}

impl InformerMetrics for Counting {
    fn list_completed(&self, _: &str, _: usize, pages: usize, _: Duration) {
        self.inc("list".into());
        *self.counts.lock().entry("pages".into()).or_default() += pages;
    }
    fn list_failed(&self, _: &str, reason: &str) {
        self.inc(format!("list_failed:{reason}"));
    }
    fn relist(&self, _: &str, cause: RelistCause) {
        self.inc(format!("relist:{}", cause.as_str()));
    }
    fn streaming_list_fallback(&self, _: &str) {
        self.inc("streaming_fallback".into());
    }
    fn metadata_fallback(&self, _: &str) {
        self.inc("metadata_fallback".into());
    }
    fn protobuf_fallback(&self, _: &str, reason: &str) {
        self.inc("protobuf_fallback".into());
        self.inc(format!("protobuf_fallback:{reason}"));
    }
    fn watch_started(&self, _: &str) {
        self.inc("watch".into());
    }
    fn watch_restart(&self, _: &str, cause: WatchRestartCause) {
        self.inc(format!("watch_restart:{}", cause.as_str()));
    }
    fn watch_event(&self, _: &str, kind: WatchEventType) {
        self.inc(format!("event:{kind}"));
    }
    fn decode_failure(&self, _: &str) {
        self.inc("decode_failure".into());
    }
    fn oversized_answer(&self, _: &str, part: &str) {
        self.inc(format!("oversized:{part}"));
    }
    fn backoff(&self, _: &str, delay: Duration) {
        self.backoffs.lock().push(delay);
        self.inc("backoff".into());
    }
}

/// Query parameters of a request-log entry.
pub fn query_of(record: &envtest::RequestRecord) -> BTreeMap<String, String> {
    form_urlencoded::parse(record.query.as_bytes())
        .into_owned()
        .collect()
}

/// LIST requests a reflector made to `path`, in order. (The tests' own
/// LISTs, through `Api::list` with default parameters, carry no query.)
pub fn lists_of(env: &envtest::TestEnv, path: &str) -> Vec<envtest::RequestRecord> {
    env.request_log()
        .into_iter()
        .filter(|r| {
            r.method == http::Method::GET && r.path == path && !r.is_watch() && !r.query.is_empty()
        })
        .collect()
}

/// WATCH requests to `path`, in order.
pub fn watches_of(env: &envtest::TestEnv, path: &str) -> Vec<envtest::RequestRecord> {
    env.request_log()
        .into_iter()
        .filter(|r| r.path == path && r.is_watch())
        .collect()
}
