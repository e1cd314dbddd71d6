//! What the derive macros' generated code names: every path goes through
//! `::controller_runtime::__private`, so users depend on this crate alone.
//! Not a public API; it may change in any release.

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
}
