//! client-go's `SharedInformerFactory`: hands out one shared informer per
//! (resource type, API path (so namespace and dynamic kind), label selector,
//! field selector) to everyone who asks, so a process that needs Pods in
//! several places still runs one list + watch and one cache for them.
//! Informers are created on first request, started by
//! [`SharedInformerFactory::start`] (later requests need another `start`),
//! waited on together and shut down together.
//!
//! Layer 5 (the top): imports the shared informer and what it is built from.
//!
//! Every informer starts from a streaming list (`sendInitialEvents`) with a
//! fallback to LIST unless [`SharedInformerFactoryBuilder::streaming_list`]
//! turns that off; [`SharedInformerFactory::metadata_informer`] and its
//! siblings cache `PartialObjectMeta<K>` (metadata only) under their own key.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube_client::{Api, Client};
use kube_core::metadata::PartialObjectMeta;
use kube_core::{NamespaceScope, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::list_watch::{ApiListerWatcher, ListWatchOptions, ReadLimits};
use crate::lister::Lister;
use crate::metrics::InformerMetrics;
use crate::shared_informer::SharedIndexInformer;

mod scope;
pub use scope::is_cluster_scoped;

/// Errors of the factory.
#[derive(Debug, thiserror::Error)]
pub enum FactoryError {
    /// The factory was shut down.
    #[error("the informer factory was shut down")]
    ShutDown,
    /// Some informers did not sync in time.
    #[error("informers not synced within {timeout:?}: {}", unsynced.join(", "))]
    NotSynced {
        /// The wait's limit.
        timeout: Duration,
        /// Descriptions of the informers that had not synced.
        unsynced: Vec<String>,
    },
}

/// Per-informer options of a factory request; part of the sharing key
/// (except `resync`, which only applies when the informer is created).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct InformerOptions {
    /// Server-side label selector (standard string syntax).
    pub label_selector: Option<String>,
    /// Server-side field selector.
    pub field_selector: Option<String>,
    /// Resync period of this informer, instead of the factory's.
    pub resync: Option<Duration>,
}

impl InformerOptions {
    /// No selectors, the factory's resync.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the label selector.
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Sets the field selector.
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Sets this informer's resync period.
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// Both sets of options at once: an object must match both label
    /// selectors and both field selectors (the requirements are joined
    /// with `,`, which means *and*; a requirement in both is kept once);
    /// `other`'s resync period wins when it has one.
    ///
    /// ```
    /// use informer_core::factory::InformerOptions;
    /// let mine = InformerOptions::new().label_selector("probe=1");
    /// let shard = InformerOptions::new().label_selector("shard=a");
    /// let both = mine.merge(shard);
    /// assert_eq!(both.label_selector.as_deref(), Some("probe=1,shard=a"));
    /// assert_eq!(both.clone().merge(InformerOptions::new()), both);
    /// ```
    pub fn merge(self, other: InformerOptions) -> Self {
        InformerOptions {
            label_selector: join_selectors(self.label_selector, other.label_selector),
            field_selector: join_selectors(self.field_selector, other.field_selector),
            resync: other.resync.or(self.resync),
        }
    }
}

/// `a` and `b` as one selector (`a,b`), each requirement once. Commas
/// inside parentheses (`env in (a,b)`) belong to their requirement.
fn join_selectors(a: Option<String>, b: Option<String>) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for selector in a.iter().chain(b.iter()) {
        let (mut depth, mut start) = (0usize, 0usize);
        let mut push = |term: &str| {
            let term = term.trim();
            if !term.is_empty() && !terms.iter().any(|t| t == term) {
                terms.push(term.to_string());
            }
        };
        for (i, c) in selector.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    push(&selector[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        push(&selector[start..]);
    }
    (!terms.is_empty()).then(|| terms.join(","))
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InformerKey {
    type_id: TypeId,
    /// The Rust type's name, short (`ConfigMap`, `PartialObjectMeta<Secret>`),
    /// so that informers of one path but different types read apart.
    type_name: String,
    url: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

/// `type_name` with every path shortened to its last segment.
fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        out.push_str(token.rsplit("::").next().unwrap_or_default());
        token.clear();
    };
    for c in full.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

impl fmt::Display for InformerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.type_name, self.url)?;
        if let Some(l) = &self.label_selector {
            write!(f, " labels={l}")?;
        }
        if let Some(s) = &self.field_selector {
            write!(f, " fields={s}")?;
        }
        Ok(())
    }
}

