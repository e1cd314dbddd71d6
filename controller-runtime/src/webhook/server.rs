//! The webhook server: HTTPS (rustls on ring) on port 9443 by default,
//! routing admission reviews to typed validators and defaulters at
//! controller-runtime's paths and conversion reviews to `/convert`.
//!
//! Every review gets a tracing span (`webhook_review`) and is counted in
//! [`WebhookMetrics`]. Input it cannot read (malformed JSON, another
//! `apiVersion`/`kind` of review, a body over the cap, a wrong content type)
//! is a `400`/`413`/`415` with a message, a body slower than its timeout a
//! `408`; a handshake or headers slower than theirs close the connection,
//! and open connections are capped ([`ServerLimits`]). A handler that
//! panics is a denial (or a failed conversion) saying so, and the server
//! keeps serving.
//! [`WebhookServer::serve`] stops accepting when its token fires and returns
//! once the reviews in flight are answered.
//!
//! Part of the manager layer: the manager runs it as a runnable; it uses the
//! metrics registry and healthz, never the controller.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use kube_client::core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::admission::{
    AdmissionHandler, Defaulter, DefaultingHandler, ValidatingHandler, Validator,
};
use super::conversion::{Conversion, ConversionHandler, Hub};
use super::declared::Declared;
use super::metrics::WebhookMetrics;
use super::review::{Routes, route};
use crate::tls::{
    CertResolver, CertSecretError, ServerLimits, TlsError, TlsListener, serve_limited,
};

/// The port controller-runtime's webhook server listens on.
pub const DEFAULT_PORT: u16 = 9443;

/// The largest review body read: two objects at the API server's 3 MiB
/// limit (an update carries the old and the new) and the envelope.
pub const DEFAULT_MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// Why the webhook server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// Binding the port failed.
    #[error("binding the webhook server to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The TLS configuration could not be built.
    #[error("webhook TLS: {0}")]
    Tls(#[from] TlsError),
    /// Serving failed.
    #[error("serving webhooks: {0}")]
    Serve(std::io::Error),
    /// Two handlers for one path.
    #[error("a webhook is already registered at {0}")]
    Duplicate(String),
    /// Webhooks the manifests declare have no handler: the API server
    /// would send their reviews to a path answering 404. One line each,
    /// naming the path and the handler to register.
    #[error("{}", .0.join("; "))]
    MissingHandlers(Vec<String>),
    /// A forced renewal of the self-managed serving certificate failed.
    #[error("renewing the webhook certificate: {0}")]
    Renew(#[source] CertSecretError),
    /// A forced renewal was asked of certificates read from a directory:
    /// whoever writes the directory (cert-manager) renews them.
    #[error(
        "the webhook certificates come from a directory: renew them there (cert-manager renews its own)"
    )]
    RenewFromDirectory,
}

/// `group` with dots as dashes, as controller-runtime writes it in paths.
fn path_part<K: Resource<DynamicType = ()>>() -> String {
    format!(
        "{}-{}-{}",
        K::group(&()).replace('.', "-"),
        K::version(&()),
        K::kind(&()).to_lowercase()
    )
}

/// `/validate-<group>-<version>-<kind>` (dots of the group as dashes), the
/// path controller-runtime serves a kind's validator at.
///
/// ```
/// use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
/// assert_eq!(controller_runtime::webhook::validate_path::<Deployment>(), "/validate-apps-v1-deployment");
/// ```
pub fn validate_path<K: Resource<DynamicType = ()>>() -> String {
    format!("/validate-{}", path_part::<K>())
}

/// `/mutate-<group>-<version>-<kind>`: where a kind's defaulter is served.
///
/// ```
/// use controller_runtime::k8s_openapi::api::core::v1::Pod;
/// assert_eq!(controller_runtime::webhook::mutate_path::<Pod>(), "/mutate--v1-pod");
/// ```
pub fn mutate_path<K: Resource<DynamicType = ()>>() -> String {
    format!("/mutate-{}", path_part::<K>())
}

pub use super::review::CONVERT_PATH;

