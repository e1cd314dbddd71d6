//! The one controller builder: what a controller watches and how it runs,
//! whatever its kind (typed or [dynamic](super::dynamic)) and wherever its
//! requests come from (the manager's own cluster, the [fleet](super::fleet)
//! or both).
//!
//! [`ControllerBuilder<K, T>`] holds every setting; `K` is the kind the
//! controller is for and `T` its request: [`Request`] for a controller of
//! the manager's own cluster, [`ClusterRequest`](crate::request::ClusterRequest) for one that reconciles in
//! the fleet (and, with `engage_local_cluster`, the manager's cluster too).
//! [`Manager::controller`], [`Manager::fleet_controller`] and
//! [`Manager::dynamic_controller`] are its constructors. Each watch is
//! kept as a factory and made on a cluster's cache when the controller
//! meets that cluster: the manager's own at `complete`, a member when it
//! attaches.
//!
//! Controller layer.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use kube_client::core::metadata::PartialObjectMeta;
use kube_client::core::{ApiResource, Resource};

use super::members::{FleetSide, ReconcilerFactory, SourceFactory};
use super::outcome::DynReconciler;
use super::runnable::{ControllerRunnable, HubSide};
use super::source::{EventFilters, KindSource, OwnedKind, Source, Watched, describe_kind};
use super::worker::{Engine, EngineConfig};
use super::{BuilderError, Controller};
use crate::cache::{Cache, ScopedInformer};
use crate::cluster::Cluster;
use crate::handler::{
    EnqueueRequestForObject, EnqueueRequestForOwner, EnqueueRequestsFromMapFunc, EventHandler,
};
use crate::manager::{Manager, ManagerError};
use crate::object::Object;
use crate::predicate::Predicate;
use crate::rbac::{FINALIZERS_VERBS, PRIMARY_VERBS, Permissions, STATUS_VERBS};
use crate::request::Request;
use crate::workqueue::RateLimiter;

/// Builds a controller; see the [module documentation](super). `T` is the
/// request its queue holds: [`Request`] (the manager's own cluster, from
/// [`Manager::controller`] or [`Manager::dynamic_controller`]) or
/// [`ClusterRequest`](crate::request::ClusterRequest) (the fleet, from [`Manager::fleet_controller`]).
///
/// ```no_run
/// # use controller_runtime::prelude::*;
/// # use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
/// # fn demo(mgr: Manager) -> ControllerBuilder<Deployment> {
/// mgr.controller::<Deployment>()
///     .named("rollout")
///     .owns::<ReplicaSet>()
///     .max_concurrent_reconciles(4)
/// # }
/// ```
#[must_use]
pub struct ControllerBuilder<K, T = Request> {
    pub(super) mgr: Manager,
    /// The kind the controller is for, as a resource (its default name).
    primary: ApiResource,
    /// `K`'s informer in a cluster's cache.
    primary_informer: InformerOf<K>,
    /// The handler enqueueing the controller owner of kind `K`.
    owner: EnqueueRequestForOwner,
    for_predicates: Vec<Box<dyn Predicate<K>>>,
    event_filters: Vec<Box<dyn Predicate<PartialObjectMeta>>>,
    /// The watches besides `K`'s, made on each cluster's cache when the
    /// controller meets it (so that cache options added until then, such
    /// as a label-mode shard's selector, apply to their informers).
    sources: Vec<SourceFactory>,
    /// The informer requests of the watches besides `K`'s, run on every
    /// fleet member's cache as it is engaged by a fleet controller (warm
    /// caches on followers).
    warm: Vec<InformerRequest>,
    /// The kinds declared owned (sharding labels them in label mode).
    owned: Vec<OwnedKind>,
    permissions: Permissions,
    pub(super) settings: Settings,
    pub(super) rate_limiter: Option<Box<dyn RateLimiter<T>>>,
    /// How many workers one cluster's requests may hold (default: all
    /// but one for a fleet controller).
    pub(super) per_cluster: Option<usize>,
    /// Runs only on the leader (not when sharded: every replica works).
    pub(super) leader_only: bool,
    /// Reconciles the manager's own cluster.
    pub(super) hub: bool,
    _request: PhantomData<fn() -> T>,
}