/// What the factory needs of an informer regardless of its type.
trait ErasedInformer: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn run(&self, token: CancellationToken) -> BoxFuture<'static, ()>;
    fn has_synced(&self) -> bool;
}

impl<K> ErasedInformer for SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn run(&self, token: CancellationToken) -> BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move {
            if let Err(err) = informer.run(token).await {
                tracing::error!(error = %err, "informer did not run");
            }
        })
    }
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
}

struct Entry {
    informer: Arc<dyn ErasedInformer>,
    task: Option<JoinHandle<()>>,
}

struct FactoryInner {
    client: Client,
    default_resync: Duration,
    custom_resync: HashMap<TypeId, Duration>,
    metrics: Option<Arc<dyn InformerMetrics>>,
    /// Every informer strips managedFields (after its own transform).
    strip_managed_fields: bool,
    /// Streaming lists on or off for every informer (`None`: the informer's default, on).
    streaming_list: Option<bool>,
    /// Protobuf for built-in kinds' informers.
    protobuf: bool,
    /// Caps on one watch event and one LIST answer, for every informer.
    read_limits: ReadLimits,
    entries: Mutex<HashMap<InformerKey, Entry>>,
    shutdown: CancellationToken,
}

/// Shares informers between everyone who asks. Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
/// use informer_core::factory::SharedInformerFactory;
///
/// let factory = SharedInformerFactory::new(client, Duration::from_secs(600));
/// let pods = factory.informer::<Pod>();
/// let same_pods = factory.informer::<Pod>(); // the same informer
/// let deployments = factory.namespaced_informer::<Deployment>("default");
/// factory.start();
/// factory.wait_for_cache_sync(Duration::from_secs(30)).await?;
/// println!("{} pods", pods.indexer().len());
/// # let _ = (same_pods, deployments);
/// factory.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<FactoryInner>,
}

impl fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.inner.entries.lock();
        let mut keys: Vec<String> = entries.keys().map(ToString::to_string).collect();
        keys.sort();
        f.debug_struct("SharedInformerFactory")
            .field("default_resync", &self.inner.default_resync)
            .field("informers", &keys)
            .finish()
    }
}

/// Builds a [`SharedInformerFactory`].
#[must_use]
pub struct SharedInformerFactoryBuilder {
    client: Client,
    default_resync: Duration,
    custom_resync: HashMap<TypeId, Duration>,
    metrics: Option<Arc<dyn InformerMetrics>>,
    strip_managed_fields: bool,
    streaming_list: Option<bool>,
    protobuf: bool,
    read_limits: ReadLimits,
}

