//! The HTTPS servers' TLS: a certificate resolver whose pair can be
//! swapped while connections are being accepted ([`CertResolver`]), and a
//! listener that completes rustls handshakes off the accept loop, so a
//! client that connects and never speaks cannot hold up the others, within
//! a handshake timeout and a cap on open connections
//! ([`super::ServerLimits`]).
//!
//! Part of [`crate::tls`]: the certificate sources
//! ([`super::certsecret`] for self-managed certificates kept in a Secret,
//! [`super::certdir`] for files mounted by cert-manager) put pairs in, every
//! new handshake reads the current one. A swap never drops a request: a
//! connection keeps the certificate it was made with, the next one gets the
//! new pair.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::limits::ServerLimits;

/// Handshaken connections waiting for the HTTP layer to take them.
const ACCEPT_BACKLOG: usize = 128;

/// Why a certificate pair could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The certificate PEM holds no certificate, or cannot be parsed.
    #[error("reading the certificate chain: {0}")]
    Certificate(String),
    /// The key PEM holds no private key, or cannot be parsed.
    #[error("reading the private key: {0}")]
    Key(String),
    /// rustls refused the key (an algorithm ring does not support).
    #[error("loading the private key: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A serving certificate and its key, swappable at any time; what the
/// rustls configuration of the webhook and secure metrics servers resolves every handshake with.
/// Clones share the pair.
///
/// ```
/// use controller_runtime::tls::{CertResolver, SelfSigned};
/// let pair = SelfSigned::generate("webhook-service", "system", std::time::SystemTime::now(),
///     std::time::Duration::from_secs(3600)).unwrap();
/// let resolver = CertResolver::new();
/// assert!(!resolver.is_loaded());
/// resolver.load_pem(pair.cert_pem().as_bytes(), pair.key_pem().as_bytes()).unwrap();
/// assert!(resolver.is_loaded());
/// ```
#[derive(Clone, Default)]
pub struct CertResolver {
    current: Arc<RwLock<Option<Arc<CertifiedKey>>>>,
}

impl std::fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertResolver")
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

impl CertResolver {
    /// A resolver with no pair yet: handshakes fail until one is loaded.
    pub fn new() -> Self {
        CertResolver::default()
    }

    /// Whether a pair is loaded.
    pub fn is_loaded(&self) -> bool {
        self.current.read().is_some()
    }

    /// Replaces the pair with the PEM chain `cert_pem` (leaf first) and the
    /// PEM key `key_pem` (PKCS#8, PKCS#1 or SEC1). On error the old pair
    /// stays.
    pub fn load_pem(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::Certificate(e.to_string()))?;
        if chain.is_empty() {
            return Err(TlsError::Certificate("no certificate in the PEM".into()));
        }
        let key =
            PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Key(e.to_string()))?;
        let provider = rustls::crypto::ring::default_provider();
        let signing = provider.key_provider.load_private_key(key)?;
        let certified = CertifiedKey::new(chain, signing);
        // A key that does not match the certificate fails every handshake:
        // refuse it here, where the error can be reported.
        certified.keys_match()?;
        *self.current.write() = Some(Arc::new(certified));
        Ok(())
    }

    /// The leaf certificate currently served, DER.
    pub fn current_leaf(&self) -> Option<CertificateDer<'static>> {
        self.current
            .read()
            .as_ref()
            .and_then(|c| c.cert.first().cloned())
    }

    /// A rustls server configuration resolving through this resolver,
    /// speaking HTTP/1.1, on the ring provider.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(self.clone()));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().clone()
    }
}

/// A listener serving HTTPS: TCP connections are accepted and their
/// handshakes run on their own tasks; [`axum::serve()`] takes finished ones.
/// The webhook server serves on it, and so does the manager's secure
/// metrics server (presenting the same, rotated, certificate).
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsConn, SocketAddr)>,
    local: SocketAddr,
    accept_loop: tokio::task::JoinHandle<()>,
}

/// A handshaken connection; it holds one of the listener's connection
/// slots until it is dropped.
pub struct TlsConn {
    tls: TlsStream<TcpStream>,
    _slot: OwnedSemaphorePermit,
}

impl AsyncRead for TlsConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tls.is_write_vectored()
    }
}

impl TlsListener {
    /// Serve TLS with `config` on `listener`, within the default
    /// [`ServerLimits`].
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<Self> {
        TlsListener::with_limits(listener, config, &ServerLimits::default())
    }

    /// Serve TLS with `config` on `listener`: at most
    /// `limits.max_connections` open at once (the next is accepted when
    /// one closes), each handshake within `limits.handshake_timeout`.
    pub(crate) fn with_limits(
        listener: TcpListener,
        config: Arc<rustls::ServerConfig>,
        limits: &ServerLimits,
    ) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(ACCEPT_BACKLOG);
        let acceptor = TlsAcceptor::from(config);
        let slots = Arc::new(Semaphore::new(limits.max_connections));
        let handshake_timeout = limits.handshake_timeout;
        let accept_loop = tokio::spawn(async move {
            loop {
                // The semaphore is never closed.
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (tcp, addr) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, as
                        // axum's own accept loop does.
                        tracing::warn!(error = %e, "accepting a webhook connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let conn = TlsConn { tls, _slot: slot };
                            // The server is gone when the receiver is.
                            let _ = tx.send((conn, addr)).await;
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

    /// The next handshaken connection.
    pub(crate) async fn next(&mut self) -> (TlsConn, SocketAddr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsConn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.next().await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}
