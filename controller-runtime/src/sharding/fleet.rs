//! Sharding a fleet controller: `fleet_builder.sharded(&membership)`
//! ([`ShardedFleetExt`]) spreads the `(cluster, namespace, name)`s of a
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
//! the controller's kind in each attached cluster. The membership runs as
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
use super::controller::{install_gate, through_ring_gate};
use super::membership::Membership;
use super::metrics::{ReassignTimes, ShardMetrics, Source};
use crate::action::Action;
use crate::cluster::Fleet;
use crate::controller::{FleetController, FleetControllerBuilder};
use crate::manager::ManagerError;
use crate::manager::error::BuilderError;
use crate::object::Object;
use crate::reconcile::{CallInfo, IntoReconciler, Reconciler};
use crate::request::{ClusterRequest, Request};
use crate::workqueue::{AddOptions, Priority};

/// Turns sharding on for a fleet controller builder:
/// `.sharded(&membership)`, in filter mode; see the [module
/// documentation](self).
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
pub trait ShardedFleetExt<K: Object> {
    /// This fleet controller's `(cluster, namespace, name)`s are spread over
    /// the replicas of `membership`'s ring (filter mode; a ring in label
    /// mode is refused when the controller is completed).
    fn sharded(self, membership: &Membership) -> ShardedFleetBuilder<K>;
}

impl<K: Object> ShardedFleetExt<K> for FleetControllerBuilder<K> {
    fn sharded(self, membership: &Membership) -> ShardedFleetBuilder<K> {
        ShardedFleetBuilder {
            builder: self,
            membership: membership.clone(),
        }
    }
}

/// A fleet controller builder with sharding on; see [`ShardedFleetExt`].
#[must_use]
pub struct ShardedFleetBuilder<K> {
    builder: FleetControllerBuilder<K>,
    membership: Membership,
}

impl<K: Object> ShardedFleetBuilder<K> {
    /// Builds the fleet controller with `reconciler` behind the shard's
    /// gate, as [`FleetControllerBuilder::complete`] does otherwise; fails
    /// with `BuilderError::FleetLabelMode` when the ring is in label mode.
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
        let gate: ShardGate<ClusterRequest> = ShardGate::new(&membership);
        let wrap_gate = gate.clone();
        let controller =
            self.builder
                .on_every_replica()
                .complete_wrapped(reconciler, move |inner| FleetGated {
                    inner,
                    gate: wrap_gate.clone(),
                })?;
        let queue = controller.queue().clone();
        gate.set_requeue(move |reqs| {
            for req in reqs {
                queue.add_with(req, AddOptions::new().priority(Priority::LOW));
            }
        });
        let fleet = mgr.fleet().clone();
        gate.set_keys(move || cached_keys::<K>(&fleet));
        let reassign = ReassignTimes::default();
        gate.set_departed({
            let (reassign, membership) = (reassign.clone(), membership.clone());
            move |gone| reassign.record(&membership, gone)
        });
        let stats_gate = gate.clone();
        let (fleet, identity) = (mgr.fleet().clone(), membership.identity().to_string());
        ShardMetrics::register(
            &mgr,
            controller.name(),
            &membership,
            Source::Ring {
                stats: Box::new(move || stats_gate.stats()),
                owned: Box::new(move |ring| {
                    cached_keys::<K>(&fleet)
                        .iter()
                        .filter(|r| ring.owns(&identity, &r.to_string()))
                        .count()
                }),
                reassign,
            },
        );
        install_gate(&mgr, controller.name(), &membership, &gate)?;
        Ok(controller)
    }
}

/// The requests of every object of `K` in the caches of the fleet's
/// attached clusters.
fn cached_keys<K: Object>(fleet: &Fleet) -> Vec<ClusterRequest> {
    let attached = fleet.subscribe().borrow().clone();
    attached
        .iter()
        .flat_map(|(name, cluster)| {
            cluster
                .cache()
                .informer::<K>()
                .list()
                .iter()
                .filter_map(|o| Request::from_object(o.as_ref()).ok())
                .map(|r| ClusterRequest::new(Arc::clone(name), r))
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
        let cluster = ctx.cluster.clone().unwrap_or_else(|| Arc::from(""));
        let key = ClusterRequest::new(cluster, req.clone());
        through_ring_gate(&self.gate, &key, self.inner.reconcile(req, ctx)).await
    }
}