impl SharedInformerFactoryBuilder {
    /// Whether informers get their initial state (and relists) from a
    /// streaming list, a WATCH with `sendInitialEvents=true`, falling back to
    /// LIST where the server refuses it (counted in
    /// [`InformerMetrics::streaming_list_fallback`]). On unless turned off.
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) {
    /// use informer_core::factory::SharedInformerFactory;
    /// use k8s_openapi::api::core::v1::Pod;
    /// let factory = SharedInformerFactory::builder(client.clone()).build();
    /// assert!(factory.informer::<Pod>().uses_streaming_list());
    /// let listing = SharedInformerFactory::builder(client).streaming_list(false).build();
    /// assert!(!listing.informer::<Pod>().uses_streaming_list());
    /// # }
    /// ```
    pub fn streaming_list(mut self, enabled: bool) -> Self {
        self.streaming_list = Some(enabled);
        self
    }

    /// Whether informers of built-in kinds (k8s-openapi types) and
    /// metadata-only informers list and watch in protobuf, with JSON as the
    /// second choice and a counted fallback to JSON (see
    /// [`ApiListerWatcher::protobuf`]). On by default; `false` reads every
    /// kind in JSON. Custom resources and dynamic objects are read in JSON
    /// either way.
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) {
    /// use informer_core::factory::SharedInformerFactory;
    /// let factory = SharedInformerFactory::builder(client.clone()).build();
    /// assert!(factory.uses_protobuf());
    /// let factory = SharedInformerFactory::builder(client).protobuf(false).build();
    /// assert!(!factory.uses_protobuf());
    /// # }
    /// ```
    pub fn protobuf(mut self, enabled: bool) -> Self {
        self.protobuf = enabled;
        self
    }

    /// Caps on what one answer of the API server may make an informer
    /// hold (one watch event, one LIST answer; 64 MiB each by default),
    /// for every informer of this factory; see
    /// [`ApiListerWatcher::read_limits`].
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) {
    /// use informer_core::factory::SharedInformerFactory;
    /// use informer_core::list_watch::ReadLimits;
    /// let limits = ReadLimits::default().max_page_bytes(256 << 20);
    /// let factory = SharedInformerFactory::builder(client).read_limits(limits).build();
    /// assert_eq!(factory.read_limits(), limits);
    /// # }
    /// ```
    pub fn read_limits(mut self, limits: ReadLimits) -> Self {
        self.read_limits = limits;
        self
    }

    /// Whether every informer of this factory clears `metadata.managedFields`
    /// from objects before caching them (off by default). managedFields are
    /// often the largest part of an object's metadata and few controllers
    /// read them; stripping roughly halves the cache of small objects. A
    /// transform set on one of the informers runs before the stripping,
    /// which stays on (see
    /// [`SharedIndexInformerBuilder::strip_managed_fields`](crate::shared_informer::SharedIndexInformerBuilder::strip_managed_fields)).
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) {
    /// use informer_core::factory::SharedInformerFactory;
    /// let factory = SharedInformerFactory::builder(client)
    ///     .strip_managed_fields(true)
    ///     .build();
    /// assert!(factory.strips_managed_fields());
    /// # }
    /// ```
    pub fn strip_managed_fields(mut self, strip: bool) -> Self {
        self.strip_managed_fields = strip;
        self
    }

    /// Where every informer of this factory reports its counters and gauges
    /// (lists, relists, watch restarts, events, decode failures, pending
    /// notifications per handler). Without it they report nowhere.
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Resync period of informers without one of their own (`ZERO`: none).
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = period;
        self
    }

    /// Resync period for every informer of type `K` (client-go's `WithCustomResyncConfig`).
    pub fn resync_for<K: 'static>(mut self, period: Duration) -> Self {
        self.custom_resync.insert(TypeId::of::<K>(), period);
        self
    }

    /// Builds the factory.
    pub fn build(self) -> SharedInformerFactory {
        SharedInformerFactory {
            inner: Arc::new(FactoryInner {
                client: self.client,
                default_resync: self.default_resync,
                custom_resync: self.custom_resync,
                metrics: self.metrics,
                strip_managed_fields: self.strip_managed_fields,
                streaming_list: self.streaming_list,
                protobuf: self.protobuf,
                read_limits: self.read_limits,
                entries: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
            }),
        }
    }
}

/// What the typed factory methods ask of `K`: a resource whose API is known
/// from the type alone (`DynamicType = ()`, as for every k8s-openapi type
/// and derived custom resource) and that can be decoded, cloned and shared
/// across tasks. Implemented for every such type; never implement it by hand.
pub trait StaticResource:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static
{
}

impl<K> StaticResource for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static
{
}

impl SharedInformerFactory {
    /// A factory whose informers resync every `default_resync` (`ZERO`: never).
    pub fn new(client: Client, default_resync: Duration) -> Self {
        Self::builder(client).default_resync(default_resync).build()
    }

    /// Starts a builder.
    pub fn builder(client: Client) -> SharedInformerFactoryBuilder {
        SharedInformerFactoryBuilder {
            client,
            default_resync: Duration::ZERO,
            custom_resync: HashMap::new(),
            metrics: None,
            strip_managed_fields: false,
            streaming_list: None,
            protobuf: true,
            read_limits: ReadLimits::default(),
        }
    }

    /// The client the informers list and watch with (for building an
    /// `Api` to pass to [`informer_for_api`](Self::informer_for_api)).
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Whether this factory's informers clear `metadata.managedFields`
    /// before caching (see [`SharedInformerFactoryBuilder::strip_managed_fields`]).
    pub fn strips_managed_fields(&self) -> bool {
        self.inner.strip_managed_fields
    }

    /// Whether informers of built-in kinds ask for protobuf (see
    /// [`SharedInformerFactoryBuilder::protobuf`]).
    pub fn uses_protobuf(&self) -> bool {
        self.inner.protobuf
    }

    /// The caps of this factory's informers (see
    /// [`SharedInformerFactoryBuilder::read_limits`]).
    pub fn read_limits(&self) -> ReadLimits {
        self.inner.read_limits
    }

    /// The shared informer of `K` across all namespaces (or of a cluster-scoped `K`).
    pub fn informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: StaticResource,
    {
        self.informer_with(InformerOptions::new())
    }

