//! Fleet controllers: one controller reconciling the same kinds in every
//! cluster of the manager's [fleet](crate::cluster::Fleet) (Go
//! multicluster-runtime's "uniform" reconcilers).
//!
//! [`Manager::fleet_controller`] builds one as [`Manager::controller`]
//! does: the kind it is *for*, the kinds it [`owns`](FleetControllerBuilder::owns)
//! or [`watches`](FleetControllerBuilder::watches), predicates, a name,
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
//! [`max_concurrent_reconciles_per_cluster`](FleetControllerBuilder::max_concurrent_reconciles_per_cluster)
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
//! [`engage_local_cluster`](FleetControllerBuilder::engage_local_cluster).
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

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use kube_client::core::ApiResource;
use kube_client::core::metadata::PartialObjectMeta;

use super::members::{FleetSide, ReconcilerFactory, SourceFactory};
use super::runnable::{ControllerRunnable, HubSide};
use super::source::{EventFilters, KindSource, Source, Watched, describe_kind};
use super::worker::Engine;
use super::{BuilderError, Settings};
use crate::cache::{Cache, ScopedInformer};
use crate::cluster::Cluster;
use crate::handler::{
    EnqueueRequestForObject, EnqueueRequestForOwner, EnqueueRequestsFromMapFunc, EventHandler,
};
use crate::manager::{Manager, ManagerError};
use crate::object::{Object, ScopeInfo};
use crate::predicate::Predicate;
use crate::reconcile::{IntoReconciler, Reconciler};
use crate::request::{ClusterRequest, Request};
use crate::workqueue::RateLimiter;

/// A fleet controller registered with a manager: a handle to its name,
/// to enqueue a [`ClusterRequest`] (dropped when its cluster is not
/// attached by the time a worker takes it) and to the queue's length.
pub type FleetController = super::Controller<ClusterRequest>;

impl Manager {
    /// Starts building a controller for kind `K` in every cluster of this
    /// manager's fleet; see [`FleetControllerBuilder`].
    pub fn fleet_controller<K: Object>(&self) -> FleetControllerBuilder<K> {
        FleetControllerBuilder {
            mgr: self.clone(),
            for_predicates: Vec::new(),
            event_filters: Vec::new(),
            sources: Vec::new(),
            settings: Settings::default(),
            rate_limiter: None,
            per_cluster: None,
            leader_only: true,
            local_cluster: false,
            _kind: PhantomData,
        }
    }
}

/// Builds a fleet controller; see the [module documentation](self).
#[must_use]
pub struct FleetControllerBuilder<K> {
    mgr: Manager,
    for_predicates: Vec<Box<dyn Predicate<K>>>,
    event_filters: Vec<Box<dyn Predicate<PartialObjectMeta>>>,
    sources: Vec<SourceFactory>,
    settings: Settings,
    rate_limiter: Option<Box<dyn RateLimiter<ClusterRequest>>>,
    per_cluster: Option<usize>,
    /// Runs only on the leader (not when sharded: every replica works).
    leader_only: bool,
    /// Reconciles the manager's own cluster too.
    local_cluster: bool,
    _kind: PhantomData<fn() -> K>,
}

impl<K: Object> FleetControllerBuilder<K> {
    /// The manager the controller is built on.
    pub(crate) fn manager(&self) -> &Manager {
        &self.mgr
    }

    /// The controller's name as set so far (default: the kind in lower
    /// case).
    pub(crate) fn current_name(&self) -> String {
        self.settings
            .name
            .clone()
            .unwrap_or_else(|| K::kind(&()).to_lowercase())
    }

    /// Runs the controller on every replica, leader or not (a sharded
    /// fleet controller).
    pub(crate) fn on_every_replica(mut self) -> Self {
        self.leader_only = false;
        self
    }

