//! Controllers: watch kinds, turn their changes into requests, reconcile.
//!
//! Every controller is built with the one [`ControllerBuilder`], started
//! on a [`Manager`](crate::manager::Manager) by
//! [`Manager::controller`](crate::manager::Manager::controller) (the
//! manager's own cluster), [`Manager::fleet_controller`](crate::manager::Manager::fleet_controller)
//! (every cluster of the manager's [fleet](fleet), and its own too with
//! `engage_local_cluster`) or [`Manager::dynamic_controller`](crate::manager::Manager::dynamic_controller)
//! (a kind chosen at run time, see [`dynamic`]); sharding is an option of
//! it too (`.sharded(&membership)`, see [`crate::sharding`]). They have the
//! same settings, errors, log lines and cache-sync rule, and one worker
//! loop runs them all. A builder declares:
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

mod builder;
pub mod dynamic;
pub mod fleet;
mod lanes;
mod members;
mod metrics;
mod outcome;
mod runnable;
mod source;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use informer_core::factory::is_cluster_scoped;
use informer_core::shared_informer::InformerError;
use kube_client::core::{ApiResource, Resource};

use crate::cache::Cache;
use crate::cluster::Cluster;
pub use crate::manager::error::BuilderError;
use crate::manager::{Manager, ManagerError};
use crate::object::Object;
use crate::reconcile::{IntoReconciler, Reconciler};
use crate::request::Request;
use crate::workqueue::Queue;
pub use builder::ControllerBuilder;
use builder::Reconcilers;
pub use dynamic::DynamicControllerBuilder;
pub use fleet::{FleetController, FleetControllerBuilder};
use outcome::DynReconciler;
#[cfg(feature = "sharding")]
pub(crate) use source::OwnedKind;

/// Errors of a running controller (reported by the manager). New
/// variants may be added: a `match` on it has a `_ =>` arm.
///
/// ```
/// use controller_runtime::controller::ControllerError;
/// fn advice(error: &ControllerError) -> &'static str {
///     match error {
///         ControllerError::CacheSync { .. } => "check the informers' RBAC and the CRDs",
///         ControllerError::Watch { .. } => "a watch could not be registered",
///         _ => "see the message",
///     }
/// }
/// # let _ = advice;
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn queue(&self) -> &Queue<T> {
        &self.queue
    }
}

impl Manager {
    /// Starts building a controller for kind `K` on this manager.
    pub fn controller<K: Object>(&self) -> ControllerBuilder<K> {
        ControllerBuilder::typed(self)
    }
}

impl<K: Object, T> ControllerBuilder<K, T> {
    /// A builder for the typed kind `K`.
    pub(super) fn typed(mgr: &Manager) -> Self {
        Self::with_kind(
            mgr,
            ApiResource::erase::<K>(&()),
            !is_cluster_scoped::<K>(),
            Arc::new(|cache: &Cache| cache.informer::<K>()),
        )
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> ControllerBuilder<K, Request> {
    /// Validates the settings and registers the controller with the
    /// manager, which starts it when it runs (and leads), or at once if it
    /// already does. `reconciler` is an
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
        self,
        reconciler: I,
        wrap: impl FnOnce(I::Reconciler) -> W + 'static,
    ) -> Result<Controller, ManagerError>
    where
        I: IntoReconciler<K, M>,
        W: Reconciler,
    {
        let make = move |cluster: &Cluster, name: &str| -> Arc<dyn DynReconciler> {
            Arc::new(wrap(reconciler.into_reconciler(
                cluster.cache(),
                &cluster.client(),
                cluster.event_recorder(name),
            )))
        };
        self.register(Reconcilers::Once(Box::new(make)), false)
    }
}

#[cfg(test)]
mod tests;
