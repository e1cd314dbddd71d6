use super::*;
use crate::action::Action;
use crate::handler::EnqueueRequestForObject;
use crate::manager::{Manager, ManagerError};
use crate::reconcile::{CallInfo, Reconciler};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};

struct Noop;
impl Reconciler for Noop {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

async fn manager() -> Manager {
    let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube_client::Client::try_from(config).unwrap();
    Manager::builder(client).build().await.unwrap()
}

#[tokio::test]
async fn default_name_is_the_lowercase_kind() {
    let mgr = manager().await;
    let c = mgr.controller::<ConfigMap>().complete(Noop).unwrap();
    assert_eq!(c.name(), "configmap");
    assert_eq!(c.queue().name(), "configmap");
    let c = mgr
        .controller::<Pod>()
        .named("pods.v2")
        .complete(Noop)
        .unwrap();
    assert_eq!(c.name(), "pods.v2");
}

#[tokio::test]
async fn names_must_be_valid_and_unique() {
    let mgr = manager().await;
    mgr.controller::<ConfigMap>()
        .named("a")
        .complete(Noop)
        .unwrap();
    let err = mgr
        .controller::<Pod>()
        .named("a")
        .complete(Noop)
        .unwrap_err();
    assert!(
        matches!(builder_error(&err), Some(BuilderError::DuplicateName(n)) if n == "a"),
        "{err}"
    );
    for bad in ["", "has space", "slash/name", &"x".repeat(64)] {
        let err = mgr
            .controller::<Pod>()
            .named(bad)
            .complete(Noop)
            .unwrap_err();
        assert!(
            matches!(builder_error(&err), Some(BuilderError::InvalidName(_))),
            "{bad:?}: {err}"
        );
    }
}

#[tokio::test]
async fn concurrency_and_timeout_must_be_positive() {
    let mgr = manager().await;
    let err = mgr
        .controller::<Pod>()
        .max_concurrent_reconciles(0)
        .complete(Noop)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "controller setup: controller \"pod\": max_concurrent_reconciles must be at least 1"
    );
    let err = mgr
        .controller::<Pod>()
        .reconcile_timeout(Duration::ZERO)
        .complete(Noop)
        .unwrap_err();
    assert!(
        matches!(builder_error(&err), Some(BuilderError::ZeroTimeout(_))),
        "{err}"
    );
    // A failed build does not take the name.
    mgr.controller::<Pod>().complete(Noop).unwrap();
}

#[tokio::test]
async fn controllers_share_informers_through_the_factory() {
    let mgr = manager().await;
    mgr.controller::<ConfigMap>()
        .named("one")
        .owns::<Pod>()
        .complete(Noop)
        .unwrap();
    mgr.controller::<Pod>()
        .named("two")
        .watches::<ConfigMap>(EnqueueRequestForObject)
        .complete(Noop)
        .unwrap();
    assert_eq!(mgr.informer_factory().len(), 2, "one informer per kind");
}

#[tokio::test]
async fn registered_controllers_export_metrics_before_reconciling() {
    let mgr = manager().await;
    mgr.controller::<ConfigMap>().complete(Noop).unwrap();
    let text = mgr.metrics().encode().unwrap();
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="configmap",result="error"} 0"#
        ),
        "{text}"
    );
}

/// The controller's own error inside a manager setup error.
fn builder_error(err: &ManagerError) -> Option<&BuilderError> {
    match err {
        ManagerError::Controller(e) => Some(e),
        _ => None,
    }
}

