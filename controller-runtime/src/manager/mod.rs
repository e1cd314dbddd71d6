//! The manager: one place that owns what a set of controllers shares and
//! runs them all.
//!
//! A [`Manager`] owns its [`Cluster`]: the Kubernetes client, the
//! [`SharedInformerFactory`] (so two controllers watching Pods share one
//! watch), a cache-backed reader ([`Cache`]) and the event recorder; and the
//! metrics registry ([`Metrics`]), the health checks
//! and the controllers and other [`Runnable`]s. [`Manager::run`]:
//!
//! 1. serves `/healthz` + `/readyz` and `/metrics` on the configured
//!    addresses (bound at [`ManagerBuilder::build`], so port 0 works and the
//!    bound address is known at once);
//! 2. checks by discovery that every resource its controllers watch is
//!    served, and fails with [`ManagerError::NotServed`] (naming the
//!    resource and, for a custom resource, its CRD) within seconds if one
//!    is not, unless [`ManagerBuilder::wait_for_crds`] says to wait;
//! 3. starts the informers (their caches clear `metadata.managedFields` from
//!    every object unless [`ManagerBuilder::keep_managed_fields`] was set);
//! 4. with leader election, competes for the lease and starts the
//!    controllers (and other leader-only runnables) only once it leads; a
//!    replica that loses the lease stops them at once, mid-reconcile, and
//!    `run` returns [`ManagerError::LeadershipLost`];
//! 5. on shutdown (the token, or SIGTERM/SIGINT with
//!    [`Manager::run_until_signal`]) stops taking work, lets in-flight
//!    reconciles finish within the graceful-shutdown timeout, releases the
//!    lease, then stops the informers and servers, all of which share
//!    [`SHUTDOWN_CLEANUP_TIMEOUT`] after it (so `run` returns within the
//!    sum of the two, whatever hangs). Leadership is still
//!    watched while draining: a lease lost then aborts the in-flight
//!    reconciles at once and `run` returns [`ManagerError::LeadershipLost`].
//!    A lease lost by the time the stop begins, or while leader-only work
//!    drains, is reported as `LeadershipLost` even when a runnable also
//!    overran the graceful timeout; one lost only after the leader-only work
//!    ended (while other runnables drain or the release hangs) is logged,
//!    and `run` reports `Ok` or [`ManagerError::ShutdownTimeout`] as it
//!    would have without it.
//!
//! A runnable (or controller) added while the manager runs is started at
//! once, as if it had been there from the start (see
//! [`Manager::add_runnable`]).
//!
//! With the `webhook` feature and [`ManagerBuilder::webhook_server`] it also
//! serves admission and conversion webhooks ([`Manager::webhook`]) on every
//! replica; `run` refuses to start while a webhook its manifests declare
//! has no handler.
//!
//! Layer 4 (manager): imports the cluster, the cache, the metrics registry, events,
//! health checks, leader election, the webhook server, the TLS stack and the vocabulary; never the
//! [controller](crate::controller), which is one of the runnables it runs
//! (`Manager::controller` is added by the controller module).
//!
//! ```no_run
//! use std::time::Duration;
//! use controller_runtime::manager::Manager;
//! use controller_runtime::reconcile::{CallInfo, Reconciler};
//! use controller_runtime::{Action, Request};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Log;
//! impl Reconciler for Log {
//!     type Error = std::convert::Infallible;
//!     async fn reconcile(&self, req: Request, _: CallInfo) -> Result<Action, Self::Error> {
//!         tracing::info!(%req, "reconciling");
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let mgr = Manager::builder(client)
//!     .health_addr("127.0.0.1:0".parse()?)
//!     .metrics_addr("127.0.0.1:0".parse()?)
//!     .graceful_shutdown_timeout(Duration::from_secs(10))
//!     .build()
//!     .await?;
//! mgr.controller::<ConfigMap>().complete(Log)?;
//! mgr.run_until_signal().await?;
//! # Ok(()) }
//! ```

mod builder;
pub mod deployment;
mod drain;
pub(crate) mod error;
mod event_writer;
mod provider;
mod runnable;
mod served;
mod server;
mod tasks;
#[cfg(feature = "webhook")]
mod webhook;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use informer_core::factory::SharedInformerFactory;
use kube_client::Client;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use builder::ManagerBuilder;
pub use error::ManagerError;
pub use runnable::{Runnable, RunnableFn, runnable_fn};
pub use served::{DISCOVERY_TIMEOUT, UnservedResource};
use server::BoundServer;
use tasks::{Tasks, wait_for_signal};
#[cfg(feature = "webhook")]
pub use webhook::WebhookRegistration;