    /// The shared informer of `K` across all namespaces, with selectors.
    pub fn informer_with<K>(&self, options: InformerOptions) -> SharedIndexInformer<K>
    where
        K: StaticResource,
    {
        self.informer_for_api(Api::all(self.inner.client.clone()), options)
    }

    /// The shared informer of namespaced `K` in `namespace`.
    pub fn namespaced_informer<K>(&self, namespace: &str) -> SharedIndexInformer<K>
    where
        K: StaticResource,
        K::Scope: NamespaceScope,
    {
        self.namespaced_informer_with(namespace, InformerOptions::new())
    }

    /// The shared informer of namespaced `K` in `namespace`, with selectors.
    pub fn namespaced_informer_with<K>(
        &self,
        namespace: &str,
        options: InformerOptions,
    ) -> SharedIndexInformer<K>
    where
        K: StaticResource,
        K::Scope: NamespaceScope,
    {
        let api = Api::<K>::all(self.inner.client.clone()).constrain(namespace);
        self.informer_for_api(api, options)
    }

    /// The shared metadata-only informer of `K` across all namespaces (or
    /// of a cluster-scoped `K`): it caches `PartialObjectMeta<K>`, asking the
    /// server for `PartialObjectMetadata` (full objects stripped to their
    /// metadata where it refuses). Not the same informer as
    /// [`informer`](Self::informer) of `K`.
    ///
    /// ```no_run
    /// # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use informer_core::factory::{InformerOptions, SharedInformerFactory};
    /// use k8s_openapi::api::core::v1::Secret;
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// let secrets = factory.metadata_informer::<Secret>(InformerOptions::new());
    /// factory.start();
    /// factory.wait_for_cache_sync(Duration::from_secs(30)).await?;
    /// for s in secrets.indexer().list() {
    ///     println!("{:?}", s.metadata.name); // no `data` anywhere
    /// }
    /// # Ok(()) }
    /// ```
    pub fn metadata_informer<K>(
        &self,
        options: InformerOptions,
    ) -> SharedIndexInformer<PartialObjectMeta<K>>
    where
        K: StaticResource,
    {
        self.informer_for_api(Api::all(self.inner.client.clone()), options)
    }

    /// The shared metadata-only informer of namespaced `K` in `namespace`.
    pub fn namespaced_metadata_informer<K>(
        &self,
        namespace: &str,
        options: InformerOptions,
    ) -> SharedIndexInformer<PartialObjectMeta<K>>
    where
        K: StaticResource,
        K::Scope: NamespaceScope,
    {
        let api = Api::<PartialObjectMeta<K>>::all(self.inner.client.clone()).constrain(namespace);
        self.informer_for_api(api, options)
    }

    /// The shared informer reading through `api` (any resource type,
    /// including `DynamicObject`, and `PartialObjectMeta` of any for
    /// metadata only); shared by API path, type and selectors.
    pub fn informer_for_api<K>(
        &self,
        api: Api<K>,
        options: InformerOptions,
    ) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
    {
        let url = api.resource_url().to_owned();
        self.informer_at(api.into_client(), url, options)
    }

    /// The shared informer of `K` listing and watching the collection at
    /// `url` (the path an `Api` would use).
    pub(crate) fn informer_at<K>(
        &self,
        client: Client,
        url: String,
        options: InformerOptions,
    ) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
    {
        let key = InformerKey {
            type_id: TypeId::of::<K>(),
            type_name: short_type_name(std::any::type_name::<K>()),
            url: url.clone(),
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
        };
        let mut entries = self.inner.entries.lock();
        if let Some(entry) = entries.get(&key)
            && let Some(informer) = entry
                .informer
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
        {
            return informer.clone();
        }
        let resync = options
            .resync
            .or_else(|| self.inner.custom_resync.get(&key.type_id).copied())
            .unwrap_or(self.inner.default_resync);
        let mut lw_options = ListWatchOptions::default();
        if let Some(labels) = options.label_selector {
            lw_options = lw_options.labels(labels);
        }
        if let Some(fields) = options.field_selector {
            lw_options = lw_options.fields(fields);
        }
        let mut lister_watcher = ApiListerWatcher::<K>::at(client, url, lw_options)
            .protobuf(self.inner.protobuf)
            .read_limits(self.inner.read_limits);
        if let Some(metrics) = &self.inner.metrics {
            lister_watcher = lister_watcher.metrics(Arc::clone(metrics));
        }
        let mut builder = SharedIndexInformer::builder(lister_watcher)
            .default_resync(resync)
            .strip_managed_fields(self.inner.strip_managed_fields);
        if let Some(metrics) = &self.inner.metrics {
            builder = builder.metrics(Arc::clone(metrics));
        }
        if let Some(streaming) = self.inner.streaming_list {
            builder = builder.streaming_list(streaming);
        }
        let informer = match builder.build() {
            Ok(informer) => informer,
            // Only repeated index names fail a build, and none are added here.
            Err(err) => unreachable!("building an informer without indexers failed: {err}"),
        };
        tracing::debug!(informer = %key, ?resync, "created shared informer");
        entries.insert(
            key,
            Entry {
                informer: Arc::new(informer.clone()),
                task: None,
            },
        );
        informer
    }

