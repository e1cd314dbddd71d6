//! A cluster as a value: what a manager holds for one Kubernetes cluster
//! (the client, the shared informer factory, the cache-backed reader and
//! the event recorder) behind one type, [`Cluster`], so that a manager can
//! hold many.
//!
//! A [`Manager`](crate::manager::Manager) holds its own cluster
//! ([`Manager::cluster`](crate::manager::Manager::cluster); its name is
//! `""`, as in Go's multicluster-runtime) and reaches it through the
//! same accessors as before (`mgr.client()`, `mgr.cache()`, ...). The other
//! clusters it reconciles, its *fleet* ([`Fleet`],
//! [`Manager::fleet`](crate::manager::Manager::fleet)), are engaged and
//! disengaged while it runs by [`Provider`]s: a [`StaticProvider`] (a list
//! of clients or kubeconfigs), a [`SecretProvider`] (kubeconfigs in
//! labelled Secrets of the manager's own cluster, watched), or a program
//! calling [`Fleet::engage`] and [`Fleet::disengage`] itself (as tests do
//! with envtest servers). [`Fleet::filter`] decides which clusters engage
//! (by name and labels, [`ClusterInfo`]), [`Fleet::on_engage`] hooks run
//! on each before it is attached, and [`Fleet::index_field`] indexes every
//! member's cache. A cluster is ready when it answers, its informers have
//! synced and they may list; one that is not is retried with jittered
//! [`EngageBackoff`] and reported ([`ClusterHealth`], the metrics
//! `controller_runtime_fleet_*`, and `/readyz` when
//! [`Fleet::readyz_threshold`] asks) while the others go on. Members'
//! informers run on every replica, so a new leader finds them synced. Clients made
//! from kubeconfigs ([`MemberClientOptions`]) accept inline credentials
//! only unless told otherwise, leave retries to the informers and time
//! out.
//!
//! Layer 3 (cluster): built from the cache and the metrics registry (layer
//! 2), events, health checks and the client (layer 1); the manager holds
//! clusters and runs the providers; fleet controllers reconcile across
//! the fleet.
//!
//! ```no_run
//! # fn demo(mgr: controller_runtime::manager::Manager) {
//! let own = mgr.cluster();
//! assert_eq!(own.name(), "");
//! let _reader = own.cache();
//! let _recorder = own.event_recorder("my-controller");
//! # }
//! ```

mod engagement;
mod every_member;
mod fleet;
mod health;
mod hooks;
mod member_client;
mod member_transport;
mod metrics;
mod permissions;
mod provider;
mod secret_provider;
mod static_provider;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use informer_core::factory::SharedInformerFactory;
use informer_core::metrics::InformerMetrics;
use kube_client::Client;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

pub(crate) use fleet::Attached;
pub use fleet::{Fleet, FleetError};
pub use health::{ClusterHealth, EngageBackoff};
pub use hooks::ClusterInfo;
pub use member_client::{MemberClientOptions, ProviderError};
pub(crate) use provider::DynProvider;
pub use provider::Provider;
pub use secret_provider::{KUBECONFIG_KEY, SecretProvider};
pub use static_provider::StaticProvider;

use crate::cache::{Cache, CacheScope};
use crate::events::{ApiEventSink, EventRecorder, EventWriter, RecorderConfig};

/// One Kubernetes cluster as a manager holds it: its client, shared
/// informer factory, cache-backed reader and event recorder. Cheap to
/// clone; clones share everything.
///
/// The manager's own cluster is [`Manager::cluster`](crate::manager::Manager::cluster);
/// the engaged clusters of its fleet are [`Fleet::get`].
///
/// ```no_run
/// # fn demo(mgr: controller_runtime::manager::Manager) {
/// let cluster = mgr.cluster();
/// println!("{} informers requested", cluster.informer_factory().len());
/// # }
/// ```
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    client: Client,
    factory: SharedInformerFactory,
    cache: Cache,
    recorder: EventRecorder,
    /// The writer of `recorder`'s events, taken once by whoever runs it
    /// (the manager's event writer for its own cluster, the fleet's
    /// engagement for the others).
    writer: Mutex<Option<EventWriter<ApiEventSink>>>,
    /// What the fleet knows of it (always `Ready` for the manager's own).
    health: watch::Sender<ClusterHealth>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.inner.name)
            .field("informers", &self.inner.factory.len())
            .finish_non_exhaustive()
    }
}

