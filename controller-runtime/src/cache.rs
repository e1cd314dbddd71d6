//! The manager's cache-backed reader: get and list objects from the shared
//! informers instead of the API server, with field indexes.
//!
//! Reads go to the [`SharedInformerFactory`]'s informer for the kind, the
//! same one the manager's controllers use, so reading a kind a controller
//! watches costs no extra watch. The first read of another kind starts its
//! informer and waits for it to sync.
//!
//! What each informer lists and watches is the cache's [`CacheScope`]: all
//! namespaces or one (cluster-scoped kinds are always cluster-wide), and per
//! kind a label and field selector (controller-runtime's `ByObject`).
//! Objects outside the scope are invisible: a read finds nothing, and no
//! event is ever delivered for them.
//!
//! [`Cache::index_field`] is controller-runtime's `IndexField`: it names a
//! value extracted from each object, after which [`ListOptions::matching_field`]
//! lists the objects with that value, optionally within one namespace.
//!
//! Layer 2 (cache and metrics registry): imports the vocabulary
//! ([`crate::object`], [`crate::terminal`]) and nothing above it; the
//! [manager](crate::manager) creates the cache and starts its informers.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::object::Object;
use crate::terminal::Terminal;
use informer_core::factory::{InformerOptions, SharedInformerFactory};
use informer_core::lister::Lister;
use informer_core::selector::LabelSelector;
use informer_core::shared_informer::{InformerError, SharedIndexInformer};
use informer_core::store::IndexFn;
use kube_client::core::metadata::PartialObjectMeta;

/// Errors of the cache reader.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Reads need the manager to run (it starts the informers).
    #[error("the cache is not started: run the manager before reading {kind}")]
    NotStarted {
        /// The kind that was read.
        kind: String,
    },
    /// The kind's informer did not sync in time (or stopped).
    #[error("the {kind} informer did not sync: {source}")]
    NotSynced {
        /// The kind that was read.
        kind: String,
        /// Why the wait ended.
        #[source]
        source: InformerError,
    },
    /// A field index is already registered under this name for the kind,
    /// or the indexer refused it.
    #[error("cannot add field index {field:?} for {kind}: {source}")]
    Index {
        /// The kind.
        kind: String,
        /// The field index name.
        field: String,
        /// The indexer's answer.
        #[source]
        source: InformerError,
    },
    /// Listing by a field index that was never registered.
    #[error("no field index {field:?} for {kind}; register it with Cache::index_field first")]
    UnknownField {
        /// The kind.
        kind: String,
        /// The field index name.
        field: String,
    },
}

/// A failed cache read is retried: the informer may sync or start later.
impl Terminal for CacheError {}

/// What to list: a namespace, a label selector, a field index value.
///
/// ```
/// use controller_runtime::cache::ListOptions;
/// let opts = ListOptions::new()
///     .namespace("default")
///     .labels("app=web".parse().unwrap())
///     .matching_field("spec.nodeName", "node-1");
/// assert_eq!(opts.namespace.as_deref(), Some("default"));
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ListOptions {
    /// Only objects in this namespace.
    pub namespace: Option<String>,
    /// Only objects whose labels match.
    pub labels: Option<LabelSelector>,
    /// Only objects whose indexed field (first) has the value (second).
    pub field: Option<(String, String)>,
}

impl ListOptions {
    /// Everything.
    pub fn new() -> Self {
        Self::default()
    }
    /// Restricts to one namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }
    /// Restricts by labels.
    pub fn labels(mut self, selector: LabelSelector) -> Self {
        self.labels = Some(selector);
        self
    }
    /// Restricts to objects whose field index `field` has `value`.
    pub fn matching_field(mut self, field: impl Into<String>, value: impl Into<String>) -> Self {
        self.field = Some((field.into(), value.into()));
        self
    }
}

const ALL_NAMESPACES: &str = "__all_namespaces";

fn index_name(field: &str) -> String {
    format!("field:{field}")
}

