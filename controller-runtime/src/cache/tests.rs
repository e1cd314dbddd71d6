//! The cache's informers per scope, without a server: how many informers a
//! kind gets, and which one holds an object of a namespace.

use std::sync::Arc;
use std::time::Duration;

use informer_core::factory::SharedInformerFactory;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::core::discovery::Scope;
use kube_client::core::{ApiResource, GroupVersionKind};

use super::{Cache, CacheScope};

fn offline_client() -> kube_client::Client {
    let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube_client::Client::try_from(config).unwrap()
}

fn cache(scope: CacheScope) -> Cache {
    let factory = SharedInformerFactory::new(offline_client(), Duration::ZERO);
    Cache::scoped(factory, Duration::from_secs(1), scope)
}

fn cm(ns: &str, name: &str) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(ns.into());
    Arc::new(cm)
}

#[tokio::test]
async fn several_namespaces_get_one_informer_each_and_cluster_kinds_one() {
    let cache = cache(CacheScope::new().namespaces(["b", "a"]));
    let cms = cache.informer::<ConfigMap>();
    assert_eq!(cms.informers().len(), 2);
    assert_eq!(cache.informer::<Namespace>().informers().len(), 1);
    assert_eq!(cache.metadata_informer::<ConfigMap>().informers().len(), 2);
    let gizmos = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Gizmo"));
    assert_eq!(
        cache
            .dynamic_informer(&gizmos, Scope::Namespaced)
            .informers()
            .len(),
        2
    );
    assert_eq!(
        cache
            .dynamic_informer(&gizmos, Scope::Cluster)
            .informers()
            .len(),
        1
    );

    // Each namespace's objects live in its own informer; reads find them
    // there and nowhere else.
    cms.informer_for(Some("a"))
        .unwrap()
        .indexer()
        .add(cm("a", "x"))
        .unwrap();
    cms.informer_for(Some("b"))
        .unwrap()
        .indexer()
        .add(cm("b", "y"))
        .unwrap();
    assert!(cms.informer_for(Some("c")).is_none());
    assert!(cms.get(Some("a"), "x").is_some());
    assert!(cms.get(Some("b"), "x").is_none());
    assert!(cms.get(Some("c"), "x").is_none());
    assert_eq!(cms.list().len(), 2);
    let registrations = cms
        .add_event_handler(informer_core::shared_informer::handler_fn::<ConfigMap>())
        .unwrap();
    assert_eq!(registrations.len(), 2, "one handler per namespace");
    let reversed: Vec<_> = registrations.iter().rev().cloned().collect();
    assert!(
        cms.remove_event_handler(&reversed).is_err(),
        "each registration belongs to its namespace's informer"
    );
    cms.remove_event_handler(&registrations).unwrap();
    assert!(cms.informers()[0].indexer().get_by_key("a/x").is_some());
}

/// A kind's metadata-only informer is one informer however it is asked
/// for, with the kind's options.
#[tokio::test]
async fn metadata_informers_of_a_kind_are_shared_whatever_the_request() {
    use informer_core::factory::InformerOptions;
    use kube_client::core::metadata::PartialObjectMeta;
    let factory = SharedInformerFactory::new(offline_client(), Duration::ZERO);
    let scope = CacheScope::new()
        .namespaces(["a", "b"])
        .by_object::<ConfigMap>(InformerOptions::new().label_selector("x=y"));
    let cache = Cache::scoped(factory.clone(), Duration::from_secs(1), scope);
    let _ = cache.metadata_informer::<ConfigMap>();
    let _ = cache.informer::<PartialObjectMeta<ConfigMap>>();
    assert_eq!(factory.len(), 2, "one per namespace, shared");
    let _ = cache.informer::<ConfigMap>();
    assert_eq!(factory.len(), 4);
    assert!(format!("{factory:?}").contains("labels=x=y"));
}

#[tokio::test]
async fn an_unrestricted_cache_has_one_informer_per_kind() {
    let cache = cache(CacheScope::new());
    let cms = cache.informer::<ConfigMap>();
    assert_eq!(cms.informers().len(), 1);
    assert!(cms.informer_for(Some("anything")).is_some());
    assert_eq!(cache.scope().namespace_name(), None);
    let one = cache_one();
    assert_eq!(one.informer::<ConfigMap>().informers().len(), 1);
}

fn cache_one() -> Cache {
    cache(CacheScope::new().namespace("a"))
}

#[tokio::test]
async fn the_scopes_transform_is_set_once_on_each_new_informer() {
    let cache = cache(
        CacheScope::new()
            .namespaces(["a", "b"])
            .transform(|mut cm: ConfigMap| {
                cm.data = None;
                cm
            }),
    );
    let cms = cache.informer::<ConfigMap>();
    // Set already: a transform set by hand afterwards is kept (the next
    // request does not overwrite it).
    cms.set_transform(Arc::new(|cm: ConfigMap| cm)).unwrap();
    let again = cache.informer::<ConfigMap>();
    assert_eq!(again.informers().len(), 2);
    assert_eq!(cache.shared.transformed.lock().len(), 2);
}
