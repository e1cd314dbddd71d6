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

    /// Generated code of a derive that declares `sharding(...)` calls it:
    /// nothing with the `sharding` feature, a compile error naming the
    /// feature without it.
    pub use crate::__require_sharding as require_sharding;

    /// Generated code of a derive that declares `webhooks(...)` calls it:
    /// nothing with the `webhook` feature, a compile error naming the
    /// feature without it.
    pub use crate::__require_webhook as require_webhook;

    use serde_json::Value;

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

    /// The index values at `path` (JSON field names) inside `value`: strings as
    /// they are, numbers and booleans as text, every element of the arrays met on
    /// the way; nothing for a missing field, `null` or an object. What
    /// `#[index(path = "...")]` indexes by.
    pub fn index_values(value: &Value, path: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        collect_index_values(value, path, &mut out);
        out
    }

    fn collect_index_values(value: &Value, path: &[&str], out: &mut Vec<String>) {
        match (value, path.split_first()) {
            (Value::Array(items), _) => {
                for item in items {
                    collect_index_values(item, path, out);
                }
            }
            (Value::Object(fields), Some((head, rest))) => {
                if let Some(v) = fields.get(*head) {
                    collect_index_values(v, rest, out);
                }
            }
            (Value::String(s), None) => out.push(s.clone()),
            (Value::Number(n), None) => out.push(n.to_string()),
            (Value::Bool(b), None) => out.push(b.to_string()),
            _ => {}
        }
    }

    /// The status of a kind declared without one: an empty object that accepts
    /// (and drops) whatever the server holds.
    #[derive(
        Debug,
        Clone,
        Copy,
        Default,
        PartialEq,
        Eq,
        serde::Serialize,
        serde::Deserialize,
        schemars::JsonSchema,
    )]
    pub struct NoStatus {}
}

/// See `__private::require_sharding`.
#[cfg(feature = "sharding")]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_sharding {
    () => {};
}

/// See `__private::require_sharding`.
#[cfg(not(feature = "sharding"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_sharding {
    () => {
        ::core::compile_error!(
            "`sharding` in `#[controller(...)]` needs controller-runtime's `sharding` feature: \
             add it to the dependency's `features`"
        );
    };
}

/// See `__private::require_webhook`.
#[cfg(feature = "webhook")]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_webhook {
    () => {};
}

/// See `__private::require_webhook`.
#[cfg(not(feature = "webhook"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_webhook {
    () => {
        ::core::compile_error!(
            "`webhooks` in `#[controller(...)]` needs controller-runtime's `webhook` feature: \
             add it to the dependency's `features`"
        );
    };
}

#[cfg(test)]
mod tests;