fn kind_of<K: Object>() -> String {
    let (group, version, kind) = (K::group(&()), K::version(&()), K::kind(&()));
    if group.is_empty() {
        format!("{kind} ({version})")
    } else {
        format!("{kind} ({group}/{version})")
    }
}

/// What the cache's informers list and watch: one namespace or all, and
/// per kind the selectors of its informer (controller-runtime's
/// `cache.Options{DefaultNamespaces, ByObject}`).
///
/// ```
/// use controller_runtime::cache::CacheScope;
/// use controller_runtime::informer_core::factory::InformerOptions;
/// use controller_runtime::k8s_openapi::api::core::v1::Secret;
/// let scope = CacheScope::new()
///     .namespace("team-a")
///     .by_object::<Secret>(InformerOptions::new().label_selector("owned-by=me"));
/// assert_eq!(scope.namespace_name(), Some("team-a"));
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct CacheScope {
    namespace: Option<String>,
    by_object: HashMap<TypeId, InformerOptions>,
}

impl CacheScope {
    /// All namespaces, no selectors.
    pub fn new() -> Self {
        Self::default()
    }

    /// Caches namespaced kinds of `namespace` only (cluster-scoped kinds
    /// stay cluster-wide). An empty name means all namespaces.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into()).filter(|ns| !ns.is_empty());
        self
    }

    /// The informer of `K` (and its metadata-only informer) lists and
    /// watches with `options`' label and field selectors (and resync).
    pub fn by_object<K: Object>(mut self, options: InformerOptions) -> Self {
        self.by_object.insert(TypeId::of::<K>(), options);
        self
    }

    /// The one namespace cached, if restricted.
    pub fn namespace_name(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    fn options_for<K: 'static>(&self) -> InformerOptions {
        self.by_object
            .get(&TypeId::of::<K>())
            .cloned()
            .unwrap_or_default()
    }
}

/// Reads objects from the manager's shared informers. Cheap to clone.
#[derive(Clone)]
pub struct Cache {
    factory: SharedInformerFactory,
    started: Arc<AtomicBool>,
    sync_timeout: Duration,
    scope: Arc<CacheScope>,
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("started", &self.started.load(Ordering::Acquire))
            .field("sync_timeout", &self.sync_timeout)
            .field("namespace", &self.scope.namespace)
            .finish()
    }
}

impl Cache {
    #[cfg(test)]
    pub(crate) fn new(factory: SharedInformerFactory, sync_timeout: Duration) -> Self {
        Self::scoped(factory, sync_timeout, CacheScope::new())
    }

    pub(crate) fn scoped(
        factory: SharedInformerFactory,
        sync_timeout: Duration,
        scope: CacheScope,
    ) -> Self {
        Cache {
            factory,
            started: Arc::new(AtomicBool::new(false)),
            sync_timeout,
            scope: Arc::new(scope),
        }
    }

    /// What the informers list and watch.
    pub fn scope(&self) -> &CacheScope {
        &self.scope
    }

    pub(crate) fn set_started(&self, started: bool) {
        self.started.store(started, Ordering::Release);
    }

    /// Whether the manager started the informers.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// The shared informer of `K` within the cache's [`CacheScope`], the
    /// one reads and the manager's controllers go to. Set a transform on it
    /// before the manager starts to change what is cached; it composes with
    /// the managedFields stripping.
    pub fn informer<K: Object>(&self) -> SharedIndexInformer<K> {
        self.factory
            .informer_in::<K>(self.scope.namespace_name(), self.scope.options_for::<K>())
    }

    /// The shared metadata-only informer of `K` within the cache's scope:
    /// it caches `PartialObjectMeta<K>` (no spec, status or data).
    pub fn metadata_informer<K: Object>(&self) -> SharedIndexInformer<PartialObjectMeta<K>> {
        self.factory
            .metadata_informer_in::<K>(self.scope.namespace_name(), self.scope.options_for::<K>())
    }