/// How the clusters of one manager are built: the manager's settings, the
/// same for its own cluster and for every cluster of its fleet.
#[derive(Clone)]
pub(crate) struct ClusterOptions {
    pub(crate) resync: Duration,
    pub(crate) strip_managed_fields: bool,
    pub(crate) streaming_list: bool,
    pub(crate) protobuf: bool,
    pub(crate) cache_sync_timeout: Duration,
    pub(crate) scope: CacheScope,
    pub(crate) events: RecorderConfig,
}

impl Cluster {
    /// The cluster `name` reached through `client`, its informers (not yet
    /// started) reporting to `informer_metrics` when given.
    pub(crate) fn new(
        name: impl Into<Arc<str>>,
        client: Client,
        options: &ClusterOptions,
        informer_metrics: Option<Arc<dyn InformerMetrics>>,
    ) -> Self {
        let mut factory = SharedInformerFactory::builder(client.clone())
            .default_resync(options.resync)
            .strip_managed_fields(options.strip_managed_fields)
            .streaming_list(options.streaming_list)
            .protobuf(options.protobuf);
        if let Some(metrics) = informer_metrics {
            factory = factory.metrics(metrics);
        }
        let factory = factory.build();
        let cache = Cache::scoped(
            factory.clone(),
            options.cache_sync_timeout,
            options.scope.clone(),
        );
        let (recorder, writer) =
            EventRecorder::new(ApiEventSink::new(client.clone()), options.events.clone());
        Cluster {
            inner: Arc::new(Inner {
                name: name.into(),
                client,
                factory,
                cache,
                recorder,
                writer: Mutex::new(Some(writer)),
                health: watch::Sender::new(ClusterHealth::Ready),
            }),
        }
    }

    /// The cluster's name: `""` for the manager's own cluster, the name it
    /// was engaged under for a cluster of the fleet.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub(crate) fn name_arc(&self) -> Arc<str> {
        Arc::clone(&self.inner.name)
    }

    /// Whether both values are the same cluster (clones of one), not two
    /// engagements under one name.
    pub(crate) fn same_as(&self, other: &Cluster) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The cluster's client.
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }

    /// The cluster's shared informer factory.
    pub fn informer_factory(&self) -> &SharedInformerFactory {
        &self.inner.factory
    }

    /// The cluster's cache-backed reader.
    pub fn cache(&self) -> &Cache {
        &self.inner.cache
    }

    /// An event recorder writing to this cluster whose events report
    /// `controller` as their `reportingController`.
    pub fn event_recorder(&self, controller: &str) -> EventRecorder {
        self.inner.recorder.for_controller(controller)
    }

    /// What the fleet knows of this cluster now: `Ready` only while it
    /// answers, its informers have synced and none is forbidden to list;
    /// always `Ready` for the manager's own cluster. A fleet controller
    /// parks the requests of a cluster that is `Failing` until it is
    /// `Ready` again.
    pub(crate) fn health(&self) -> ClusterHealth {
        self.inner.health.borrow().clone()
    }

    /// Follows [`health`](Self::health): `changed()` wakes on every change
    /// (a fleet controller's lane of the cluster parks its requests on
    /// `Failing` and puts them back once the cluster is `Ready` again).
    pub(crate) fn watch_health(&self) -> watch::Receiver<ClusterHealth> {
        self.inner.health.subscribe()
    }

    /// Sets what the fleet knows of this cluster, waking watchers only on
    /// a change.
    pub(crate) fn set_health(&self, health: ClusterHealth) {
        self.inner.health.send_if_modified(|now| {
            let changed = *now != health;
            *now = health;
            changed
        });
    }

    /// The informers started in this cluster that have not synced yet, by
    /// description.
    pub(crate) fn unsynced(&self) -> Vec<String> {
        self.inner
            .factory
            .synced()
            .into_iter()
            .filter(|(_, synced)| !synced)
            .map(|(informer, _)| informer)
            .collect()
    }

    /// The writer of this cluster's events, once.
    pub(crate) fn take_event_writer(&self) -> Option<EventWriter<ApiEventSink>> {
        self.inner.writer.lock().take()
    }

    /// Starts every informer requested so far (again after requesting
    /// more) and lets the cache serve reads.
    pub(crate) fn start_informers(&self) {
        self.inner.factory.start();
        self.inner.cache.set_started(true);
    }

    /// Stops the informers and waits for them until `give_up`; `false` if
    /// they did not stop in time.
    pub(crate) async fn stop_informers(&self, give_up: Instant) -> bool {
        self.inner.cache.set_started(false);
        tokio::time::timeout_at(give_up, self.inner.factory.shutdown())
            .await
            .is_ok()
    }
}
