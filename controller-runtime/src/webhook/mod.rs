//! Admission and conversion webhooks served by the manager: typed
//! validators and defaulters, hub-and-spoke conversion, and the
//! certificates they are served with.
//!
//! | piece | what it is |
//! |---|---|
//! | [`Validator`], [`Defaulter`], [`AdmissionContext`], [`Denial`] | typed admission for a kind `K` |
//! | [`Hub`], [`Convertible`], [`Conversion`] | conversion between a kind's versions through one hub version |
//! | [`WebhookServer`] | HTTPS on port 9443 at controller-runtime's paths, with metrics, a span per review and graceful shutdown |
//! | [`ServerLimits`] | what one client is granted: handshake, header and body timeouts, a cap on open connections |
//! | [`WebhookOptions`] | how a manager serves them: address, certificates self-managed or from a directory |
//! | [`CertResolver`] | the serving certificate, swapped atomically on rotation or reload |
//! | [`SelfSigned`] | a CA and a serving certificate made without cert-manager |
//! | [`CertDir`] | a pair mounted from a directory (cert-manager), reloaded when the files change |
//! | [`SecretCerts`] | those kept in a Secret shared by the replicas, their CA bundle in every `caBundle`, renewed and the CA rotated before expiry |
//! | [`WebhookDeclaration`], [`WebhookManifests`] | what `#[controller(webhooks(...))]` declares, and the configurations, Service, CRD conversion, options and RBAC built from it |
//!
//! This module sits in layer 3, right under the manager, which runs the
//! server as a runnable (as it runs its health and metrics servers); it
//! uses the client, healthz and a metrics registry, never the manager or
//! the controller.
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
mod cabundle;
mod cert_error;
mod certdir;
mod certsecret;
mod certwatch;
mod conversion;
mod declared;
mod limits;
mod manifests;
mod metrics;
mod options;
mod patch;
mod review;
mod selfsigned;
mod serve;
mod server;
mod tls;

pub use admission::{AdmissionContext, Defaulter, Denial, Validator, Warnings};
pub use cert_error::CertSecretError;
pub use certdir::{CertDir, CertDirError};
pub use certsecret::{
    CA_NOT_AFTER_ANNOTATION, CA_ROTATION_ANNOTATION, Clock, DEFAULT_CA_OVERLAP,
    NOT_AFTER_ANNOTATION, SecretCerts,
};
pub use conversion::{Conversion, ConversionError, Convertible, Hub};
/// The admission operation (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`).
pub use kube_client::core::admission::Operation;
pub use limits::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, ServerLimits,
};
pub use manifests::{
    DEFAULT_SERVICE, DEFAULT_TIMEOUT_SECONDS, FailurePolicy, ManifestError, SERVICE_PORT,
    WebhookDeclaration, WebhookManifests,
};
pub use metrics::WebhookMetrics;
pub(crate) use options::CertKeeper;
pub use options::{CertSourceError, WebhookOptions};
pub use selfsigned::{CA_VALIDITY, CertError, SelfSigned, service_dns_names};
pub(crate) use serve::serve as serve_limited;
pub use server::{
    CONVERT_PATH, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT, WebhookError, WebhookServer, mutate_path,
    validate_path,
};
pub use tls::{CertResolver, TlsError};
/// The TLS listener the webhook server accepts on; not part of the API
/// (the benchmark's TLS echo floor serves on the same stack with it).
#[doc(hidden)]
pub use tls::{TlsConn, TlsListener};
