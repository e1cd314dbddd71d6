//! Why self-managed webhook certificates could not be kept: the error the
//! Secret keeper ([`super::certsecret`]) and the caBundle writer
//! ([`super::cabundle`]) share, in its own module so neither imports the
//! other.

use kube_client::Error as KubeError;

use super::listener::TlsError;
use super::selfsigned::CertError;

/// Why the certificates could not be kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertSecretError {
    /// An API call failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client's error (the API's Status preserved).
        source: KubeError,
    },
    /// Making a certificate failed.
    #[error(transparent)]
    Generate(#[from] CertError),
    /// The stored pair could not be loaded.
    #[error("loading the certificate from Secret {secret}: {source}")]
    Load {
        /// `namespace/name`.
        secret: String,
        /// Why.
        source: TlsError,
    },
    /// Other replicas kept winning the race.
    #[error("Secret {0} kept changing under us")]
    Contended(String),
}

pub(super) fn api_err(action: impl Into<String>) -> impl FnOnce(KubeError) -> CertSecretError {
    let action = action.into();
    move |source| CertSecretError::Api { action, source }
}