/// The webhook server, before it listens: where, with which certificate,
/// and the handlers.
///
/// ```no_run
/// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
/// use controller_runtime::tls::CertResolver;
/// use controller_runtime::webhook::{AdmissionContext, Denial, Validator, Warnings, WebhookServer};
/// # struct V;
/// # impl Validator<ConfigMap> for V {
/// #     async fn validate_create(&self, _: &ConfigMap, _: &AdmissionContext) -> Result<Warnings, Denial> { Ok(vec![]) }
/// #     async fn validate_update(&self, _: &ConfigMap, _: &ConfigMap, _: &AdmissionContext) -> Result<Warnings, Denial> { Ok(vec![]) }
/// # }
/// # async fn run(resolver: CertResolver, stop: tokio_util::sync::CancellationToken) -> Result<(), Box<dyn std::error::Error>> {
/// let server = WebhookServer::new(resolver).validator::<ConfigMap, _>(V)?;
/// server.serve(stop).await?;
/// # Ok(()) }
/// ```
#[must_use]
pub struct WebhookServer {
    addr: SocketAddr,
    resolver: CertResolver,
    max_body: usize,
    limits: ServerLimits,
    admission: HashMap<String, Arc<dyn AdmissionHandler>>,
    conversions: Vec<Arc<dyn ConversionHandler>>,
    metrics: Option<WebhookMetrics>,
    ready: Arc<AtomicBool>,
    bound: Option<std::net::TcpListener>,
    declared: Vec<Declared>,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut paths: Vec<&String> = self.admission.keys().collect();
        paths.sort();
        f.debug_struct("WebhookServer")
            .field("addr", &self.addr)
            .field("paths", &paths)
            .field("conversions", &self.conversions.len())
            .finish_non_exhaustive()
    }
}

