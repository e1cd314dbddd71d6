//! How `/metrics` is served securely: over HTTPS, every request
//! authenticated by a TokenReview and authorized by a SubjectAccessReview
//! (see [`super::auth`]). [`SecureMetrics`] only describes it; the manager
//! serves it on the TLS stack it shares with its webhook server
//! (`crate::tls`, built with or without the `webhook` feature).

use std::path::PathBuf;
use std::time::Duration;

/// How long a review's answer is reused by default.
pub const DEFAULT_AUTH_CACHE_TTL: Duration = Duration::from_secs(10);

/// How many answers are kept by default (distinct tokens, methods, paths).
pub const DEFAULT_AUTH_CACHE_CAPACITY: usize = 1024;

/// How long a TokenReview or SubjectAccessReview may take by default
/// before the request is answered `500`.
pub const DEFAULT_REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest bearer token sent for review by default; a longer one is
/// `401` at once (service-account tokens are about 1 KiB, OIDC tokens a
/// few KiB).
pub const DEFAULT_MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Where the serving certificate of the secure metrics server comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MetricsCerts {
    /// Made in memory at start for `localhost`, `127.0.0.1` and the extra
    /// names (controller-runtime's default without a certificate directory).
    Generated,
    /// `tls.crt` and `tls.key` in a directory, reloaded when they change.
    Dir(PathBuf),
    /// Made and renewed by the manager in the Secret `<service>-cert` of
    /// `namespace` ([`SecretCerts`](crate::tls::SecretCerts)), as the
    /// webhook server's self-managed certificates.
    SelfManaged {
        /// The Secret's namespace.
        namespace: String,
        /// The metrics Service.
        service: String,
    },
}

/// Serve `/metrics` over HTTPS to authenticated, authorized clients only,
/// as kubebuilder's scaffold does with controller-runtime's
/// `filters.WithAuthenticationAndAuthorization`. Given to
/// `ManagerBuilder::metrics_secure`; the address is still
/// `ManagerBuilder::metrics_addr`.
///
/// Each request's bearer token is reviewed with a TokenReview
/// (`authentication.k8s.io/v1`): no token, a malformed `Authorization`
/// header or a token the API server does not accept get `401`. The user it
/// names is then reviewed with a SubjectAccessReview
/// (`authorization.k8s.io/v1`, the request's verb on the non-resource URL
/// of its path, e.g. `get /metrics`): not allowed is `403`. An answer is
/// reused for [`DEFAULT_AUTH_CACHE_TTL`] (at most
/// [`DEFAULT_AUTH_CACHE_CAPACITY`] tokens), so a scrape every few seconds
/// costs two API calls every ten seconds, not two per scrape. A review that
/// fails (the API server unreachable, the manager lacking RBAC) or takes
/// longer than [`DEFAULT_REVIEW_TIMEOUT`] is `500` and not cached. A token
/// longer than [`DEFAULT_MAX_TOKEN_BYTES`] is `401` without a review. Each
/// client is granted the webhook server's limits (handshake and header
/// timeouts, a cap on open connections; set them with
/// `ManagerBuilder::metrics_server_limits`).
///
/// The manager needs `create` on both reviews
/// ([`Permissions::secure_metrics`](crate::rbac::Permissions::secure_metrics));
/// a scraper needs `get` on `/metrics`
/// ([`metrics_reader_cluster_role`](crate::rbac::metrics_reader_cluster_role)).
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::metrics::SecureMetrics;
/// let secure = SecureMetrics::new()
///     .cert_dir("/tmp/k8s-metrics-server/metrics-certs")
///     .auth_cache_ttl(Duration::from_secs(30));
/// # let _ = secure;
/// ```
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureMetrics {
    pub(crate) certs: MetricsCerts,
    pub(crate) extra_names: Vec<String>,
    pub(crate) cache_ttl: Duration,
    pub(crate) cache_capacity: usize,
    pub(crate) review_timeout: Duration,
    pub(crate) max_token_bytes: usize,
}

impl Default for SecureMetrics {
    fn default() -> Self {
        SecureMetrics::new()
    }
}

impl SecureMetrics {
    /// HTTPS with a certificate made in memory at start for `localhost`
    /// and `127.0.0.1` (scrapers then skip verification, as kubebuilder's
    /// ServiceMonitor does without cert-manager); reviews cached 10 s.
    pub fn new() -> Self {
        SecureMetrics {
            certs: MetricsCerts::Generated,
            extra_names: Vec::new(),
            cache_ttl: DEFAULT_AUTH_CACHE_TTL,
            cache_capacity: DEFAULT_AUTH_CACHE_CAPACITY,
            review_timeout: DEFAULT_REVIEW_TIMEOUT,
            max_token_bytes: DEFAULT_MAX_TOKEN_BYTES,
        }
    }

    /// Serve the pair in `dir` (`tls.crt`, `tls.key`, as cert-manager
    /// mounts it), reloaded when the files change (polled every 10 s).
    pub fn cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.certs = MetricsCerts::Dir(dir.into());
        self
    }

    /// Serve a pair the manager makes for the Service `service` in
    /// `namespace` and keeps in the Secret `<service>-cert`, renewed and
    /// its CA rotated as the webhook server's self-managed certificates
    /// (the manager then needs `get`, `update` and `watch` on that Secret,
    /// `create` on Secrets in `namespace`: the same rules as the webhook
    /// server's certificates, `WebhookManifests::permissions`).
    pub fn self_managed(
        mut self,
        namespace: impl Into<String>,
        service: impl Into<String>,
    ) -> Self {
        self.certs = MetricsCerts::SelfManaged {
            namespace: namespace.into(),
            service: service.into(),
        };
        self
    }

    /// The made certificate is also valid for `name` (a DNS name or an IP
    /// address); no effect with [`SecureMetrics::cert_dir`].
    pub fn extra_name(mut self, name: impl Into<String>) -> Self {
        self.extra_names.push(name.into());
        self
    }

    /// How long a review's answer is reused (allowed, denied or
    /// unauthenticated alike); zero asks the API server on every request.
    pub fn auth_cache_ttl(mut self, ttl: Duration) -> Self {
        self.cache_ttl = ttl;
        self
    }

    /// How many answers are kept; beyond it the oldest is dropped.
    pub fn auth_cache_capacity(mut self, entries: usize) -> Self {
        self.cache_capacity = entries;
        self
    }

    /// How long a review may take before the request is answered `500`
    /// (not cached).
    pub fn review_timeout(mut self, timeout: Duration) -> Self {
        self.review_timeout = timeout;
        self
    }

    /// The longest bearer token sent for review; a longer one is `401`.
    pub fn max_token_bytes(mut self, bytes: usize) -> Self {
        self.max_token_bytes = bytes;
        self
    }
}
