//! The webhook tests' HTTPS side: a client over tokio-rustls and hyper,
//! trusting one CA (or verifying as its caller says: the secure metrics
//! scraper), and a server started on a free loopback port with fresh
//! certificates and its own metrics registry.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use controller_runtime::tls::{CertResolver, SelfSigned};
use controller_runtime::webhook::{WebhookError, WebhookMetrics, WebhookServer};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

/// An HTTPS client trusting one CA; every request opens its own
/// connection, so a rotated certificate is seen at once.
#[derive(Clone)]
pub struct TlsClient {
    connector: TlsConnector,
    addr: SocketAddr,
}

impl TlsClient {
    pub fn new(addr: SocketAddr, ca_pem: &str) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(root_store(ca_pem))
            .with_no_client_auth();
        // Every connection a full handshake: the certificate served now is
        // the one verified (a resumed session would show the old one).
        config.resumption = rustls::client::Resumption::disabled();
        TlsClient::with_config(addr, config)
    }

    /// A client verifying the server as `config` says.
    pub fn with_config(addr: SocketAddr, config: rustls::ClientConfig) -> Self {
        TlsClient {
            connector: TlsConnector::from(Arc::new(config)),
            addr,
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A new connection, handshaken with the server as `localhost`.
    pub async fn connect(&self) -> Result<TlsStream<tokio::net::TcpStream>, String> {
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").unwrap();
        self.connector
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())
    }

    /// The leaf certificate the server presents now, DER.
    pub async fn peer_leaf(&self) -> Result<Vec<u8>, String> {
        let tls = self.connect().await?;
        let (_, conn) = tls.get_ref();
        conn.peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec())
            .ok_or_else(|| "no peer certificate".to_owned())
    }

    /// Sends `req` over HTTP/1.1 on a new connection; the status and the
    /// body.
    pub async fn send(&self, req: http::Request<Full<Bytes>>) -> Result<(u16, Bytes), String> {
        let tls = self.connect().await?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, body))
    }

    /// POSTs `body` to `path`; the status and the body.
    pub async fn post(
        &self,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<(u16, Bytes), String> {
        let req = http::Request::post(path)
            .header("host", "localhost")
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        self.send(req).await
    }

    /// POSTs a JSON review; the status and the parsed body (or the text).
    pub async fn review(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, bytes) = self
            .post(path, "application/json", serde_json::to_vec(body).unwrap())
            .await
            .unwrap();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }
}

/// A fresh CA and serving pair for `localhost`, loaded in a resolver.
pub fn local_certs() -> (SelfSigned, CertResolver) {
    let pair = SelfSigned::generate_for(
        &["localhost".into(), "127.0.0.1".into()],
        std::time::SystemTime::now(),
        Duration::from_secs(3600),
    )
    .unwrap();
    let resolver = CertResolver::new();
    resolver
        .load_pem(pair.cert_pem().as_bytes(), pair.key_pem().as_bytes())
        .unwrap();
    (pair, resolver)
}

/// A running server and what the tests need of it.
pub struct Running {
    pub client: TlsClient,
    pub metrics: WebhookMetrics,
    pub registry: prometheus::Registry,
    pub stop: CancellationToken,
    pub done: JoinHandle<Result<(), WebhookError>>,
}

/// Starts `server` on a free loopback port with fresh certificates.
pub async fn start(build: impl FnOnce(WebhookServer) -> WebhookServer) -> Running {
    let (pair, resolver) = local_certs();
    start_with(resolver, pair.ca_pem(), build).await
}

pub async fn start_with(
    resolver: CertResolver,
    ca_pem: &str,
    build: impl FnOnce(WebhookServer) -> WebhookServer,
) -> Running {
    let registry = prometheus::Registry::new();
    let metrics = WebhookMetrics::new(&registry).unwrap();
    let stop = CancellationToken::new();
    let (addr, done) = serve_loopback(resolver, &stop, |s| build(s.metrics(metrics.clone()))).await;
    Running {
        client: TlsClient::new(addr, ca_pem),
        metrics,
        registry,
        stop,
        done,
    }
}

/// A server serving `resolver`'s pair on a free loopback port, with the
/// handlers `build` adds, until `stop`: its address and its task.
pub async fn serve_loopback(
    resolver: CertResolver,
    stop: &CancellationToken,
    build: impl FnOnce(WebhookServer) -> WebhookServer,
) -> (SocketAddr, JoinHandle<Result<(), WebhookError>>) {
    let listener = std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = build(WebhookServer::new(resolver).listener(listener));
    (addr, tokio::spawn(server.serve(stop.clone())))
}

/// The certificates in `ca_pem`, as roots to trust.
pub fn root_store(ca_pem: &str) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    roots
}
