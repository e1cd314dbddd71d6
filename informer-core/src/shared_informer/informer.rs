//! [`SharedIndexInformer`] itself: construction, handler registration, the
//! run loop that pops the FIFO, and sync waits.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::registration::{SYNC_POLL, UpstreamSynced};
use super::{InformerError, MINIMUM_RESYNC_PERIOD, ResourceEventHandler};
use super::{ResourceEventHandlerRegistration, SharedIndexInformerBuilder};
use crate::delta_fifo::{DeltaFifo, DeltaType, Deltas, Transform, strip_managed_fields};
use crate::list_watch::ListerWatcher;
use crate::lister::Lister;
use crate::metrics::InformerMetrics;
use crate::processor::{Notification, SharedProcessor};
pub use crate::reflector::WatchErrorHandler;
use crate::reflector::{Reflector, SyncedResourceVersion};
use crate::store::{IndexFn, Indexer, KnownObjects};

/// The most keys the informer takes from its FIFO at once (a LIST page
/// or a burst of watch events), keeping the FIFO's lock, which the
/// reflector needs to queue more, for a bounded time.
const POP_BATCH: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    New,
    Running,
    Stopped,
}

pub(super) struct Config<K> {
    pub(super) phase: Phase,
    /// The user's transform (managedFields stripping is apart from it).
    pub(super) transform: Option<Transform<K>>,
    pub(super) watch_error_handler: Option<WatchErrorHandler>,
    pub(super) default_resync: Duration,
    /// How often the informer asks the processor whether a resync is due.
    pub(super) resync_check_period: Option<Duration>,
    /// Clear managedFields after the user's transform.
    pub(super) strip_managed_fields: bool,
    /// Start from a streaming list rather than LIST.
    pub(super) streaming_list: bool,
}

impl<K: kube_core::Resource + 'static> Config<K> {
    /// What the FIFO runs on every object entering it: the user's
    /// transform, then the managedFields stripping.
    fn fifo_transform(&self) -> Option<Transform<K>> {
        match (self.transform.clone(), self.strip_managed_fields) {
            (None, false) => None,
            (None, true) => Some(strip_managed_fields()),
            (Some(user), false) => Some(user),
            (Some(user), true) => Some(Arc::new(move |obj: K| {
                let mut obj = user(obj);
                obj.meta_mut().managed_fields = None;
                obj
            })),
        }
    }
}

pub(super) struct Inner<K> {
    pub(super) lister_watcher: Arc<dyn ListerWatcher<K>>,
    pub(super) indexer: Indexer<K>,
    pub(super) processor: SharedProcessor<K>,
    pub(super) config: Mutex<Config<K>>,
    pub(super) fifo: OnceLock<Arc<DeltaFifo<K>>>,
    /// Held while a popped item is processed and while a handler is added, so
    /// a late handler's replay and later notifications never interleave.
    pub(super) block_deltas: Mutex<()>,
    pub(super) stop: CancellationToken,
    pub(super) metrics: Option<Arc<dyn InformerMetrics>>,
    /// Name in logs and metrics (the lister-watcher's description).
    pub(super) name: String,
    pub(super) synced_rv: Mutex<Option<SyncedResourceVersion>>,
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
pub(super) fn resync_enabled(period: Duration) -> Option<Duration> {
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
        SharedIndexInformerBuilder::new(Arc::new(lister_watcher))
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

    /// Sets the transform applied to objects entering the FIFO, in place of
    /// an earlier one. It composes with managedFields stripping: the
    /// transform runs first, then managedFields are cleared (see
    /// [`SharedIndexInformerBuilder::strip_managed_fields`]). Only before start.
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

    /// Whether managedFields are cleared from objects before caching.
    pub fn strips_managed_fields(&self) -> bool {
        self.inner.config.lock().strip_managed_fields
    }

    /// Whether lists are streaming lists (with a fallback to LIST); see
    /// [`SharedIndexInformerBuilder::streaming_list`].
    pub fn uses_streaming_list(&self) -> bool {
        self.inner.config.lock().streaming_list
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
        let (fifo, check_period, watch_error_handler, streaming_list) = {
            let mut config = self.inner.config.lock();
            match config.phase {
                Phase::New => {}
                Phase::Running => return Err(InformerError::AlreadyStarted { what: "running" }),
                Phase::Stopped => return Err(InformerError::Stopped { what: "running" }),
            }
            config.phase = Phase::Running;
            let known: Arc<dyn KnownObjects<K>> = Arc::new(self.inner.indexer.clone());
            let mut fifo = DeltaFifo::new(Some(known));
            if let Some(transform) = config.fifo_transform() {
                fifo = fifo.with_transform(transform);
            }
            let fifo = Arc::new(fifo);
            let _ = self.inner.fifo.set(Arc::clone(&fifo));
            // Stripped anyway and no transform sees them first: the
            // lister-watcher may skip them as it decodes.
            self.inner
                .lister_watcher
                .drop_managed_fields(config.strip_managed_fields && config.transform.is_none());
            (
                fifo,
                config.resync_check_period,
                config.watch_error_handler.clone(),
                config.streaming_list,
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
                .name(self.inner.name.clone())
                .streaming_list(streaming_list);
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
                popped = fifo.pop_batch(POP_BATCH, move |batch| inner.handle_batch(batch)) => {
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
    /// Applies popped keys to the indexer and the handlers, in order. Runs
    /// while the FIFO lock is held.
    pub(super) fn handle_batch(&self, batch: Vec<Deltas<K>>) {
        let _deltas = self.block_deltas.lock();
        for deltas in batch {
            self.apply(deltas);
        }
    }

    /// Applies one popped key to the indexer and the handlers. Runs while the
    /// FIFO lock is held.
    #[cfg(test)]
    pub(super) fn handle_deltas(&self, deltas: Deltas<K>) {
        let _deltas = self.block_deltas.lock();
        self.apply(deltas);
    }

    /// [`handle_deltas`](Self::handle_deltas) with the delta lock held.
    fn apply(&self, deltas: Deltas<K>) {
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
