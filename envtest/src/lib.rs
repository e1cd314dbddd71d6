//! An in-process Kubernetes API server for testing controllers without a
//! cluster, served over real HTTP on a random loopback port.
//!
//! It gets right what controllers depend on: one global revision and
//! `resourceVersion` semantics on reads, paginated lists from one snapshot,
//! label and field selectors, watches that resume exactly (or answer 410
//! Expired beyond a bounded history window), bookmarks, optimistic
//! concurrency, generation and status-subresource rules, finalizers,
//! namespaces, and CustomResourceDefinitions that become servable when
//! created. It refuses what a cluster refuses: built-in kinds are decoded
//! through their k8s-openapi types (a JSON type mismatch is 400 with the
//! field path), `fieldValidation` Strict/Warn/Ignore is honoured, metadata
//! syntax and immutable fields are checked, CRD schemas are defaulted and
//! enforced, and sizes (objects, annotations, JSON patches, URLs) and
//! request time are bounded. `kubectl explain` reads the real OpenAPI v3
//! schemas of built-in kinds and CRD versions, and `kubectl get` shows each
//! kind's columns, as on a cluster. Faults (dropped watches, compaction,
//! injected errors, latency, pause) are scoped to one server so tests can
//! run in parallel.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube_client::{Api, api::PostParams};
//!
//! let env = envtest::TestEnv::start().await?;
//! let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! let created = cms.create(&PostParams::default(), &cm).await?;
//! assert_eq!(created.metadata.generation, Some(1));
//! # Ok(()) }
//! ```

// Layers, each using only those below it (and the shared leaf modules
// `error`, `request`, `tls`, `kubeconfig`); tests/it/module_graph.rs checks it.
pub mod codec;
mod env;
mod http;
mod resources;
mod storage;

mod error;
mod kubeconfig;
mod request;
mod tls;

pub use env::{
    DEFAULT_BOOKMARK_INTERVAL, DEFAULT_HISTORY_WINDOW, DEFAULT_MAX_BODY_BYTES, DEFAULT_NAMESPACES,
    DEFAULT_REQUEST_TIMEOUT, KEEP_CRDS, NAMESPACE_PREFIX, RUN_LABEL, TEARDOWN_TIMEOUT, TestEnv,
    TestEnvBuilder, USE_EXISTING_CLUSTER, WEBHOOK_ADDR, cleanup_existing_cluster,
    skip_on_existing_cluster, skip_without_webhook_route, use_existing_cluster,
};
pub use error::{ApiError, Cause, Details, Error};
pub use http::faults::{FailureRule, Faults, RequestRecord, WatchLineFault};
pub use kubeconfig::{kubeconfig_yaml, kubeconfig_yaml_with_ca, kubeconfig_yaml_with_token};
pub use resources::selectors::{FieldSelector, LabelSelector, SelectorError};
pub use tls::TlsError;
