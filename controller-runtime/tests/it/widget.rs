//! Fixtures shared by the controller and manager tests: a `Widget` CRD whose
//! reconciler mirrors `spec.data` into a ConfigMap it owns, a journal of
//! what the reconciler saw, and condition waits.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_runtime::cache::Cache;
use controller_runtime::manager::{Manager, ManagerBuilder};
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::{Action, Request};
use envtest::TestEnv;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use kube_core::Resource;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

pub const NS: &str = "default";

/// The test CRD: a widget whose `spec.data` is mirrored into a ConfigMap.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Widget {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: WidgetSpec,
}

/// What a widget asks for, and faults to inject into its reconciles.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    #[serde(default)]
    pub data: BTreeMap<String, String>,
    /// The first `fail_times` reconciles of this widget return an error.
    #[serde(default)]
    pub fail_times: usize,
    /// The first `panic_times` reconciles of this widget panic.
    #[serde(default)]
    pub panic_times: usize,
}

impl Resource for Widget {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Widget".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "example.com".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "widgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

pub fn widget(name: &str, data: &[(&str, &str)]) -> Widget {
    Widget {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        // Created in the namespace of the Api it is created through.
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: WidgetSpec {
            data: data
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..WidgetSpec::default()
        },
    }
}

/// The Widget CRD.
pub fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

/// Widgets in the client's default namespace: `default` on envtest's own
/// server, the test's namespace on an existing cluster.
pub fn widgets(client: &Client) -> Api<Widget> {
    Api::default_namespaced(client.clone())
}

/// ConfigMaps in the client's default namespace (as [`widgets`]).
pub fn configmaps(client: &Client) -> Api<ConfigMap> {
    Api::default_namespaced(client.clone())
}

pub fn cm_name(widget: &str) -> String {
    format!("{widget}-data")
}

/// Polls `cond` every 20 ms until it is true; panics with `what` after
/// `timeout`.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !cond().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The data of the widget's ConfigMap, if it exists.
pub async fn cm_data(client: &Client, widget: &str) -> Option<BTreeMap<String, String>> {
    configmaps(client)
        .get_opt(&cm_name(widget))
        .await
        .unwrap()
        .map(|cm| cm.data.unwrap_or_default())
}

/// Errors of the widget reconciler.
#[derive(Debug, thiserror::Error)]
pub enum WidgetError {
    #[error("injected failure {0}")]
    Injected(usize),
    #[error("cache: {0}")]
    Cache(#[from] controller_runtime::cache::CacheError),
    #[error("api: {0}")]
    Api(#[from] kube_client::Error),
}

impl controller_runtime::Terminal for WidgetError {}

/// What the reconciler saw, for assertions.
#[derive(Default)]
pub struct Journal {
    /// Every reconcile start, by key, with its time.
    pub attempts: Mutex<HashMap<String, Vec<Instant>>>,
    /// Keys being reconciled right now.
    pub in_flight: Mutex<HashSet<String>>,
    /// Set if a key was ever reconciled by two workers at once.
    pub overlap: Mutex<Option<String>>,
    pub max_concurrent: AtomicUsize,
    pub completed: AtomicUsize,
}

impl Journal {
    pub fn attempts(&self, key: &str) -> Vec<Instant> {
        self.attempts.lock().get(key).cloned().unwrap_or_default()
    }
    pub fn count(&self, key: &str) -> usize {
        self.attempts(key).len()
    }
}

/// Mirrors each widget's `spec.data` into a ConfigMap `<name>-data` that it
/// controls; the garbage collector deletes the ConfigMap with the widget.
pub struct WidgetReconciler {
    pub client: Client,
    pub cache: Cache,
    pub journal: Arc<Journal>,
    /// Extra time each reconcile takes.
    pub work: Duration,
}

impl WidgetReconciler {
    pub fn new(mgr: &Manager, journal: Arc<Journal>) -> Self {
        WidgetReconciler {
            client: mgr.client(),
            cache: mgr.cache().clone(),
            journal,
            work: Duration::ZERO,
        }
    }
}

struct InFlight<'a> {
    journal: &'a Journal,
    key: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.journal.in_flight.lock().remove(&self.key);
    }
}

impl Reconciler for WidgetReconciler {
    type Error = WidgetError;

