//! [`Cleanup`]: the step a reconciler with a finalizer runs before the
//! finalizer is removed, and what `#[derive(Controller)]` builds on.
//!
//! The derive reads a reconciler's wiring from `#[controller(...)]` and
//! generates its controller registration (`setup`), its RBAC (`rbac()`, see
//! [`crate::rbac`]) and, when a `finalizer` is declared, the finalizer flow:
//! on a live object the finalizer is added and
//! [`ObjectReconciler::reconcile`] runs; once the object is being deleted
//! [`Cleanup::cleanup`] runs and the finalizer is removed when it succeeds
//! (conflict-safe, through [`crate::finalizer`]).
//!
//! Layer 3 (typed reconcile).
//!
//! ```no_run
//! use controller_runtime::prelude::*;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! #[derive(controller_runtime::Controller)]
//! #[controller(for = ConfigMap, owns(Deployment), finalizer = "example.com/cleanup")]
//! struct Web;
//!
//! impl ObjectReconciler<ConfigMap> for Web {
//!     type Error = kube_client::Error;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
//!         Ok(Action::done())
//!     }
//! }
//!
//! impl Cleanup<ConfigMap> for Web {
//!     async fn cleanup(&self, cm: Arc<ConfigMap>, ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn demo(mgr: Manager) -> Result<(), ManagerError> {
//! Web.setup(&mgr)?;
//! assert_eq!(Web::FINALIZER, Some("example.com/cleanup"));
//! let role = Web::rbac();
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;

use super::{ObjectContext, ObjectReconciler};
use crate::action::Action;
use crate::object::Object;

/// The cleanup step of a reconciler that declares a `finalizer`: runs once
/// the object is being deleted, before the finalizer is removed. It must be
/// idempotent (a failed removal runs it again).
#[diagnostic::on_unimplemented(
    message = "`{Self}` declares a `finalizer` but does not implement `Cleanup<{K}>`",
    label = "this finalizer needs a cleanup step",
    note = "add `impl Cleanup<{K}> for {Self} {{ async fn cleanup(&self, obj: Arc<{K}>, ctx: &ObjectContext<{K}>) -> Result<Action, Self::Error> {{ .. }} }}`"
)]
pub trait Cleanup<K: Object>: ObjectReconciler<K> {
    /// Removes what `obj` caused outside the cluster's garbage collection.
    fn cleanup(
        &self,
        obj: Arc<K>,
        ctx: &ObjectContext<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}
