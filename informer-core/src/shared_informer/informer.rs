//! [`SharedIndexInformer`] itself: construction, handler registration, the
//! run loop that pops the FIFO, and sync waits.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::ResourceEventHandlerRegistration;
use super::registration::{SYNC_POLL, UpstreamSynced};
use super::{InformerError, MINIMUM_RESYNC_PERIOD, ResourceEventHandler};
use crate::delta_fifo::{DeltaFifo, DeltaType, Deltas, Transform};
use crate::list_watch::ListerWatcher;
use crate::lister::Lister;
use crate::metrics::InformerMetrics;
use crate::processor::{Notification, PendingObserver, SharedProcessor};
pub use crate::reflector::WatchErrorHandler;
use crate::reflector::{Reflector, SyncedResourceVersion};
use crate::store::{IndexFn, Indexer, KnownObjects};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    New,
    Running,
    Stopped,
}

struct Config<K> {
    phase: Phase,
    transform: Option<Transform<K>>,
    watch_error_handler: Option<WatchErrorHandler>,
    default_resync: Duration,
    /// How often the informer asks the processor whether a resync is due.
    resync_check_period: Option<Duration>,
}

pub(super) struct Inner<K> {
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    indexer: Indexer<K>,
    pub(super) processor: SharedProcessor<K>,
    config: Mutex<Config<K>>,
    fifo: OnceLock<Arc<DeltaFifo<K>>>,
    /// Held while a popped item is processed and while a handler is added, so
    /// a late handler's replay and later notifications never interleave.
    block_deltas: Mutex<()>,
    stop: CancellationToken,
    metrics: Option<Arc<dyn InformerMetrics>>,
    /// Name in logs and metrics (the lister-watcher's description).
    name: String,
    synced_rv: Mutex<Option<SyncedResourceVersion>>,
}

/// A cache of one resource type kept in step by list + watch, with many
/// handlers. Cheap to clone: clones share everything.
///
/// ```no_run
/// # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use k8s_openapi::api::apps::v1::Deployment;
/// use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
/// use informer_core::shared_informer::{SharedIndexInformer, handler_fn};
/// use tokio_util::sync::CancellationToken;
///
/// let api = kube_client::Api::<Deployment>::all(client);
/// let informer = SharedIndexInformer::new(
///     ApiListerWatcher::new(api, ListWatchOptions::default()),
///     Duration::ZERO,
/// );
/// informer.add_event_handler(
///     handler_fn()
///         .on_add(|d: std::sync::Arc<Deployment>, _| println!("added {:?}", d.metadata.name))
///         .on_delete(|d| println!("deleted {:?}", d.object().metadata.name)),
/// )?;
/// let stop = CancellationToken::new();
/// tokio::spawn({
///     let informer = informer.clone();
///     let stop = stop.clone();
///     async move { informer.run(stop).await }
/// });
/// informer.wait_for_cache_sync(Duration::from_secs(30)).await?;
/// println!("{} deployments", informer.indexer().len());
/// stop.cancel();
/// # Ok(()) }
/// ```
pub struct SharedIndexInformer<K> {
    pub(super) inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("type", &std::any::type_name::<K>())
            .field("phase", &self.inner.config.lock().phase)
            .finish_non_exhaustive()
    }
}

/// Builds a [`SharedIndexInformer`] with options beyond [`SharedIndexInformer::new`].
#[must_use]
pub struct SharedIndexInformerBuilder<K> {
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    default_resync: Duration,
    transform: Option<Transform<K>>,
    watch_error_handler: Option<WatchErrorHandler>,
    indexers: Vec<(String, IndexFn<K>)>,
    metrics: Option<Arc<dyn InformerMetrics>>,
}

impl<K> SharedIndexInformerBuilder<K>
where
    K: kube_core::Resource + Clone + Send + Sync + 'static,
{
    /// Resync period for handlers added without one (`Duration::ZERO`: none).
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = period;
        self
    }

    /// Transform applied to every object as it enters the FIFO.
    pub fn transform(mut self, transform: Transform<K>) -> Self {
        self.transform = Some(transform);
        self
    }

    /// Hears every error of the list/watch loop.
    pub fn watch_error_handler(mut self, handler: WatchErrorHandler) -> Self {
        self.watch_error_handler = Some(handler);
        self
    }

    /// Adds a named index to the informer's indexer.
    pub fn indexer(mut self, name: impl Into<String>, index: IndexFn<K>) -> Self {
        self.indexers.push((name.into(), index));
        self
    }

    /// Where the informer reports its counters and gauges.
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Builds the informer (not started). Fails only if an index name repeats.
    pub fn build(self) -> Result<SharedIndexInformer<K>, InformerError> {
        let indexer = Indexer::new();
        if !self.indexers.is_empty() {
            indexer.add_indexers(self.indexers)?;
        }
        let name = self.lister_watcher.describe();
        let observer: Option<PendingObserver> = self.metrics.as_ref().map(|m| {
            let m = Arc::clone(m);
            let informer = name.clone();
            let observer: PendingObserver = Arc::new(move |id, pending| {
                m.handler_pending(&informer, &format!("handler-{id}"), pending);
            });
            observer
        });
        Ok(SharedIndexInformer {
            inner: Arc::new(Inner {
                lister_watcher: self.lister_watcher,
                indexer,
                processor: SharedProcessor::new(observer),
                config: Mutex::new(Config {
                    phase: Phase::New,
                    transform: self.transform,
                    watch_error_handler: self.watch_error_handler,
                    default_resync: self.default_resync,
                    resync_check_period: resync_enabled(self.default_resync),
                }),
                fifo: OnceLock::new(),
                block_deltas: Mutex::new(()),
                stop: CancellationToken::new(),
                metrics: self.metrics,
                name,
                synced_rv: Mutex::new(None),
            }),
        })
    }
}

