//! The manager's HTTP servers (health probes and metrics): bound when the
//! manager is built, so their addresses are known before it runs (port 0
//! picks a free port), served until the manager stops.
//!
//! With [`SecureMetrics`] the metrics server speaks HTTPS on the TLS stack
//! it shares with the webhook server ([`crate::tls`]: [`TlsListener`], a
//! [`CertResolver`] swapped on renewal) and guards every request with a TokenReview and a
//! SubjectAccessReview ([`MetricsAuth`]); its certificate is made at start,
//! read from a directory, or kept in a Secret like the webhook's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;
use kube_client::Client;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ManagerError;
use crate::metrics::{Metrics, MetricsAuth, MetricsCerts, MetricsError, SecureMetrics};
use crate::tls::{
    CA_VALIDITY, CertDir, CertKeeper, CertResolver, SecretCerts, SelfSigned, ServerLimits,
    TlsListener, serve_limited,
};

/// How long to wait before preparing the certificates again after a
/// failure (the API server not reachable yet, say).
const PREPARE_RETRY: Duration = Duration::from_secs(5);

/// HTTPS and the review guard of a secure metrics server.
struct Secure {
    auth: Arc<MetricsAuth>,
    resolver: CertResolver,
    /// What keeps the pair current; `None` when it was made at build.
    keeper: Option<CertKeeper>,
    /// What one client is granted.
    limits: ServerLimits,
}

/// A bound, not yet serving, listener.
pub(crate) struct BoundServer {
    pub(crate) what: &'static str,
    pub(crate) addr: SocketAddr,
    listener: TcpListener,
    secure: Option<Secure>,
}

impl std::fmt::Debug for BoundServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundServer")
            .field("what", &self.what)
            .field("addr", &self.addr)
            .field("secure", &self.secure.is_some())
            .finish_non_exhaustive()
    }
}

impl BoundServer {
    /// Binds `addr` for the server called `what` (`health` or `metrics`).
    pub(crate) async fn bind(what: &'static str, addr: SocketAddr) -> Result<Self, ManagerError> {
        let bind_err = |source| ManagerError::Bind { what, addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        Ok(BoundServer {
            what,
            addr,
            listener,
            secure: None,
        })
    }

    /// Serve HTTPS to reviewed clients only, as `options` says, each client
    /// within `limits`; reviews go through `client`, refusals are counted
    /// in `metrics`.
    pub(crate) fn secure(
        mut self,
        options: &SecureMetrics,
        limits: ServerLimits,
        client: Client,
        metrics: &Metrics,
    ) -> Result<Self, ManagerError> {
        let auth = Arc::new(MetricsAuth::new(
            client.clone(),
            options,
            metrics.registry(),
        )?);
        let resolver = CertResolver::new();
        let keeper = match &options.certs {
            MetricsCerts::Generated => {
                let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
                names.extend(options.extra_names.iter().cloned());
                let pair = SelfSigned::generate_for(&names, SystemTime::now(), CA_VALIDITY)
                    .map_err(|e| MetricsError::Certificate(e.to_string()))?;
                resolver
                    .load_pem(pair.cert_pem().as_bytes(), pair.key_pem().as_bytes())
                    .map_err(|e| MetricsError::Certificate(e.to_string()))?;
                None
            }
            MetricsCerts::Dir(dir) => Some(CertKeeper::Dir(CertDir::new(dir, resolver.clone()))),
            MetricsCerts::SelfManaged { namespace, service } => {
                let certs = options.extra_names.iter().fold(
                    SecretCerts::new(client, namespace, service, resolver.clone()),
                    |certs, name| certs.extra_name(name),
                );
                Some(CertKeeper::SelfManaged(certs))
            }
        };
        self.secure = Some(Secure {
            auth,
            resolver,
            keeper,
            limits,
        });
        Ok(self)
    }

    /// Serves `router` until `stop` fires (then finishes open requests).
    pub(crate) fn serve(self, router: Router, stop: CancellationToken) -> JoinHandle<()> {
        let BoundServer {
            what,
            addr,
            listener,
            secure,
        } = self;
        tokio::spawn(async move {
            let served = match secure {
                None => {
                    tracing::info!(server = what, %addr, "serving");
                    axum::serve(listener, router)
                        .with_graceful_shutdown(stop.cancelled_owned())
                        .await
                }
                Some(secure) => {
                    let Some(listener) = secure_listener(what, listener, &secure, &stop).await
                    else {
                        return;
                    };
                    tracing::info!(server = what, %addr, "serving HTTPS to authorized clients");
                    serve_limited(listener, secure.auth.protect(router), secure.limits, stop).await;
                    Ok(())
                }
            };
            if let Err(error) = served {
                tracing::error!(server = what, %addr, %error, "server failed");
            }
        })
    }
}

/// The TLS listener once the first pair is loaded (retried until then, or
/// `None` when `stop` fires first), with the keeper running until `stop`.
async fn secure_listener(
    what: &'static str,
    listener: TcpListener,
    secure: &Secure,
    stop: &CancellationToken,
) -> Option<TlsListener> {
    if let Some(keeper) = &secure.keeper {
        loop {
            match keeper.prepare().await {
                Ok(()) => break,
                Err(error) => {
                    tracing::warn!(server = what, %error, "cannot load the serving certificate; retrying");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = tokio::time::sleep(PREPARE_RETRY) => {}
            }
        }
        tokio::spawn(keeper.clone().run(stop.clone()));
    }
    let config = match secure.resolver.server_config() {
        Ok(config) => config,
        Err(error) => {
            tracing::error!(server = what, %error, "cannot configure TLS");
            return None;
        }
    };
    match TlsListener::with_limits(listener, config, &secure.limits) {
        Ok(listener) => Some(listener),
        Err(error) => {
            tracing::error!(server = what, %error, "cannot serve TLS");
            None
        }
    }
}
