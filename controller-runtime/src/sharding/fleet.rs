//! Sharding a fleet controller: `fleet_builder.sharded(&membership)`
//! (the one [`ShardedExt`](super::controller::ShardedExt), also named
//! [`ShardedFleetExt`]) spreads the `(cluster, namespace, name)`s of a
//! [fleet controller](crate::controller::fleet) over the replicas of a ring.
//!
//! **Filter mode only.** Every replica runs the fleet controller over every
//! attached cluster (each caches everything); a request is reconciled only
//! by the replica the ring gives its shard key, `cluster/namespace/name`
//! (the [`ClusterRequest`]'s display), so the same name in two clusters is
//! two keys that may land on different replicas. The [handover
//! rule](super#the-handover-rule) holds as for a single-cluster controller:
//! the same shard gate parks, drops and admits the requests, and when an
//! epoch settles the keys that moved in are queued again from the cache of
//! the controller's kind in each attached cluster (and in the manager's
//! own, `""/namespace/name`, with
//! [`engage_local_cluster`](crate::controller::ControllerBuilder::engage_local_cluster)). The membership runs as
//! a manager runnable, the controller adds the readiness check
//! `shard-<controller>` and the `sharding_*` metrics, as
//! [`ShardedExt`](super::controller::ShardedExt) does; the sharded fleet
//! controller is not leader-only (every replica works; do not turn the
//! manager's leader election on for it).
//!
//! **Label mode is refused** (`BuilderError::FleetLabelMode` inside
//! [`ManagerError::Controller`]): the sharder would have to label the
//! objects in the member clusters, which the fleet's clusters may not
//! allow and which the sharder's own cluster cannot watch.

use std::sync::Arc;

use super::assignment::ShardGate;
use super::config::ShardMode;
use super::controller::{ShardedBuilder, through_ring_gate, wire_ring};
use crate::action::Action;
use crate::cluster::{Cluster, Fleet};
use crate::controller::FleetController;
use crate::manager::ManagerError;
use crate::manager::error::BuilderError;
use crate::object::Object;
use crate::reconcile::{CallInfo, IntoReconciler, Reconciler};
use crate::request::{ClusterRequest, Request};

/// Turns sharding on for a fleet controller builder: the one
/// [`ShardedExt`](super::controller::ShardedExt), by its former name.
///
/// ```no_run
/// use controller_runtime::prelude::*;
/// use controller_runtime::sharding::config::ShardingConfig;
/// use controller_runtime::sharding::fleet::ShardedFleetExt;
/// use controller_runtime::sharding::membership::Membership;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// # struct R;
/// # impl Reconciler for R {
/// #     type Error = std::convert::Infallible;
/// #     async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, Self::Error> { Ok(Action::done()) }
/// # }
/// # async fn demo(mgr: Manager) -> Result<(), Box<dyn std::error::Error>> {
/// let membership = Membership::new(mgr.client(), ShardingConfig::new("default", "fleet-cm"))?;
/// mgr.fleet_controller::<ConfigMap>()
///     .named("fleet-cm")
///     .sharded(&membership)
///     .complete(R)?;
/// mgr.run_until_signal().await?;
/// # Ok(()) }
/// ```
pub use super::controller::ShardedExt as ShardedFleetExt;

/// A fleet controller builder with sharding on: the one
/// [`ShardedBuilder`], whose requests name their cluster.
pub type ShardedFleetBuilder<K> = ShardedBuilder<K, ClusterRequest>;

impl<K: Object> ShardedBuilder<K, ClusterRequest> {
    /// Builds the fleet controller with `reconciler` behind the shard's
    /// gate, as [`ControllerBuilder::complete`](crate::controller::ControllerBuilder::complete)
    /// does otherwise; fails with `BuilderError::FleetLabelMode` when the
    /// ring is in label mode.
    pub fn complete<R, M>(self, reconciler: R) -> Result<FleetController, ManagerError>
    where
        R: Send + Sync + 'static,
        Arc<R>: IntoReconciler<K, M>,
        M: 'static,
    {
        let membership = self.membership;
        if membership.config().mode == ShardMode::Label {
            return Err(ManagerError::Controller(BuilderError::FleetLabelMode {
                controller: self.builder.current_name(),
                ring: membership.config().ring.clone(),
            }));
        }
        let mgr = self.builder.manager().clone();
        let hub = self
            .builder
            .engages_local_cluster()
            .then(|| mgr.cluster().clone());
        let gate: ShardGate<ClusterRequest> = ShardGate::new(&membership);
        let wrap_gate = gate.clone();
        let controller =
            self.builder
                .on_every_replica()
                .complete_wrapped(reconciler, move |inner| FleetGated {
                    inner,
                    gate: wrap_gate.clone(),
                })?;
        let fleet = mgr.fleet().clone();
        wire_ring(&mgr, &controller, &membership, &gate, move || {
            cached_keys::<K>(hub.as_ref(), &fleet)
        })?;
        Ok(controller)
    }
}

/// The requests of every object of `K` in the caches of the fleet's
/// attached clusters and, when given, of the manager's own cluster `hub`.
fn cached_keys<K: Object>(hub: Option<&Cluster>, fleet: &Fleet) -> Vec<ClusterRequest> {
    let attached = fleet.subscribe().borrow().clone();
    hub.into_iter()
        .chain(attached.values())
        .flat_map(|cluster| {
            let name = cluster.name_arc();
            cluster
                .cache()
                .informer::<K>()
                .list()
                .iter()
                .filter_map(|o| Request::from_object(o.as_ref()).ok())
                .map(|r| ClusterRequest::new(Arc::clone(&name), r))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One cluster's reconciler behind the fleet controller's gate.
struct FleetGated<R> {
    inner: R,
    gate: ShardGate<ClusterRequest>,
}

impl<R: Reconciler> Reconciler for FleetGated<R> {
    type Error = R::Error;

    async fn reconcile(&self, req: Request, ctx: CallInfo) -> Result<Action, Self::Error> {
        let key = ClusterRequest::new(Arc::clone(&ctx.cluster), req.clone());
        through_ring_gate(&self.gate, &key, self.inner.reconcile(req, ctx)).await
    }
}