/// Runs its closure when dropped.
struct OnDrop(Option<Box<dyn FnOnce() + Send>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// `Some(period)` raised to the minimum, or `None` for zero (no resync).
fn resync_enabled(period: Duration) -> Option<Duration> {
    if period.is_zero() {
        None
    } else if period < MINIMUM_RESYNC_PERIOD {
        tracing::warn!(
            ?period,
            minimum = ?MINIMUM_RESYNC_PERIOD,
            "resync period too short; using the minimum"
        );
        Some(MINIMUM_RESYNC_PERIOD)
    } else {
        Some(period)
    }
}

fn resource_version<K: kube_core::Resource>(obj: &K) -> Option<&str> {
    obj.meta().resource_version.as_deref()
}

impl<K> SharedIndexInformer<K>
where
    K: kube_core::Resource + Clone + Send + Sync + 'static,
{
    /// An informer over `lister_watcher`; handlers added without a period of
    /// their own resync every `default_resync` (`Duration::ZERO`: never).
    pub fn new(lister_watcher: impl ListerWatcher<K>, default_resync: Duration) -> Self {
        match Self::builder(lister_watcher)
            .default_resync(default_resync)
            .build()
        {
            Ok(informer) => informer,
            // Without indexers build cannot fail.
            Err(err) => unreachable!("building without indexers failed: {err}"),
        }
    }

    /// Starts a builder over `lister_watcher`.
    pub fn builder(lister_watcher: impl ListerWatcher<K>) -> SharedIndexInformerBuilder<K> {
        SharedIndexInformerBuilder {
            lister_watcher: Arc::new(lister_watcher),
            default_resync: Duration::ZERO,
            transform: None,
            watch_error_handler: None,
            indexers: Vec::new(),
            metrics: None,
        }
    }

    /// Adds a handler with the informer's default resync period.
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<ResourceEventHandlerRegistration, InformerError> {
        let period = self.inner.config.lock().default_resync;
        self.add_event_handler_with_resync(handler, period)
    }

    /// Adds a handler that also gets resyncs every `resync_period`
    /// (`Duration::ZERO`: never; at least [`MINIMUM_RESYNC_PERIOD`]). Before
    /// start, a shorter period than any so far makes the informer check that
    /// often; after start, a period shorter than the informer's check period
    /// is raised to it. A handler added after start first receives
    /// `on_add(obj, true)` for every cached object.
    pub fn add_event_handler_with_resync(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync_period: Duration,
    ) -> Result<ResourceEventHandlerRegistration, InformerError> {
        let mut config = self.inner.config.lock();
        let mut period = resync_enabled(resync_period);
        match config.phase {
            Phase::Stopped => {
                return Err(InformerError::Stopped {
                    what: "adding a handler",
                });
            }
            Phase::New => {
                if let Some(p) = period
                    && config.resync_check_period.is_none_or(|check| p < check)
                {
                    config.resync_check_period = Some(p);
                }
            }
            Phase::Running => match (period, config.resync_check_period) {
                (Some(p), Some(check)) if p < check => {
                    tracing::warn!(
                        requested = ?p,
                        check = ?check,
                        "informer already started; raising the handler's resync period to the informer's check period"
                    );
                    period = Some(check);
                }
                (Some(p), None) => {
                    tracing::warn!(
                        requested = ?p,
                        "informer started without resync; this handler will not be resynced"
                    );
                }
                _ => {}
            },
        }
        let running = config.phase == Phase::Running;
        let _deltas = self.inner.block_deltas.lock();
        let replay = if running {
            self.inner.indexer.list()
        } else {
            Vec::new()
        };
        let (id, stats) = self
            .inner
            .processor
            .add_listener(Arc::new(handler), period, replay);
        drop(_deltas);
        drop(config);
        let weak = Arc::downgrade(&self.inner);
        let upstream_synced: UpstreamSynced = Arc::new(move || {
            weak.upgrade()
                .and_then(|inner| inner.fifo.get().map(|f| f.synced_receiver()))
        });
        Ok(ResourceEventHandlerRegistration {
            informer_id: self.informer_id(),
            id,
            stats,
            upstream_synced,
        })
    }

    /// Removes a handler: it receives nothing more (beyond a call already
    /// running). Removing twice is fine.
    pub fn remove_event_handler(
        &self,
        registration: &ResourceEventHandlerRegistration,
    ) -> Result<(), InformerError> {
        if registration.informer_id != self.informer_id() {
            return Err(InformerError::ForeignRegistration {
                id: registration.id,
            });
        }
        self.inner.processor.remove_listener(registration.id);
        Ok(())
    }

    /// Sets the transform applied to objects entering the FIFO. Only before start.
    pub fn set_transform(&self, transform: Transform<K>) -> Result<(), InformerError> {
        let mut config = self.inner.config.lock();
        if config.phase != Phase::New {
            return Err(InformerError::AlreadyStarted {
                what: "setting the transform",
            });
        }
        config.transform = Some(transform);
        Ok(())
    }

    /// Sets the handler of list/watch errors. Only before start.
    pub fn set_watch_error_handler(&self, handler: WatchErrorHandler) -> Result<(), InformerError> {
        let mut config = self.inner.config.lock();
        if config.phase != Phase::New {
            return Err(InformerError::AlreadyStarted {
                what: "setting the watch error handler",
            });
        }
        config.watch_error_handler = Some(handler);
        Ok(())
    }

    /// Adds named indexes (existing objects are re-indexed).
    pub fn add_indexers(
        &self,
        indexers: impl IntoIterator<Item = (String, IndexFn<K>)>,
    ) -> Result<(), InformerError> {
        Ok(self.inner.indexer.add_indexers(indexers)?)
    }

    /// The informer's cache.
    pub fn indexer(&self) -> &Indexer<K> {
        &self.inner.indexer
    }

    /// A lister over the informer's cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.indexer.clone())
    }

    /// True once the first list has been fully processed into the cache.
    pub fn has_synced(&self) -> bool {
        self.inner.fifo.get().is_some_and(|f| f.has_synced())
    }

    /// True between the start of [`run`](Self::run) and its end.
    pub fn is_running(&self) -> bool {
        self.inner.config.lock().phase == Phase::Running
    }

    /// True once [`run`](Self::run) has returned (or [`stop`](Self::stop) was called before it ran).
    pub fn is_stopped(&self) -> bool {
        self.inner.config.lock().phase == Phase::Stopped
    }

    /// The resourceVersion of the last list or watch event the reflector
    /// processed (`None` before the first list).
    pub fn last_sync_resource_version(&self) -> Option<String> {
        let synced = self.inner.synced_rv.lock().clone();
        synced.and_then(|rv| rv.get())
    }

    /// How often the informer checks whether a handler's resync is due
    /// (`None`: never).
    pub fn resync_check_period(&self) -> Option<Duration> {
        self.inner.config.lock().resync_check_period
    }

    /// Waits up to `timeout` for [`has_synced`](Self::has_synced).
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> Result<(), InformerError> {
        let cancel = CancellationToken::new();
        tokio::select! {
            synced = self.wait_for_cache_sync_until(&cancel) => {
                if synced { Ok(()) } else { Err(InformerError::SyncCancelled) }
            }
            () = tokio::time::sleep(timeout) => {
                if self.has_synced() { Ok(()) } else { Err(InformerError::SyncTimeout(timeout)) }
            }
        }
    }

    /// Waits for [`has_synced`](Self::has_synced) until `cancel` fires or the
    /// informer stops; returns whether it synced.
    pub async fn wait_for_cache_sync_until(&self, cancel: &CancellationToken) -> bool {
        loop {
            if self.has_synced() {
                return true;
            }
            if self.is_stopped() {
                return false;
            }
            // Woken the moment the FIFO syncs; the short sleep only covers
            // an informer not running yet, or stopping.
            let synced = async {
                match self.inner.fifo.get() {
                    Some(fifo) => fifo.synced().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return self.has_synced(),
                () = synced => {}
                () = tokio::time::sleep(SYNC_POLL) => {}
            }
        }
    }

    /// Asks a running informer to stop (as if its run token was cancelled).
    pub fn stop(&self) {
        self.inner.stop.cancel();
        let mut config = self.inner.config.lock();
        if config.phase == Phase::New {
            config.phase = Phase::Stopped;
        }
    }

    /// Runs the informer until `shutdown` fires (or [`stop`](Self::stop)):
    /// starts the reflector, the handlers' tasks and the resync checks, and
    /// processes the FIFO. An informer runs once; a second call is an error.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), InformerError> {
        let (fifo, check_period, watch_error_handler) = {
            let mut config = self.inner.config.lock();
            match config.phase {
                Phase::New => {}
                Phase::Running => return Err(InformerError::AlreadyStarted { what: "running" }),
                Phase::Stopped => return Err(InformerError::Stopped { what: "running" }),
            }
            config.phase = Phase::Running;
            let known: Arc<dyn KnownObjects<K>> = Arc::new(self.inner.indexer.clone());
            let mut fifo = DeltaFifo::new(Some(known));
            if let Some(transform) = config.transform.clone() {
                fifo = fifo.with_transform(transform);
            }
            let fifo = Arc::new(fifo);
            let _ = self.inner.fifo.set(Arc::clone(&fifo));
            (
                fifo,
                config.resync_check_period,
                config.watch_error_handler.clone(),
            )
        };
        let token = CancellationToken::new();
        // If this future is dropped instead of finishing, still stop
        // everything it started.
        let _cleanup = OnDrop(Some(Box::new({
            let inner = Arc::clone(&self.inner);
            let fifo = Arc::clone(&fifo);
            let token = token.clone();
            move || {
                token.cancel();
                fifo.close();
                inner.processor.stop();
                inner.config.lock().phase = Phase::Stopped;
            }
        })));
        let stop_link = {
            let token = token.clone();
            let shutdown = shutdown.clone();
            let own = self.inner.stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = own.cancelled() => {}
                    () = token.cancelled() => {}
                }
                token.cancel();
            })
        };
        self.inner.processor.run();
        let mut reflector =
            Reflector::builder(Arc::clone(&self.inner.lister_watcher), Arc::clone(&fifo))
                .name(self.inner.name.clone());
        if let Some(metrics) = &self.inner.metrics {
            reflector = reflector.metrics(Arc::clone(metrics));
        }
        if let Some(handler) = watch_error_handler {
            reflector = reflector.watch_error_handler(move |err| handler(err));
        }
        if let Some(period) = check_period {
            // client-go: the reflector ticks at the informer's check period
            // and resyncs only when some handler's period is due.
            let inner = Arc::downgrade(&self.inner);
            reflector = reflector.resync_period(period).should_resync(move || {
                inner
                    .upgrade()
                    .is_some_and(|inner| inner.processor.should_resync())
            });
        }
        let reflector = reflector.build();
        *self.inner.synced_rv.lock() = Some(reflector.synced_resource_version());
        let reflector = tokio::spawn(reflector.run(token.clone()));
        tracing::debug!(informer = %self.inner.name, "informer started");

        loop {
            let inner = Arc::clone(&self.inner);
            tokio::select! {
                () = token.cancelled() => break,
                popped = fifo.pop(move |deltas| inner.handle_deltas(deltas)) => {
                    if popped.is_err() {
                        break;
                    }
                }
            }
        }

        token.cancel();
        fifo.close();
        self.inner.processor.stop();
        let _ = stop_link.await;
        if let Err(err) = reflector.await {
            tracing::error!(error = %err, "reflector task failed");
        }
        drop(_cleanup);
        tracing::debug!(informer = %self.inner.name, "informer stopped");
        Ok(())
    }

    fn informer_id(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }
}