impl WebhookServer {
    /// A server on `0.0.0.0:9443` presenting `resolver`'s certificate.
    pub fn new(resolver: CertResolver) -> Self {
        WebhookServer {
            addr: SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)),
            resolver,
            max_body: DEFAULT_MAX_BODY_BYTES,
            limits: ServerLimits::default(),
            admission: HashMap::new(),
            conversions: Vec::new(),
            metrics: None,
            ready: Arc::new(AtomicBool::new(false)),
            bound: None,
            declared: Vec::new(),
        }
    }

    /// The webhooks the manifests declare, checked by
    /// [`WebhookServer::undeclared`] (the manager sets them from its
    /// [`super::WebhookOptions`]).
    pub(crate) fn declared(mut self, declared: Vec<Declared>) -> Self {
        self.declared = declared;
        self
    }

    /// One line per declared webhook without a handler, naming its path
    /// and how to register one; empty when every one has a handler.
    pub(crate) fn missing_handlers(&self) -> Vec<String> {
        self.declared
            .iter()
            .filter_map(|d| match d {
                Declared::Admission { path, kind, handler } => {
                    (!self.admission.contains_key(path)).then(|| {
                        format!(
                            "{path} (the {handler} of {kind}) is declared but has no handler: register one with `mgr.webhook::<K>().{handler}(..)` before running the manager"
                        )
                    })
                }
                Declared::Conversion { group, kind, crd } => (!self
                    .conversions
                    .iter()
                    .any(|c| c.group_kind() == (group.clone(), kind.clone())))
                .then(|| {
                    format!(
                        "{CONVERT_PATH} for {group}/{kind} (the conversion of the CRD {crd}) is declared but has no handler: register one with `mgr.webhook_conversion(..)` before running the manager"
                    )
                }),
            })
            .collect()
    }

    /// Serves on `listener`, a socket bound already (by a manager at
    /// build time, or handed over by a test that needs the port first).
    pub fn listener(mut self, listener: std::net::TcpListener) -> Self {
        if let Ok(addr) = listener.local_addr() {
            self.addr = addr;
        }
        self.bound = Some(listener);
        self
    }

    /// Listens on `addr` instead (port 0: any free port).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Reads at most `bytes` of a review body (default
    /// [`DEFAULT_MAX_BODY_BYTES`]); a larger one is a `413`.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Grants each client `limits`: handshake, header and body timeouts,
    /// and a cap on open connections (default [`ServerLimits::default`]).
    pub fn limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Counts reviews in `metrics`.
    pub fn metrics(mut self, metrics: WebhookMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn insert(
        &mut self,
        path: String,
        handler: Arc<dyn AdmissionHandler>,
    ) -> Result<(), WebhookError> {
        if self.admission.contains_key(&path) {
            return Err(WebhookError::Duplicate(path));
        }
        self.admission.insert(path, handler);
        Ok(())
    }

    /// Serves `validator` for `K` at [`validate_path`]`::<K>()`.
    pub fn validator<K, V>(mut self, validator: V) -> Result<Self, WebhookError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        V: Validator<K>,
    {
        self.add_validator::<K, V>(validator)?;
        Ok(self)
    }

    /// [`WebhookServer::validator`] in place (the server is kept on an error).
    pub fn add_validator<K, V>(&mut self, validator: V) -> Result<(), WebhookError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        V: Validator<K>,
    {
        self.insert(
            validate_path::<K>(),
            Arc::new(ValidatingHandler::<K, V>::new(validator)),
        )
    }

    /// Serves `defaulter` for `K` at [`mutate_path`]`::<K>()`.
    pub fn defaulter<K, D>(mut self, defaulter: D) -> Result<Self, WebhookError>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
        D: Defaulter<K>,
    {
        self.add_defaulter::<K, D>(defaulter)?;
        Ok(self)
    }

    /// [`WebhookServer::defaulter`] in place (the server is kept on an error).
    pub fn add_defaulter<K, D>(&mut self, defaulter: D) -> Result<(), WebhookError>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
        D: Defaulter<K>,
    {
        self.insert(
            mutate_path::<K>(),
            Arc::new(DefaultingHandler::<K, D>::new(defaulter)),
        )
    }

    /// Serves `conversion` at [`CONVERT_PATH`] (one path for every kind:
    /// a review is routed by its objects' group and kind).
    pub fn conversion<H: Hub>(mut self, conversion: Conversion<H>) -> Result<Self, WebhookError> {
        self.add_conversion(conversion)?;
        Ok(self)
    }

    /// [`WebhookServer::conversion`] in place (the server is kept on an error).
    pub fn add_conversion<H: Hub>(
        &mut self,
        conversion: Conversion<H>,
    ) -> Result<(), WebhookError> {
        let key = super::conversion::ConversionHandler::group_kind(&conversion);
        if self.conversions.iter().any(|c| c.group_kind() == key) {
            return Err(WebhookError::Duplicate(format!(
                "{CONVERT_PATH} for {}/{}",
                key.0, key.1
            )));
        }
        self.conversions.push(Arc::new(conversion));
        Ok(())
    }

    /// The paths served (admission paths, then `/convert` if any
    /// conversion is registered).
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.admission.keys().cloned().collect();
        paths.sort();
        if !self.conversions.is_empty() {
            paths.push(CONVERT_PATH.into());
        }
        paths
    }

    /// A readiness check: healthy once the server listens with a
    /// certificate loaded, until it stops.
    pub fn readiness(
        &self,
    ) -> crate::healthz::CheckFn<impl Fn() -> Result<(), String> + Send + Sync + 'static> {
        let ready = self.ready.clone();
        let resolver = self.resolver.clone();
        crate::healthz::check_fn(move || {
            if !ready.load(Ordering::Acquire) {
                Err("the webhook server is not listening".into())
            } else if !resolver.is_loaded() {
                Err("the webhook server has no certificate".into())
            } else {
                Ok(())
            }
        })
    }

    /// Binds the port (unless [`WebhookServer::listener`] gave a bound
    /// socket) and serves until `stop` fires, then finishes the reviews in
    /// flight and returns. To know the port before serving (port 0), bind
    /// a socket first and hand it over with [`WebhookServer::listener`].
    pub async fn serve(self, stop: CancellationToken) -> Result<(), WebhookError> {
        self.listen().await?.serve(stop).await
    }

    /// Binds the port.
    pub(crate) async fn listen(self) -> Result<ListeningServer, WebhookError> {
        let config = self.resolver.server_config()?;
        let bind_err = |source| WebhookError::Bind {
            addr: self.addr,
            source,
        };
        let tcp = match self.bound {
            Some(std) => {
                std.set_nonblocking(true).map_err(bind_err)?;
                TcpListener::from_std(std).map_err(bind_err)?
            }
            None => TcpListener::bind(self.addr).await.map_err(bind_err)?,
        };
        let listener =
            TlsListener::with_limits(tcp, config, &self.limits).map_err(WebhookError::Serve)?;
        let local = axum::serve::Listener::local_addr(&listener).map_err(WebhookError::Serve)?;
        self.ready.store(true, Ordering::Release);
        let state = Arc::new(Routes {
            max_body: self.max_body,
            body_timeout: self.limits.body_timeout,
            admission: self.admission,
            conversions: self.conversions,
            metrics: self.metrics,
        });
        Ok(ListeningServer {
            listener,
            local,
            state,
            limits: self.limits,
            ready: self.ready,
        })
    }
}

/// A webhook server bound to its port; [`ListeningServer::serve`] answers.
pub(crate) struct ListeningServer {
    listener: TlsListener,
    local: SocketAddr,
    state: Arc<Routes>,
    limits: ServerLimits,
    ready: Arc<AtomicBool>,
}

impl std::fmt::Debug for ListeningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListeningServer")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl ListeningServer {
    /// The address bound.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until `stop` fires, then finishes the reviews in flight and
    /// returns.
    pub(crate) async fn serve(self, stop: CancellationToken) -> Result<(), WebhookError> {
        let app = Router::new().fallback(route).with_state(self.state);
        let ready = self.ready;
        serve_limited(self.listener, app, self.limits, stop).await;
        ready.store(false, Ordering::Release);
        Ok(())
    }
}
