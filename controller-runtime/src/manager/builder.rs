//! Building a [`Manager`]: addresses, leader election, timeouts, and the
//! health checks every manager starts with.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use informer_core::factory::SharedInformerFactory;
use kube_client::Client;
use parking_lot::Mutex;

use super::event_writer::{EventWriterRunnable, default_recorder_config};
use super::provider::ProviderRunnable;
use super::server::BoundServer;
use super::{Inner, Manager, ManagerError, Runnable};
use crate::cache::{Cache, CacheScope};
use crate::cluster::{Cluster, ClusterOptions, DynProvider, EngageBackoff, Fleet, Provider};
use crate::events::RecorderConfig;
use crate::healthz::{Checks, HealthCheck, Ping, check_fn};
use crate::leaderelection::{LeaderElectionConfig, LeaderElector};
use crate::metrics::{Metrics, SecureMetrics};
use crate::object::Object;
use informer_core::factory::InformerOptions;

/// Builds a [`Manager`].
#[must_use]
pub struct ManagerBuilder {
    pub(super) client: Client,
    pub(super) health_addr: Option<SocketAddr>,
    pub(super) metrics_addr: Option<SocketAddr>,
    pub(super) metrics_secure: Option<SecureMetrics>,
    pub(super) metrics_limits: crate::tls::ServerLimits,
    pub(super) leader_election: Option<LeaderElectionConfig>,
    pub(super) graceful_shutdown_timeout: Duration,
    pub(super) cache_sync_timeout: Duration,
    pub(super) resync: Duration,
    pub(super) registry: Option<prometheus::Registry>,
    pub(super) events: Option<RecorderConfig>,
    pub(super) keep_managed_fields: bool,
    #[cfg(feature = "webhook")]
    pub(super) webhook: Option<crate::webhook::WebhookOptions>,
    pub(super) cache_scope: CacheScope,
    pub(super) streaming_list: bool,
    pub(super) providers: Vec<Arc<dyn DynProvider>>,
    pub(super) fleet_backoff: EngageBackoff,
    pub(super) protobuf: bool,
    pub(super) wait_for_crds: Option<Duration>,
}

impl ManagerBuilder {
    /// Serve `/healthz` and `/readyz` on `addr` (port 0: any free port).
    /// Off by default.
    pub fn health_addr(mut self, addr: SocketAddr) -> Self {
        self.health_addr = Some(addr);
        self
    }

    /// Serve `/metrics` on `addr` (port 0: any free port). Off by default.
    /// Plain HTTP to anyone unless [`ManagerBuilder::metrics_secure`].
    pub fn metrics_addr(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Serve `/metrics` (on [`ManagerBuilder::metrics_addr`]) over HTTPS,
    /// to clients a TokenReview authenticates and a SubjectAccessReview
    /// allows `get` on `/metrics` only (see [`SecureMetrics`]). Off by
    /// default: plain HTTP, for local runs.
    ///
    /// ```no_run
    /// # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use controller_runtime::manager::Manager;
    /// use controller_runtime::metrics::SecureMetrics;
    /// let mgr = Manager::builder(client)
    ///     .metrics_addr("0.0.0.0:8443".parse()?)
    ///     .metrics_secure(SecureMetrics::new())
    ///     .build()
    ///     .await?;
    /// # let _ = mgr;
    /// # Ok(()) }
    /// ```
    pub fn metrics_secure(mut self, options: SecureMetrics) -> Self {
        self.metrics_secure = Some(options);
        self
    }

    /// Grants each client of the secure metrics server `limits`: handshake
    /// and header timeouts and a cap on open connections, as the webhook
    /// server's (default [`ServerLimits::default`](crate::tls::ServerLimits)).
    pub fn metrics_server_limits(mut self, limits: crate::tls::ServerLimits) -> Self {
        self.metrics_limits = limits;
        self
    }

    /// Run controllers only while this replica holds the lease.
    pub fn leader_election(mut self, config: LeaderElectionConfig) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// How long in-flight work may take to finish on shutdown (default 30 s).
    pub fn graceful_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.graceful_shutdown_timeout = timeout;
        self
    }