use crate::cache::{Cache, CacheScope};
use crate::cluster::{Cluster, EngageBackoff, Fleet};
use crate::events::EventRecorder;
use crate::healthz::{Checks, HealthCheck};
use crate::leaderelection::LeaderElector;
use crate::metrics::Metrics;
use crate::workqueue::PrometheusMetricsProvider;

/// Default time in-flight work gets to finish on shutdown (as controller-runtime).
pub const DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// Time the last steps of a shutdown share once the graceful-shutdown
/// timeout is over or every runnable has stopped: releasing the lease,
/// stopping the informers and the servers, and waiting for aborted
/// runnables to unwind. [`Manager::run`] returns at most
/// `graceful_shutdown_timeout + SHUTDOWN_CLEANUP_TIMEOUT` after shutdown
/// begins, whatever hangs (an API server that does not answer the lease
/// release, a probe stuck in a health check).
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::manager::SHUTDOWN_CLEANUP_TIMEOUT;
/// // A pod killed 30 s after SIGTERM: in-flight work may take the rest.
/// let graceful = Duration::from_secs(30) - SHUTDOWN_CLEANUP_TIMEOUT;
/// assert_eq!(graceful, Duration::from_secs(25));
/// ```
pub const SHUTDOWN_CLEANUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time a controller waits for its caches before failing (as
/// controller-runtime's `CacheSyncTimeout`).
pub const DEFAULT_CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

struct Inner {
    /// The manager's own cluster: client, informers, cache, events.
    cluster: Cluster,
    /// The other clusters, engaged by providers while the manager runs.
    fleet: Fleet,
    metrics: Metrics,
    healthz: Checks,
    readyz: Checks,
    health_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    servers: Mutex<(Option<BoundServer>, Option<BoundServer>)>,
    #[cfg(feature = "webhook")]
    webhook: Option<(Arc<webhook::Pending>, SocketAddr)>,
    elector: Option<LeaderElector>,
    runnables: Mutex<Vec<Arc<dyn Runnable>>>,
    /// While [`Manager::run`] runs: where runnables added meanwhile go, to
    /// be started at once (taken before `runnables` when both are locked).
    late: Mutex<Option<mpsc::UnboundedSender<Arc<dyn Runnable>>>>,
    controller_names: Mutex<HashSet<String>>,
    started: AtomicBool,
    graceful_shutdown_timeout: Duration,
    cache_sync_timeout: Duration,
    /// The resources the controllers watch, checked at start.
    served: served::ServedCheck,
}

/// Owns the shared pieces of a set of controllers and runs them. Cheap to
/// clone; clones share everything.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("health_addr", &self.inner.health_addr)
            .field("metrics_addr", &self.inner.metrics_addr)
            .field("leader_election", &self.inner.elector.is_some())
            .field("runnables", &self.inner.runnables.lock().len())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// Starts a builder for a manager using `client`.
    pub fn builder(client: Client) -> ManagerBuilder {
        ManagerBuilder {
            client,
            health_addr: None,
            metrics_addr: None,
            metrics_secure: None,
            metrics_limits: crate::tls::ServerLimits::default(),
            leader_election: None,
            graceful_shutdown_timeout: DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            resync: Duration::ZERO,
            registry: None,
            events: None,
            keep_managed_fields: false,
            #[cfg(feature = "webhook")]
            webhook: None,
            cache_scope: CacheScope::new(),
            streaming_list: true,
            providers: Vec::new(),
            fleet_backoff: EngageBackoff::default(),
            protobuf: true,
            wait_for_crds: None,
        }
    }

    /// The manager's own cluster (the one its client reaches): what
    /// [`client`](Self::client), [`cache`](Self::cache),
    /// [`informer_factory`](Self::informer_factory) and
    /// [`event_recorder`](Self::event_recorder) return, as one value.
    ///
    /// ```no_run
    /// # fn demo(mgr: controller_runtime::manager::Manager) {
    /// let own = mgr.cluster();
    /// assert!(std::ptr::eq(own.cache(), mgr.cache()));
    /// # }
    /// ```
    pub fn cluster(&self) -> &Cluster {
        &self.inner.cluster
    }

    /// The clusters this manager reconciles besides its own, engaged and
    /// disengaged by the [providers](ManagerBuilder::provider) (or by the
    /// program) while it runs; fleet controllers
    /// ([`Manager::fleet_controller`](crate::controller::fleet)) reconcile
    /// in each.
    ///
    /// ```no_run
    /// # fn demo(mgr: controller_runtime::manager::Manager) {
    /// for name in mgr.fleet().names() {
    ///     println!("{name}: {:?}", mgr.fleet().health(&name));
    /// }
    /// # }
    /// ```
    pub fn fleet(&self) -> &Fleet {
        &self.inner.fleet
    }

    /// The Kubernetes client (of the manager's own cluster).
    pub fn client(&self) -> Client {
        self.inner.cluster.client()
    }

    /// The shared informer factory (of the manager's own cluster).
    pub fn informer_factory(&self) -> &SharedInformerFactory {
        self.inner.cluster.informer_factory()
    }

    /// The cache-backed reader (of the manager's own cluster).
    pub fn cache(&self) -> &Cache {
        self.inner.cluster.cache()
    }

    /// An event recorder whose events report `controller` as their
    /// `reportingController`. Cheap: every recorder shares the manager's
    /// queue and writer, which runs with the manager on every replica and
    /// writes what is still queued when the manager shuts down.
    ///
    /// ```no_run
    /// # use controller_runtime::prelude::*;
    /// # fn demo(mgr: Manager, cm: k8s_openapi::api::core::v1::ConfigMap) {
    /// let recorder = mgr.event_recorder("foo-controller");
    /// recorder.publish(&cm, EventInfo::normal("Synced", "Reconcile").note("all good"));
    /// # }
    /// ```
    pub fn event_recorder(&self, controller: &str) -> EventRecorder {
        self.inner.cluster.event_recorder(controller)
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The provider of `workqueue_*` metrics on this manager's registry.
    pub fn workqueue_metrics(&self) -> Arc<PrometheusMetricsProvider> {
        self.inner.metrics.workqueue_metrics()
    }

    /// The address `/healthz` and `/readyz` are served on, if enabled.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.inner.health_addr
    }

    /// The address `/metrics` is served on, if enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.inner.metrics_addr
    }

    /// The leader elector, when leader election is on.
    pub fn leader_elector(&self) -> Option<&LeaderElector> {
        self.inner.elector.as_ref()
    }

    /// Whether this replica may run leader-only work now: always without
    /// leader election, else while it holds the lease.
    pub fn is_leader(&self) -> bool {
        self.inner
            .elector
            .as_ref()
            .is_none_or(LeaderElector::is_leader)
    }

    /// How long controllers wait for their caches.
    pub fn cache_sync_timeout(&self) -> Duration {
        self.inner.cache_sync_timeout
    }

    /// Adds a liveness check served under `/healthz`.
    pub fn add_healthz_check(
        &self,
        name: impl Into<String>,
        check: impl HealthCheck,
    ) -> Result<(), ManagerError> {
        Ok(self.inner.healthz.add(name, check)?)
    }

    /// Adds a readiness check served under `/readyz`.
    pub fn add_readyz_check(
        &self,
        name: impl Into<String>,
        check: impl HealthCheck,
    ) -> Result<(), ManagerError> {
        Ok(self.inner.readyz.add(name, check)?)
    }

    /// The liveness checks.
    pub fn healthz_checks(&self) -> &Checks {
        &self.inner.healthz
    }

    /// The readiness checks.
    pub fn readyz_checks(&self) -> &Checks {
        &self.inner.readyz
    }

    /// Adds a runnable. One added while [`run`](Self::run) runs is started
    /// at once (one that needs leader election once this replica leads),
    /// after starting any informers requested since, so that a controller
    /// for a kind found at run time (a CRD installed later) can join a
    /// running manager. One added after `run` returned is not run.
    pub fn add_runnable(&self, runnable: impl Runnable) {
        self.add_runnable_arc(Arc::new(runnable));
    }

    /// Records resources `controller` watches, which [`run`](Self::run)
    /// checks are served before it starts the informers.
    pub(crate) fn watches_resources(
        &self,
        controller: &str,
        resources: impl IntoIterator<Item = kube_client::core::ApiResource>,
    ) {
        self.inner.served.add(controller, resources);
    }

    /// Reserves a controller name; `false` if another controller has it.
    pub(crate) fn claim_controller_name(&self, name: &str) -> bool {
        self.inner.controller_names.lock().insert(name.to_string())
    }

    pub(crate) fn add_runnable_arc(&self, runnable: Arc<dyn Runnable>) {
        let late = self.inner.late.lock();
        let runnable = match late.as_ref() {
            Some(running) => match running.send(runnable) {
                Ok(()) => return,
                Err(unsent) => unsent.0,
            },
            None => runnable,
        };
        if self.inner.started.load(Ordering::Acquire) {
            tracing::warn!(runnable = %runnable.name(), "runnable added after the manager stopped; it will not run");
        }
        self.inner.runnables.lock().push(runnable);
    }

    /// Runs until SIGTERM or SIGINT (Ctrl-C), then shuts down gracefully.
    pub async fn run_until_signal(&self) -> Result<(), ManagerError> {
        let token = CancellationToken::new();
        let signals = tokio::spawn({
            let token = token.clone();
            async move {
                wait_for_signal().await;
                tracing::info!("shutdown signal received");
                token.cancel();
            }
        });
        let result = self.run(token).await;
        signals.abort();
        result
    }

    /// Runs until `shutdown` completes (any future: a timer, a channel, a
    /// test's condition), then shuts down gracefully.
    ///
    /// ```no_run
    /// # async fn demo(mgr: controller_runtime::manager::Manager) -> Result<(), controller_runtime::manager::ManagerError> {
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// # drop(stop);
    /// mgr.run_until(async { let _ = stopped.await; }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run_until(
        &self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ManagerError> {
        let token = CancellationToken::new();
        let trigger = tokio::spawn({
            let token = token.clone();
            async move {
                shutdown.await;
                token.cancel();
            }
        });
        let result = self.run(token).await;
        trigger.abort();
        result
    }

    /// Runs everything until `shutdown` fires, then shuts down gracefully;
    /// see the module documentation for the order of events.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), ManagerError> {
        #[cfg(feature = "webhook")]
        self.check_declared_webhooks()?;
        if self.inner.started.swap(true, Ordering::AcqRel) {
            return Err(ManagerError::AlreadyStarted);
        }
        let deadline_for = |timeout: Duration| Instant::now() + timeout;

        // Servers first, so probes answer during start-up.
        let servers_stop = CancellationToken::new();
        let mut servers: Vec<JoinHandle<()>> = Vec::new();
        let (health, metrics) = std::mem::take(&mut *self.inner.servers.lock());
        if let Some(bound) = health {
            let router =
                crate::healthz::router(self.inner.healthz.clone(), self.inner.readyz.clone());
            servers.push(bound.serve(router, servers_stop.clone()));
        }
        if let Some(bound) = metrics {
            servers.push(bound.serve(self.inner.metrics.router(), servers_stop.clone()));
        }

        // Every watched resource served (or waited for), before any
        // informer retries 404s.
        if let Err(error) = self.inner.served.run(&self.client(), &shutdown).await {
            servers_stop.cancel();
            for server in servers {
                let _ = tokio::time::timeout(SHUTDOWN_CLEANUP_TIMEOUT, server).await;
            }
            return Err(error);
        }

        // Informers run on every replica, leader or not; so do the
        // fleet's clusters' (engaged until the manager stops).
        self.inner.cluster.start_informers();
        let fleet_stop = CancellationToken::new();
        self.inner.fleet.start(&fleet_stop);

        let (late_tx, mut late_rx) = mpsc::unbounded_channel();
        let runnables: Vec<Arc<dyn Runnable>> = {
            let mut late = self.inner.late.lock();
            *late = Some(late_tx);
            self.inner.runnables.lock().clone()
        };
        let (mut leader_only, always): (Vec<_>, Vec<_>) = runnables
            .into_iter()
            .partition(|r| r.needs_leader_election());
        let others_stop = CancellationToken::new();
        let mut others = Tasks::spawn_all(&always, &others_stop);

        let leader_stop = CancellationToken::new();
        let mut leader_tasks = Tasks::default();
        let election_stop = CancellationToken::new();
        let (mut election, mut leading) = match &self.inner.elector {
            Some(elector) => {
                let rx = elector.subscribe();
                let elector = elector.clone();
                let stop = election_stop.clone();
                (
                    Some(tokio::spawn(async move { elector.run(stop).await })),
                    Some(rx),
                )
            }
            None => {
                leader_tasks = Tasks::spawn_all(&leader_only, &leader_stop);
                (None, None)
            }
        };
        let mut leader_started = election.is_none();

        let result: Result<(), ManagerError> = loop {
            tokio::select! {
                () = shutdown.cancelled() => break Ok(()),
                changed = async { leading.as_mut()?.changed().await.ok() }, if leading.is_some() => {
                    let now_leading = changed.is_some()
                        && leading.as_ref().is_some_and(|rx| *rx.borrow());
                    if now_leading && !leader_started {
                        tracing::info!("became leader; starting controllers");
                        leader_tasks = Tasks::spawn_all(&leader_only, &leader_stop);
                        leader_started = true;
                    } else if !now_leading && leader_started {
                        // Stop reconciling at once: abort, do not drain.
                        leader_tasks.abort_all();
                        break Err(ManagerError::LeadershipLost(
                            "this replica stopped leading".to_string(),
                        ));
                    } else if changed.is_none() {
                        leading = None;
                    }
                }
                Some(runnable) = late_rx.recv() => {
                    // Informers the runnable asked for since the start.
                    self.inner.cluster.informer_factory().start();
                    tracing::info!(runnable = %runnable.name(), "starting a runnable added while running");
                    self.inner.runnables.lock().push(Arc::clone(&runnable));
                    if !runnable.needs_leader_election() {
                        others.spawn(&runnable, &others_stop);
                    } else if leader_started {
                        leader_tasks.spawn(&runnable, &leader_stop);
                    } else {
                        leader_only.push(runnable);
                    }
                }
                Some(failure) = others.next_failure() => {
                    if let Some(err) = failure { break Err(err); }
                }
                Some(failure) = leader_tasks.next_failure() => {
                    if let Some(err) = failure { break Err(err); }
                }
                ended = async { election.as_mut()?.await.ok() }, if election.is_some() => {
                    election = None;
                    if let Some(Err(error)) = ended {
                        leader_tasks.abort_all();
                        break Err(ManagerError::LeadershipLost(error.to_string()));
                    }
                }
            }
        };
        // Runnables added from here on are not run.
        self.inner.late.lock().take();
        late_rx.close();
        if let Err(error) = &result {
            tracing::error!(%error, "manager stopping");
        } else {
            tracing::info!("manager shutting down");
        }

        // One overall bound: runnables get until `deadline`, everything
        // after them (and the unwinding of those aborted) until `cleanup`.
        let deadline = deadline_for(self.inner.graceful_shutdown_timeout);
        let cleanup = deadline + SHUTDOWN_CLEANUP_TIMEOUT;
        let mut unfinished = Vec::new();
        // 1. Controllers stop taking work and finish what is in flight,
        // unless the lease is lost meanwhile (then they are aborted at once).
        leader_stop.cancel();
        let leading_now = leading.as_mut().filter(|_| leader_started);
        let drained =
            drain::drain_leader_tasks(&mut leader_tasks, deadline, cleanup, leading_now).await;
        unfinished.extend(drained.unfinished);
        let result = match (result, drained.lost) {
            (Ok(()), Some(lost)) => Err(ManagerError::LeadershipLost(lost)),
            (result, _) => result,
        };
        // 2. The other runnables.
        others_stop.cancel();
        unfinished.extend(others.drain(deadline, cleanup).await);
        // 3. Release the lease so that a successor takes over at once.
        election_stop.cancel();
        if let Some(task) = election {
            match tokio::time::timeout_at(cleanup, task).await {
                Ok(Ok(Err(error))) => tracing::warn!(%error, "leader election ended with an error"),
                Ok(_) => {}
                Err(_) => tracing::warn!("leader election did not stop in time"),
            }
        }
        // 4. The fleet's clusters, the informers and the servers.
        fleet_stop.cancel();
        self.inner.fleet.shutdown(cleanup).await;
        if !self.inner.cluster.stop_informers(cleanup).await {
            tracing::warn!("informers did not stop in time");
        }
        servers_stop.cancel();
        for server in servers {
            if tokio::time::timeout_at(cleanup, server).await.is_err() {
                tracing::warn!("a server did not stop in time (a request still in flight)");
            }
        }
        tracing::info!("manager stopped");

        match result {
            Ok(()) if !unfinished.is_empty() => Err(ManagerError::ShutdownTimeout {
                timeout: self.inner.graceful_shutdown_timeout,
                unfinished,
            }),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests;
