//! The manager's secure metrics server against envtest over real HTTPS:
//! every scrape's bearer token is reviewed with a TokenReview and its user
//! with a SubjectAccessReview (`get /metrics`), as kubebuilder's scaffold
//! guards metrics. No token, a malformed header or an unknown token is 401,
//! a user without the metrics-reader ClusterRole 403, one bound to it 200;
//! answers are cached, so repeated scrapes cost no reviews; a manager
//! without the RBAC to ask answers 500.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use controller_runtime::manager::Manager;
use controller_runtime::metrics::SecureMetrics;
use controller_runtime::rbac::{Permissions, metrics_reader_cluster_role};
use envtest::TestEnv;
use http_body_util::Full;
use k8s_openapi::api::core::v1::Secret;
use kube_client::api::Api;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_util::sync::CancellationToken;

use crate::eventually;
use crate::fixture::create_namespace;
use crate::webhook_client::{TlsClient, root_store};

/// Accepts any server certificate: a scraper of the certificate the
/// manager makes in memory (kubebuilder's `insecureSkipVerify`).
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A scraper: GETs over HTTPS, a new connection each time.
#[derive(Clone)]
pub struct Scraper(pub TlsClient);

impl Scraper {
    /// Trusting the CA in `ca_pem`, or any certificate with `None`.
    pub fn new(addr: SocketAddr, ca_pem: Option<&str>) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let config = match ca_pem {
            Some(pem) => builder
                .with_root_certificates(root_store(pem))
                .with_no_client_auth(),
            None => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
                .with_no_client_auth(),
        };
        Scraper(TlsClient::with_config(addr, config))
    }

    /// GET `/metrics` with this `Authorization` header (if any): status, body.
    pub async fn get(&self, authorization: Option<&[u8]>) -> Result<(u16, String), String> {
        let mut req = http::Request::get("/metrics").header("host", "localhost");
        if let Some(value) = authorization {
            req = req.header(
                "authorization",
                http::HeaderValue::from_bytes(value).unwrap(),
            );
        }
        let (status, body) = self.0.send(req.body(Full::default()).unwrap()).await?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    pub async fn with_token(&self, token: &str) -> (u16, String) {
        self.get(Some(format!("Bearer {token}").as_bytes()))
            .await
            .unwrap()
    }

    /// The first answer, once the server serves HTTPS, to a GET with this
    /// bearer token (if any).
    pub async fn first(&self, token: Option<&str>) -> (u16, String) {
        let auth = token.map(|t| format!("Bearer {t}"));
        eventually(Duration::from_secs(10), "HTTPS served", || {
            let (s, auth) = (self.clone(), auth.clone());
            async move { s.get(auth.as_deref().map(str::as_bytes)).await.ok() }
        })
        .await
    }
}

/// Binds Prometheus' service account `monitoring/prometheus` to the
/// metrics-reader ClusterRole; a new token of it.
pub async fn reader_token(env: &TestEnv) -> String {
    env.client_with_cluster_role(
        "monitoring",
        "prometheus",
        &metrics_reader_cluster_role("metrics-reader"),
    )
    .await
    .unwrap();
    env.service_account_token("monitoring", "prometheus")
}

/// How many reviews of `plural` envtest has answered.
pub fn reviews(env: &TestEnv, plural: &str) -> usize {
    env.request_log()
        .iter()
        .filter(|r| r.path.ends_with(plural))
        .count()
}

/// A manager acting as service account `system/controller-manager` with
/// `perms`, serving secure metrics as `secure` says; running until the
/// token is cancelled.
pub async fn manager(
    env: &TestEnv,
    perms: Permissions,
    secure: SecureMetrics,
) -> (SocketAddr, CancellationToken) {
    let client = env
        .client_with_cluster_role(
            "system",
            "controller-manager",
            &perms.cluster_role("manager-role"),
        )
        .await
        .unwrap();
    let mgr = Manager::builder(client)
        .metrics_addr(SocketAddr::from(([127, 0, 0, 1], 0)))
        .metrics_secure(secure)
        .build()
        .await
        .unwrap();
    let addr = mgr.metrics_addr().unwrap();
    let stop = CancellationToken::new();
    let run = stop.clone();
    tokio::spawn(async move { mgr.run(run).await });
    (addr, stop)
}

