//! Controllers: watch kinds, turn their changes into requests, reconcile.
//!
//! A controller is built on a [`Manager`] with [`Manager::controller`], the
//! one way to build one (for the same in every cluster of the manager's
//! fleet, see [`fleet`] and [`Manager::fleet_controller`]):
//!
//! - the kind it is *for* (`K`): changes to a `K` reconcile that `K`;
//! - kinds it [`owns`](ControllerBuilder::owns): changes to an owned object
//!   reconcile its controller owner of kind `K`;
//! - other kinds it [`watches`](ControllerBuilder::watches) through any
//!   [`EventHandler`], or through a map function
//!   ([`watches_map`](ControllerBuilder::watches_map));
//! - kinds it owns or watches by their metadata alone
//!   ([`owns_metadata`](ControllerBuilder::owns_metadata),
//!   [`watches_metadata`](ControllerBuilder::watches_metadata)): the cache
//!   holds `PartialObjectMeta` of them, no spec, status or data;
//! - predicates that filter events
//!   ([`with_event_filter`](ControllerBuilder::with_event_filter) for every
//!   watch, [`for_event_filter`](ControllerBuilder::for_event_filter) for
//!   `K` alone, `*_with` variants per watch);
//! - a name, the number of concurrent reconciles, the workqueue's rate
//!   limiter and an optional per-reconcile timeout.
//!
//! [`complete`](ControllerBuilder::complete) registers it with the manager;
//! it takes either a typed [`ObjectReconciler<K>`](crate::reconcile::ObjectReconciler)
//! (the object from the cache and a ready context) or a request-based
//! [`Reconciler`](crate::reconcile::Reconciler).
//! Informers come from the manager's shared factory, so two controllers
//! watching Pods share one watch and one cache. When the manager runs (and
//! leads), the controller waits for its caches to sync (failing with an
//! error naming the informers that did not), then starts its workers. A
//! request is never reconciled by two workers at once, a request queued many
//! times while waiting is reconciled once, and failures are retried with
//! per-request exponential backoff.
//!
//! Layer 5 (controller): the builder, the watch sources, the workers, the
//! reconcile outcome and its metrics. It imports the manager (a controller
//! is a runnable the manager runs) and everything below; nothing but the
//! derive support imports it.
//!
//! ```no_run
//! use controller_runtime::manager::Manager;
//! use controller_runtime::predicate::GenerationChanged;
//! use controller_runtime::reconcile::{CallInfo, Reconciler};
//! use controller_runtime::{Action, Request};
//! use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
//!
//! struct Rollout;
//! impl Reconciler for Rollout {
//!     type Error = std::convert::Infallible;
//!     async fn reconcile(&self, _req: Request, _: CallInfo) -> Result<Action, Self::Error> {
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn demo(mgr: Manager) -> Result<(), controller_runtime::manager::ManagerError> {
//! mgr.controller::<Deployment>()
//!     .named("rollout")
//!     .owns::<ReplicaSet>()
//!     .for_event_filter(GenerationChanged)
//!     .max_concurrent_reconciles(4)
//!     .complete(Rollout)?;
//! # Ok(()) }
//! ```

pub mod dynamic;
pub mod fleet;
mod lanes;
mod members;
mod metrics;
mod outcome;
mod runnable;
mod source;
mod worker;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use informer_core::shared_informer::InformerError;
use kube_client::core::ApiResource;
use kube_client::core::metadata::PartialObjectMeta;

use crate::cache::Cache;
use crate::handler::{
    EnqueueRequestForObject, EnqueueRequestForOwner, EnqueueRequestsFromMapFunc, EventHandler,
};
pub use crate::manager::error::BuilderError;
use crate::manager::{Manager, ManagerError};
use crate::object::{Object, ScopeInfo};
use crate::predicate::Predicate;
use crate::reconcile::{IntoReconciler, Reconciler};
use crate::request::Request;
use crate::workqueue::{Queue, RateLimiter};
pub use dynamic::DynamicControllerBuilder;
pub use fleet::{FleetController, FleetControllerBuilder};
use outcome::DynReconciler;
use runnable::{ControllerRunnable, HubSide};
pub(crate) use source::OwnedKind;
use source::{EventFilters, KindSource, PendingSource, Source, describe_kind};
use worker::{Engine, EngineConfig};

/// Errors of a running controller (reported by the manager).
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The caches did not sync in time.
    #[error("controller {controller}: caches did not sync within {timeout:?}; not synced: {}", unsynced.join(", "))]
    CacheSync {
        /// The controller.
        controller: String,
        /// The limit.
        timeout: Duration,
        /// The informers that had not synced.
        unsynced: Vec<String>,
    },
    /// A watch could not be registered on its informer.
    #[error("controller {controller}: cannot watch {watch}: {source}")]
    Watch {
        /// The controller.
        controller: String,
        /// The watched kind.
        watch: String,
        /// The informer's error.
        #[source]
        source: InformerError,
    },
}

