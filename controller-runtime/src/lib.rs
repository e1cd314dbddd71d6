//! controller-runtime for Rust: the loop that turns informer changes into
//! reconciles.
//!
//! Changes flow from informers through [`handler`]s and [`predicate`]s into a
//! rate-limited [`workqueue`], from which a [`controller`]'s workers call a
//! [`reconcile::Reconciler`]. A [`manager`] owns the client, the shared
//! informers, the controllers, [`leaderelection`], [`healthz`] and
//! [`metrics`].
//!
//! # One dependency
//!
//! A controller program depends on this crate alone (plus `tokio`, `serde`
//! and, for derives, `schemars`; `envtest` for tests). What the public API
//! names is re-exported: [`kube_client`] (with `kube_client::core`),
//! [`k8s_openapi`], [`informer_core`] (listers, label selectors, informers),
//! [`CancellationToken`], and the everyday names in [`prelude`].
//!
//! ## Picking the Kubernetes version
//!
//! `k8s-openapi` needs exactly one `v1_*` feature in the whole build, and
//! only the final program may pick it. This crate forwards its own `v1_33`
//! ... `v1_37` features to `k8s-openapi` and enables `v1_34` by default, so
//! a program that adds nothing gets 1.34 and never names `k8s-openapi`
//! itself (use [`k8s_openapi`] through this crate). To pick another version,
//! turn the defaults off and name one, with a TLS stack (the other default):
//!
//! ```toml
//! [dependencies]
//! controller-runtime = { version = "0.1", default-features = false, features = ["v1_35", "rustls-tls"] }
//! ```
//!
//! Every offered version compiles (CI checks each). Between versions
//! `k8s-openapi` turns some fields into `Option`s or out of them (a
//! Deployment's `spec` is no `Option` from 1.37): code meant for several
//! versions writes such a field with `.into()` and reads it with
//! `Option::from(&field)`. The version matrix and the changed fields are in
//! the book's "Kubernetes versions" page (`docs/kubernetes-versions.md`).
//!
//! ## Optional parts
//!
//! `sharding` (sharded controllers: the [`sharding`] module and the derive's
//! `sharding(...)`), `manifests` (YAML rendering: `manifests::to_yaml`) and
//! `webhook` (admission and conversion webhooks: the [`webhook`] module, the
//! manager's `webhook_server` and `Manager::webhook`, the derive's
//! `webhooks(...)`) are default features. A program that turns the defaults
//! off to pick a version gets none of them unless it names them, so a
//! controller that does not shard, render YAML or serve webhooks does not
//! compile them (nor `xxhash-rust`, `serde-saphyr` and `http-body-util`):
//!
//! ```toml
//! [dependencies]
//! controller-runtime = { version = "0.1", default-features = false, features = ["v1_35", "rustls-tls", "sharding", "manifests", "webhook"] }
//! ```
//!
//! A derive that declares `sharding` or `webhooks` without its feature
//! fails to compile with a message naming the feature. The TLS stack and
//! serving certificates ([`tls`]) are always built: the secure metrics
//! endpoint ([`metrics::SecureMetrics`]) serves with them, with or without
//! the webhook server.
//!
//! ## TLS and kubeconfig auth
//!
//! The default features include `rustls-tls` (rustls on ring): the client
//! reaches any API server over HTTPS, as every cluster serves it. Without
//! default features pick `rustls-tls` or `openssl-tls` (the system's
//! OpenSSL); with neither, `Client::try_default` fails on an `https://`
//! server with kube-client's "TLS required but no TLS stack selected".
//! Kubeconfig users with a token, a client certificate or an `exec` plugin
//! (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`) work with
//! the defaults; `oidc` (an `auth-provider: oidc` with token refresh) and
//! `gcp` (`auth-provider: gcp`) are opt-in features.
//!
//! `envtest` (a dev-dependency) has the same `v1_*` features with the same
//! default; list it without default features and it follows whatever
//! version this crate is built for:
//!
//! ```toml
//! [dev-dependencies]
//! envtest = { version = "0.1", default-features = false }
//! ```
//!
//! Do not also depend on `k8s-openapi` with a version feature: none or two
//! enabled versions fail the build (that is `k8s-openapi`'s own rule, checked
//! by its build script). `informer-core`, used through this crate, never
//! picks one on its own: this crate depends on it without default features.
//! A program may offer the choice to its own users by forwarding the same way
//! (`v1_35 = ["controller-runtime/v1_35"]`), as the workspace's
//! `framework-test` crate does.
//!
//! ```
//! use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
//! use controller_runtime::kube_client::core::Resource;
//! assert_eq!(ConfigMap::kind(&()), "ConfigMap");
//! ```

/// The informer machinery the cache is built on (informers, listers, label
/// selectors, keys).
pub use informer_core;
/// The Kubernetes API types (Deployment, ConfigMap, ...).
pub use k8s_openapi;
/// The client every API call goes through (`Api`, `Client`, parameters),
/// with `kube_client::core` for `Resource`, `ObjectMeta` and friends.
pub use kube_client;
/// The token that stops a manager ([`manager::Manager::run`]) or a
/// [`manager::Runnable`].
pub use tokio_util::sync::CancellationToken;

// One path per item. The vocabulary every layer speaks is named at the
// root (its modules are private); everything else at its module alone
// (`cache::Cache`, `manager::Manager`, `reconcile::Reconciler`, ...). The
// prelude re-exports the everyday names of both for a glob import, and is
// the one second path.
pub use action::Action;
pub use error::BoxError;
pub use request::{ClusterRequest, Request, RequestError};
pub use terminal::{Terminal, TerminalError, is_terminal};

// The modules in layers, each importing only those below it (see
// `docs/architecture.md`; `tests/it/module_graph.rs` checks it).
//
// 0. Vocabulary (private modules: their items are named at the root).
mod action;
mod error;
pub mod object;
mod request;
mod terminal;
// 1. Building blocks.
pub mod client;
pub mod conditions;
pub mod crd;
pub mod events;
pub mod finalizer;
pub mod handler;
pub mod healthz;
pub mod leaderelection;
#[cfg(feature = "manifests")]
pub mod manifests;
pub mod predicate;
pub mod rbac;
pub mod tls;
pub mod workqueue;
// 2. Cache and metrics registry.
pub mod cache;
pub mod metrics;
// 3. A cluster as a value; typed reconcile; the webhook server the
// manager runs.
pub mod cluster;
pub mod reconcile;
#[cfg(feature = "webhook")]
pub mod webhook;
// 4. Manager.
pub mod manager;
// 5. Controller.
pub mod controller;
// 6. Sharded controllers.
#[cfg(feature = "sharding")]
pub mod sharding;
// 7. Derive support.
pub mod prelude;

mod macro_support;
#[cfg(all(
    doctest,
    feature = "sharding",
    feature = "manifests",
    feature = "webhook"
))]
mod visibility;
#[doc(hidden)]
pub use macro_support::__private;

/// Hooks for this workspace's own tests and benchmarks, not an API (it may
/// change in any release): the shard ring, so that a test predicts which
/// replica owns an object without a running membership.
#[doc(hidden)]
#[cfg(feature = "sharding")]
pub mod __test_support {
    pub use crate::sharding::ring::Ring;
}

#[doc = include_str!("../docs/derive-custom-resource.md")]
pub use informer_macros::CustomResource;

#[doc = include_str!("../docs/attr-api-types.md")]
pub use informer_macros::api_types;

#[doc = include_str!("../docs/derive-controller.md")]
pub use informer_macros::Controller;
