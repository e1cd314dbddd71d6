//! Fleet controllers: one controller reconciling the same kinds in every
//! cluster of the manager's [fleet](crate::cluster::Fleet) (Go
//! multicluster-runtime's "uniform" reconcilers).
//!
//! [`Manager::fleet_controller`] builds one as [`Manager::controller`]
//! does, with the same [`ControllerBuilder`] (requests of type
//! [`ClusterRequest`]): the kind it is *for*, the kinds it
//! [`owns`](ControllerBuilder::owns) or [`watches`](ControllerBuilder::watches), predicates, a name,
//! concurrency, a rate limiter and a timeout. Each watch applies to every
//! cluster attached to the fleet (engaged and reached): when a cluster
//! arrives, the controller registers its handlers on that cluster's
//! informers; when it leaves, it removes them, drops the cluster's queued
//! requests and its `cluster`-labelled metric series, and cancels the
//! cluster's running reconciles (dropped at their next await, so one
//! hanging on a stalled API server frees its worker at once).
//!
//! Its queue holds [`ClusterRequest`]s, `(cluster, namespace, name)`, so
//! the same object name in two clusters is two requests. The reconciler
//! is either form, and runs per cluster: a typed
//! [`ObjectReconciler<K>`](crate::reconcile::ObjectReconciler) reads the
//! object from that cluster's cache and gets an
//! [`ObjectContext`](crate::reconcile::ObjectContext) whose `api()`,
//! `client()`, `cache()` and `recorder()` are that cluster's, and
//! [`ObjectContext::cluster`](crate::reconcile::ObjectContext::cluster)
//! its name; a request-form [`Reconciler`](crate::reconcile::Reconciler)
//! gets the name in [`CallInfo::cluster`](crate::reconcile::CallInfo) and
//! looks the cluster up in [`Manager::fleet`].
//!
//! The workers serve every cluster, and one cluster's trouble stays its
//! own. A request of a cluster whose caches have not synced yet, or which
//! the fleet reports `Failing`, waits parked (it holds no worker and
//! nothing looks at it again) until the cluster is synced and healthy; one
//! whose cluster left is dropped. When a cluster starts failing, its
//! running reconciles let go of their workers (they go on in the
//! background, and end as usual). One cluster's requests hold at most
//! [`max_concurrent_reconciles_per_cluster`](ControllerBuilder::max_concurrent_reconciles_per_cluster)
//! of the workers (default: all but one); the next ones wait parked until
//! one of its reconciles ends. The default rate limiter's overall bucket
//! is one per cluster. The controller follows the same rules as a
//! [`Manager::controller`] otherwise: the same settings, errors and log
//! lines, and its caches in each cluster must sync within the manager's
//! cache-sync timeout (past it the error is logged with the cluster's name
//! and the cluster's requests go on waiting, since one member never fails
//! the controller or the others).
//!
//! A fleet controller is a leader-only runnable: with leader election,
//! only the leader reconciles the fleet; a sharded one
//! ([`ShardedFleetExt::sharded`](crate::sharding::fleet::ShardedFleetExt))
//! runs on every replica, each reconciling its share of the
//! `(cluster, namespace, name)`s. The manager's own cluster is not
//! part of the fleet; a [`Manager::controller`] reconciles it, or the
//! fleet controller itself with
//! [`engage_local_cluster`](ControllerBuilder::engage_local_cluster).
//!
//! ```no_run
//! use std::sync::Arc;
//! use controller_runtime::prelude::*;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Stamp;
//!
//! impl ObjectReconciler<ConfigMap> for Stamp {
//!     type Error = kube_client::Error;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
//!         let patch = serde_json::json!({"data": {"cluster": ctx.cluster()}});
//!         ctx.api().patch(&cm.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn demo(mgr: Manager) -> Result<(), ManagerError> {
//! mgr.fleet_controller::<ConfigMap>().named("stamp").complete(Stamp)?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use kube_client::core::Resource;

use super::Controller;
use super::builder::{ControllerBuilder, Reconcilers};
use super::members::ReconcilerFactory;
use crate::cluster::Cluster;
use crate::manager::{Manager, ManagerError};
use crate::object::Object;
use crate::reconcile::{IntoReconciler, Reconciler};
use crate::request::ClusterRequest;

/// A fleet controller registered with a manager: a handle to its name,
/// to enqueue a [`ClusterRequest`] (dropped when its cluster is not
/// attached by the time a worker takes it) and to the queue's length.
pub type FleetController = super::Controller<ClusterRequest>;