/// How a controller finds the informer of one kind in a cluster's cache.
type InformerOf<X> = Arc<dyn Fn(&Cache) -> ScopedInformer<X> + Send + Sync>;

/// Requests one informer in a cluster's cache (without using it).
type InformerRequest = Arc<dyn Fn(&Cache) + Send + Sync>;

/// The request of `informer` alone.
fn request_of<X: 'static>(informer: &InformerOf<X>) -> InformerRequest {
    let informer = Arc::clone(informer);
    Arc::new(move |cache: &Cache| {
        informer(cache);
    })
}

/// What every controller is configured with besides its watches.
#[derive(Default)]
pub(super) struct Settings {
    pub(super) name: Option<String>,
    max_concurrent: Option<usize>,
    reconcile_timeout: Option<Duration>,
}

impl Settings {
    fn max_concurrent(&self) -> usize {
        self.max_concurrent.unwrap_or(1)
    }

    /// The controller's name (`default_name` unless named), once the
    /// settings are found valid.
    fn validate(&self, default_name: &str) -> Result<String, BuilderError> {
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| default_name.to_lowercase());
        let valid = !name.is_empty()
            && name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(BuilderError::InvalidName(name));
        }
        if self.max_concurrent() == 0 {
            return Err(BuilderError::ZeroConcurrency(name));
        }
        if self.reconcile_timeout.is_some_and(|t| t.is_zero()) {
            return Err(BuilderError::ZeroTimeout(name));
        }
        Ok(name)
    }
}

