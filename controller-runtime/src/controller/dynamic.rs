//! Controllers for kinds chosen at run time (Go's controllers over
//! `unstructured.Unstructured`): the reconciled kind, and the kinds it owns
//! or watches, are [`ApiResource`]s found while the program runs (from
//! discovery, configuration, or a CRD installed after the manager started)
//! and their objects are [`DynamicObject`]s.
//!
//! [`Manager::dynamic_controller`] starts a [`DynamicControllerBuilder`];
//! [`complete`](DynamicControllerBuilder::complete) takes a request-form
//! [`Reconciler`], which reads the object from
//! [`Cache::dynamic_informer`](crate::cache::Cache::dynamic_informer) (the
//! informers the controller watches, synced before the first reconcile).
//! A controller completed while the manager runs starts at once.
//! [`permissions`](DynamicControllerBuilder::permissions) gives the RBAC
//! rules of the wiring, computed from the `ApiResource`s, to apply or check
//! at run time.
//!
//! Controller layer.

use std::sync::Arc;
use std::time::Duration;

use kube_client::core::discovery::Scope;
use kube_client::core::metadata::PartialObjectMeta;
use kube_client::core::{ApiResource, DynamicObject};

use super::source::{EventFilters, KindSource, Source, describe_kind};
use super::{Controller, Settings};
use crate::handler::{EnqueueRequestForObject, EnqueueRequestForOwner, EventHandler};
use crate::manager::{Manager, ManagerError};
use crate::object::Object;
use crate::predicate::Predicate;
use crate::rbac::{
    FINALIZERS_VERBS, OWNED_VERBS, PRIMARY_VERBS, Permissions, STATUS_VERBS, WATCHED_VERBS,
};
use crate::reconcile::Reconciler;
use crate::request::Request;
use crate::workqueue::RateLimiter;

impl Manager {
    /// Starts building a controller for the kind `resource`, namespaced or
    /// not as `scope` says, reconciling [`DynamicObject`]s; see the
    /// [module documentation](super::dynamic).
    ///
    /// ```no_run
    /// use controller_runtime::prelude::*;
    /// use controller_runtime::kube_client::core::{ApiResource, GroupVersionKind, discovery::Scope};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// struct Log;
    /// impl Reconciler for Log {
    ///     type Error = std::convert::Infallible;
    ///     async fn reconcile(&self, req: Request, _: CallInfo) -> Result<Action, Self::Error> {
    ///         println!("{req}");
    ///         Ok(Action::done())
    ///     }
    /// }
    ///
    /// # fn demo(mgr: Manager) -> Result<(), ManagerError> {
    /// let gvk = GroupVersionKind::gvk("example.com", "v1", "Gizmo");
    /// let gizmos = ApiResource::from_gvk_with_plural(&gvk, "gizmos");
    /// let builder = mgr.dynamic_controller(gizmos, Scope::Namespaced).owns::<ConfigMap>();
    /// let rules = builder.permissions(); // apply or check them before running
    /// assert!(rules.allows("example.com", "gizmos", "watch"));
    /// builder.complete(Log)?;
    /// # Ok(()) }
    /// ```
    pub fn dynamic_controller(
        &self,
        resource: ApiResource,
        scope: Scope,
    ) -> DynamicControllerBuilder {
        DynamicControllerBuilder {
            mgr: self.clone(),
            permissions: Permissions::new()
                .rule(
                    &resource.group,
                    &resource.plural,
                    PRIMARY_VERBS.iter().cloned(),
                )
                .rule(
                    &resource.group,
                    &format!("{}/status", resource.plural),
                    STATUS_VERBS.iter().cloned(),
                )
                .rule(
                    &resource.group,
                    &format!("{}/finalizers", resource.plural),
                    FINALIZERS_VERBS.iter().cloned(),
                )
                .events(),
            resource,
            scope,
            for_predicates: Vec::new(),
            event_filters: Vec::new(),
            sources: Vec::new(),
            settings: Settings::default(),
        }
    }
}

/// Builds a controller for a kind chosen at run time; see the
/// [module documentation](super::dynamic).
#[must_use]
pub struct DynamicControllerBuilder {
    mgr: Manager,
    resource: ApiResource,
    scope: Scope,
    for_predicates: Vec<Box<dyn Predicate<DynamicObject>>>,
    event_filters: Vec<Box<dyn Predicate<PartialObjectMeta>>>,
    sources: Vec<Box<dyn Source>>,
    settings: Settings,
    permissions: Permissions,
}

fn describe(resource: &ApiResource) -> String {
    format!("{} ({})", resource.kind, resource.api_version)
}

