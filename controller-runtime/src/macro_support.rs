//! What the derive macros' generated code names: every path goes through
//! `::controller_runtime::__private`, so users depend on this crate alone.
//! Not a public API; it may change in any release.
//!
//! Derive-support layer (the top): may import every module below.

/// Re-exports for generated code.
#[doc(hidden)]
pub mod __private {
    pub use ::informer_core;
    pub use ::k8s_openapi;
    pub use ::kube_core;
    pub use ::schemars;
    pub use ::serde;
    pub use ::serde_json;

    pub use crate::crd;

    use crate::object::Object;
    use crate::reconcile::{Cleanup, ObjectReconciler};

    /// Asserts that `R` reconciles `K` (generated code calls it, so a missing or
    /// mistyped `ObjectReconciler<K>` impl is reported on the derive).
    pub fn assert_reconciler<K: Object, R: IsReconcilerFor<K>>() {}

    /// Asserts that `R` has a cleanup step for `K` (generated when a finalizer
    /// is declared).
    pub fn assert_cleanup<K: Object, R: Cleanup<K>>() {}

    /// Implemented by every `ObjectReconciler<K>`; exists for its error message.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` derives `Controller` for `{K}` but does not implement `ObjectReconciler<{K}>`",
        label = "needs `impl ObjectReconciler<{K}> for {Self}`",
        note = "add `impl ObjectReconciler<{K}> for {Self} {{ type Error = ..; async fn reconcile(&self, obj: Arc<{K}>, ctx: &ObjectContext<{K}>) -> Result<Action, Self::Error> {{ .. }} }}`"
    )]
    pub trait IsReconcilerFor<K> {}

    impl<K: Object, R: ObjectReconciler<K>> IsReconcilerFor<K> for R {}
}