    /// How long controllers wait for their caches to sync (default 2 min).
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.cache_sync_timeout = timeout;
        self
    }

    /// Waits up to `timeout` at start for watched resources that are not
    /// served yet (a CRD installed by another component after this
    /// manager starts), instead of failing at once.
    ///
    /// By default [`Manager::run`] checks by discovery that every resource
    /// its controllers watch is served and fails within seconds with
    /// [`ManagerError::NotServed`] (naming the resource and its CRD) if
    /// one is not. With this, it asks again every half second while the
    /// health and metrics servers answer (`/readyz` not ready); the
    /// informers start once all are served, and `run` fails the same way
    /// when `timeout` passes first.
    ///
    /// ```no_run
    /// # async fn demo(client: kube_client::Client) -> Result<(), controller_runtime::manager::ManagerError> {
    /// use std::time::Duration;
    /// use controller_runtime::manager::Manager;
    /// // The CRD is applied by the same Helm release, maybe after this pod starts.
    /// let mgr = Manager::builder(client)
    ///     .wait_for_crds(Duration::from_secs(120))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn wait_for_crds(mut self, timeout: Duration) -> Self {
        self.wait_for_crds = Some(timeout);
        self
    }

    /// Resync period of the shared informers (default: none).
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = period;
        self
    }

    /// Cache objects with their `metadata.managedFields`. By default the
    /// manager's caches clear them as objects arrive: they are often half of
    /// an object's metadata and few controllers read them. Reads from the
    /// API server (the client) are not affected either way.
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) -> Result<(), controller_runtime::manager::ManagerError> {
    /// use controller_runtime::manager::Manager;
    /// let mgr = Manager::builder(client).keep_managed_fields().build().await?;
    /// assert!(!mgr.informer_factory().strips_managed_fields());
    /// # Ok(())
    /// # }
    /// ```
    pub fn keep_managed_fields(mut self) -> Self {
        self.keep_managed_fields = true;
        self
    }

    /// Restricts the manager to one namespace: every cache, informer and
    /// controller of the manager lists and watches namespaced kinds in
    /// `namespace` only (cluster-scoped kinds stay cluster-wide), so a Role
    /// in that namespace is enough RBAC. All namespaces by default; an
    /// empty name also means all (as an unset `WATCH_NAMESPACE`). For
    /// several, see [`namespaces`](Self::namespaces).
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) -> Result<(), controller_runtime::manager::ManagerError> {
    /// use controller_runtime::manager::Manager;
    /// let ns = std::env::var("WATCH_NAMESPACE").unwrap_or_default();
    /// let mgr = Manager::builder(client).namespace(ns).build().await?;
    /// # let _ = mgr;
    /// # Ok(())
    /// # }
    /// ```
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.cache_scope = self.cache_scope.namespace(namespace);
        self
    }

    /// Restricts the manager to a set of namespaces (controller-runtime's
    /// `DefaultNamespaces`): the cache runs one informer per namespace for
    /// each namespaced kind and reads them as one, so the controllers see
    /// the objects of these namespaces only, and a Role in each is enough
    /// RBAC. Cluster-scoped kinds stay cluster-wide. Empty names are
    /// ignored; none at all means all namespaces. Replaces
    /// [`namespace`](Self::namespace).
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) -> Result<(), controller_runtime::manager::ManagerError> {
    /// use controller_runtime::manager::Manager;
    /// let mgr = Manager::builder(client).namespaces(["team-a", "team-b"]).build().await?;
    /// assert_eq!(mgr.cache().scope().namespace_names(), ["team-a", "team-b"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn namespaces<I, S>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.cache_scope = self.cache_scope.namespaces(namespaces);
        self
    }

    /// The cache's informers of `K` cache what `transform` makes of each
    /// object (controller-runtime's `ByObject.Transform`); managedFields are
    /// stripped after it unless [`keep_managed_fields`](Self::keep_managed_fields)
    /// is set. For metadata-only informers, give a transform of
    /// `PartialObjectMeta<K>`.
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) -> Result<(), controller_runtime::manager::ManagerError> {
    /// use controller_runtime::k8s_openapi::api::core::v1::Pod;
    /// use controller_runtime::manager::Manager;
    /// let mgr = Manager::builder(client)
    ///     .cache_transform(|mut pod: Pod| {
    ///         pod.metadata.annotations = None; // never read, often large
    ///         pod
    ///     })
    ///     .build()
    ///     .await?;
    /// # let _ = mgr;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cache_transform<K: Object>(
        mut self,
        transform: impl Fn(K) -> K + Send + Sync + 'static,
    ) -> Self {
        self.cache_scope = self.cache_scope.transform(transform);
        self
    }

    /// The cache's informers of `K` list and watch with `options`' label
    /// and field selectors (controller-runtime's `ByObject`): objects
    /// outside them are invisible to the cache and to the controllers. The
    /// options are the kind's: its metadata-only informers get them too.
    ///
    /// ```
    /// # async fn demo(client: kube_client::Client) -> Result<(), controller_runtime::manager::ManagerError> {
    /// use controller_runtime::informer_core::factory::InformerOptions;
    /// use controller_runtime::k8s_openapi::api::core::v1::Secret;
    /// use controller_runtime::manager::Manager;
    /// let mgr = Manager::builder(client)
    ///     .cache_options::<Secret>(InformerOptions::new().label_selector("app.kubernetes.io/managed-by=me"))
    ///     .build()
    ///     .await?;
    /// # let _ = mgr;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cache_options<K: Object>(mut self, options: InformerOptions) -> Self {
        self.cache_scope = self.cache_scope.by_object::<K>(options);
        self
    }

    /// [`cache_options`](Self::cache_options) for a kind named by its API
    /// group (`""` for the core group) and kind, as a dynamic controller's
    /// kind is: its full, metadata-only and dynamic informers all get them.
    pub fn cache_options_by_kind(
        mut self,
        group: &str,
        kind: &str,
        options: InformerOptions,
    ) -> Self {
        self.cache_scope = self.cache_scope.by_kind(group, kind, options);
        self
    }

    /// Whether informers start from a streaming list (`sendInitialEvents`,
    /// with a counted fallback to LIST). On by default.
    pub fn streaming_list(mut self, enabled: bool) -> Self {
        self.streaming_list = enabled;
        self
    }

    /// Adds a provider of clusters to the manager's
    /// [fleet](crate::cluster::Fleet): it runs on every replica while the
    /// manager runs, engaging and disengaging clusters (see
    /// [`Provider`]). A manager without providers holds its own cluster
    /// alone, as before.
    ///
    /// ```no_run
    /// # async fn demo(client: kube_client::Client, edge: kube_client::Client) -> Result<(), controller_runtime::manager::ManagerError> {
    /// use controller_runtime::cluster::StaticProvider;
    /// use controller_runtime::manager::Manager;
    /// let mgr = Manager::builder(client)
    ///     .provider(StaticProvider::new().client("edge-1", edge))
    ///     .build()
    ///     .await?;
    /// # let _ = mgr;
    /// # Ok(()) }
    /// ```
    pub fn provider(mut self, provider: impl Provider) -> Self {
        self.providers.push(Arc::new(provider));
        self
    }

    /// How the fleet retries and watches its clusters (default:
    /// [`EngageBackoff::default`]).
    pub fn fleet_backoff(mut self, backoff: EngageBackoff) -> Self {
        self.fleet_backoff = backoff;
        self
    }

    /// Whether informers of built-in kinds (and metadata-only informers)
    /// list and watch in protobuf, JSON as the second choice, with a
    /// counted fallback to JSON (`informer_protobuf_fallbacks_total`). On by
    /// default (the release bench: see `docs/protobuf.md`); `false` reads
    /// every kind in JSON. Custom resources are read in JSON either way.
    ///
    /// ```no_run
    /// # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use controller_runtime::manager::Manager;
    /// let mgr = Manager::builder(client).protobuf(false).build().await?;
    /// # let _ = mgr; Ok(()) }
    /// ```
    pub fn protobuf(mut self, enabled: bool) -> Self {
        self.protobuf = enabled;
        self
    }

    /// Register metrics in `registry` instead of a new one.
    pub fn registry(mut self, registry: prometheus::Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Who the manager's events come from and the recorder's limits
    /// (default: `reportingInstance` from `POD_NAME` or `HOSTNAME`); each
    /// [`Manager::event_recorder`] reports its own controller name.
    pub fn events(mut self, config: RecorderConfig) -> Self {
        self.events = Some(config);
        self
    }

    /// Validates the settings, binds the server addresses and creates the
    /// shared informer factory, metrics and health checks.
    pub async fn build(self) -> Result<Manager, ManagerError> {
        let elector = match self.leader_election {
            Some(config) => Some(LeaderElector::new(self.client.clone(), config)?),
            None => None,
        };
        let metrics = match self.registry {
            Some(registry) => Metrics::with_registry(registry)?,
            None => Metrics::new()?,
        };
        let health = match self.health_addr {
            Some(addr) => Some(BoundServer::bind("health", addr).await?),
            None => None,
        };
        let metrics_server = match (self.metrics_addr, &self.metrics_secure) {
            (Some(addr), None) => Some(BoundServer::bind("metrics", addr).await?),
            (Some(addr), Some(secure)) => Some(BoundServer::bind("metrics", addr).await?.secure(
                secure,
                self.metrics_limits,
                self.client.clone(),
                &metrics,
            )?),
            (None, _) => None,
        };
        let cluster_options = ClusterOptions {
            resync: self.resync,
            strip_managed_fields: !self.keep_managed_fields,
            streaming_list: self.streaming_list,
            protobuf: self.protobuf,
            cache_sync_timeout: self.cache_sync_timeout,
            scope: self.cache_scope,
            events: self.events.unwrap_or_else(default_recorder_config),
        };
        let cluster = Cluster::new(
            "",
            self.client.clone(),
            &cluster_options,
            Some(metrics.informer_metrics()),
        );
        let readyz = Checks::new();
        let fleet = Fleet::new(
            cluster_options,
            self.fleet_backoff,
            &metrics,
            readyz.clone(),
        )?;

        let healthz = Checks::new();
        healthz.add("ping", Ping)?;
        readyz.add(
            "caches synced",
            caches_synced_check(cluster.informer_factory(), cluster.cache()),
        )?;
        if let Some(elector) = &elector {
            let elector = elector.clone();
            readyz.add(
                "leadership settled",
                check_fn(move || {
                    if elector.is_leader() || elector.observed_leader().is_some() {
                        Ok(())
                    } else {
                        Err("no leader observed yet".to_string())
                    }
                }),
            )?;
        }

        // The webhook server's runnable joins them (with the feature).
        #[cfg_attr(not(feature = "webhook"), allow(unused_mut))]
        let mut runnables: Vec<Arc<dyn Runnable>> = self
            .providers
            .into_iter()
            .map(|provider| {
                Arc::new(ProviderRunnable {
                    provider,
                    fleet: fleet.clone(),
                }) as Arc<dyn Runnable>
            })
            .collect();
        #[cfg(feature = "webhook")]
        let webhook = match self.webhook {
            Some(options) => {
                let built =
                    super::webhook::build(options, self.client.clone(), metrics.registry())?;
                readyz.add("webhook", check_fn(built.readiness))?;
                runnables.push(built.runnable);
                Some((built.pending, built.addr))
            }
            None => None,
        };

        let writer = EventWriterRunnable::new(cluster.clone());
        Ok(Manager {
            inner: Arc::new(Inner {
                cluster,
                fleet,
                metrics,
                healthz,
                readyz,
                health_addr: health.as_ref().map(|s| s.addr),
                metrics_addr: metrics_server.as_ref().map(|s| s.addr),
                servers: Mutex::new((health, metrics_server)),
                #[cfg(feature = "webhook")]
                webhook,
                elector,
                runnables: Mutex::new(
                    std::iter::once(Arc::new(writer) as Arc<dyn Runnable>)
                        .chain(runnables)
                        .collect(),
                ),
                controller_names: Mutex::new(HashSet::new()),
                started: AtomicBool::new(false),
                late: Mutex::new(None),
                graceful_shutdown_timeout: self.graceful_shutdown_timeout,
                cache_sync_timeout: self.cache_sync_timeout,
                served: super::served::ServedCheck::new(self.wait_for_crds),
            }),
        })
    }
}

fn caches_synced_check(factory: &SharedInformerFactory, cache: &Cache) -> impl HealthCheck {
    let (factory, cache) = (factory.clone(), cache.clone());
    check_fn(move || {
        if !cache.is_started() {
            return Err("informers not started".to_string());
        }
        let unsynced: Vec<String> = factory
            .synced()
            .into_iter()
            .filter(|(_, synced)| !synced)
            .map(|(name, _)| name)
            .collect();
        if unsynced.is_empty() {
            Ok(())
        } else {
            Err(format!("not synced: {}", unsynced.join(", ")))
        }
    })
}