/// A controller registered with a manager: a handle to its name, to
/// enqueue requests from outside the cluster and to its queue's length
/// (`T` is [`ClusterRequest`](crate::request::ClusterRequest) for a
/// [fleet controller](fleet::FleetController)). The queue itself stays the
/// controller's.
///
/// ```no_run
/// # use controller_runtime::prelude::*;
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// # struct R;
/// # impl Reconciler for R {
/// #     type Error = std::convert::Infallible;
/// #     async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, Self::Error> { Ok(Action::done()) }
/// # }
/// # fn demo(mgr: Manager) -> Result<(), ManagerError> {
/// let controller = mgr.controller::<ConfigMap>().complete(R)?;
/// controller.enqueue(Request::new(Some("default"), "settings"));
/// assert_eq!(controller.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Controller<T = Request> {
    name: Arc<str>,
    queue: Queue<T>,
}

impl<T: Clone + Eq + std::hash::Hash + Send + Sync + 'static> Controller<T> {
    /// The controller's name (its `controller` metric label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Enqueues a request, as a generic event would.
    pub fn enqueue(&self, req: T) {
        self.queue.add(req);
    }

    /// How many requests wait to be reconciled (not counting those being
    /// reconciled, nor those waiting for a delay).
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no request waits to be reconciled.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether no request waits and none is being reconciled.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.queue.processing() == 0
    }

    /// The controller's workqueue (sharding requeues through it).
    pub(crate) fn queue(&self) -> &Queue<T> {
        &self.queue
    }
}

impl Manager {
    /// Starts building a controller for kind `K` on this manager.
    pub fn controller<K: Object>(&self) -> ControllerBuilder<K> {
        ControllerBuilder::new(self)
    }
}

/// Builds a controller; see the [module documentation](self).
#[must_use]
pub struct ControllerBuilder<K> {
    mgr: Manager,
    for_predicates: Vec<Box<dyn Predicate<K>>>,
    event_filters: Vec<Box<dyn Predicate<PartialObjectMeta>>>,
    /// The watches besides `K`'s, made when the controller is completed
    /// (so that cache options added until then, such as a label-mode
    /// shard's selector, apply to their informers).
    sources: Vec<PendingSource>,
    /// The kinds declared owned (sharding labels them in label mode).
    owned: Vec<OwnedKind>,
    settings: Settings,
    _kind: PhantomData<fn() -> K>,
}

/// What every controller is configured with besides its watches.
struct Settings {
    name: Option<String>,
    max_concurrent: usize,
    rate_limiter: Option<Box<dyn RateLimiter<Request>>>,
    reconcile_timeout: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            name: None,
            max_concurrent: 1,
            rate_limiter: None,
            reconcile_timeout: None,
        }
    }
}