/// The source of `X` (a kind, or a kind's metadata) in whichever cluster
/// it is made for, from that cluster's `informer`.
fn source_in_each<X: Watched>(
    informer: InformerOf<X>,
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

impl<K: Resource + Clone + Send + Sync + 'static, T> ControllerBuilder<K, T> {
    /// A builder on `mgr` for the kind `primary` (namespaced or not as
    /// `namespaced` says), found in a cache by `informer`.
    pub(super) fn with_kind(
        mgr: &Manager,
        primary: ApiResource,
        namespaced: bool,
        informer: InformerOf<K>,
    ) -> Self {
        let permissions = Permissions::new()
            .rule(
                &primary.group,
                &primary.plural,
                PRIMARY_VERBS.iter().cloned(),
            )
            .rule(
                &primary.group,
                &format!("{}/status", primary.plural),
                STATUS_VERBS.iter().cloned(),
            )
            .rule(
                &primary.group,
                &format!("{}/finalizers", primary.plural),
                FINALIZERS_VERBS.iter().cloned(),
            )
            .events();
        ControllerBuilder {
            mgr: mgr.clone(),
            owner: EnqueueRequestForOwner::for_kind(
                primary.group.clone(),
                primary.kind.clone(),
                namespaced,
                true,
            ),
            primary,
            primary_informer: informer,
            for_predicates: Vec::new(),
            event_filters: Vec::new(),
            sources: Vec::new(),
            warm: Vec::new(),
            owned: Vec::new(),
            permissions,
            settings: Settings::default(),
            rate_limiter: None,
            per_cluster: None,
            leader_only: true,
            hub: true,
            _request: PhantomData,
        }
    }

    /// The manager the controller is built on (for builder extensions
    /// such as sharding's).
    pub fn manager(&self) -> &Manager {
        &self.mgr
    }

    /// The kinds declared owned so far.
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn owned_kinds(&self) -> &[OwnedKind] {
        &self.owned
    }

    /// The controller's name as set so far (default: the kind in lower
    /// case).
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn current_name(&self) -> String {
        self.settings
            .name
            .clone()
            .unwrap_or_else(|| self.primary.kind.to_lowercase())
    }

    /// Names the controller (default: the kind in lower case).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.settings.name = Some(name.into());
        self
    }

    /// Filters the events of `K`, the kind the controller is for, alone
    /// (all such predicates must pass); [`owns_with`](Self::owns_with) and
    /// [`watches_with`](Self::watches_with) filter the other kinds.
    pub fn for_event_filter(mut self, predicate: impl Predicate<K>) -> Self {
        self.for_predicates.push(Box::new(predicate));
        self
    }

    /// Filters the events of every watch of the controller (`K`, the kinds
    /// it owns and those it watches), whenever they were added, in every
    /// cluster, as Go's `WithEventFilter`. The predicate sees each
    /// object's metadata as a `PartialObjectMeta` (labels, annotations,
    /// generation, `resourceVersion`, owners...); the ready-made predicates
    /// ([`GenerationChanged`](crate::predicate::GenerationChanged), ...)
    /// work on it. Every filter and each watch's own predicates must pass.
    ///
    /// ```no_run
    /// # use controller_runtime::prelude::*;
    /// use controller_runtime::kube_client::core::metadata::PartialObjectMeta;
    /// use controller_runtime::predicate::from_fn;
    /// # use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    /// # fn demo(mgr: Manager) -> ControllerBuilder<Deployment> {
    /// // Neither a Deployment nor a ReplicaSet outside team A reconciles.
    /// mgr.controller::<Deployment>()
    ///     .owns::<ReplicaSet>()
    ///     .with_event_filter(from_fn(|m: &PartialObjectMeta| {
    ///         m.labels().get("team").is_some_and(|t| t == "a")
    ///     }))
    /// # }
    /// ```
    pub fn with_event_filter(mut self, predicate: impl Predicate<PartialObjectMeta>) -> Self {
        self.event_filters.push(Box::new(predicate));
        self
    }

    /// Reconciles the controller owner of kind `K` when a `C` changes (in
    /// the cluster of the change).
    pub fn owns<C: Object>(self) -> Self {
        self.owns_with::<C>(Vec::new())
    }

    /// [`owns`](Self::owns), with predicates on `C`'s events.
    pub fn owns_with<C: Object>(mut self, predicates: Vec<Box<dyn Predicate<C>>>) -> Self {
        self.owned.push(OwnedKind::of::<C>());
        self.permissions = self.permissions.owns::<C>();
        let owner = self.owner.clone();
        self.kind_watch::<C>(owner, predicates)
    }

    /// Reconciles whatever `handler` maps `W`'s events to (in the cluster
    /// of the event).
    pub fn watches<W: Object>(self, handler: impl EventHandler<W>) -> Self {
        self.watches_with::<W>(handler, Vec::new())
    }

    /// Reconciles the requests `map` returns for each event of `W` (the
    /// object as it is now, or as it was last seen when deleted).
    ///
    /// ```no_run
    /// # use controller_runtime::prelude::*;
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// # fn demo(mgr: Manager) -> ControllerBuilder<ConfigMap> {
    /// // A Secret change reconciles the ConfigMap of the same name.
    /// mgr.controller::<ConfigMap>()
    ///     .watches_map(|secret: &Secret| Request::from_object(secret).into_iter().collect())
    /// # }
    /// ```
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
        self.permissions = self.permissions.watches::<W>();
        self.kind_watch::<W>(handler, predicates)
    }

    fn kind_watch<W: Object>(
        self,
        handler: impl EventHandler<W>,
        predicates: Vec<Box<dyn Predicate<W>>>,
    ) -> Self {
        self.watch(
            |cache| cache.informer::<W>(),
            handler,
            predicates,
            describe_kind::<W>(),
            ApiResource::erase::<W>(&()),
        )
    }

    /// Reconciles the controller owner of kind `K` when a `C` changes,
    /// watching `C`'s metadata only (Go's `builder.OnlyMetadata`): the
    /// cache holds `PartialObjectMeta<C>`, never `C`'s spec, status or
    /// data, so owning Secrets or ConfigMaps costs their metadata alone.
    /// The informer is the cache's
    /// [`metadata_informer`](crate::cache::Cache::metadata_informer) of `C`,
    /// with `C`'s cache options; it needs the same `list` and `watch` verbs.
    ///
    /// ```no_run
    /// # use controller_runtime::prelude::*;
    /// # use k8s_openapi::api::apps::v1::Deployment;
    /// # use k8s_openapi::api::core::v1::Secret;
    /// # fn demo(mgr: Manager) -> ControllerBuilder<Deployment> {
    /// mgr.controller::<Deployment>().owns_metadata::<Secret>()
    /// # }
    /// ```
    pub fn owns_metadata<C: Object>(self) -> Self {
        self.owns_metadata_with::<C>(Vec::new())
    }

    /// [`owns_metadata`](Self::owns_metadata), with predicates on the
    /// metadata events of `C`.
    pub fn owns_metadata_with<C: Object>(
        mut self,
        predicates: Vec<Box<dyn Predicate<PartialObjectMeta<C>>>>,
    ) -> Self {
        self.owned.push(OwnedKind::of::<C>());
        self.permissions = self.permissions.owns::<C>();
        let owner = self.owner.clone();
        self.metadata_watch::<C>(owner, predicates)
    }

    /// Reconciles whatever `handler` maps the metadata events of `W` to,
    /// caching `W`'s metadata only (see [`owns_metadata`](Self::owns_metadata)).
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
        self.permissions = self.permissions.watches::<W>();
        self.metadata_watch::<W>(handler, predicates)
    }

    fn metadata_watch<W: Object>(
        self,
        handler: impl EventHandler<PartialObjectMeta<W>>,
        predicates: Vec<Box<dyn Predicate<PartialObjectMeta<W>>>>,
    ) -> Self {
        self.watch(
            |cache| cache.metadata_informer::<W>(),
            handler,
            predicates,
            format!("{} metadata", describe_kind::<W>()),
            ApiResource::erase::<W>(&()),
        )
    }

    /// Adds the watch of `X` (the kind `resource`), found in each
    /// cluster's cache by `informer`.
    pub(super) fn watch<X: Watched>(
        mut self,
        informer: impl Fn(&Cache) -> ScopedInformer<X> + Send + Sync + 'static,
        handler: impl EventHandler<X>,
        predicates: Vec<Box<dyn Predicate<X>>>,
        description: String,
        resource: ApiResource,
    ) -> Self {
        let informer: InformerOf<X> = Arc::new(informer);
        self.warm.push(request_of(&informer));
        self.sources.push(source_in_each(
            informer,
            Arc::new(handler),
            Arc::new(predicates),
            description,
            resource,
        ));
        self
    }

    /// Records an extra RBAC rule of the wiring (dynamic kinds).
    pub(super) fn add_permissions(mut self, add: impl FnOnce(Permissions) -> Permissions) -> Self {
        self.permissions = add(self.permissions);
        self
    }

    /// Records a kind owned by resource (dynamic kinds).
    pub(super) fn add_owned(mut self, owned: OwnedKind) -> Self {
        self.owned.push(owned);
        self
    }

    /// The handler enqueueing the controller owner of kind `K`.
    pub(super) fn owner_handler(&self) -> EnqueueRequestForOwner {
        self.owner.clone()
    }

    /// How many requests are reconciled at once, over all clusters
    /// (default 1).
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.settings.max_concurrent = Some(n);
        self
    }

    /// The workqueue's rate limiter (default: per-request exponential 5 ms
    /// to 1000 s, and an overall 10/s burst-100 bucket per cluster).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Drops a reconcile that runs longer than `timeout` and retries it
    /// with backoff.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.settings.reconcile_timeout = Some(timeout);
        self
    }

    /// The RBAC rules this wiring needs, from the kinds used so far: the
    /// reconciled kind with its `status` and `finalizers`, the owned and
    /// watched kinds, and Events. Render them with
    /// [`Permissions::cluster_role`] or [`Permissions::role`], or check
    /// them with [`Permissions::allows`].
    ///
    /// ```no_run
    /// # use controller_runtime::prelude::*;
    /// # use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    /// # fn demo(mgr: Manager) {
    /// let rules = mgr.controller::<Deployment>().owns::<ReplicaSet>().permissions();
    /// assert!(rules.allows("apps", "replicasets", "watch"));
    /// # }
    /// ```
    pub fn permissions(&self) -> Permissions {
        self.permissions.clone()
    }

    /// Every watch of the controller as made on `cluster`, `K`'s first.
    fn take_sources(&mut self) -> Vec<SourceFactory> {
        let primary = source_in_each(
            Arc::clone(&self.primary_informer),
            Arc::new(EnqueueRequestForObject),
            Arc::new(std::mem::take(&mut self.for_predicates)),
            describe(&self.primary),
            self.primary.clone(),
        );
        let mut sources = vec![primary];
        sources.append(&mut self.sources);
        sources
    }

    /// Every watch of the controller on the manager's own cluster, each
    /// with the controller-wide filters.
    #[cfg(test)]
    pub(super) fn sources(&mut self) -> Vec<Box<dyn Source>> {
        let filters: EventFilters = Arc::new(std::mem::take(&mut self.event_filters));
        let own = self.mgr.cluster().clone();
        self.take_sources()
            .iter()
            .map(|make| make(&own, &filters))
            .collect()
    }

    /// Validates the settings and registers the controller with the
    /// manager. `reconcilers` makes the reconciler of a cluster once the
    /// name is known (its events carry it); the fleet's clusters are
    /// followed when `fleet`.
    pub(super) fn register(
        mut self,
        reconcilers: Reconcilers,
        fleet: bool,
    ) -> Result<Controller<T>, ManagerError>
    where
        T: super::lanes::WorkItem,
    {
        let name = self.settings.validate(&self.primary.kind)?;
        if !self.mgr.claim_controller_name(&name) {
            return Err(BuilderError::DuplicateName(name).into());
        }
        let sources = self.take_sources();
        let filters: EventFilters = Arc::new(std::mem::take(&mut self.event_filters));
        let mgr = self.mgr;
        let (hub_reconciler, members) = match reconcilers {
            Reconcilers::Once(make) => (self.hub.then(|| make(mgr.cluster(), &name)), None),
            Reconcilers::Each(make) => (
                self.hub.then(|| make(mgr.cluster(), &name)),
                fleet.then_some(make),
            ),
        };
        let hub = hub_reconciler.map(|reconciler| {
            let sources: Vec<Box<dyn Source>> = sources
                .iter()
                .map(|make| make(mgr.cluster(), &filters))
                .collect();
            mgr.watches_resources(&name, sources.iter().map(|s| s.resource().clone()));
            HubSide {
                sources,
                reconciler,
            }
        });
        if fleet {
            // On every replica, before leading: a new leader finds its
            // members' caches of these kinds synced.
            let every = mgr.fleet();
            every.warm(request_of(&self.primary_informer));
            for request in self.warm {
                every.warm(request);
            }
        }
        let workers = self.settings.max_concurrent();
        let per_cluster = match (self.per_cluster, fleet) {
            (Some(n), _) => n,
            (None, true) => workers.saturating_sub(1),
            (None, false) => workers,
        };
        let config = EngineConfig {
            workers,
            per_cluster: per_cluster.clamp(1, workers.max(1)),
            reconcile_timeout: self.settings.reconcile_timeout,
            cache_sync_timeout: mgr.cache_sync_timeout(),
        };
        let engine = Engine::new(name.into(), config, self.rate_limiter, &mgr);
        let handle = Controller {
            name: Arc::clone(&engine.name),
            queue: engine.queue.clone(),
        };
        mgr.add_runnable(ControllerRunnable {
            engine,
            hub,
            fleet: members.map(|reconcilers| FleetSide {
                fleet: mgr.fleet().clone(),
                metrics: mgr.metrics().clone(),
                sources,
                filters,
                reconcilers,
            }),
            leader_only: self.leader_only,
        });
        Ok(handle)
    }
}

/// Makes the reconciler of the manager's own cluster, once.
pub(super) type OneReconciler = Box<dyn FnOnce(&Cluster, &str) -> Arc<dyn DynReconciler>>;

/// How a controller gets the reconciler of a cluster.
pub(super) enum Reconcilers {
    /// The manager's own cluster only: one reconciler.
    Once(OneReconciler),
    /// One per cluster, made as each is met.
    Each(ReconcilerFactory),
}

/// `Kind (group/version)` of a resource, for logs and sync errors.
pub(super) fn describe(resource: &ApiResource) -> String {
    format!("{} ({})", resource.kind, resource.api_version)
}