/// `with_event_filter` reaches every watch (the kind the controller is for,
/// the kinds it owns and watches), whatever the order of the calls;
/// `for_event_filter` stays on the kind it is for.
#[tokio::test]
async fn with_event_filter_applies_to_every_watch() {
    use crate::predicate::{GenerationChanged, LabelsChanged};
    let mgr = manager().await;
    let mut builder = mgr
        .controller::<ConfigMap>()
        .owns::<Pod>()
        .with_event_filter(LabelsChanged)
        .watches_map(|_: &k8s_openapi::api::core::v1::Secret| Vec::new())
        .owns_metadata::<k8s_openapi::api::core::v1::Service>()
        .for_event_filter(GenerationChanged);
    let sources = builder.sources();
    assert_eq!(sources.len(), 4);
    for source in &sources {
        assert_eq!(source.event_filters().len(), 1, "{}", source.describe());
        assert!(Arc::ptr_eq(
            source.event_filters(),
            sources[0].event_filters()
        ));
    }
}

/// A watch's informer is made when the controller is completed, so cache
/// options added after `owns` (as a label-mode shard adds its selector)
/// apply to it; the owned kinds are recorded by resource and scope.
#[tokio::test]
async fn watches_take_the_cache_options_added_until_complete() {
    use informer_core::factory::InformerOptions;
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    let mgr = manager().await;
    let builder = mgr
        .controller::<ConfigMap>()
        .owns::<Pod>()
        .owns_metadata::<Secret>()
        .owns::<Namespace>();
    let owned: Vec<(String, bool)> = builder
        .owned_kinds()
        .iter()
        .map(|o| (o.resource.plural.clone(), o.namespaced))
        .collect();
    assert_eq!(
        owned,
        [
            ("pods".to_string(), true),
            ("secrets".to_string(), true),
            ("namespaces".to_string(), false)
        ]
    );
    for kind in ["Pod", "Secret"] {
        mgr.cache()
            .add_options_for("", kind, InformerOptions::new().label_selector("shard=a"));
    }
    builder.complete(Noop).unwrap();
    mgr.informer_factory().start();
    let informers: Vec<String> = mgr.informer_factory().synced().into_keys().collect();
    mgr.informer_factory().shutdown().await;
    for plural in ["pods", "secrets"] {
        let of_kind: Vec<&String> = informers
            .iter()
            .filter(|k| {
                k.contains(&format!("/api/v1/{plural} "))
                    || k.ends_with(&format!("/api/v1/{plural}"))
            })
            .collect();
        assert!(
            !of_kind.is_empty() && of_kind.iter().all(|k| k.ends_with("labels=shard=a")),
            "{plural}: {informers:?}"
        );
    }
}

/// Every form is the one builder: a dynamic controller takes the typed
/// forms' watches (here `owns_with` and `watches_map`), a typed and a
/// fleet controller give their RBAC rules as a dynamic one does, and the
/// same name is refused whichever form claimed it first.
#[tokio::test]
async fn every_form_is_the_one_builder() {
    use kube_client::core::discovery::Scope;
    use kube_client::core::{ApiResource, GroupVersionKind};
    let mgr = manager().await;
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Gizmo");
    let gizmos = ApiResource::from_gvk_with_plural(&gvk, "gizmos");
    let dynamic = mgr
        .dynamic_controller(gizmos, Scope::Namespaced)
        .owns_with::<Pod>(Vec::new())
        .watches_map(|_: &k8s_openapi::api::core::v1::Secret| Vec::new());
    let rules = dynamic.permissions();
    assert!(rules.allows("example.com", "gizmos", "watch"));
    assert!(rules.allows("", "pods", "delete"));
    assert!(rules.allows("", "secrets", "watch"));
    assert_eq!(dynamic.owned_kinds().len(), 1);
    let typed = mgr.controller::<ConfigMap>().owns::<Pod>().permissions();
    assert!(typed.allows("", "configmaps", "patch"));
    assert!(typed.allows("", "pods", "delete"));
    let fleet = mgr.fleet_controller::<ConfigMap>().named("gizmo");
    assert!(fleet.permissions().allows("", "configmaps", "watch"));
    dynamic.complete(Noop).unwrap();
    let err = fleet.complete(Noop).unwrap_err();
    assert!(
        matches!(builder_error(&err), Some(BuilderError::DuplicateName(n)) if n == "gizmo"),
        "{err}"
    );
}