impl Settings {
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
        if self.max_concurrent == 0 {
            return Err(BuilderError::ZeroConcurrency(name));
        }
        if self.reconcile_timeout.is_some_and(|t| t.is_zero()) {
            return Err(BuilderError::ZeroTimeout(name));
        }
        Ok(name)
    }

    /// What the engine runs with; one cluster's reconciles may hold
    /// `per_cluster` of the workers.
    fn engine_config(&self, mgr: &Manager, per_cluster: usize) -> EngineConfig {
        EngineConfig {
            workers: self.max_concurrent,
            per_cluster: per_cluster.clamp(1, self.max_concurrent.max(1)),
            reconcile_timeout: self.reconcile_timeout,
            cache_sync_timeout: mgr.cache_sync_timeout(),
        }
    }

    /// Validates, claims the name and registers the controller with `mgr`.
    /// `reconciler` is made once the name is known (its events carry it).
    fn register(
        mut self,
        mgr: &Manager,
        default_name: &str,
        reconciler: impl FnOnce(&str) -> Arc<dyn DynReconciler>,
        sources: Vec<Box<dyn Source>>,
    ) -> Result<Controller, ManagerError> {
        let name = self.validate(default_name)?;
        if !mgr.claim_controller_name(&name) {
            return Err(BuilderError::DuplicateName(name).into());
        }
        mgr.watches_resources(&name, sources.iter().map(|s| s.resource().clone()));
        let reconciler = reconciler(&name);
        let engine = Engine::new(
            name.into(),
            self.engine_config(mgr, self.max_concurrent),
            self.rate_limiter.take(),
            mgr,
        );
        let (name, queue) = (Arc::clone(&engine.name), engine.queue.clone());
        mgr.add_runnable(ControllerRunnable {
            engine,
            hub: Some(HubSide {
                sources,
                reconciler,
            }),
            fleet: None,
            leader_only: true,
        });
        Ok(Controller { name, queue })
    }
}

impl<K: Object> ControllerBuilder<K> {
    fn new(mgr: &Manager) -> Self {
        ControllerBuilder {
            mgr: mgr.clone(),
            for_predicates: Vec::new(),
            event_filters: Vec::new(),
            sources: Vec::new(),
            owned: Vec::new(),
            settings: Settings::default(),
            _kind: PhantomData,
        }
    }

    /// The manager the controller is built on (for builder extensions
    /// such as sharding's).
    pub fn manager(&self) -> &Manager {
        &self.mgr
    }

    /// The kinds declared owned so far.
    pub(crate) fn owned_kinds(&self) -> &[OwnedKind] {
        &self.owned
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
    /// it owns and those it watches), whenever they were added, as Go's
    /// `WithEventFilter`. The predicate sees each object's metadata as a
    /// `PartialObjectMeta` (labels, annotations, generation,
    /// `resourceVersion`, owners...); the ready-made predicates
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

    /// Reconciles the controller owner of kind `K` when a `C` changes.
    pub fn owns<C: Object>(self) -> Self
    where
        K::Scope: ScopeInfo,
    {
        self.owns_with::<C>(Vec::new())
    }

    /// [`owns`](Self::owns), with predicates on `C`'s events.
    pub fn owns_with<C: Object>(mut self, predicates: Vec<Box<dyn Predicate<C>>>) -> Self
    where
        K::Scope: ScopeInfo,
    {
        self.owned.push(OwnedKind::of::<C>());
        self.watches_with::<C>(EnqueueRequestForOwner::controller_of::<K>(), predicates)
    }

    /// Reconciles whatever `handler` maps `W`'s events to.
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
        let (handler, predicates) = (Arc::new(handler), Arc::new(predicates));
        self.sources.push(Box::new(move |cache: &Cache| {
            Box::new(KindSource {
                informer: cache.informer::<W>(),
                handler,
                predicates,
                filters: Arc::default(),
                description: describe_kind::<W>(),
                resource: ApiResource::erase::<W>(&()),
            }) as Box<dyn Source>
        }));
        self
    }

