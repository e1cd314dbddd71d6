//! What applies to every member of a fleet, those engaged now and those
//! engaged later: the filter deciding which clusters engage, the hooks run
//! as each is engaged, fleet-wide field indexes, and the informers requested
//! in every member as it is engaged, so that they run on every replica
//! (leader or not) from the moment the member is reached: a replica that
//! becomes leader finds its members' caches synced instead of listing them
//! all again.

use std::any::TypeId;
use std::sync::Arc;

use informer_core::shared_informer::InformerError;
use informer_core::store::StoreError;

use super::Cluster;
use super::fleet::Fleet;
use super::hooks::{ClusterInfo, Hook};
use crate::cache::{Cache, CacheError};
use crate::error::BoxError;
use crate::object::Object;

impl Fleet {
    /// Lets only the clusters for which `keep` returns `true` engage: any
    /// other [`engage`](Self::engage) or [`engage_with`](Self::engage_with)
    /// (a provider's included) fails with
    /// [`FleetError::Filtered`](super::FleetError::Filtered), which the
    /// [`SecretProvider`](super::SecretProvider) and the
    /// [`StaticProvider`](super::StaticProvider) log and skip. `keep` sees
    /// the cluster's name and the labels its provider gives (a
    /// `SecretProvider`'s are the Secret's). Set it before the manager
    /// runs: it decides engagements from then on and leaves clusters
    /// engaged already alone. Called again, the new filter replaces the
    /// old.
    ///
    /// ```no_run
    /// # fn demo(mgr: controller_runtime::manager::Manager) {
    /// // Only the clusters whose Secret says they are in Europe.
    /// mgr.fleet().filter(|cluster| cluster.label("region") == Some("eu"));
    /// # }
    /// ```
    pub fn filter(&self, keep: impl Fn(&ClusterInfo) -> bool + Send + Sync + 'static) {
        *self.every().filter.lock() = Some(Arc::new(keep));
    }

    /// Runs `hook` on each cluster engaged while the manager runs, once it
    /// answers and before it is attached (before its informers start and
    /// fleet controllers see it): to check it, or install what the
    /// controllers need there. The hook gets the [`Cluster`]; use its
    /// client (its cache is not started yet). If it fails, the cluster is
    /// kept out: reported `Failing` with the hook's name and error (logged),
    /// and the hook is run again at the next look, with the fleet's
    /// backoff, until it succeeds. Hooks run in the order they were added,
    /// on every replica (they should be idempotent), once per engagement;
    /// add them before the manager runs (a cluster attached already is not
    /// hooked again).
    ///
    /// ```no_run
    /// # fn demo(mgr: controller_runtime::manager::Manager) {
    /// use controller_runtime::BoxError;
    /// use controller_runtime::k8s_openapi::api::core::v1::Namespace;
    /// mgr.fleet().on_engage("needs-the-apps-namespace", |cluster| async move {
    ///     let namespaces = kube_client::Api::<Namespace>::all(cluster.client());
    ///     namespaces.get("apps").await?;
    ///     Ok::<(), BoxError>(())
    /// });
    /// # }
    /// ```
    pub fn on_engage<F, Fut>(&self, name: impl Into<String>, hook: F)
    where
        F: Fn(Cluster) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.every().hooks.lock().push(Hook::new(name, hook));
    }

    /// Registers the field index `field` for `K` in every member's cache,
    /// engaged now or later ([`Cache::index_field`](crate::cache::Cache::index_field)
    /// for the fleet), so that [`ListOptions::matching_field`](crate::cache::ListOptions::matching_field)
    /// works on any member's cache. `K`'s informer is requested in every
    /// member, so it runs on every replica, leader or not. A second index
    /// of the same name for `K` is refused ([`CacheError::Index`]).
    ///
    /// ```no_run
    /// # async fn demo(mgr: controller_runtime::manager::Manager) -> Result<(), Box<dyn std::error::Error>> {
    /// use controller_runtime::cache::ListOptions;
    /// use controller_runtime::k8s_openapi::api::core::v1::Pod;
    /// mgr.fleet().index_field::<Pod>("spec.nodeName", |pod| {
    ///     pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
    /// })?;
    /// // ... once the manager runs, in a fleet reconciler:
    /// if let Some(edge) = mgr.fleet().get("edge-1") {
    ///     let on_node = edge.cache().list::<Pod>(&ListOptions::new().matching_field("spec.nodeName", "node-1")).await?;
    ///     # let _ = on_node;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn index_field<K: Object>(
        &self,
        field: &str,
        extract: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), CacheError> {
        if !self
            .every()
            .indexes
            .lock()
            .insert((TypeId::of::<K>(), field.to_string()))
        {
            return Err(CacheError::Index {
                kind: K::kind(&()).to_string(),
                field: field.to_string(),
                source: InformerError::Store(StoreError::IndexExists {
                    index: field.to_string(),
                }),
            });
        }
        let extract = Arc::new(extract);
        let field = field.to_string();
        self.add_setup(Arc::new(move |cluster: &Cluster| {
            let extract = Arc::clone(&extract);
            if let Err(error) = cluster
                .cache()
                .index_field::<K>(&field, move |obj: &K| extract(obj))
            {
                tracing::warn!(cluster = %cluster.name(), %error, "fleet-wide field index not added");
            }
        }));
        Ok(())
    }

    /// Runs `request` (which asks a cache for an informer: a kind's, its
    /// metadata's or a dynamic kind's) on every member's cache, engaged
    /// now or later, so that the informer runs on every replica from the
    /// moment the member is reached (warm caches on followers). A fleet
    /// controller calls it for the kind it is for and each kind it owns
    /// or watches when it is built (on every replica), not when it starts
    /// leading, with the very informer requests its watches make: a
    /// replica that becomes leader finds them synced.
    pub(crate) fn warm(&self, request: Arc<dyn Fn(&Cache) + Send + Sync>) {
        self.add_setup(Arc::new(move |cluster: &Cluster| request(cluster.cache())));
    }
}
