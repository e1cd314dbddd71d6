//! The manager's webhook server: configured on the builder
//! ([`ManagerBuilder::webhook_server`]), its port bound at build time,
//! handlers registered one line per kind ([`Manager::webhook`],
//! [`Manager::webhook_conversion`]), run on every replica (not only the
//! leader) after its certificates are ready, and part of `/readyz`.
//!
//! Layer 4 (manager): runs the [`crate::webhook`] server (layer 3) as it
//! runs its health and metrics servers. Built with the `webhook` feature.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube_client::core::Resource;
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{Manager, ManagerBuilder, ManagerError, Runnable};
use crate::error::BoxError;
use crate::tls::{CertKeeper, CertResolver};
use crate::webhook::{
    Conversion, Defaulter, Hub, Validator, WebhookError, WebhookMetrics, WebhookOptions,
    WebhookServer,
};

/// The server being assembled (handlers are added until the manager
/// runs, which takes it) and the keeper of its certificates.
pub(super) struct Pending {
    server: Mutex<Option<WebhookServer>>,
    keeper: CertKeeper,
}

impl ManagerBuilder {
    /// Serve admission and conversion webhooks as `options` says (port
    /// 9443, self-managed certificates or a certificate directory). Off by
    /// default.
    ///
    /// ```no_run
    /// # async fn demo(client: controller_runtime::kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use controller_runtime::manager::Manager;
    /// use controller_runtime::webhook::WebhookOptions;
    /// let mgr = Manager::builder(client)
    ///     .webhook_server(WebhookOptions::self_managed("system", "demo-webhook-service")
    ///         .validating_webhook("demo-validating-webhook-configuration"))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn webhook_server(mut self, options: WebhookOptions) -> Self {
        self.webhook = Some(options);
        self
    }
}

/// What `build` sets up for the webhook server: the pending server (its
/// readiness check registered), its address, and the runnable.
pub(super) struct Built {
    pub(super) pending: Arc<Pending>,
    pub(super) addr: SocketAddr,
    pub(super) runnable: Arc<dyn Runnable>,
    pub(super) readiness: Box<dyn Fn() -> Result<(), String> + Send + Sync>,
}

pub(super) fn build(
    options: WebhookOptions,
    client: kube_client::Client,
    registry: &prometheus::Registry,
) -> Result<Built, ManagerError> {
    let resolver = CertResolver::new();
    let parts = options.into_parts(client, resolver.clone());
    let (addr, keeper) = (parts.addr, parts.keeper);
    let listener = match parts.listener {
        Some(l) => l,
        None => std::net::TcpListener::bind(addr).map_err(|source| ManagerError::Bind {
            what: "webhook",
            addr,
            source,
        })?,
    };
    let addr = listener.local_addr().map_err(|source| ManagerError::Bind {
        what: "webhook",
        addr,
        source,
    })?;
    let metrics = WebhookMetrics::new(registry).map_err(crate::metrics::MetricsError::from)?;
    let server = WebhookServer::new(resolver)
        .listener(listener)
        .metrics(metrics)
        .limits(parts.limits)
        .declared(parts.declared);
    let check = server.readiness();
    let readiness = Box::new(move || crate::healthz::HealthCheck::check(&check));
    let pending = Arc::new(Pending {
        server: Mutex::new(Some(server)),
        keeper,
    });
    let runnable = Arc::new(WebhookRunnable {
        pending: pending.clone(),
    });
    Ok(Built {
        pending,
        addr,
        runnable,
        readiness,
    })
}

/// Registers a kind's webhooks; see [`Manager::webhook`]. Each call
/// registers at once, so the value may be dropped.
pub struct WebhookRegistration<'a, K> {
    mgr: &'a Manager,
    _kind: PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for WebhookRegistration<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookRegistration")
            .finish_non_exhaustive()
    }
}

impl<K> WebhookRegistration<'_, K>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// Serves `defaulter` for `K` at `/mutate-<group>-<version>-<kind>`.
    pub fn defaulter<D: Defaulter<K>>(self, defaulter: D) -> Result<Self, ManagerError> {
        self.mgr
            .with_webhook_server(|s| s.add_defaulter::<K, D>(defaulter))?;
        Ok(self)
    }

    /// Serves `validator` for `K` at `/validate-<group>-<version>-<kind>`.
    pub fn validator<V: Validator<K>>(self, validator: V) -> Result<Self, ManagerError> {
        self.mgr
            .with_webhook_server(|s| s.add_validator::<K, V>(validator))?;
        Ok(self)
    }
}

