//! The manager's cache-backed reader: get and list objects from the shared
//! informers instead of the API server, with field indexes.
//!
//! Reads go to the [`SharedInformerFactory`]'s informer for the kind, the
//! same one the manager's controllers use, so reading a kind a controller
//! watches costs no extra watch. The first read of another kind starts its
//! informer and waits for it to sync.
//!
//! What each informer lists and watches is the cache's [`CacheScope`]: all
//! namespaces, one, or a set of them (cluster-scoped kinds are always
//! cluster-wide), and per kind a label and field selector and a transform
//! (controller-runtime's `DefaultNamespaces` and `ByObject`). Objects
//! outside the scope are invisible: a read finds nothing, and no event is
//! ever delivered for them. Restricted to several namespaces, the cache
//! runs one informer per namespace and kind and reads them as one
//! ([`ScopedInformer`]), so each namespace needs only a Role.
//!
//! [`Cache::index_field`] is controller-runtime's `IndexField`: it names a
//! value extracted from each object, after which [`ListOptions::matching_field`]
//! lists the objects with that value, optionally within one namespace.
//!
//! Layer 2 (cache and metrics registry): imports the vocabulary
//! ([`crate::object`], [`crate::terminal`]) and nothing above it; the
//! [manager](crate::manager) creates the cache and starts its informers.

mod informer;
mod scope;

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::object::Object;
use crate::terminal::Terminal;
use informer_core::factory::{InformerOptions, SharedInformerFactory, is_cluster_scoped};
use informer_core::lister::Lister;
use informer_core::selector::LabelSelector;
use informer_core::shared_informer::{InformerError, SharedIndexInformer};
use informer_core::store::{IndexFn, Indexer};
use kube_client::Api;
use kube_client::core::discovery::Scope;
use kube_client::core::metadata::PartialObjectMeta;
use kube_client::core::{ApiResource, DynamicObject};
use kube_core::Resource;
use parking_lot::Mutex;

use informer::Mirror;
pub use informer::ScopedInformer;
pub use scope::CacheScope;

/// Errors of the cache reader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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

/// Reads objects from the manager's shared informers. Cheap to clone.
#[derive(Clone)]
pub struct Cache {
    factory: SharedInformerFactory,
    started: Arc<AtomicBool>,
    sync_timeout: Duration,
    scope: Arc<CacheScope>,
    shared: Arc<Shared>,
}