    /// Names the controller (default: the kind in lower case).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.settings.name = Some(name.into());
        self
    }

    /// Reconciles the manager's own cluster too (Go multicluster-runtime's
    /// "engage with the local cluster"): one controller, one name, one
    /// queue and one set of workers for the manager's cluster and every
    /// member. In the manager's own cluster the reconciler gets the
    /// manager's client and cache,
    /// [`ObjectContext::cluster`](crate::reconcile::ObjectContext::cluster)
    /// and [`CallInfo::cluster`](crate::reconcile::CallInfo) are `None`,
    /// and its caches must sync within the manager's cache-sync timeout,
    /// as for a [`Manager::controller`] (the controller fails otherwise);
    /// its requests are [`ClusterRequest`]s with the cluster `""` (the
    /// name of [`Manager::cluster`]).
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
        self.local_cluster = true;
        self
    }

    /// Filters the events of `K` alone, in every cluster.
    pub fn for_event_filter(mut self, predicate: impl Predicate<K>) -> Self {
        self.for_predicates.push(Box::new(predicate));
        self
    }

    /// Filters the events of every watch, in every cluster (see
    /// [`ControllerBuilder::with_event_filter`](super::ControllerBuilder::with_event_filter)).
    pub fn with_event_filter(mut self, predicate: impl Predicate<PartialObjectMeta>) -> Self {
        self.event_filters.push(Box::new(predicate));
        self
    }

    /// Reconciles the controller owner of kind `K` when a `C` changes, in
    /// the cluster of the change.
    pub fn owns<C: Object>(self) -> Self
    where
        K::Scope: ScopeInfo,
    {
        self.owns_with::<C>(Vec::new())
    }

    /// [`owns`](Self::owns), with predicates on `C`'s events.
    pub fn owns_with<C: Object>(self, predicates: Vec<Box<dyn Predicate<C>>>) -> Self
    where
        K::Scope: ScopeInfo,
    {
        self.watches_with::<C>(EnqueueRequestForOwner::controller_of::<K>(), predicates)
    }

    /// [`owns`](Self::owns), caching `C`'s metadata only in every cluster
    /// (see [`ControllerBuilder::owns_metadata`](super::ControllerBuilder::owns_metadata)).
    ///
    /// ```no_run
    /// # use controller_runtime::prelude::*;
    /// # use k8s_openapi::api::apps::v1::Deployment;
    /// # use k8s_openapi::api::core::v1::Secret;
    /// # use controller_runtime::controller::FleetControllerBuilder;
    /// # fn demo(mgr: Manager) -> FleetControllerBuilder<Deployment> {
    /// mgr.fleet_controller::<Deployment>().owns_metadata::<Secret>()
    /// # }
    /// ```
    pub fn owns_metadata<C: Object>(self) -> Self
    where
        K::Scope: ScopeInfo,
    {
        self.owns_metadata_with::<C>(Vec::new())
    }

    /// [`owns_metadata`](Self::owns_metadata), with predicates on the
    /// metadata events of `C`.
    pub fn owns_metadata_with<C: Object>(
        self,
        predicates: Vec<Box<dyn Predicate<PartialObjectMeta<C>>>>,
    ) -> Self
    where
        K::Scope: ScopeInfo,
    {
        self.watches_metadata_with::<C>(EnqueueRequestForOwner::controller_of::<K>(), predicates)
    }

    /// Reconciles whatever `handler` maps the metadata events of `W` to,
    /// in the cluster of the event, caching `W`'s metadata only.
    pub fn watches_metadata<W: Object>(
        self,
        handler: impl EventHandler<PartialObjectMeta<W>>,
    ) -> Self {
        self.watches_metadata_with::<W>(handler, Vec::new())
    }

    /// [`watches_metadata`](Self::watches_metadata), with predicates.
    pub fn watches_metadata_with<W: Object>(
        mut self,
        handler: impl EventHandler<PartialObjectMeta<W>>,
        predicates: Vec<Box<dyn Predicate<PartialObjectMeta<W>>>>,
    ) -> Self {
        self.sources.push(source_in_each(
            |cache| cache.metadata_informer::<W>(),
            Arc::new(handler),
            Arc::new(predicates),
            format!("{} metadata", describe_kind::<W>()),
            ApiResource::erase::<W>(&()),
        ));
        self
    }

    /// Reconciles whatever `handler` maps `W`'s events to, in the cluster
    /// of the event.
    pub fn watches<W: Object>(self, handler: impl EventHandler<W>) -> Self {
        self.watches_with::<W>(handler, Vec::new())
    }

    /// Reconciles the requests `map` returns for each event of `W`, in the
    /// cluster of the event.
    pub fn watches_map<W: Object>(
        self,
        map: impl Fn(&W) -> Vec<Request> + Send + Sync + 'static,
    ) -> Self {
        self.watches_with::<W>(EnqueueRequestsFromMapFunc::new(map), Vec::new())
    }

    /// [`watches`](Self::watches), with predicates on `W`'s events.
    pub fn watches_with<W: Object>(
        mut self,
        handler: impl EventHandler<W>,
        predicates: Vec<Box<dyn Predicate<W>>>,
    ) -> Self {
        self.sources.push(source_in_each(
            |cache| cache.informer::<W>(),
            Arc::new(handler),
            Arc::new(predicates),
            describe_kind::<W>(),
            ApiResource::erase::<W>(&()),
        ));
        self
    }

    /// How many requests are reconciled at once, over all clusters
    /// (default 1).
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.settings.max_concurrent = n;
        self
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

    /// The workqueue's rate limiter (default: per-request exponential 5 ms
    /// to 1000 s, and an overall 10/s burst-100 bucket per cluster).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<ClusterRequest> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Drops a reconcile that runs longer than `timeout` and retries it
    /// with backoff.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.settings.reconcile_timeout = Some(timeout);
        self
    }

    /// Validates the settings and registers the controller with the
    /// manager, which starts it when it runs (and leads). `reconciler` is
    /// an [`ObjectReconciler<K>`](crate::reconcile::ObjectReconciler) or a
    /// [`Reconciler`](crate::reconcile::Reconciler), shared by every
    /// cluster.
    pub fn complete<R, M>(self, reconciler: R) -> Result<FleetController, ManagerError>
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
    ) -> Result<FleetController, ManagerError>
    where
        R: Send + Sync + 'static,
        Arc<R>: IntoReconciler<K, M>,
        M: 'static,
        W: Reconciler,
    {
        let name = self.settings.validate(&K::kind(&()))?;
        if !self.mgr.claim_controller_name(&name) {
            return Err(BuilderError::DuplicateName(name).into());
        }
        let mut sources = vec![source_in_each(
            |cache| cache.informer::<K>(),
            Arc::new(EnqueueRequestForObject),
            Arc::new(self.for_predicates),
            describe_kind::<K>(),
            ApiResource::erase::<K>(&()),
        )];
        sources.extend(self.sources);
        let shared = Arc::new(reconciler);
        let reconcilers: ReconcilerFactory = Box::new(move |cluster: &Cluster, name: &str| {
            Arc::new(wrap(Arc::clone(&shared).into_reconciler(
                cluster.cache(),
                &cluster.client(),
                cluster.event_recorder(name),
            )))
        });
        let per_cluster = self
            .per_cluster
            .unwrap_or(self.settings.max_concurrent.saturating_sub(1));
        let filters: EventFilters = Arc::new(self.event_filters);
        let hub = self.local_cluster.then(|| {
            let own = self.mgr.cluster();
            let sources: Vec<Box<dyn Source>> =
                sources.iter().map(|make| make(own, &filters)).collect();
            self.mgr
                .watches_resources(&name, sources.iter().map(|s| s.resource().clone()));
            HubSide {
                sources,
                reconciler: reconcilers(own, &name),
            }
        });
        let engine = Engine::new(
            name.into(),
            self.settings.engine_config(&self.mgr, per_cluster),
            self.rate_limiter,
            &self.mgr,
        );
        let (name, queue) = (Arc::clone(&engine.name), engine.queue.clone());
        self.mgr.add_runnable(ControllerRunnable {
            engine,
            hub,
            fleet: Some(FleetSide {
                fleet: self.mgr.fleet().clone(),
                metrics: self.mgr.metrics().clone(),
                sources,
                filters,
                reconcilers,
            }),
            leader_only: self.leader_only,
        });
        Ok(FleetController { name, queue })
    }
}

/// The source of `X` (a kind, or a kind's metadata) in whichever cluster
/// it is made for, from that cluster's `informer`.
fn source_in_each<X: Watched>(
    informer: fn(&Cache) -> ScopedInformer<X>,
    handler: Arc<dyn EventHandler<X>>,
    predicates: Arc<Vec<Box<dyn Predicate<X>>>>,
    description: String,
    resource: ApiResource,
) -> SourceFactory {
    Box::new(move |cluster: &Cluster, filters: &EventFilters| {
        Box::new(KindSource {
            informer: informer(cluster.cache()),
            handler: Arc::clone(&handler),
            predicates: Arc::clone(&predicates),
            filters: Arc::clone(filters),
            description: description.clone(),
            resource: resource.clone(),
        }) as Box<dyn Source>
    })
}
