//! Admission and conversion webhooks served by the manager: typed
//! validators and defaulters, hub-and-spoke conversion, and the manifests
//! that declare them. Built with the `webhook` feature (a default one); the
//! TLS stack and certificates the server is served with are
//! [`crate::tls`], which the secure metrics endpoint shares.
//!
//! | piece | what it is |
//! |---|---|
//! | [`Validator`], [`Defaulter`], [`AdmissionContext`], [`Denial`] | typed admission for a kind `K` |
//! | [`Hub`], [`Convertible`], [`Conversion`] | conversion between a kind's versions through one hub version |
//! | [`WebhookServer`] | HTTPS on port 9443 at controller-runtime's paths, with metrics, a span per review and graceful shutdown |
//! | [`WebhookOptions`] | how a manager serves them: address, certificates self-managed or from a directory |
//! | [`WebhookDeclaration`], [`WebhookManifests`] | what `#[controller(webhooks(...))]` declares, and the configurations, Service, CRD conversion, options and RBAC built from it |
//!
//! This module sits in layer 3, right under the manager, which runs the
//! server as a runnable (as it runs its health and metrics servers); it
//! uses the client, healthz, a metrics registry and [`crate::tls`], never
//! the manager or the controller.
//!
//! ```
//! use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
//! use controller_runtime::webhook::{AdmissionContext, Denial, Validator, Warnings};
//!
//! struct SmallDeployments;
//!
//! impl Validator<Deployment> for SmallDeployments {
//!     async fn validate_create(&self, d: &Deployment, _: &AdmissionContext) -> Result<Warnings, Denial> {
//!         let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
//!         if replicas > 50 {
//!             return Err(Denial::new("too many replicas").field("spec.replicas", "at most 50"));
//!         }
//!         Ok(if replicas > 10 { vec!["more than 10 replicas".into()] } else { vec![] })
//!     }
//!     async fn validate_update(&self, _: &Deployment, new: &Deployment, ctx: &AdmissionContext) -> Result<Warnings, Denial> {
//!         self.validate_create(new, ctx).await
//!     }
//! }
//! ```

mod admission;
mod conversion;
mod declared;
mod manifests;
mod metrics;
mod options;
mod patch;
mod review;
mod server;

pub use admission::{AdmissionContext, Defaulter, Denial, Validator, Warnings};
pub use conversion::{Conversion, ConversionError, Convertible, Hub};
/// The admission operation (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`).
pub use kube_client::core::admission::Operation;
pub use manifests::{
    DEFAULT_SERVICE, DEFAULT_TIMEOUT_SECONDS, FailurePolicy, ManifestError, SERVICE_PORT,
    WebhookDeclaration, WebhookManifests,
};
pub use metrics::WebhookMetrics;
pub use options::WebhookOptions;
pub use server::{
    CONVERT_PATH, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT, WebhookError, WebhookServer, mutate_path,
    validate_path,
};
