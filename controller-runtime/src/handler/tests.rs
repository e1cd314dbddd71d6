use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::*;

fn owner(api_version: &str, kind: &str, name: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(controller),
        ..Default::default()
    }
}

fn pod(ns: &str, name: &str, owners: Vec<OwnerReference>) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some(ns.into());
    p.metadata.owner_references = Some(owners);
    p
}

fn keys(reqs: Vec<Request>) -> Vec<String> {
    reqs.into_iter().map(|r| r.to_string()).collect()
}

#[test]
fn object_handler_enqueues_the_object_for_every_event() {
    let p = pod("ns", "a", vec![]);
    let h = EnqueueRequestForObject;
    assert_eq!(keys(h.create(&p)), ["ns/a"]);
    assert_eq!(keys(h.delete(&p)), ["ns/a"]);
    assert_eq!(keys(h.generic(&p)), ["ns/a"]);
    // Same object before and after: one request, not two.
    assert_eq!(keys(h.update(&p, &p)), ["ns/a"]);
    // Nameless objects are ignored, not mapped to an empty name.
    assert!(EventHandler::<Pod>::create(&h, &Pod::default()).is_empty());
}

#[test]
fn cluster_scoped_object_has_no_namespace() {
    let mut n = Namespace::default();
    n.metadata.name = Some("team-a".into());
    assert_eq!(
        EnqueueRequestForObject.create(&n),
        vec![Request::new(None::<String>, "team-a")]
    );
}

#[test]
fn owner_handler_picks_only_the_controller_owner_of_the_kind() {
    let p = pod(
        "ns",
        "web-1",
        vec![
            owner("apps/v1", "ReplicaSet", "not-controller", false),
            owner("apps/v1", "ReplicaSet", "web", true),
            owner("apps/v1", "Deployment", "web-deploy", false),
            owner("v1", "ConfigMap", "cm", false),
        ],
    );
    let h = EnqueueRequestForOwner::controller_of::<ReplicaSet>();
    assert_eq!(keys(h.create(&p)), ["ns/web"]);
    let all = EnqueueRequestForOwner::owners_of::<ReplicaSet>();
    assert_eq!(keys(all.create(&p)), ["ns/not-controller", "ns/web"]);
    let cm = EnqueueRequestForOwner::owners_of::<ConfigMap>();
    assert_eq!(keys(cm.create(&p)), ["ns/cm"]);
    let deploy = EnqueueRequestForOwner::controller_of::<Deployment>();
    assert!(deploy.create(&p).is_empty());
}

#[test]
fn owner_match_ignores_version_but_not_group() {
    let p = pod(
        "ns",
        "x",
        vec![
            owner("apps/v1beta2", "ReplicaSet", "old-version", true),
            owner("example.com/v1", "ReplicaSet", "other-group", false),
        ],
    );
    let h = EnqueueRequestForOwner::owners_of::<ReplicaSet>();
    assert_eq!(keys(h.create(&p)), ["ns/old-version"]);
}

#[test]
fn cluster_scoped_owner_gets_no_namespace() {
    let p = pod("ns", "x", vec![owner("v1", "Namespace", "ns", true)]);
    let h = EnqueueRequestForOwner::controller_of::<Namespace>();
    assert_eq!(h.create(&p), vec![Request::new(None::<String>, "ns")]);
}

#[test]
fn update_enqueues_old_and_new_owner() {
    let old = pod(
        "ns",
        "x",
        vec![owner("apps/v1", "ReplicaSet", "rs-old", true)],
    );
    let new = pod(
        "ns",
        "x",
        vec![owner("apps/v1", "ReplicaSet", "rs-new", true)],
    );
    let h = EnqueueRequestForOwner::controller_of::<ReplicaSet>();
    assert_eq!(keys(h.update(&old, &new)), ["ns/rs-old", "ns/rs-new"]);
}

#[test]
fn dynamic_kind_owner_handler() {
    let p = pod(
        "ns",
        "x",
        vec![owner("example.com/v1", "Widget", "w", true)],
    );
    let h = EnqueueRequestForOwner::for_kind("example.com", "Widget", true, true);
    assert_eq!(keys(EventHandler::<Pod>::create(&h, &p)), ["ns/w"]);
}

#[test]
fn map_func_handler_and_arc() {
    let h = Arc::new(EnqueueRequestsFromMapFunc::new(|p: &Pod| {
        p.metadata
            .labels
            .iter()
            .flatten()
            .filter(|(k, _)| k.as_str() == "app")
            .map(|(_, v)| Request::new(Some("apps"), v.clone()))
            .collect()
    }));
    let mut p = pod("ns", "x", vec![]);
    assert!(h.create(&p).is_empty());
    p.metadata.labels = Some([("app".to_string(), "shop".to_string())].into());
    assert_eq!(keys(h.delete(&p)), ["apps/shop"]);
    let dynh: Arc<dyn EventHandler<Pod>> = h;
    assert_eq!(keys(dynh.generic(&p)), ["apps/shop"]);
}

#[test]
fn scope_info_gives_a_namespaced_api_only_for_namespaced_kinds() {
    let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let client = kube_client::Client::try_from(config).unwrap();
    let in_ns: kube_client::Api<ConfigMap> =
        <k8s_openapi::NamespaceResourceScope as ScopeInfo>::api(client.clone(), Some("team-a"));
    assert_eq!(in_ns.resource_url(), "/api/v1/namespaces/team-a/configmaps");
    let everywhere: kube_client::Api<ConfigMap> =
        <k8s_openapi::NamespaceResourceScope as ScopeInfo>::api(client.clone(), None);
    assert_eq!(everywhere.resource_url(), "/api/v1/configmaps");
    let namespaces: kube_client::Api<Namespace> =
        <k8s_openapi::ClusterResourceScope as ScopeInfo>::api(client, Some("ignored"));
    assert_eq!(namespaces.resource_url(), "/api/v1/namespaces");
}