#[tokio::test]
async fn scrapes_are_authenticated_and_authorized_by_the_api_server() {
    let env = TestEnv::start().await.unwrap();
    create_namespace(&env.client(), "system").await;
    let perms =
        Permissions::new()
            .secure_metrics()
            .rule("", "secrets", ["get", "create", "update"]);
    let secure = SecureMetrics::new()
        .self_managed("system", "metrics-service")
        .extra_name("localhost");
    let (addr, stop) = manager(&env, perms, secure).await;

    // The serving certificate is the manager's own, kept in a Secret.
    let secrets: Api<Secret> = Api::namespaced(env.client(), "system");
    let ca = eventually(Duration::from_secs(10), "the metrics Secret", || {
        let secrets = secrets.clone();
        async move {
            let secret = secrets.get_opt("metrics-service-cert").await.ok()??;
            let ca = secret.data?.get("ca.crt")?.0.clone();
            String::from_utf8(ca).ok()
        }
    })
    .await;
    let scraper = Scraper::new(addr, Some(&ca));

    // No token at all.
    let (status, body) = scraper.first(None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("no bearer token"), "{body}");
    // Malformed headers: a clear 401, and the server keeps serving.
    for header in [
        &b"Basic dXNlcjpwYXNz"[..],
        b"Bearer",
        b"Bearer a b",
        b"\xff\xfe",
    ] {
        let (status, body) = scraper.get(Some(header)).await.unwrap();
        assert_eq!(status, 401, "{header:?}: {body}");
        assert!(body.contains("not `Bearer <token>`"), "{body}");
    }
    // A token the API server does not know.
    let (status, body) = scraper.with_token("not-a-token").await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("invalid bearer token"), "{body}");

    // Prometheus' service account, not bound to the reader role yet.
    let unbound = env.service_account_token("monitoring", "prometheus");
    let (status, body) = scraper.with_token(&unbound).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("system:serviceaccount:monitoring:prometheus"),
        "{body}"
    );

    // Bound to the metrics-reader ClusterRole: allowed (a new token, as
    // the old one's 403 is cached for 10 s).
    let token = reader_token(&env).await;
    let (status, body) = scraper.with_token(&token).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("controller_runtime_metrics_requests_denied_total{code=\"401\"} 6"),
        "{body}"
    );
    assert!(
        body.contains("controller_runtime_metrics_requests_denied_total{code=\"403\"} 1"),
        "{body}"
    );

    // Scraping again within the cache's 10 s costs no review.
    let (tokens, accesses) = (
        reviews(&env, "tokenreviews"),
        reviews(&env, "subjectaccessreviews"),
    );
    assert_eq!((tokens, accesses), (3, 2));
    for _ in 0..5 {
        assert_eq!(scraper.with_token(&token).await.0, 200);
        assert_eq!(scraper.with_token(&unbound).await.0, 403);
    }
    assert_eq!(
        (
            reviews(&env, "tokenreviews"),
            reviews(&env, "subjectaccessreviews")
        ),
        (tokens, accesses)
    );
    stop.cancel();
}

#[tokio::test]
async fn a_manager_without_the_review_permissions_answers_500_and_a_made_certificate_serves() {
    let env = TestEnv::start().await.unwrap();
    create_namespace(&env.client(), "system").await;
    // Reviews allowed but the cache off: every scrape asks.
    let secure = SecureMetrics::new().auth_cache_ttl(Duration::ZERO);
    let (addr, stop) = manager(&env, Permissions::new().secure_metrics(), secure).await;
    // The certificate made in memory: the scraper skips verification.
    let scraper = Scraper::new(addr, None);
    let token = reader_token(&env).await;
    let (status, body) = scraper.first(Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let before = reviews(&env, "tokenreviews");
    assert_eq!(scraper.with_token(&token).await.0, 200);
    assert_eq!(reviews(&env, "tokenreviews"), before + 1, "no cache");
    stop.cancel();

    // Without `create` on the reviews the manager cannot ask: 500, said so.
    let (addr, stop) = manager(&env, Permissions::new(), SecureMetrics::new()).await;
    let scraper = Scraper::new(addr, None);
    let (status, body) = scraper.first(Some(&token)).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("TokenReview failed"), "{body}");
    assert!(body.contains("tokenreviews"), "{body}");
    stop.cancel();
}

#[tokio::test]
async fn a_pair_from_a_directory_is_served() {
    let dir = std::env::temp_dir().join(format!(
        "metrics-certs-{}-{}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let pair = controller_runtime::tls::SelfSigned::generate_for(
        &["localhost".into()],
        std::time::SystemTime::now(),
        Duration::from_secs(3600),
    )
    .unwrap();
    std::fs::write(dir.join("tls.crt"), pair.cert_pem()).unwrap();
    std::fs::write(dir.join("tls.key"), pair.key_pem()).unwrap();
    let env = TestEnv::start().await.unwrap();
    create_namespace(&env.client(), "system").await;
    let secure = SecureMetrics::new().cert_dir(&dir);
    let (addr, stop) = manager(&env, Permissions::new().secure_metrics(), secure).await;
    // Verified against the directory's CA.
    let scraper = Scraper::new(addr, Some(pair.ca_pem()));
    let (status, body) = scraper.first(None).await;
    assert_eq!(status, 401, "{body}");
    let token = reader_token(&env).await;
    assert_eq!(scraper.with_token(&token).await.0, 200);
    stop.cancel();
    std::fs::remove_dir_all(&dir).unwrap();
}
