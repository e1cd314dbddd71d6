//! Read access to an informer's cache: client-go's generated listers, generic
//! over the resource type. A [`Lister`] answers from the indexer without any
//! request to the API server; results are the cached `Arc<K>`s themselves
//! (no copies), in no particular order.
//!
//! Layer 2: imports the store and selectors.

mod typed;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use kube_core::Resource;

use crate::selector::LabelSelector;
use crate::store::{Indexer, NAMESPACE_INDEX, StoreError};

/// Errors of the listers.
#[derive(Debug, thiserror::Error)]
pub enum ListerError {
    /// The indexer refused an index query (for example an unknown index name).
    #[error("index query failed: {0}")]
    Index(#[from] StoreError),
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

fn labels_match<K: Resource>(selector: &LabelSelector, obj: &K) -> bool {
    selector.matches(obj.meta().labels.as_ref().unwrap_or(&NO_LABELS))
}

/// Lists and gets objects of one type from an informer's cache.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::apps::v1::Deployment;
/// use informer_core::{lister::Lister, selector::LabelSelector, store::Indexer};
///
/// let indexer = Indexer::<Deployment>::new(); // usually `informer.lister()`
/// let mut web = Deployment::default();
/// web.metadata.name = Some("web".into());
/// web.metadata.namespace = Some("default".into());
/// web.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
/// indexer.add(Arc::new(web)).unwrap();
///
/// let lister = Lister::new(indexer);
/// let selector: LabelSelector = "app=web".parse().unwrap();
/// assert_eq!(lister.namespace("default").list(&selector).len(), 1);
/// assert!(lister.namespace("default").get("web").is_some());
/// assert!(lister.namespace("other").get("web").is_none());
/// ```
pub struct Lister<K> {
    indexer: Indexer<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
        }
    }
}

impl<K> fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister").finish_non_exhaustive()
    }
}

impl<K: Resource + Send + Sync + 'static> Lister<K> {
    /// A lister over `indexer` (usually [`SharedIndexInformer::lister`](crate::shared_informer)).
    pub fn new(indexer: Indexer<K>) -> Self {
        Self { indexer }
    }

    /// Every cached object whose labels match `selector`, in all namespaces.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        let mut all = self.indexer.list();
        if !selector.is_everything() {
            all.retain(|obj| labels_match(selector, obj.as_ref()));
        }
        all
    }

    /// The cluster-scoped object named `name` (key `name`). For namespaced
    /// objects use [`namespace`](Self::namespace) first.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(name)
    }

    /// The object with key `key` (`namespace/name` or `name`).
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(key)
    }

    /// A lister limited to namespace `namespace`.
    pub fn namespace(&self, namespace: &str) -> NamespaceLister<K> {
        NamespaceLister {
            indexer: self.indexer.clone(),
            namespace: namespace.to_owned(),
        }
    }

    /// The objects whose index `index` contains `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, ListerError> {
        Ok(self.indexer.by_index(index, value)?)
    }

    /// The indexer behind this lister.
    pub fn indexer(&self) -> &Indexer<K> {
        &self.indexer
    }
}

/// Lists and gets objects of one namespace; made by [`Lister::namespace`].
pub struct NamespaceLister<K> {
    indexer: Indexer<K>,
    namespace: String,
}

impl<K> Clone for NamespaceLister<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