    /// The informer of `K`, started and synced.
    async fn synced_informer<K: Object>(&self) -> Result<SharedIndexInformer<K>, CacheError> {
        if !self.is_started() {
            return Err(CacheError::NotStarted {
                kind: kind_of::<K>(),
            });
        }
        let informer = self.informer::<K>();
        if !informer.has_synced() {
            self.factory.start();
            informer
                .wait_for_cache_sync(self.sync_timeout)
                .await
                .map_err(|source| CacheError::NotSynced {
                    kind: kind_of::<K>(),
                    source,
                })?;
        }
        Ok(informer)
    }

    /// A lister of `K` over the cache (no waiting: empty until synced).
    pub fn lister<K: Object>(&self) -> Lister<K> {
        self.informer::<K>().lister()
    }

    /// The object `namespace/name` (or `name` when `namespace` is `None`),
    /// `None` when the cache has no such object.
    pub async fn get<K: Object>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<K>>, CacheError> {
        let informer = self.synced_informer::<K>().await?;
        let key = match namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_string(),
        };
        Ok(informer.indexer().get_by_key(&key))
    }

    /// The cached objects of `K` matching `opts`.
    pub async fn list<K: Object>(&self, opts: &ListOptions) -> Result<Vec<Arc<K>>, CacheError> {
        let informer = self.synced_informer::<K>().await?;
        let indexer = informer.indexer();
        let candidates = match (&opts.field, &opts.namespace) {
            (Some((field, value)), ns) => {
                let scope = ns.as_deref().unwrap_or(ALL_NAMESPACES);
                indexer
                    .by_index(&index_name(field), &format!("{scope}/{value}"))
                    .map_err(|_| CacheError::UnknownField {
                        kind: kind_of::<K>(),
                        field: field.clone(),
                    })?
            }
            (None, Some(ns)) => indexer
                .by_index(informer_core::store::NAMESPACE_INDEX, ns)
                .unwrap_or_default(),
            (None, None) => indexer.list(),
        };
        Ok(match &opts.labels {
            Some(selector) => candidates
                .into_iter()
                .filter(|obj| {
                    let labels = obj.meta().labels.clone().unwrap_or_default();
                    selector.matches(&labels)
                })
                .collect(),
            None => candidates,
        })
    }

    /// Registers the field index `field` for `K`: `extract` gives the values
    /// an object has for it. Afterwards [`ListOptions::matching_field`]
    /// lists by it, across all namespaces or within one.
    ///
    /// ```no_run
    /// # async fn demo(mgr: controller_runtime::manager::Manager) -> Result<(), Box<dyn std::error::Error>> {
    /// use controller_runtime::cache::ListOptions;
    /// use k8s_openapi::api::core::v1::Pod;
    /// mgr.cache().index_field::<Pod>("spec.nodeName", |pod| {
    ///     pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
    /// })?;
    /// // ... once the manager runs:
    /// let on_node = mgr.cache().list::<Pod>(&ListOptions::new().matching_field("spec.nodeName", "node-1")).await?;
    /// # let _ = on_node; Ok(()) }
    /// ```
    pub fn index_field<K: Object>(
        &self,
        field: &str,
        extract: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), CacheError> {
        let index: IndexFn<K> = Arc::new(move |obj: &K| {
            let values = extract(obj);
            let ns = obj.meta().namespace.as_deref().filter(|ns| !ns.is_empty());
            let mut out = Vec::with_capacity(values.len() * 2);
            for value in values {
                if let Some(ns) = ns {
                    out.push(format!("{ns}/{value}"));
                }
                out.push(format!("{ALL_NAMESPACES}/{value}"));
            }
            Ok(out)
        });
        self.informer::<K>()
            .add_indexers([(index_name(field), index)])
            .map_err(|source| CacheError::Index {
                kind: kind_of::<K>(),
                field: field.to_string(),
                source,
            })
    }
}