/// What the clones of a cache share besides the factory.
#[derive(Default)]
struct Shared {
    /// The informers (by object type and namespace) given the scope's
    /// transform already, so that a transform set on one later by hand is
    /// not overwritten.
    transformed: Mutex<HashSet<(TypeId, Option<String>)>>,
    /// Per object type, the `Indexer<T>` mirroring its informers when there
    /// are several (see [`Cache::lister`]).
    mirrors: Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    /// Options the framework adds to a kind's (by API group and kind),
    /// merged with the scope's: a label-mode shard's selector.
    added: Mutex<HashMap<(String, String), InformerOptions>>,
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("started", &self.started.load(Ordering::Acquire))
            .field("sync_timeout", &self.sync_timeout)
            .field("namespaces", &self.scope.namespace_names())
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
            shared: Arc::new(Shared::default()),
        }
    }

    /// What the informers list and watch, as the manager was built with
    /// (without the selectors a sharded controller adds, see
    /// [`options_for_kind`](Self::options_for_kind)).
    pub fn scope(&self) -> &CacheScope {
        &self.scope
    }

    /// The options of the informers of the kind `kind` of API `group`: the
    /// scope's, merged with those the framework added (a label-mode
    /// shard's selector, see [`crate::sharding`]).
    ///
    /// ```no_run
    /// # fn demo(mgr: controller_runtime::manager::Manager) {
    /// let options = mgr.cache().options_for_kind("", "ConfigMap");
    /// println!("{:?}", options.label_selector);
    /// # }
    /// ```
    pub fn options_for_kind(&self, group: &str, kind: &str) -> InformerOptions {
        let scoped = self.scope.options_for_kind(group, kind);
        match self
            .shared
            .added
            .lock()
            .get(&(group.to_owned(), kind.to_owned()))
        {
            Some(added) => scoped.merge(added.clone()),
            None => scoped,
        }
    }

    fn options_for<K: Resource<DynamicType = ()>>(&self) -> InformerOptions {
        self.options_for_kind(&K::group(&()), &K::kind(&()))
    }

    /// Adds `options` to those of `K`'s informers (merged: both selectors
    /// apply). Informers of `K` handed out before keep their options.
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn add_options<K: Resource<DynamicType = ()>>(&self, options: InformerOptions) {
        self.add_options_for(&K::group(&()), &K::kind(&()), options);
    }

    /// [`add_options`](Self::add_options) of the kind `kind` of API `group`.
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn add_options_for(&self, group: &str, kind: &str, options: InformerOptions) {
        let key = (group.to_owned(), kind.to_owned());
        let mut added = self.shared.added.lock();
        let merged = added.remove(&key).unwrap_or_default().merge(options);
        added.insert(key, merged);
    }

    pub(crate) fn set_started(&self, started: bool) {
        self.started.store(started, Ordering::Release);
    }

    /// Whether the manager started the informers.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// The namespaces `T` is cached in: one `None` (cluster-wide) for
    /// cluster-scoped kinds and an unrestricted cache, else each namespace.
    fn namespaces_of<T: Resource>(&self) -> Vec<Option<String>> {
        let names = self.scope.namespace_names();
        if names.is_empty() || is_cluster_scoped::<T>() {
            vec![None]
        } else {
            names.iter().cloned().map(Some).collect()
        }
    }

    /// The informers of `T`, one per namespace in scope, each made by
    /// `make` and given the scope's transform of `T` if it has not started.
    fn scoped_informers<T>(
        &self,
        make: impl Fn(Option<&str>) -> SharedIndexInformer<T>,
    ) -> ScopedInformer<T>
    where
        T: Resource + Clone + Send + Sync + 'static,
    {
        let transform = self.scope.transform_for::<T>();
        let parts = self
            .namespaces_of::<T>()
            .into_iter()
            .map(|ns| {
                let informer = make(ns.as_deref());
                if let Some(transform) = &transform
                    && !informer.is_running()
                    && !informer.is_stopped()
                    && self
                        .shared
                        .transformed
                        .lock()
                        .insert((TypeId::of::<T>(), ns.clone()))
                {
                    // Not started: setting the transform cannot fail.
                    let _ = informer.set_transform(Arc::clone(transform));
                }
                (ns, informer)
            })
            .collect();
        ScopedInformer::new(parts)
    }

    /// The shared informers of `K` within the cache's [`CacheScope`], the
    /// ones reads and the manager's controllers go to: one, or one per
    /// namespace when the cache is restricted to several. A transform set
    /// on them before the manager starts changes what is cached; it
    /// composes with the managedFields stripping (or give it as a cache
    /// option, [`CacheScope::transform`]).
    pub fn informer<K: Object>(&self) -> ScopedInformer<K> {
        let options = self.options_for::<K>();
        self.scoped_informers(|ns| self.factory.informer_in::<K>(ns, options.clone()))
    }

    /// The shared metadata-only informers of `K` within the cache's scope
    /// (with `K`'s selectors): they cache `PartialObjectMeta<K>` (no spec,
    /// status or data).
    ///
    /// ```no_run
    /// # async fn demo(mgr: controller_runtime::manager::Manager) -> Result<(), Box<dyn std::error::Error>> {
    /// use controller_runtime::k8s_openapi::api::core::v1::Secret;
    /// let secrets = mgr.cache().metadata_informer::<Secret>();
    /// // ... once the manager runs:
    /// for s in secrets.list() {
    ///     println!("{:?} has no data here", s.metadata.name);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn metadata_informer<K: Object>(&self) -> ScopedInformer<PartialObjectMeta<K>> {
        let options = self.options_for::<K>();
        self.scoped_informers(|ns| self.factory.metadata_informer_in::<K>(ns, options.clone()))
    }

    /// The shared informers of the kind `resource` (chosen at run time, for
    /// example from discovery or a CRD installed meanwhile) within the
    /// cache's namespaces, caching [`DynamicObject`]s. `scope` says whether
    /// the kind is namespaced (a cluster-scoped kind has one informer). The
    /// kind's cache options apply ([`CacheScope::by_kind`]); transforms,
    /// which are keyed by Rust type, do not.
    ///
    /// ```no_run
    /// # async fn demo(mgr: controller_runtime::manager::Manager) {
    /// use controller_runtime::kube_client::core::{ApiResource, GroupVersionKind, discovery::Scope};
    /// let gvk = GroupVersionKind::gvk("example.com", "v1", "Gizmo");
    /// let gizmos = ApiResource::from_gvk_with_plural(&gvk, "gizmos");
    /// let informer = mgr.cache().dynamic_informer(&gizmos, Scope::Namespaced);
    /// // ... once the manager runs (and has started it):
    /// if let Some(g) = informer.get(Some("default"), "first") {
    ///     println!("{:?}", g.data.get("spec"));
    /// }
    /// # }
    /// ```
    pub fn dynamic_informer(
        &self,
        resource: &ApiResource,
        scope: Scope,
    ) -> ScopedInformer<DynamicObject> {
        let names = self.scope.namespace_names();
        let namespaces: Vec<Option<String>> = match scope {
            Scope::Namespaced if !names.is_empty() => names.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        let client = self.factory.client().clone();
        let parts = namespaces
            .into_iter()
            .map(|ns| {
                let api = match &ns {
                    Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, resource),
                    None => Api::<DynamicObject>::all_with(client.clone(), resource),
                };
                let options = self.options_for_kind(&resource.group, &resource.kind);
                let informer = self.factory.informer_for_api(api, options);
                (ns, informer)
            })
            .collect();
        ScopedInformer::new(parts)
    }

    /// The informers of `K`, started and synced.
    async fn synced_informer<K: Object>(&self) -> Result<ScopedInformer<K>, CacheError> {
        if !self.is_started() {
            return Err(CacheError::NotStarted {
                kind: kind_of::<K>(),
            });
        }
        let scoped = self.informer::<K>();
        if !scoped.has_synced() {
            self.factory.start();
            for informer in scoped.informers() {
                informer
                    .wait_for_cache_sync(self.sync_timeout)
                    .await
                    .map_err(|source| CacheError::NotSynced {
                        kind: kind_of::<K>(),
                        source,
                    })?;
            }
        }
        Ok(scoped)
    }

    /// A lister of `K` over the cache (no waiting: empty until synced).
    /// With several namespaces, it reads an indexer that follows the
    /// namespaces' informers through event handlers (one per kind, shared
    /// by every lister of it), so it may lag them by the handlers' delay;
    /// [`get`](Self::get) and [`list`](Self::list) read the informers
    /// themselves.
    pub fn lister<K: Object>(&self) -> Lister<K> {
        let scoped = self.informer::<K>();
        match scoped.informers() {
            [one] => one.lister(),
            _ => Lister::new(self.mirror(&scoped)),
        }
    }

    /// The indexer mirroring `scoped`'s informers, created on first use.
    fn mirror<K: Object>(&self, scoped: &ScopedInformer<K>) -> Indexer<K> {
        let mut mirrors = self.shared.mirrors.lock();
        if let Some(indexer) = mirrors
            .get(&TypeId::of::<K>())
            .and_then(|m| m.downcast_ref::<Indexer<K>>())
        {
            return indexer.clone();
        }
        let indexer = Indexer::<K>::new();
        if let Err(error) = scoped.add_event_handler(Mirror(indexer.clone())) {
            tracing::warn!(%error, kind = %kind_of::<K>(), "the lister will not follow the cache");
        }
        mirrors.insert(TypeId::of::<K>(), Box::new(indexer.clone()));
        indexer
    }

    /// The object `namespace/name` (or `name` when `namespace` is `None`),
    /// `None` when the cache has no such object (also when `namespace` is
    /// outside the cache's scope).
    pub async fn get<K: Object>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<K>>, CacheError> {
        let scoped = self.synced_informer::<K>().await?;
        Ok(scoped.get(namespace, name))
    }

    /// The cached objects of `K` matching `opts`.
    pub async fn list<K: Object>(&self, opts: &ListOptions) -> Result<Vec<Arc<K>>, CacheError> {
        let scoped = self.synced_informer::<K>().await?;
        let informers: Vec<&SharedIndexInformer<K>> = match &opts.namespace {
            Some(ns) => scoped.informer_for(Some(ns)).into_iter().collect(),
            None => scoped.informers().iter().collect(),
        };
        let mut candidates = Vec::new();
        for informer in informers {
            let indexer = informer.indexer();
            let found = match (&opts.field, &opts.namespace) {
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
            candidates.extend(found);
        }
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
        let error = |source| CacheError::Index {
            kind: kind_of::<K>(),
            field: field.to_string(),
            source,
        };
        let scoped = self.informer::<K>();
        if scoped.informers().len() > 1 {
            self.mirror(&scoped)
                .add_indexers([(index_name(field), Arc::clone(&index))])
                .map_err(|e| error(e.into()))?;
        }
        scoped
            .add_indexers([(index_name(field), index)])
            .map_err(error)
    }
}

#[cfg(test)]
mod tests;
