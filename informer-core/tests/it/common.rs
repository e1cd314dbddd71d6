//! Helpers shared by the integration tests: object builders, condition
//! waits, a mirroring store and counting metrics.

#![allow(dead_code)] // each test module uses its own subset

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use informer_core::metrics::{InformerMetrics, RelistCause, WatchEventType, WatchRestartCause};
use informer_core::reflector::{BackoffConfig, ReflectorStore};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::Api;
use kube_client::api::{DeleteParams, ListParams, PostParams};
use kube_core::{ObjectMeta, Resource};
use parking_lot::Mutex;

/// How long any condition may take before a test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

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

/// Creates a namespace (envtest starts with `default` only).
pub async fn create_namespace(client: &kube_client::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    api.create(&PostParams::default(), &ns).await.unwrap();
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

/// Waits until `cond` holds, checking every 10 ms, for at most [`PATIENCE`].
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let wait = async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    if tokio::time::timeout(PATIENCE, wait).await.is_err() {
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
    if tokio::time::timeout(PATIENCE, wait).await.is_err() {
        panic!("timed out waiting until {what}");
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
