//! [`SharedIndexInformerBuilder`]: a [`SharedIndexInformer`] with options
//! beyond [`SharedIndexInformer::new`] (transform and managedFields
//! stripping, streaming list, indexes, metrics, watch-error handler).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::informer::{Config, Inner, Phase, resync_enabled};
use super::{InformerError, SharedIndexInformer, WatchErrorHandler};
use crate::delta_fifo::Transform;
use crate::list_watch::ListerWatcher;
use crate::metrics::InformerMetrics;
use crate::processor::{PendingObserver, SharedProcessor};
use crate::store::{IndexFn, Indexer};

/// Builds a [`SharedIndexInformer`] with options beyond [`SharedIndexInformer::new`].
#[must_use]
pub struct SharedIndexInformerBuilder<K> {
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    default_resync: Duration,
    transform: Option<Transform<K>>,
    watch_error_handler: Option<WatchErrorHandler>,
    indexers: Vec<(String, IndexFn<K>)>,
    metrics: Option<Arc<dyn InformerMetrics>>,
    streaming_list: Option<bool>,
    strip_managed_fields: bool,
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

    /// Transform applied to every object as it enters the FIFO (before
    /// the managedFields stripping, if that is on: see
    /// [`strip_managed_fields`](Self::strip_managed_fields)).
    pub fn transform(mut self, transform: Transform<K>) -> Self {
        self.transform = Some(transform);
        self
    }

    /// Whether `metadata.managedFields` are cleared from every object
    /// before it is cached (off by default). This composes with a
    /// [`transform`](Self::transform) rather than being one: the transform
    /// runs first, on the object as the server sent it, then managedFields
    /// are cleared from what it returned, so no transform can put them
    /// back into the cache.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use informer_core::shared_informer::SharedIndexInformer;
    /// use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
    /// use kube_client::{Api, Client, Config};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Nothing is sent before the informer runs: any address will do here.
    /// let client = Client::try_from(Config::new("http://127.0.0.1:9".parse()?))?;
    /// let lw = ApiListerWatcher::new(Api::all(client), ListWatchOptions::default());
    /// let informer = SharedIndexInformer::builder(lw)
    ///     .strip_managed_fields(true)
    ///     .transform(Arc::new(|mut cm: k8s_openapi::api::core::v1::ConfigMap| {
    ///         cm.binary_data = None;
    ///         cm
    ///     }))
    ///     .build()?;
    /// assert!(informer.strips_managed_fields());
    /// # Ok(()) }
    /// ```
    pub fn strip_managed_fields(mut self, strip: bool) -> Self {
        self.strip_managed_fields = strip;
        self
    }

    /// Whether the first list (and every relist) is a streaming list: a
    /// WATCH with `sendInitialEvents=true`, falling back to LIST (counted in
    /// [`InformerMetrics::streaming_list_fallback`]) where the server
    /// refuses it. Unset, it is on for a lister-watcher that
    /// [supports it](ListerWatcher::supports_streaming_list) (an
    /// [`ApiListerWatcher`](crate::list_watch::ApiListerWatcher)), as
    /// client-go's `WatchListClient` is on by default from Kubernetes 1.35.
    pub fn streaming_list(mut self, enabled: bool) -> Self {
        self.streaming_list = Some(enabled);
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
        let streaming_list = self
            .streaming_list
            .unwrap_or_else(|| self.lister_watcher.supports_streaming_list());
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
                    strip_managed_fields: self.strip_managed_fields,
                    streaming_list,
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

impl<K> SharedIndexInformerBuilder<K> {
    /// A builder over `lister_watcher` with every option at its default.
    pub(super) fn new(lister_watcher: Arc<dyn ListerWatcher<K>>) -> Self {
        Self {
            lister_watcher,
            default_resync: Duration::ZERO,
            transform: None,
            watch_error_handler: None,
            indexers: Vec::new(),
            metrics: None,
            streaming_list: None,
            strip_managed_fields: false,
        }
    }
}
