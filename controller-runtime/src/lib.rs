//! controller-runtime for Rust: the loop that turns informer changes into
//! reconciles.
//!
//! Changes flow from informers through [`handler`]s and [`predicate`]s into a
//! rate-limited [`workqueue`], from which a [`controller`]'s workers call a
//! [`reconcile::Reconciler`]. A [`manager`] owns the client, the shared
//! informers, the controllers, [`leaderelection`], [`healthz`] and
//! [`metrics`].

pub mod client;
pub mod controller;
pub mod crd;
pub mod events;
pub mod finalizer;
pub mod handler;
pub mod healthz;
pub mod leaderelection;
pub mod manager;
pub mod metrics;
pub mod predicate;
pub mod reconcile;
pub mod workqueue;

mod macro_support;
#[doc(hidden)]
pub use macro_support::__private;

/// Derives a custom resource from its spec struct: see [`crd`] and `docs/macros.md`.
pub use informer_macros::CustomResource;
