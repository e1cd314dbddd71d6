//! `fleet`: `setup_fleet` with every wiring option (finalizer, watches,
//! workers, predicate, leader election, an extra rule) beside `setup`, and
//! the member and hub roles apart.

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
    leader_election,
    fleet
)]
#[rbac(group = "", resources(pods), verbs(get))]
struct Everywhere;

impl Everywhere {
    fn secret_to_configmaps(secret: &Secret) -> Vec<Request> {
        Request::from_object(secret).into_iter().collect()
    }
}

impl ObjectReconciler<ConfigMap> for Everywhere {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

impl Cleanup<ConfigMap> for Everywhere {
    async fn cleanup(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

#[allow(dead_code)]
fn wire(mgr: &Manager) -> Result<(), ManagerError> {
    let fleet = Everywhere.setup_fleet(mgr)?;
    assert_eq!(fleet.name(), Everywhere::CONTROLLER_NAME);
    Ok(())
}

#[test]
fn compiles_and_holds() {
    let member = Everywhere::fleet_member_permissions();
    assert!(member.allows("", "configmaps", "patch"), "the finalizer");
    assert!(member.allows("apps", "deployments", "watch"));
    assert!(member.allows("", "secrets", "watch"));
    assert!(member.allows("", "pods", "get"), "the #[rbac] rule");
    assert!(!member.allows("coordination.k8s.io", "leases", "get"));
    let hub = Everywhere::fleet_hub_permissions();
    assert!(hub.allows("coordination.k8s.io", "leases", "update"));
    assert!(hub.allows("", "secrets", "list"));
    assert!(!hub.allows("", "configmaps", "get"));
    assert!(Everywhere::permissions().allows("coordination.k8s.io", "leases", "get"));
    assert_eq!(
        Everywhere::fleet_hub_rbac("fleet-system")
            .metadata
            .namespace
            .as_deref(),
        Some("fleet-system")
    );
}

/// `fleet` with `sharding`: `setup_fleet_sharded` beside `setup_sharded`,
/// and the shard Leases in the hub's role.
#[derive(controller_runtime::Controller)]
#[controller(
    for = ConfigMap,
    owns(Deployment),
    finalizer = "example.com/cleanup",
    sharding,
    fleet
)]
struct Spread;

impl ObjectReconciler<ConfigMap> for Spread {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

impl Cleanup<ConfigMap> for Spread {
    async fn cleanup(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

#[allow(dead_code)]
fn wire_sharded(
    mgr: &Manager,
    config: controller_runtime::sharding::config::ShardingConfig,
) -> Result<(), ManagerError> {
    let fleet = Spread.setup_fleet_sharded(mgr, config.clone())?;
    assert_eq!(fleet.name(), Spread::CONTROLLER_NAME);
    Spread.setup_sharded(mgr, config)?;
    Ok(())
}

#[test]
fn a_sharded_fleet_controller_gets_the_shard_leases_in_the_hub() {
    let hub = Spread::fleet_hub_permissions();
    assert!(hub.allows("coordination.k8s.io", "leases", "delete"));
    assert!(hub.allows("", "secrets", "watch"));
    assert!(!Spread::fleet_member_permissions().allows("coordination.k8s.io", "leases", "get"));
}
