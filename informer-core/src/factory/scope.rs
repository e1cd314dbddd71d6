//! Informers scoped at run time: one namespace or the whole cluster,
//! chosen by a value rather than by the type's scope bound, with
//! cluster-scoped kinds always cluster-wide. This is what a namespaced
//! manager asks the factory for, for every kind it caches.

use kube_core::Resource;
use kube_core::metadata::PartialObjectMeta;

use super::{InformerOptions, SharedInformerFactory, StaticResource};
use crate::shared_informer::SharedIndexInformer;

/// Whether `K` is a cluster-scoped kind (its `Resource::Scope` is
/// `ClusterResourceScope`), so that it has no namespace to restrict to.
///
/// ```
/// use informer_core::factory::is_cluster_scoped;
/// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
/// assert!(is_cluster_scoped::<Namespace>());
/// assert!(!is_cluster_scoped::<ConfigMap>());
/// ```
pub fn is_cluster_scoped<K: Resource>() -> bool {
    std::any::type_name::<K::Scope>().ends_with("::ClusterResourceScope")
}

/// The collection path of `K` in `namespace` (cluster-wide when `None` or
/// when `K` is cluster-scoped).
fn url_in<K: Resource<DynamicType = ()>>(namespace: Option<&str>) -> String {
    let namespace = namespace.filter(|ns| !ns.is_empty() && !is_cluster_scoped::<K>());
    K::url_path(&(), namespace)
}

impl SharedInformerFactory {
    /// The shared informer of `K` in `namespace`, or across the cluster
    /// when `namespace` is `None`; a cluster-scoped `K` is always
    /// cluster-wide. The same informer as [`informer_with`](Self::informer_with)
    /// or [`namespaced_informer_with`](Self::namespaced_informer_with) would
    /// give.
    ///
    /// ```no_run
    /// # fn demo(client: kube_client::Client) {
    /// use informer_core::factory::{InformerOptions, SharedInformerFactory};
    /// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    /// let factory = SharedInformerFactory::builder(client).build();
    /// let watch_namespace = std::env::var("WATCH_NAMESPACE").ok();
    /// let cms = factory.informer_in::<ConfigMap>(watch_namespace.as_deref(), InformerOptions::new());
    /// let nss = factory.informer_in::<Namespace>(watch_namespace.as_deref(), InformerOptions::new());
    /// # let _ = (cms, nss);
    /// # }
    /// ```
    pub fn informer_in<K>(
        &self,
        namespace: Option<&str>,
        options: InformerOptions,
    ) -> SharedIndexInformer<K>
    where
        K: StaticResource,
    {
        self.informer_at(self.inner.client.clone(), url_in::<K>(namespace), options)
    }

    /// The shared metadata-only informer of `K` in `namespace` (see
    /// [`informer_in`](Self::informer_in) and
    /// [`metadata_informer`](Self::metadata_informer)).
    pub fn metadata_informer_in<K>(
        &self,
        namespace: Option<&str>,
        options: InformerOptions,
    ) -> SharedIndexInformer<PartialObjectMeta<K>>
    where
        K: StaticResource,
    {
        self.informer_at(self.inner.client.clone(), url_in::<K>(namespace), options)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
    use k8s_openapi::api::rbac::v1::ClusterRole;

    use super::*;

    #[test]
    fn cluster_scoped_kinds_ignore_the_namespace() {
        assert_eq!(url_in::<Namespace>(Some("a")), "/api/v1/namespaces");
        assert_eq!(url_in::<Node>(Some("a")), "/api/v1/nodes");
        assert_eq!(
            url_in::<ClusterRole>(Some("a")),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles"
        );
        assert_eq!(
            url_in::<ConfigMap>(Some("a")),
            "/api/v1/namespaces/a/configmaps"
        );
        assert_eq!(url_in::<ConfigMap>(None), "/api/v1/configmaps");
        assert_eq!(url_in::<ConfigMap>(Some("")), "/api/v1/configmaps");
    }
}