/// The builder of a fleet controller: the one [`ControllerBuilder`],
/// whose requests name their cluster.
pub type FleetControllerBuilder<K> = ControllerBuilder<K, ClusterRequest>;

impl Manager {
    /// Starts building a controller for kind `K` in every cluster of this
    /// manager's fleet; see the [module documentation](self).
    pub fn fleet_controller<K: Object>(&self) -> FleetControllerBuilder<K> {
        let mut builder = ControllerBuilder::typed(self);
        builder.hub = false;
        builder
    }
}

impl<K, T> ControllerBuilder<K, T> {
    /// Runs the controller on every replica, leader or not (a sharded
    /// controller).
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn on_every_replica(mut self) -> Self {
        self.leader_only = false;
        self
    }
}

impl<K> ControllerBuilder<K, ClusterRequest> {
    /// Reconciles the manager's own cluster too (Go multicluster-runtime's
    /// "engage with the local cluster"): one controller, one name, one
    /// queue and one set of workers for the manager's cluster and every
    /// member. In the manager's own cluster the reconciler gets the
    /// manager's client and cache,
    /// [`ObjectContext::cluster`](crate::reconcile::ObjectContext::cluster)
    /// and [`CallInfo::cluster`](crate::reconcile::CallInfo) are `""`
    /// (the name of [`Manager::cluster`], as in its requests'
    /// [`ClusterRequest::cluster`]), and its caches must sync within the
    /// manager's cache-sync timeout, as for a [`Manager::controller`] (the
    /// controller fails otherwise).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use controller_runtime::prelude::*;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # struct Stamp;
    /// # impl ObjectReconciler<ConfigMap> for Stamp {
    /// #     type Error = kube_client::Error;
    /// #     async fn reconcile(&self, _: Arc<ConfigMap>, _: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> { Ok(Action::done()) }
    /// # }
    /// # fn demo(mgr: Manager) -> Result<(), ManagerError> {
    /// mgr.fleet_controller::<ConfigMap>()
    ///     .named("stamp")
    ///     .engage_local_cluster()
    ///     .complete(Stamp)?;
    /// # Ok(()) }
    /// ```
    pub fn engage_local_cluster(mut self) -> Self {
        self.hub = true;
        self
    }

    /// Whether the controller reconciles the manager's own cluster too
    /// ([`engage_local_cluster`](Self::engage_local_cluster)).
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn engages_local_cluster(&self) -> bool {
        self.hub
    }

    /// How many of the workers one cluster's requests may hold at once (at
    /// least 1; default: one less than
    /// [`max_concurrent_reconciles`](Self::max_concurrent_reconciles), at
    /// least 1). A request of a cluster at its share waits parked (holding
    /// no worker) until one of the cluster's reconciles ends, while the
    /// others' requests go first, so a cluster whose API server hangs
    /// holds at most this many workers until the fleet reports it
    /// `Failing`, then none.
    pub fn max_concurrent_reconciles_per_cluster(mut self, n: usize) -> Self {
        self.per_cluster = Some(n.max(1));
        self
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> ControllerBuilder<K, ClusterRequest> {
    /// Validates the settings and registers the controller with the
    /// manager, which starts it when it runs (and leads). `reconciler` is
    /// an [`ObjectReconciler<K>`](crate::reconcile::ObjectReconciler) or a
    /// [`Reconciler`](crate::reconcile::Reconciler), shared by every
    /// cluster.
    pub fn complete<R, M>(self, reconciler: R) -> Result<Controller<ClusterRequest>, ManagerError>
    where
        R: Send + Sync + 'static,
        Arc<R>: IntoReconciler<K, M>,
        M: 'static,
    {
        self.complete_wrapped(reconciler, |inner| inner)
    }

    /// [`complete`](Self::complete), with each cluster's reconciler put
    /// behind `wrap` (sharding's gate).
    pub(crate) fn complete_wrapped<R, M, W>(
        self,
        reconciler: R,
        wrap: impl Fn(<Arc<R> as IntoReconciler<K, M>>::Reconciler) -> W + Send + Sync + 'static,
    ) -> Result<Controller<ClusterRequest>, ManagerError>
    where
        R: Send + Sync + 'static,
        Arc<R>: IntoReconciler<K, M>,
        M: 'static,
        W: Reconciler,
    {
        let shared = Arc::new(reconciler);
        let make: ReconcilerFactory = Box::new(move |cluster: &Cluster, name: &str| {
            Arc::new(wrap(Arc::clone(&shared).into_reconciler(
                cluster.cache(),
                &cluster.client(),
                cluster.event_recorder(name),
            )))
        });
        self.register(Reconcilers::Each(make), true)
    }
}