    /// Reconciles the controller owner of kind `K` when a `C` changes,
    /// watching `C`'s metadata only (Go's `builder.OnlyMetadata`): the
    /// cache holds `PartialObjectMeta<C>`, never `C`'s spec, status or
    /// data, so owning Secrets or ConfigMaps costs their metadata alone.
    /// The informer is the manager cache's
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
    pub fn owns_metadata<C: Object>(self) -> Self
    where
        K::Scope: ScopeInfo,
    {
        self.owns_metadata_with::<C>(Vec::new())
    }

    /// [`owns_metadata`](Self::owns_metadata), with predicates on the
    /// metadata events of `C`.
    pub fn owns_metadata_with<C: Object>(
        mut self,
        predicates: Vec<Box<dyn Predicate<PartialObjectMeta<C>>>>,
    ) -> Self
    where
        K::Scope: ScopeInfo,
    {
        self.owned.push(OwnedKind::of::<C>());
        self.watches_metadata_with::<C>(EnqueueRequestForOwner::controller_of::<K>(), predicates)
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
        let (handler, predicates) = (Arc::new(handler), Arc::new(predicates));
        self.sources.push(Box::new(move |cache: &Cache| {
            Box::new(KindSource {
                informer: cache.metadata_informer::<W>(),
                handler,
                predicates,
                filters: Arc::default(),
                description: format!("{} metadata", describe_kind::<W>()),
                resource: ApiResource::erase::<W>(&()),
            }) as Box<dyn Source>
        }));
        self
    }

    /// How many requests are reconciled at once (default 1).
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.settings.max_concurrent = n;
        self
    }

    /// The workqueue's rate limiter (default: per-request exponential 5 ms
    /// to 1000 s, and an overall 10/s burst-100 bucket).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<Request> + 'static) -> Self {
        self.settings.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Drops a reconcile that runs longer than `timeout` and retries it with
    /// backoff.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.settings.reconcile_timeout = Some(timeout);
        self
    }

    /// Every watch of the controller, `K`'s first, each with the
    /// controller-wide filters.
    fn sources(&mut self) -> Vec<Box<dyn Source>> {
        let primary: Box<dyn Source> = Box::new(KindSource {
            informer: self.mgr.cache().informer::<K>(),
            handler: Arc::new(EnqueueRequestForObject) as Arc<dyn EventHandler<K>>,
            predicates: Arc::new(std::mem::take(&mut self.for_predicates)),
            filters: Arc::default(),
            description: describe_kind::<K>(),
            resource: ApiResource::erase::<K>(&()),
        });
        let mut sources = vec![primary];
        let cache = self.mgr.cache().clone();
        sources.extend(self.sources.drain(..).map(|make| make(&cache)));
        let filters: EventFilters = Arc::new(std::mem::take(&mut self.event_filters));
        for source in &mut sources {
            source.set_event_filters(Arc::clone(&filters));
        }
        sources
    }

    /// Validates the settings and registers the controller with the
    /// manager, which starts it when it runs (and leads). `reconciler` is an
    /// [`ObjectReconciler<K>`](crate::reconcile::ObjectReconciler) or a
    /// [`Reconciler`](crate::reconcile::Reconciler); both run the same way.
    pub fn complete<M>(
        self,
        reconciler: impl IntoReconciler<K, M>,
    ) -> Result<Controller, ManagerError> {
        self.complete_wrapped(reconciler, |inner| inner)
    }

    /// [`complete`](Self::complete), with the reconciler put behind `wrap`
    /// (sharding's gate).
    pub(crate) fn complete_wrapped<M, I, W>(
        mut self,
        reconciler: I,
        wrap: impl FnOnce(I::Reconciler) -> W,
    ) -> Result<Controller, ManagerError>
    where
        I: IntoReconciler<K, M>,
        W: Reconciler,
    {
        let sources = self.sources();
        let mgr = self.mgr;
        self.settings.register(
            &mgr,
            &K::kind(&()),
            |name| {
                Arc::new(wrap(reconciler.into_reconciler(
                    mgr.cache(),
                    &mgr.client(),
                    mgr.event_recorder(name),
                )))
            },
            sources,
        )
    }
}

#[cfg(test)]
mod tests;
