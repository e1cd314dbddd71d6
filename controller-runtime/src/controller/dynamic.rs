//! Controllers for kinds chosen at run time (Go's controllers over
//! `unstructured.Unstructured`): the reconciled kind, and the kinds it owns
//! or watches, are [`ApiResource`]s found while the program runs (from
//! discovery, configuration, or a CRD installed after the manager started)
//! and their objects are [`DynamicObject`]s.
//!
//! [`Manager::dynamic_controller`] starts the one [`ControllerBuilder`]
//! for [`DynamicObject`]s, with the same settings and watches as a typed
//! controller's and [`owns_dynamic`](ControllerBuilder::owns_dynamic) and
//! [`watches_dynamic`](ControllerBuilder::watches_dynamic) for kinds known
//! at run time; [`complete`](ControllerBuilder::complete) takes a
//! request-form [`Reconciler`](crate::reconcile::Reconciler), which reads the object from
//! [`Cache::dynamic_informer`](crate::cache::Cache::dynamic_informer) (the
//! informers the controller watches, synced before the first reconcile).
//! A controller completed while the manager runs starts at once.
//! [`permissions`](ControllerBuilder::permissions) gives the RBAC
//! rules of the wiring, computed from the `ApiResource`s, to apply or check
//! at run time.
//!
//! Controller layer.

use std::sync::Arc;

use kube_client::core::discovery::Scope;
use kube_client::core::{ApiResource, DynamicObject, Resource};

use super::builder::{ControllerBuilder, describe};
use super::source::OwnedKind;
use crate::handler::EventHandler;
use crate::manager::Manager;
use crate::rbac::{OWNED_VERBS, WATCHED_VERBS};
use crate::request::Request;

/// The builder of a controller for a kind chosen at run time: the one
/// [`ControllerBuilder`], for [`DynamicObject`]s.
pub type DynamicControllerBuilder<T = Request> = ControllerBuilder<DynamicObject, T>;

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
        let namespaced = scope == Scope::Namespaced;
        let informer = resource.clone();
        ControllerBuilder::with_kind(
            self,
            resource,
            namespaced,
            Arc::new(move |cache| cache.dynamic_informer(&informer, scope.clone())),
        )
    }
}

impl<K: Resource + Clone + Send + Sync + 'static, T> ControllerBuilder<K, T> {
    /// Reconciles the controller owner (of the reconciled kind) when an
    /// object of the kind `resource` changes.
    pub fn owns_dynamic(self, resource: ApiResource, scope: Scope) -> Self {
        let handler = self.owner_handler();
        let rules = (resource.group.clone(), resource.plural.clone());
        let owned = OwnedKind {
            resource: resource.clone(),
            namespaced: scope == Scope::Namespaced,
        };
        self.watches_dynamic(resource, scope, handler)
            .add_owned(owned)
            .add_permissions(|p| p.rule(&rules.0, &rules.1, OWNED_VERBS.iter().cloned()))
    }

    /// Reconciles whatever `handler` maps the events of the kind
    /// `resource` to.
    pub fn watches_dynamic(
        self,
        resource: ApiResource,
        scope: Scope,
        handler: impl EventHandler<DynamicObject>,
    ) -> Self {
        let (group, plural) = (resource.group.clone(), resource.plural.clone());
        let informer = resource.clone();
        self.add_permissions(|p| p.rule(&group, &plural, WATCHED_VERBS.iter().cloned()))
            .watch(
                move |cache| cache.dynamic_informer(&informer, scope.clone()),
                handler,
                Vec::new(),
                describe(&resource),
                resource,
            )
    }
}
