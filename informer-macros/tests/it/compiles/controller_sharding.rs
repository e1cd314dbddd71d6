//! `sharding(...)`: `setup_sharded` in both modes, with every wiring option a sharded controller accepts, and the shard rules in its RBAC.

use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
use controller_runtime::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use controller_runtime::prelude::*;
use controller_runtime::reconcile::Cleanup;
use controller_runtime::sharding::config::ShardingConfig;

#[derive(controller_runtime::Controller)]
#[controller(
    for = ConfigMap,
    owns(Deployment),
    watches(Secret, map = Self::secret_to_configmaps),
    max_concurrent = 4,
    finalizer = "example.com/cleanup",
    predicate = generation_changed,
    sharding(mode = "label")
)]
struct Labelled;

impl Labelled {
    fn secret_to_configmaps(secret: &Secret) -> Vec<Request> {
        Request::from_object(secret).into_iter().collect()
    }
}

impl ObjectReconciler<ConfigMap> for Labelled {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

impl Cleanup<ConfigMap> for Labelled {
    async fn cleanup(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

/// Filter mode, spelt out and by default.
#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, sharding(mode = "filter"))]
struct Filtered;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, sharding)]
struct FilteredByDefault;

impl ObjectReconciler<ConfigMap> for Filtered {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

impl ObjectReconciler<ConfigMap> for FilteredByDefault {
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
    Labelled.setup_sharded(mgr, ShardingConfig::new("ops", "labelled"))?;
    Filtered.setup_sharded(mgr, ShardingConfig::new("ops", "filtered"))?;
    FilteredByDefault.setup_sharded(mgr, ShardingConfig::new("ops", "default"))?;
    Ok(())
}

#[test]
fn compiles_and_holds() {
    let perms = Labelled::permissions();
    assert!(perms.allows("coordination.k8s.io", "leases", "delete"));
    assert!(perms.allows("", "configmaps", "patch"));
    assert!(perms.allows("apps", "deployments", "patch"));
    let perms = Filtered::permissions();
    assert!(perms.allows("coordination.k8s.io", "leases", "watch"));
}
