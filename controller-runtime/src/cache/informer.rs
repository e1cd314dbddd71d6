//! The informers of one kind within the cache's scope, seen as one: a
//! single informer, or one per namespace when the cache is restricted to
//! several (controller-runtime's `multiNamespaceInformer`).

use std::sync::Arc;

use informer_core::delta_fifo::Transform;
use informer_core::key::{ObjectOrTombstone, object_key};
use informer_core::shared_informer::{
    InformerError, ResourceEventHandler, ResourceEventHandlerRegistration, SharedIndexInformer,
};
use informer_core::store::{IndexFn, Indexer};
use kube_core::Resource;

/// The shared informers of `K` within the cache's
/// [`CacheScope`](super::CacheScope): one across the cluster (all
/// namespaces, or a cluster-scoped `K`), one for the one namespace, or one
/// per namespace of a set. A handler added here is added to each of them,
/// so it sees every object in scope; reads find an object in the informer
/// of its namespace. Cheap to clone.
///
/// ```no_run
/// # async fn demo(mgr: controller_runtime::manager::Manager) -> Result<(), Box<dyn std::error::Error>> {
/// use controller_runtime::informer_core::shared_informer::handler_fn;
/// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
/// let cms = mgr.cache().informer::<ConfigMap>();
/// cms.add_event_handler(handler_fn().on_add(|cm: std::sync::Arc<ConfigMap>, _| {
///     println!("{:?}", cm.metadata.name);
/// }))?;
/// println!("{} informers, {} objects", cms.informers().len(), cms.list().len());
/// # Ok(()) }
/// ```
pub struct ScopedInformer<K> {
    /// The namespace of each informer (`None`: cluster-wide), in step with `informers`.
    namespaces: Vec<Option<String>>,
    informers: Vec<SharedIndexInformer<K>>,
}

impl<K> Clone for ScopedInformer<K> {
    fn clone(&self) -> Self {
        ScopedInformer {
            namespaces: self.namespaces.clone(),
            informers: self.informers.clone(),
        }
    }
}

impl<K> std::fmt::Debug for ScopedInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedInformer")
            .field("namespaces", &self.namespaces)
            .finish_non_exhaustive()
    }
}

impl<K> ScopedInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    pub(super) fn new(parts: Vec<(Option<String>, SharedIndexInformer<K>)>) -> Self {
        let (namespaces, informers) = parts.into_iter().unzip();
        ScopedInformer {
            namespaces,
            informers,
        }
    }

    /// The informers, one per namespace (or the one cluster-wide).
    pub fn informers(&self) -> &[SharedIndexInformer<K>] {
        &self.informers
    }

    /// The informer holding objects of `namespace` (`None`: cluster-scoped
    /// objects), if that namespace is in scope.
    pub fn informer_for(&self, namespace: Option<&str>) -> Option<&SharedIndexInformer<K>> {
        let namespace = namespace.filter(|ns| !ns.is_empty());
        self.namespaces
            .iter()
            .position(|ns| ns.is_none() || ns.as_deref() == namespace)
            .and_then(|i| self.informers.get(i))
    }

    /// Adds `handler` to every informer; it sees every object in scope.
    /// The registrations are in the order of [`informers`](Self::informers).
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<Vec<ResourceEventHandlerRegistration>, InformerError> {
        let handler = Arc::new(handler);
        self.informers
            .iter()
            .map(|i| i.add_event_handler(Arc::clone(&handler)))
            .collect()
    }

    /// Removes the handler registered by
    /// [`add_event_handler`](Self::add_event_handler) (its registrations,
    /// in the order returned) from every informer.
    pub fn remove_event_handler(
        &self,
        registrations: &[ResourceEventHandlerRegistration],
    ) -> Result<(), InformerError> {
        for (informer, registration) in self.informers.iter().zip(registrations) {
            informer.remove_event_handler(registration)?;
        }
        Ok(())
    }

    /// Sets the transform of every informer (only before they start; see
    /// [`SharedIndexInformer::set_transform`]).
    pub fn set_transform(&self, transform: Transform<K>) -> Result<(), InformerError> {
        for informer in &self.informers {
            informer.set_transform(Arc::clone(&transform))?;
        }
        Ok(())
    }

    /// Adds the indexes to every informer's indexer.
    pub fn add_indexers(
        &self,
        indexers: impl IntoIterator<Item = (String, IndexFn<K>)>,
    ) -> Result<(), InformerError> {
        let indexers: Vec<(String, IndexFn<K>)> = indexers.into_iter().collect();
        for informer in &self.informers {
            informer.add_indexers(indexers.iter().cloned())?;
        }
        Ok(())
    }

    /// Whether every informer has synced.
    pub fn has_synced(&self) -> bool {
        self.informers.iter().all(SharedIndexInformer::has_synced)
    }

    /// Every cached object in scope.
    pub fn list(&self) -> Vec<Arc<K>> {
        match self.informers.as_slice() {
            [one] => one.indexer().list(),
            all => all.iter().flat_map(|i| i.indexer().list()).collect(),
        }
    }

    /// The cached object `namespace/name` (or `name`).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let namespace = namespace.filter(|ns| !ns.is_empty());
        let key = match namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        };
        self.informer_for(namespace)?.indexer().get_by_key(&key)
    }
}

/// An indexer kept equal to the union of several informers' caches by a
/// handler on each: the one indexer a [`Lister`](informer_core::lister::Lister)
/// over several namespaces reads. It follows the informers through their
/// handlers, so it may lag them slightly; the cache's `get` and `list` read
/// the informers themselves.
pub(super) struct Mirror<K>(pub(super) Indexer<K>);

impl<K: Resource + Send + Sync + 'static> ResourceEventHandler<K> for Mirror<K> {
    fn on_add(&self, obj: Arc<K>, _is_in_initial_list: bool) {
        // Only the built-in namespace index: storing cannot fail.
        let _ = self.0.add(obj);
    }

    fn on_update(&self, _old: Arc<K>, new: Arc<K>) {
        let _ = self.0.update(new);
    }

    fn on_delete(&self, obj: ObjectOrTombstone<K>) {
        let key = match &obj {
            ObjectOrTombstone::Tombstone(t) => t.key.clone(),
            ObjectOrTombstone::Object(o) => object_key(o.as_ref()),
        };
        self.0.delete(&key);
    }
}
