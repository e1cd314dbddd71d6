//! Controllers against envtest: a `Widget` CRD whose controller owns
//! ConfigMaps. Shared fixtures (the CRD, the reconciler, waits) live here and
//! are used by the manager tests too.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_runtime::manager::{Cache, Manager, ManagerError};
use controller_runtime::reconcile::{Action, Context, Reconciler, Request};
use controller_runtime::workqueue::ItemExponentialFailureRateLimiter;
use envtest::TestEnv;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube_client::Client;
use kube_client::api::{Api, DeleteParams, PostParams};
use kube_core::Resource;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
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

pub async fn install_widget_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

pub fn widgets(client: &Client) -> Api<Widget> {
    Api::namespaced(client.clone(), NS)
}

pub fn configmaps(client: &Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), NS)
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
    Cache(#[from] controller_runtime::manager::CacheError),
    #[error("api: {0}")]
    Api(#[from] kube_client::Error),
}

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
/// controls; deletes the ConfigMap when the widget is gone.
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

    async fn reconcile(&self, req: Request, _ctx: Context) -> Result<Action, WidgetError> {
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
            // envtest has no garbage collector: clean up ourselves.
            match cms
                .delete(&cm_name(&req.name), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube_client::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
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
            Err(kube_client::Error::Api(s)) if s.code == 409 => return Ok(Action::requeue()),
            Err(e) => return Err(e.into()),
        }
        self.journal.completed.fetch_add(1, Ordering::SeqCst);
        Ok(Action::done())
    }
}

/// A started envtest with the CRD installed.
pub async fn env_with_crd() -> TestEnv {
    let env = TestEnv::start().await.unwrap();
    install_widget_crd(&env.client()).await;
    env
}

/// Runs `mgr` in the background until the returned token is cancelled.
pub fn spawn_manager(mgr: &Manager) -> (CancellationToken, JoinHandle<Result<(), ManagerError>>) {
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    (stop, task)
}

pub async fn stop_manager(stop: CancellationToken, task: JoinHandle<Result<(), ManagerError>>) {
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("manager stopped in time")
        .unwrap()
        .unwrap();
}

const LONG: Duration = Duration::from_secs(20);

