//! What keeps a server's certificate current, whichever its source: a
//! [`SecretCerts`] (self-managed, in a Secret) or a [`CertDir`] (files
//! mounted by cert-manager). The webhook server and the secure metrics
//! server each run one beside their listener.

use tokio_util::sync::CancellationToken;

use super::cert_error::CertSecretError;
use super::certdir::{CertDir, CertDirError};
use super::certsecret::SecretCerts;

/// Why the certificates could not be prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertSourceError {
    /// Self-managed certificates failed.
    #[error(transparent)]
    SelfManaged(#[from] CertSecretError),
    /// The certificate directory failed.
    #[error(transparent)]
    Dir(#[from] CertDirError),
}

/// What keeps the serving certificate current: a [`SecretCerts`] or a
/// [`CertDir`].
// One per server, made once: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub(crate) enum CertKeeper {
    /// Self-managed, in a Secret.
    SelfManaged(SecretCerts),
    /// From a directory.
    Dir(CertDir),
}

impl CertKeeper {
    /// Loads the first pair (and, self-managed, writes the `caBundle`s).
    pub(crate) async fn prepare(&self) -> Result<(), CertSourceError> {
        match self {
            CertKeeper::SelfManaged(s) => s.ensure().await.map(drop).map_err(Into::into),
            CertKeeper::Dir(d) => d.load().map_err(Into::into),
        }
    }

    /// Keeps the pair current until `stop` fires.
    pub(crate) async fn run(self, stop: CancellationToken) {
        match self {
            CertKeeper::SelfManaged(s) => s.run(stop).await,
            CertKeeper::Dir(d) => d.run(stop).await,
        }
    }
}