    async fn reconcile(&self, req: Request, _ctx: CallInfo) -> Result<Action, WidgetError> {
        let key = req.to_string();
        let attempt = {
            let mut attempts = self.journal.attempts.lock();
            let list = attempts.entry(key.clone()).or_default();
            list.push(Instant::now());
            list.len()
        };
        let _guard = {
            let mut in_flight = self.journal.in_flight.lock();
            if !in_flight.insert(key.clone()) {
                *self.journal.overlap.lock() = Some(key.clone());
            }
            self.journal
                .max_concurrent
                .fetch_max(in_flight.len(), Ordering::SeqCst);
            InFlight {
                journal: &self.journal,
                key: key.clone(),
            }
        };
        if !self.work.is_zero() {
            tokio::time::sleep(self.work).await;
        }
        let ns = req.namespace.as_deref().unwrap_or(NS);
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let Some(w) = self.cache.get::<Widget>(Some(ns), &req.name).await? else {
            // The widget is gone; its ConfigMap, which it controls, goes with
            // it through the garbage collector (envtest runs one, as a
            // cluster does).
            self.journal.completed.fetch_add(1, Ordering::SeqCst);
            return Ok(Action::done());
        };
        if attempt <= w.spec.panic_times {
            panic!("injected panic {attempt} for {key}");
        }
        if attempt <= w.spec.panic_times + w.spec.fail_times {
            return Err(WidgetError::Injected(attempt));
        }
        let owner = OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            name: req.name.clone(),
            uid: w.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let name = cm_name(&req.name);
        let current = self.cache.get::<ConfigMap>(Some(ns), &name).await?;
        let result = match current {
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(ns.into()),
                        owner_references: Some(vec![owner]),
                        ..ObjectMeta::default()
                    },
                    data: Some(w.spec.data.clone()),
                    ..ConfigMap::default()
                };
                cms.create(&PostParams::default(), &cm).await.map(|_| ())
            }
            Some(cm) if cm.data.clone().unwrap_or_default() != w.spec.data => {
                let mut cm = (*cm).clone();
                cm.data = Some(w.spec.data.clone());
                cms.replace(&name, &PostParams::default(), &cm)
                    .await
                    .map(|_| ())
            }
            Some(_) => Ok(()),
        };
        match result {
            Ok(()) => {}
            // The cache was behind: look again shortly.
            Err(kube_client::Error::Api(s)) if s.code == 409 => {
                return Ok(Action::requeue_rate_limited());
            }
            Err(e) => return Err(e.into()),
        }
        self.journal.completed.fetch_add(1, Ordering::SeqCst);
        Ok(Action::done())
    }
}

/// A started envtest with the CRD installed (on an existing cluster too).
pub async fn env_with_crd() -> TestEnv {
    TestEnv::builder()
        .crds([widget_crd()])
        .start()
        .await
        .unwrap()
}

/// The usual start of a controller test: a server with the Widget CRD (keep
/// it alive for the test), a client to it, a manager with default options on
/// that client, and an empty journal.
pub async fn fixture() -> (TestEnv, Client, Manager, Arc<Journal>) {
    fixture_with(|b| b).await
}

/// [`fixture`] with the manager's options set by `configure`.
pub async fn fixture_with(
    configure: impl FnOnce(ManagerBuilder) -> ManagerBuilder,
) -> (TestEnv, Client, Manager, Arc<Journal>) {
    let env = env_with_crd().await;
    let client = env.client();
    let mgr = configure(Manager::builder(client.clone()))
        .build()
        .await
        .unwrap();
    (env, client, mgr, Arc::new(Journal::default()))
}

/// Registers the usual Widget controller on `mgr`: it owns ConfigMaps and
/// reconciles with a default [`WidgetReconciler`] writing to `journal`.
pub fn add_widget_controller(mgr: &Manager, journal: &Arc<Journal>) {
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .complete(WidgetReconciler::new(mgr, Arc::clone(journal)))
        .unwrap();
}

// Re-exported for the chaos and sharding tests, which import it from here.
pub use crate::fixture::spawn_manager;