impl<K> fmt::Debug for NamespaceLister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceLister")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<K: Resource + Send + Sync + 'static> NamespaceLister<K> {
    /// The namespace this lister reads.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The objects of this namespace whose labels match `selector`, found
    /// through the built-in namespace index.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        let mut found = match self.indexer.by_index(NAMESPACE_INDEX, &self.namespace) {
            Ok(found) => found,
            Err(err) => {
                // The namespace index is built into every indexer; fall back to
                // a scan rather than answer wrongly if it is ever missing.
                tracing::warn!(error = %err, "namespace index unavailable; scanning the cache");
                self.indexer
                    .list()
                    .into_iter()
                    .filter(|o| o.meta().namespace.as_deref() == Some(self.namespace.as_str()))
                    .collect()
            }
        };
        if !selector.is_everything() {
            found.retain(|obj| labels_match(selector, obj.as_ref()));
        }
        found
    }

    /// The object `name` of this namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.indexer
            .get_by_key(&format!("{}/{}", self.namespace, name))
    }

    /// The objects of this namespace whose index `index` contains `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, ListerError> {
        let mut found = self.indexer.by_index(index, value)?;
        found.retain(|o| o.meta().namespace.as_deref() == Some(self.namespace.as_str()));
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube_core::ObjectMeta;

    fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                labels: (!labels.is_empty()).then(|| {
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                }),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }

    fn names(mut objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
        objs.sort_by_key(|o| (o.metadata.namespace.clone(), o.metadata.name.clone()));
        objs.iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o.metadata.namespace.as_deref().unwrap_or(""),
                    o.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect()
    }

    fn lister() -> Lister<ConfigMap> {
        let indexer = Indexer::new();
        indexer.add(cm("a", "web", &[("app", "web")])).unwrap();
        indexer.add(cm("a", "db", &[("app", "db")])).unwrap();
        indexer
            .add(cm("b", "web", &[("app", "web"), ("tier", "front")]))
            .unwrap();
        indexer.add(cm("b", "plain", &[])).unwrap();
        Lister::new(indexer)
    }

    #[test]
    fn list_filters_by_label_selector_across_namespaces() {
        let l = lister();
        assert_eq!(names(l.list(&LabelSelector::everything())).len(), 4);
        assert_eq!(
            names(l.list(&"app=web".parse().unwrap())),
            vec!["a/web", "b/web"]
        );
        assert_eq!(names(l.list(&"!app".parse().unwrap())), vec!["b/plain"]);
        assert_eq!(
            names(l.list(&"app in (db,web),tier".parse().unwrap())),
            vec!["b/web"]
        );
    }

    #[test]
    fn namespace_lister_lists_and_gets_one_namespace() {
        let l = lister();
        let b = l.namespace("b");
        assert_eq!(b.namespace(), "b");
        assert_eq!(
            names(b.list(&LabelSelector::everything())),
            vec!["b/plain", "b/web"]
        );
        assert_eq!(names(b.list(&"app=web".parse().unwrap())), vec!["b/web"]);
        assert!(b.get("web").is_some());
        assert!(b.get("db").is_none());
        assert!(l.namespace("a").get("db").is_some());
        assert!(
            l.namespace("nope")
                .list(&LabelSelector::everything())
                .is_empty()
        );
        assert!(l.get_by_key("a/web").is_some());
    }

    #[test]
    fn by_index_uses_custom_indexes_and_rejects_unknown_ones() {
        let l = lister();
        let by_app: crate::store::IndexFn<ConfigMap> = Arc::new(|cm: &ConfigMap| {
            Ok(cm
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app").cloned())
                .into_iter()
                .collect())
        });
        l.indexer()
            .add_indexers([("by-app".to_string(), by_app)])
            .unwrap();
        assert_eq!(
            names(l.by_index("by-app", "web").unwrap()),
            vec!["a/web", "b/web"]
        );
        assert_eq!(
            names(l.namespace("a").by_index("by-app", "web").unwrap()),
            vec!["a/web"]
        );
        assert!(matches!(
            l.by_index("missing", "x"),
            Err(ListerError::Index(_))
        ));
    }

    #[test]
    fn get_finds_cluster_scoped_objects_by_name() {
        let indexer = Indexer::<Namespace>::new();
        indexer
            .add(Arc::new(Namespace {
                metadata: ObjectMeta {
                    name: Some("kube-system".into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            }))
            .unwrap();
        let l = Lister::new(indexer);
        assert!(l.get("kube-system").is_some());
        assert!(l.get("default").is_none());
    }
}