#[tokio::test]
async fn reconciles_create_update_delete_and_owned_changes() {
    let env = env_with_crd().await;
    let client = env.client();
    let mgr = Manager::builder(client.clone()).build().await.unwrap();
    let journal = Arc::new(Journal::default());
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .complete(WidgetReconciler::new(&mgr, Arc::clone(&journal)))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);

    let api = widgets(&client);
    api.create(&PostParams::default(), &widget("w1", &[("color", "red")]))
        .await
        .unwrap();
    wait_until(LONG, "the ConfigMap is created", || async {
        cm_data(&client, "w1").await == Some(BTreeMap::from([("color".into(), "red".into())]))
    })
    .await;
    let cm = configmaps(&client).get(&cm_name("w1")).await.unwrap();
    let owner = &cm.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Widget", "w1", Some(true))
    );

    // Update.
    let mut w = api.get("w1").await.unwrap();
    w.spec.data = BTreeMap::from([("color".into(), "blue".into())]);
    api.replace("w1", &PostParams::default(), &w).await.unwrap();
    wait_until(LONG, "the ConfigMap follows the update", || async {
        cm_data(&client, "w1").await == Some(BTreeMap::from([("color".into(), "blue".into())]))
    })
    .await;

    // A change to the owned ConfigMap re-triggers the owner, which repairs it.
    let before = journal.count("default/w1");
    let mut cm = configmaps(&client).get(&cm_name("w1")).await.unwrap();
    cm.data = Some(BTreeMap::from([("color".into(), "tampered".into())]));
    configmaps(&client)
        .replace(&cm_name("w1"), &PostParams::default(), &cm)
        .await
        .unwrap();
    wait_until(LONG, "the owner repairs its ConfigMap", || async {
        cm_data(&client, "w1").await == Some(BTreeMap::from([("color".into(), "blue".into())]))
    })
    .await;
    assert!(
        journal.count("default/w1") > before,
        "owned change reconciled the owner"
    );

    // Delete.
    api.delete("w1", &DeleteParams::default()).await.unwrap();
    wait_until(LONG, "the ConfigMap is deleted", || async {
        cm_data(&client, "w1").await.is_none()
    })
    .await;
    assert!(journal.overlap.lock().is_none());

    let text = mgr.metrics().encode().unwrap();
    assert!(
        !text.contains(
            r#"controller_runtime_reconcile_total{controller="widget",result="success"} 0"#
        ),
        "{text}"
    );
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn failures_back_off_per_key_with_growing_delays() {
    let env = env_with_crd().await;
    let client = env.client();
    let mgr = Manager::builder(client.clone()).build().await.unwrap();
    let journal = Arc::new(Journal::default());
    let base = Duration::from_millis(100);
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            base,
            Duration::from_secs(30),
        ))
        .max_concurrent_reconciles(2)
        .complete(WidgetReconciler::new(&mgr, Arc::clone(&journal)))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);

    let api = widgets(&client);
    let mut flaky = widget("flaky", &[("k", "v")]);
    flaky.spec.fail_times = 4;
    api.create(&PostParams::default(), &flaky).await.unwrap();
    // Wait for the first failure, then create a healthy widget: it is not
    // held back by the other key's backoff.
    wait_until(LONG, "first attempt", || async {
        journal.count("default/flaky") >= 1
    })
    .await;
    api.create(&PostParams::default(), &widget("healthy", &[("k", "v")]))
        .await
        .unwrap();
    wait_until(LONG, "flaky finally succeeds", || async {
        cm_data(&client, "flaky").await.is_some()
    })
    .await;
    let attempts = journal.attempts("default/flaky");
    assert!(attempts.len() >= 5, "{} attempts", attempts.len());
    let gaps: Vec<Duration> = attempts.windows(2).take(4).map(|w| w[1] - w[0]).collect();
    for (i, gap) in gaps.iter().enumerate() {
        let expected = base * 2u32.pow(i as u32);
        assert!(
            *gap >= expected.mul_f64(0.9),
            "gap {i} is {gap:?}, expected about {expected:?}: {gaps:?}"
        );
    }
    for pair in gaps.windows(2) {
        assert!(pair[1] > pair[0], "delays grow: {gaps:?}");
    }
    let healthy_first = journal.attempts("default/healthy")[0];
    assert!(
        healthy_first < *attempts.last().unwrap(),
        "the healthy key was reconciled while the flaky one backed off"
    );
    let text = mgr.metrics().encode().unwrap();
    assert!(
        text.contains(r#"controller_runtime_reconcile_errors_total{controller="widget"} 4"#),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_retries_total{controller="widget",name="widget"} 4"#),
        "{text}"
    );
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn panics_are_recovered_counted_and_retried() {
    let env = env_with_crd().await;
    let client = env.client();
    let mgr = Manager::builder(client.clone()).build().await.unwrap();
    let journal = Arc::new(Journal::default());
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(10),
            Duration::from_secs(1),
        ))
        .complete(WidgetReconciler::new(&mgr, Arc::clone(&journal)))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    let api = widgets(&client);
    let mut bomb = widget("bomb", &[("k", "v")]);
    bomb.spec.panic_times = 2;
    api.create(&PostParams::default(), &bomb).await.unwrap();
    wait_until(
        LONG,
        "the panicking widget is reconciled after retries",
        || async { cm_data(&client, "bomb").await.is_some() },
    )
    .await;
    // The single worker survived the panics and serves other keys.
    api.create(&PostParams::default(), &widget("after", &[("k", "v")]))
        .await
        .unwrap();
    wait_until(LONG, "a later widget is reconciled", || async {
        cm_data(&client, "after").await.is_some()
    })
    .await;
    let text = mgr.metrics().encode().unwrap();
    assert!(
        text.contains(r#"controller_runtime_reconcile_panics_total{controller="widget"} 2"#),
        "{text}"
    );
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn a_key_is_never_reconciled_concurrently_and_workers_are_bounded() {
    let env = env_with_crd().await;
    let client = env.client();
    let mgr = Manager::builder(client.clone()).build().await.unwrap();
    let journal = Arc::new(Journal::default());
    let mut reconciler = WidgetReconciler::new(&mgr, Arc::clone(&journal));
    reconciler.work = Duration::from_millis(30);
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .max_concurrent_reconciles(3)
        .complete(reconciler)
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    let api = widgets(&client);
    for i in 0..8 {
        api.create(
            &PostParams::default(),
            &widget(&format!("c{i}"), &[("v", "0")]),
        )
        .await
        .unwrap();
    }
    // Hammer each widget with updates while they are being reconciled.
    for round in 1..4 {
        for i in 0..8 {
            let name = format!("c{i}");
            let mut w = api.get(&name).await.unwrap();
            w.spec.data = BTreeMap::from([("v".into(), round.to_string())]);
            api.replace(&name, &PostParams::default(), &w)
                .await
                .unwrap();
        }
    }
    wait_until(LONG, "every widget converges", || async {
        for i in 0..8 {
            if cm_data(&client, &format!("c{i}")).await
                != Some(BTreeMap::from([("v".into(), "3".into())]))
            {
                return false;
            }
        }
        true
    })
    .await;
    assert_eq!(
        *journal.overlap.lock(),
        None,
        "no key was reconciled concurrently"
    );
    let max = journal.max_concurrent.load(Ordering::SeqCst);
    assert!((2..=3).contains(&max), "max concurrent reconciles {max}");
    let text = mgr.metrics().encode().unwrap();
    assert!(
        text.contains(r#"controller_runtime_max_concurrent_reconciles{controller="widget"} 3"#),
        "{text}"
    );
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn workers_wait_for_caches_and_name_the_unsynced_informer() {
    // No CRD: the Widget informer can never list, so it never syncs.
    let env = TestEnv::start().await.unwrap();
    let mgr = Manager::builder(env.client())
        .cache_sync_timeout(Duration::from_millis(1500))
        .build()
        .await
        .unwrap();
    let journal = Arc::new(Journal::default());
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .complete(WidgetReconciler::new(&mgr, Arc::clone(&journal)))
        .unwrap();
    let err = tokio::time::timeout(LONG, mgr.run(CancellationToken::new()))
        .await
        .unwrap()
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("caches did not sync within 1.5s"),
        "{message}"
    );
    assert!(message.contains("Widget (example.com/v1)"), "{message}");
    assert!(
        !message.contains("ConfigMap"),
        "the ConfigMap informer synced: {message}"
    );
}

#[tokio::test]
async fn two_controllers_share_one_watch_per_kind() {
    let env = env_with_crd().await;
    let client = env.client();
    let mgr = Manager::builder(client.clone()).build().await.unwrap();
    let journal = Arc::new(Journal::default());
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .complete(WidgetReconciler::new(&mgr, Arc::clone(&journal)))
        .unwrap();
    struct CountCms(Arc<AtomicUsize>);
    impl Reconciler for CountCms {
        type Error = std::convert::Infallible;
        async fn reconcile(&self, _: Request, _: Context) -> Result<Action, Self::Error> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(Action::done())
        }
    }
    let seen = Arc::new(AtomicUsize::new(0));
    mgr.controller::<ConfigMap>()
        .complete(CountCms(Arc::clone(&seen)))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    widgets(&client)
        .create(&PostParams::default(), &widget("shared", &[("a", "b")]))
        .await
        .unwrap();
    wait_until(
        LONG,
        "the ConfigMap controller sees the widget's ConfigMap",
        || async { cm_data(&client, "shared").await.is_some() && seen.load(Ordering::SeqCst) >= 1 },
    )
    .await;
    let watches = env
        .request_log()
        .iter()
        .filter(|r| r.path.ends_with("/configmaps") && r.query.contains("watch=true"))
        .count();
    assert_eq!(watches, 1, "one ConfigMap watch for both controllers");
    stop_manager(stop, task).await;
}
