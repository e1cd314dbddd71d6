//! What the cache's informers list and watch: which namespaces, and per
//! kind the selectors and transform of its informers.

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use informer_core::delta_fifo::Transform;
use informer_core::factory::InformerOptions;
use kube_core::Resource;

/// What the cache's informers list and watch: all namespaces, one, or a
/// set of them (cluster-scoped kinds are always cluster-wide), and per kind
/// the selectors and transform of its informers (controller-runtime's
/// `cache.Options{DefaultNamespaces, ByObject}`).
///
/// ```
/// use controller_runtime::cache::CacheScope;
/// use controller_runtime::informer_core::factory::InformerOptions;
/// use controller_runtime::k8s_openapi::api::core::v1::Secret;
/// let scope = CacheScope::new()
///     .namespaces(["team-b", "team-a"])
///     .by_object::<Secret>(InformerOptions::new().label_selector("owned-by=me"));
/// assert_eq!(scope.namespace_names(), ["team-a", "team-b"]);
/// assert_eq!(scope.namespace_name(), None); // not exactly one
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct CacheScope {
    /// Sorted, without empty names; empty means all namespaces.
    namespaces: Vec<String>,
    /// By API group and kind, so that a kind's full, metadata-only and
    /// dynamic informers share them.
    by_object: HashMap<(String, String), InformerOptions>,
    /// A `Transform<K>` per `TypeId` of `K`.
    transforms: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl CacheScope {
    /// All namespaces, no selectors, no transforms.
    pub fn new() -> Self {
        Self::default()
    }

    /// Caches namespaced kinds of `namespace` only (cluster-scoped kinds
    /// stay cluster-wide). An empty name means all namespaces.
    pub fn namespace(self, namespace: impl Into<String>) -> Self {
        self.namespaces([namespace.into()])
    }

    /// Caches namespaced kinds of these namespaces only, with one informer
    /// per namespace and kind (cluster-scoped kinds stay cluster-wide).
    /// Empty names are ignored; no name at all means all namespaces.
    pub fn namespaces<I, S>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let set: BTreeSet<String> = namespaces
            .into_iter()
            .map(Into::into)
            .filter(|ns| !ns.is_empty())
            .collect();
        self.namespaces = set.into_iter().collect();
        self
    }

    /// The informers of `K`'s kind list and watch with `options`' label
    /// and field selectors (and resync): full, metadata-only
    /// (`PartialObjectMeta<K>` is the same kind) and dynamic informers of
    /// the kind alike.
    pub fn by_object<K: Resource<DynamicType = ()>>(self, options: InformerOptions) -> Self {
        self.by_kind(&K::group(&()), &K::kind(&()), options)
    }

    /// [`by_object`](Self::by_object) for a kind named at run time by its
    /// API group (`""` for the core group) and kind.
    pub fn by_kind(mut self, group: &str, kind: &str, options: InformerOptions) -> Self {
        self.by_object
            .insert((group.to_owned(), kind.to_owned()), options);
        self
    }

    /// The informers of `K` cache what `transform` makes of each object
    /// (client-go's `TransformFunc`, controller-runtime's
    /// `ByObject.Transform`). When the factory strips managedFields (the
    /// manager's default), the stripping runs after `transform`, so the
    /// cache never holds them whatever it returns. For a metadata-only
    /// informer, give the transform of `PartialObjectMeta<K>`.
    pub fn transform<K: Send + Sync + 'static>(
        mut self,
        transform: impl Fn(K) -> K + Send + Sync + 'static,
    ) -> Self {
        let transform: Transform<K> = Arc::new(transform);
        self.transforms.insert(
            TypeId::of::<K>(),
            Arc::new(transform) as Arc<dyn Any + Send + Sync>,
        );
        self
    }

    /// The one namespace cached, when restricted to exactly one.
    pub fn namespace_name(&self) -> Option<&str> {
        match self.namespaces.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// The namespaces cached, sorted; empty when all are.
    pub fn namespace_names(&self) -> &[String] {
        &self.namespaces
    }

    #[cfg(test)]
    pub(super) fn options_for<K: Resource<DynamicType = ()>>(&self) -> InformerOptions {
        self.options_for_kind(&K::group(&()), &K::kind(&()))
    }

    pub(crate) fn options_for_kind(&self, group: &str, kind: &str) -> InformerOptions {
        self.by_object
            .get(&(group.to_owned(), kind.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    pub(super) fn transform_for<K: 'static>(&self) -> Option<Transform<K>> {
        self.transforms
            .get(&TypeId::of::<K>())
            .and_then(|t| t.downcast_ref::<Transform<K>>())
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};

    #[test]
    fn namespaces_are_a_sorted_set_and_empty_names_mean_all() {
        let scope = CacheScope::new().namespaces(["b", "", "a", "b"]);
        assert_eq!(scope.namespace_names(), ["a", "b"]);
        assert_eq!(scope.namespace_name(), None);
        assert_eq!(CacheScope::new().namespace("a").namespace_name(), Some("a"));
        assert!(CacheScope::new().namespace("").namespace_names().is_empty());
        assert!(
            CacheScope::new()
                .namespace("a")
                .namespaces(Vec::<String>::new())
                .namespace_names()
                .is_empty()
        );
    }

    #[test]
    fn options_are_per_api_kind_whatever_the_rust_type() {
        use kube_core::metadata::PartialObjectMeta;
        let scope = CacheScope::new()
            .by_object::<Secret>(InformerOptions::new().label_selector("a=b"))
            .by_kind(
                "example.com",
                "Gizmo",
                InformerOptions::new().field_selector("x=y"),
            );
        let selector = |o: InformerOptions| o.label_selector.or(o.field_selector);
        assert_eq!(
            selector(scope.options_for::<Secret>()).as_deref(),
            Some("a=b")
        );
        assert_eq!(
            selector(scope.options_for::<PartialObjectMeta<Secret>>()).as_deref(),
            Some("a=b")
        );
        assert_eq!(selector(scope.options_for::<ConfigMap>()), None);
        assert_eq!(
            selector(scope.options_for_kind("example.com", "Gizmo")).as_deref(),
            Some("x=y")
        );
    }

    #[test]
    fn transforms_are_found_by_their_kind_only() {
        let scope = CacheScope::new().transform(|mut cm: ConfigMap| {
            cm.data = None;
            cm
        });
        assert!(scope.transform_for::<ConfigMap>().is_some());
        assert!(scope.transform_for::<Secret>().is_none());
    }
}
