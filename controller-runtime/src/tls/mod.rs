//! HTTPS for the manager's servers: the TLS stack and the serving
//! certificates that the admission and conversion webhook server
//! ([`webhook`](crate::webhook), the `webhook` feature) and the secure
//! metrics endpoint ([`metrics::SecureMetrics`](crate::metrics::SecureMetrics))
//! both serve with, so it is built whatever the features.
//!
//! | piece | what it is |
//! |---|---|
//! | [`CertResolver`] | the serving certificate, swapped atomically on rotation or reload |
//! | [`ServerLimits`] | what one client is granted: handshake, header and body timeouts, a cap on open connections |
//! | [`SelfSigned`] | a CA and a serving certificate made without cert-manager |
//! | [`CertDir`] | a pair mounted from a directory (cert-manager), reloaded when the files change |
//! | [`SecretCerts`] | those kept in a Secret shared by the replicas, their CA bundle in every `caBundle`, renewed and the CA rotated before expiry |
//!
//! A building block (layer 1): it uses the client and nothing else of this
//! crate; the webhook server (layer 3) and the manager (layer 4) serve
//! with it.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use controller_runtime::tls::{CertResolver, SelfSigned};
//! let pair = SelfSigned::generate("metrics", "system", SystemTime::now(), Duration::from_secs(3600))?;
//! let resolver = CertResolver::new();
//! resolver.load_pem(pair.cert_pem().as_bytes(), pair.key_pem().as_bytes())?;
//! assert!(resolver.server_config().is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod cabundle;
mod cert_error;
mod certdir;
mod certsecret;
mod certwatch;
mod keeper;
mod limits;
mod listener;
mod selfsigned;
mod serve;

pub use cert_error::CertSecretError;
pub use certdir::{CertDir, CertDirError};
pub use certsecret::{
    CA_NOT_AFTER_ANNOTATION, CA_ROTATION_ANNOTATION, Clock, DEFAULT_CA_OVERLAP,
    NOT_AFTER_ANNOTATION, SecretCerts,
};
pub(crate) use keeper::CertKeeper;
pub use keeper::CertSourceError;
pub use limits::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, ServerLimits,
};
pub use listener::{CertResolver, TlsError};
/// The TLS listener the webhook and secure metrics servers accept on; not
/// part of the API (the benchmark's TLS echo floor serves on the same
/// stack with it).
#[doc(hidden)]
pub use listener::{TlsConn, TlsListener};
pub use selfsigned::{CA_VALIDITY, CertError, SelfSigned, service_dns_names};
pub(crate) use serve::serve as serve_limited;
