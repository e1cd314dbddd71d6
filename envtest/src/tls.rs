//! HTTPS for a server started with `--tls` / [`crate::TestEnvBuilder::tls`]:
//! a throw-away certificate authority and a server certificate it signs,
//! both generated at start (rcgen), valid for `127.0.0.1`, `::1` and
//! `localhost`; and a listener that completes rustls handshakes off the
//! accept loop, so a client that connects and never speaks cannot hold up
//! the others. The CA certificate is what kubeconfigs and clients trust.
//!
//! Plain HTTP stays the default: TLS exists because client-go (kubectl,
//! every Go controller) never sends a bearer token over plain HTTP.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Names the server certificate is valid for.
pub const SERVER_NAMES: &[&str] = &["127.0.0.1", "::1", "localhost"];

/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for the HTTP layer to take them.
const ACCEPT_BACKLOG: usize = 64;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen refused to make a key or certificate.
    #[error("generating the TLS certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the generated certificate or key.
    #[error("configuring rustls with the generated certificate: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A CA and the server certificate it signed, generated together.
pub struct Certificates {
    /// The CA certificate, PEM (what a kubeconfig's
    /// `certificate-authority-data` holds, base64-encoded).
    pub ca_pem: String,
    /// The CA certificate, DER (what `kube_client::Config::root_cert` takes).
    pub ca_der: Vec<u8>,
    /// The server certificate, DER.
    pub server_der: CertificateDer<'static>,
    /// The server certificate's private key, PKCS#8 DER.
    server_key: PrivatePkcs8KeyDer<'static>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the private key.
        f.debug_struct("Certificates")
            .field("ca_pem", &self.ca_pem)
            .finish_non_exhaustive()
    }
}

impl Certificates {
    /// A fresh CA (`envtest-ca`) and a server certificate (`envtest`) for
    /// [`SERVER_NAMES`], both ECDSA P-256.
    pub fn generate() -> Result<Self, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "envtest-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let server_key = KeyPair::generate()?;
        let names: Vec<String> = SERVER_NAMES.iter().map(|n| n.to_string()).collect();
        let mut server = CertificateParams::new(names)?;
        server
            .distinguished_name
            .push(DnType::CommonName, "envtest");
        server.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.use_authority_key_identifier_extension = true;
        let server_cert = server.signed_by(&server_key, &issuer)?;
        Ok(Certificates {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            server_der: server_cert.der().clone(),
            server_key: PrivatePkcs8KeyDer::from(server_key.serialize_der()),
        })
    }

    /// A rustls server configuration presenting the server certificate
    /// (chained to the CA), speaking HTTP/1.1, on the ring provider.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = vec![
            self.server_der.clone(),
            CertificateDer::from(self.ca_der.clone()),
        ];
        let key = PrivateKeyDer::Pkcs8(self.server_key.clone_key());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Make ring rustls' process-wide provider unless one is installed already,
/// so that kube-client (which asks rustls for the default provider) works
/// even when another crate in the build also enables aws-lc.
pub fn install_default_provider() {
    // Err only means a provider is installed already, which is just as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A listener serving HTTPS: TCP connections are accepted and their
/// handshakes run on their own tasks; [`axum::serve`] takes finished ones.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accept_loop: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl TlsListener {
    /// Serve TLS with `config` on `listener`.
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(ACCEPT_BACKLOG);
        let acceptor = TlsAcceptor::from(config);
        let accept_loop = tokio::spawn(async move {
            loop {
                let (tcp, addr) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, as
                        // axum's own accept loop does.
                        tracing::warn!(error = %e, "accepting a TLS connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            // The server is gone when the receiver is.
                            let _ = tx.send((tls, addr)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%addr, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            ready,
            local,
            accept_loop,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop never ends on its own; it is only aborted
            // when this listener is dropped, so this point is unreachable
            // in practice. Wait forever rather than spin.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// `certificate-authority-data`: the CA PEM, base64-encoded.
pub fn authority_data(ca_pem: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(ca_pem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{ServerName, UnixTime};

    fn verify(certs: &Certificates, roots: &[&[u8]], name: &str) -> Result<(), rustls::Error> {
        let mut store = rustls::RootCertStore::empty();
        for r in roots {
            store.add(CertificateDer::from(r.to_vec()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
                .build()
                .map_err(|e| rustls::Error::General(e.to_string()))?;
        let name = ServerName::try_from(name.to_string())
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        use rustls::client::danger::ServerCertVerifier;
        verifier
            .verify_server_cert(
                &certs.server_der,
                &[CertificateDer::from(certs.ca_der.clone())],
                &name,
                &[],
                UnixTime::now(),
            )
            .map(drop)
    }

    #[test]
    fn the_server_certificate_chains_to_the_ca_for_every_loopback_name() {
        let certs = Certificates::generate().unwrap();
        for name in SERVER_NAMES {
            verify(&certs, &[&certs.ca_der], name).unwrap();
        }
        assert!(verify(&certs, &[&certs.ca_der], "example.com").is_err());
        assert!(verify(&certs, &[&certs.ca_der], "10.0.0.1").is_err());
    }

    #[test]
    fn another_ca_does_not_verify_it() {
        let ours = Certificates::generate().unwrap();
        let theirs = Certificates::generate().unwrap();
        assert_ne!(ours.ca_der, theirs.ca_der, "every start makes a new CA");
        assert!(verify(&ours, &[&theirs.ca_der], "127.0.0.1").is_err());
        // The CA alone is not a server certificate.
        assert!(verify(&ours, &[&ours.server_der], "127.0.0.1").is_err());
    }

    #[test]
    fn pem_and_kubeconfig_data_carry_the_ca() {
        use base64::Engine;
        let certs = Certificates::generate().unwrap();
        assert!(certs.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let data = authority_data(&certs.ca_pem);
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        assert_eq!(decoded, certs.ca_pem.as_bytes());
        assert!(!format!("{certs:?}").contains("PRIVATE"));
        certs.server_config().unwrap();
    }
}
