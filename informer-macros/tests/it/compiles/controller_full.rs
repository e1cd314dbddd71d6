//! Every `#[controller]` option at once, with `#[rbac]` rules.

use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
use controller_runtime::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use controller_runtime::prelude::*;
use controller_runtime::reconcile::Cleanup;

#[derive(controller_runtime::Controller)]
#[controller(
    for = ConfigMap,
    owns(Deployment),
    watches(Secret, map = Self::secret_to_configmaps),
    max_concurrent = 4,
    finalizer = "example.com/cleanup",
    predicate = generation_changed,
    name = "web-controller",
    leader_election,
    webhooks(defaulting, validating, failure_policy = "Ignore", timeout_seconds = 5, service = "web-webhooks")
)]
#[rbac(group = "", resources(pods, "pods/log"), verbs(get, list))]
#[rbac(group = "", resources(configmaps), verbs(get), names("settings"))]
struct Web;

impl Web {
    fn secret_to_configmaps(secret: &Secret) -> Vec<Request> {
        Request::from_object(secret).into_iter().collect()
    }
}

impl ObjectReconciler<ConfigMap> for Web {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

impl Cleanup<ConfigMap> for Web {
    async fn cleanup(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

/// Webhook certificates mounted from a directory: no RBAC for them.
#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, webhooks(validating, cert_dir = "/certs"))]
struct MountedCerts;

impl ObjectReconciler<ConfigMap> for MountedCerts {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

/// No finalizer, an expression predicate, split attributes, default name.
#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap)]
#[controller(predicate = controller_runtime::predicate::LabelsChanged)]
struct PlainWatcher;

impl ObjectReconciler<ConfigMap> for PlainWatcher {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

#[allow(dead_code)]
fn wire(mgr: &Manager) -> Result<(), ManagerError> {
    Web.setup(mgr)?;
    PlainWatcher.setup(mgr)?;
    Ok(())
}

#[test]
fn compiles_and_holds() {
    assert_eq!(Web::CONTROLLER_NAME, "web-controller");
    assert_eq!(Web::FINALIZER, Some("example.com/cleanup"));
    assert_eq!(PlainWatcher::CONTROLLER_NAME, "plain-watcher");
    assert_eq!(PlainWatcher::FINALIZER, None);
    let perms = Web::permissions();
    assert!(perms.allows("coordination.k8s.io", "leases", "update"));
    assert!(perms.allows("", "pods/log", "get"));
    assert!(!PlainWatcher::permissions().allows("coordination.k8s.io", "leases", "update"));
    assert_eq!(
        Web::rbac_role("ns").metadata.namespace.as_deref(),
        Some("ns")
    );
    // The webhooks' certificates are in the role; the manifests name the same objects.
    assert!(perms.allows(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "patch"
    ));
    assert!(!PlainWatcher::permissions().allows("", "secrets", "create"));
    let hooks = Web::webhooks("web-system");
    assert_eq!(hooks.service_name(), "web-webhooks");
    assert_eq!(
        Web::WEBHOOKS.failure_policy,
        controller_runtime::webhook::FailurePolicy::Ignore
    );
    assert!(hooks.validating_configuration().is_some() && hooks.mutating_configuration().is_some());
    // Confined to namespaces: a Role in each from the controller's own
    // wiring (nothing cluster-scoped in it, so no ClusterRole); the webhook
    // certificates' rules apart: their Secret in the Service's namespace,
    // the cluster-scoped configurations in a ClusterRole, never in a Role.
    let scoped = Web::rbac_for_namespaces(["a", "b"]);
    assert_eq!(scoped.roles.len(), 2);
    assert!(scoped.cluster_role.is_none());
    assert!(!Web::controller_permissions().allows("", "secrets", "create"));
    let resources = |rules: Option<Vec<controller_runtime::rbac::PolicyRule>>| -> Vec<String> {
        rules
            .unwrap_or_default()
            .into_iter()
            .flat_map(|r| r.resources.unwrap_or_default())
            .collect()
    };
    let certs = hooks
        .permissions()
        .for_namespaces("web-certs", ["web-system"]);
    let in_cluster = resources(
        certs
            .cluster_role
            .expect("webhook configurations are cluster-scoped")
            .rules,
    );
    assert!(
        in_cluster.contains(&"mutatingwebhookconfigurations".to_string()),
        "{in_cluster:?}"
    );
    let in_role = resources(certs.roles[0].rules.clone());
    assert!(
        in_role.contains(&"secrets".to_string())
            && !in_role.contains(&"mutatingwebhookconfigurations".to_string()),
        "{in_role:?}"
    );
    // Certificates from a directory: nothing for them in the role.
    assert_eq!(MountedCerts::WEBHOOKS.cert_dir, Some("/certs"));
    let mounted = MountedCerts::permissions();
    assert!(!mounted.allows("", "secrets", "create") && !mounted.allows("", "secrets", "get"));
    assert!(!mounted.allows(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "patch"
    ));
    let hook = &hooks.validating_configuration().unwrap().webhooks.unwrap()[0];
    assert_eq!(hook.timeout_seconds, Some(5));
    assert_eq!(
        hook.rules.as_ref().unwrap()[0].scope.as_deref(),
        Some("Namespaced")
    );
}