    /// A lister over the shared informer of `K` (all namespaces).
    pub fn lister<K>(&self) -> Lister<K>
    where
        K: StaticResource,
    {
        self.informer::<K>().lister()
    }

    /// Starts every informer requested so far that is not running yet.
    /// Call again after requesting more. Does nothing after shutdown. Must be
    /// called inside a tokio runtime.
    pub fn start(&self) {
        if self.inner.shutdown.is_cancelled() {
            tracing::warn!("informer factory is shut down; start ignored");
            return;
        }
        let mut entries = self.inner.entries.lock();
        for (key, entry) in entries.iter_mut() {
            if entry.task.is_none() {
                tracing::debug!(informer = %key, "starting shared informer");
                entry.task = Some(tokio::spawn(
                    entry.informer.run(self.inner.shutdown.child_token()),
                ));
            }
        }
    }

    /// Sync state of every started informer, by description (its Rust
    /// type, API path and selectors).
    pub fn synced(&self) -> BTreeMap<String, bool> {
        self.inner
            .entries
            .lock()
            .iter()
            .filter(|(_, e)| e.task.is_some())
            .map(|(k, e)| (k.to_string(), e.informer.has_synced()))
            .collect()
    }

    /// Waits up to `timeout` until every started informer has synced.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> Result<(), FactoryError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let state = self.synced();
            let unsynced: Vec<String> = state
                .into_iter()
                .filter(|(_, synced)| !synced)
                .map(|(k, _)| k)
                .collect();
            if unsynced.is_empty() {
                return Ok(());
            }
            if self.inner.shutdown.is_cancelled() {
                return Err(FactoryError::ShutDown);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(FactoryError::NotSynced { timeout, unsynced });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops every informer and waits for them to end.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let tasks: Vec<JoinHandle<()>> = self
            .inner
            .entries
            .lock()
            .values_mut()
            .filter_map(|e| e.task.take())
            .collect();
        for task in tasks {
            if let Err(err) = task.await {
                tracing::error!(error = %err, "informer task failed");
            }
        }
    }

    /// Number of distinct informers requested so far.
    pub fn len(&self) -> usize {
        self.inner.entries.lock().len()
    }

    /// Whether no informer was requested.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::{InformerOptions, short_type_name};
    use std::time::Duration;

    #[test]
    fn merged_options_keep_both_selectors() {
        let user = InformerOptions::new()
            .label_selector("env in (a,b),probe=1")
            .field_selector("metadata.name!=x")
            .resync(Duration::from_secs(5));
        let shard = InformerOptions::new().label_selector("probe=1,sharding.informer-rs.io/r=a");
        let both = user.clone().merge(shard);
        assert_eq!(
            both.label_selector.as_deref(),
            Some("env in (a,b),probe=1,sharding.informer-rs.io/r=a")
        );
        assert_eq!(both.field_selector.as_deref(), Some("metadata.name!=x"));
        assert_eq!(both.resync, Some(Duration::from_secs(5)));
        assert_eq!(
            InformerOptions::new().merge(InformerOptions::new()),
            InformerOptions::new()
        );
        assert_eq!(InformerOptions::new().merge(user.clone()), user);
    }

    #[test]
    fn type_names_are_shortened_path_by_path() {
        assert_eq!(
            short_type_name(
                "kube_core::metadata::PartialObjectMeta<k8s_openapi::api::core::v1::Secret>"
            ),
            "PartialObjectMeta<Secret>"
        );
        assert_eq!(
            short_type_name("k8s_openapi::api::core::v1::ConfigMap"),
            "ConfigMap"
        );
        assert_eq!(short_type_name("Plain"), "Plain");
    }
}