impl DynamicControllerBuilder {
    /// Names the controller (default: the kind in lower case).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.settings.name = Some(name.into());
        self
    }

    /// Filters the events of the reconciled kind alone (all predicates
    /// must pass).
    pub fn for_event_filter(mut self, predicate: impl Predicate<DynamicObject>) -> Self {
        self.for_predicates.push(Box::new(predicate));
        self
    }

    /// Filters the events of every watch of the controller, whenever they
    /// were added, on each object's metadata (as
    /// [`ControllerBuilder::with_event_filter`](super::ControllerBuilder::with_event_filter)).
    pub fn with_event_filter(mut self, predicate: impl Predicate<PartialObjectMeta>) -> Self {
        self.event_filters.push(Box::new(predicate));
        self
    }

    /// The handler enqueueing the controller owner of the reconciled kind.
    fn owner_handler(&self) -> EnqueueRequestForOwner {
        EnqueueRequestForOwner::for_kind(
            self.resource.group.clone(),
            self.resource.kind.clone(),
            self.scope == Scope::Namespaced,
            true,
        )
    }

    /// Reconciles the controller owner (of the reconciled kind) when an
    /// object of the kind `resource` changes.
    pub fn owns_dynamic(self, resource: ApiResource, scope: Scope) -> Self {
        let handler = self.owner_handler();
        let rules = (resource.group.clone(), resource.plural.clone());
        let mut this = self.watches_dynamic(resource, scope, handler);
        this.permissions = this
            .permissions
            .rule(&rules.0, &rules.1, OWNED_VERBS.iter().cloned());
        this
    }

    /// Reconciles the controller owner (of the reconciled kind) when a
    /// typed `C` changes.
    pub fn owns<C: Object>(self) -> Self {
        let handler = self.owner_handler();
        let mut this = self.watches::<C>(handler);
        this.permissions = this.permissions.owns::<C>();
        this
    }

    /// Reconciles whatever `handler` maps the events of the kind
    /// `resource` to.
    pub fn watches_dynamic(
        mut self,
        resource: ApiResource,
        scope: Scope,
        handler: impl EventHandler<DynamicObject>,
    ) -> Self {
        self.permissions = self.permissions.rule(
            &resource.group,
            &resource.plural,
            WATCHED_VERBS.iter().cloned(),
        );
        self.sources.push(Box::new(KindSource {
            informer: self.mgr.cache().dynamic_informer(&resource, scope),
            handler: Arc::new(handler),
            predicates: Arc::new(Vec::new()),
            filters: Arc::default(),
            description: describe(&resource),
            resource: resource.clone(),
        }));
        self
    }

    /// Reconciles whatever `handler` maps the events of a typed `W` to.
    pub fn watches<W: Object>(mut self, handler: impl EventHandler<W>) -> Self {
        self.permissions = self.permissions.watches::<W>();
        self.sources.push(Box::new(KindSource {
            informer: self.mgr.cache().informer::<W>(),
            handler: Arc::new(handler),
            predicates: Arc::new(Vec::new()),
            filters: Arc::default(),
            description: describe_kind::<W>(),
            resource: ApiResource::erase::<W>(&()),
        }));
        self
    }

    /// How many requests are reconciled at once (default 1).
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.settings.max_concurrent = n;
        self
    }

    /// The workqueue's rate limiter (default as
    /// [`ControllerBuilder::rate_limiter`](super::ControllerBuilder::rate_limiter)).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<Request> + 'static) -> Self {
        self.settings.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Drops a reconcile that runs longer than `timeout` and retries it
    /// with backoff.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.settings.reconcile_timeout = Some(timeout);
        self
    }

    /// The RBAC rules this wiring needs, from the `ApiResource`s and types
    /// used so far: the reconciled kind with its `status` and `finalizers`,
    /// the owned and watched kinds, and Events. Render them with
    /// [`Permissions::cluster_role`] or [`Permissions::role`], or check
    /// them with [`Permissions::allows`].
    pub fn permissions(&self) -> Permissions {
        self.permissions.clone()
    }

    /// Validates the settings and registers the controller with the
    /// manager; started when the manager runs (and leads), or at once if it
    /// already does.
    pub fn complete(self, reconciler: impl Reconciler) -> Result<Controller, ManagerError> {
        let primary: Box<dyn Source> = Box::new(KindSource {
            informer: self
                .mgr
                .cache()
                .dynamic_informer(&self.resource, self.scope.clone()),
            handler: Arc::new(EnqueueRequestForObject) as Arc<dyn EventHandler<DynamicObject>>,
            predicates: Arc::new(self.for_predicates),
            filters: Arc::default(),
            description: describe(&self.resource),
            resource: self.resource.clone(),
        });
        let mut sources = vec![primary];
        sources.extend(self.sources);
        let filters: EventFilters = Arc::new(self.event_filters);
        for source in &mut sources {
            source.set_event_filters(Arc::clone(&filters));
        }
        self.settings.register(
            &self.mgr,
            &self.resource.kind,
            |_| Arc::new(reconciler),
            sources,
        )
    }
}