impl Manager {
    /// Registers webhooks for `K`, one line per kind:
    /// `mgr.webhook::<Foo>().defaulter(FooDefaults)?.validator(FooRules)?;`.
    /// The manager must have a webhook server
    /// ([`ManagerBuilder::webhook_server`]).
    pub fn webhook<K>(&self) -> WebhookRegistration<'_, K> {
        WebhookRegistration {
            mgr: self,
            _kind: PhantomData,
        }
    }

    /// Serves `conversion` at `/convert`.
    pub fn webhook_conversion<H: Hub>(
        &self,
        conversion: Conversion<H>,
    ) -> Result<(), ManagerError> {
        self.with_webhook_server(|s| s.add_conversion(conversion))
    }

    /// Renews the webhook serving certificate now, not when it is due:
    /// after a key may have leaked, or to see a rotation happen. With
    /// self-managed certificates ([`WebhookOptions::self_managed`]) a new
    /// pair signed by the same CA is written to the Secret and served at
    /// once; every other replica serves it within seconds (each watches
    /// the Secret). A CA rotation that is due advances instead. With
    /// certificates from a directory it is refused: whoever writes the
    /// directory renews them.
    ///
    /// Works before and while the manager runs; the renewal interval is
    /// [`WebhookOptions::check_interval`].
    ///
    /// ```no_run
    /// # async fn demo(mgr: controller_runtime::manager::Manager) -> Result<(), controller_runtime::manager::ManagerError> {
    /// mgr.renew_webhook_certificate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn renew_webhook_certificate(&self) -> Result<(), ManagerError> {
        let Some((pending, _)) = &self.inner.webhook else {
            return Err(ManagerError::NoWebhookServer);
        };
        let renewed = match &pending.keeper {
            CertKeeper::SelfManaged(certs) => {
                certs.renew().await.map(drop).map_err(WebhookError::Renew)
            }
            // Whoever writes the directory renews its pair.
            CertKeeper::Dir(_) => Err(WebhookError::RenewFromDirectory),
        };
        renewed.map_err(ManagerError::Webhook)
    }

    /// The address the webhook server listens on, if there is one.
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.inner.webhook.as_ref().map(|(_, addr)| *addr)
    }

    /// Refuses to start while a webhook the manifests declare (see
    /// [`crate::webhook::WebhookManifests::options`]) has no handler: the
    /// API server would send its reviews to a path answering 404.
    pub(super) fn check_declared_webhooks(&self) -> Result<(), ManagerError> {
        let Some((pending, _)) = &self.inner.webhook else {
            return Ok(());
        };
        let missing = pending
            .server
            .lock()
            .as_ref()
            .map(WebhookServer::missing_handlers)
            .unwrap_or_default();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(ManagerError::Webhook(WebhookError::MissingHandlers(
                missing,
            )))
        }
    }

    fn with_webhook_server(
        &self,
        add: impl FnOnce(&mut WebhookServer) -> Result<(), crate::webhook::WebhookError>,
    ) -> Result<(), ManagerError> {
        let Some((pending, _)) = &self.inner.webhook else {
            return Err(ManagerError::NoWebhookServer);
        };
        let mut slot = pending.server.lock();
        let Some(server) = slot.as_mut() else {
            return Err(ManagerError::WebhookServerRunning);
        };
        add(server).map_err(ManagerError::Webhook)
    }
}

/// Runs the webhook server on every replica: certificates first, then the
/// server, until the stop token; reviews in flight are finished.
struct WebhookRunnable {
    pending: Arc<Pending>,
}

impl Runnable for WebhookRunnable {
    fn name(&self) -> String {
        "webhook-server".into()
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move {
            let Some(server) = self.pending.server.lock().take() else {
                return Err("the webhook server was started twice".into());
            };
            self.pending.keeper.prepare().await?;
            let listening = server.listen().await?;
            tracing::info!(addr = %listening.local_addr(), "serving webhooks");
            let keeper = tokio::spawn(self.pending.keeper.clone().run(stop.clone()));
            let served = listening.serve(stop).await;
            keeper.abort();
            served.map_err(Into::into)
        })
    }
}