impl<K> Inner<K>
where
    K: kube_core::Resource + Clone + Send + Sync + 'static,
{
    /// Applies one popped key to the indexer and the handlers. Runs while the
    /// FIFO lock is held.
    pub(super) fn handle_deltas(&self, deltas: Deltas<K>) {
        let _deltas = self.block_deltas.lock();
        let Deltas {
            key,
            deltas,
            is_in_initial_list,
        } = deltas;
        for delta in deltas {
            match delta.kind {
                DeltaType::Deleted => {
                    self.indexer.delete(&key);
                    self.processor
                        .distribute(Notification::Delete(delta.object), false);
                }
                DeltaType::Sync | DeltaType::Replaced | DeltaType::Added | DeltaType::Updated => {
                    let new = delta.object.into_object();
                    // One write: stores `new` under the FIFO's key string and
                    // hands back the version it replaced, if any.
                    let (old, err) = self.indexer.upsert(&key, Arc::clone(&new));
                    if let Some(err) = err {
                        tracing::warn!(key = %key, error = %err, "indexing an object failed");
                    }
                    match old {
                        Some(old) => {
                            let resync = delta.kind == DeltaType::Sync
                                || resource_version(old.as_ref()) == resource_version(new.as_ref());
                            self.processor
                                .distribute(Notification::Update { old, new }, resync);
                        }
                        None => {
                            self.processor.distribute(
                                Notification::Add {
                                    obj: new,
                                    is_in_initial_list,
                                },
                                false,
                            );
                        }
                    }
                }
            }
        }
    }
}
