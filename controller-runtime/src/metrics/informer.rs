//! Informer metrics on Prometheus: the adapter from informer-core's
//! [`InformerMetrics`] sink to `informer_*` series labelled by informer.

use std::time::{Duration, SystemTime};

use informer_core::metrics::{InformerMetrics, RelistCause, WatchEventType, WatchRestartCause};
use prometheus::{
    GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
};

use super::MetricsError;

/// The `informer_*` families on one registry; hand it (as
/// `Arc<dyn InformerMetrics>`) to informers.
///
/// | metric | labels |
/// |---|---|
/// | `informer_lists_total` | `informer` |
/// | `informer_list_failures_total` | `informer`, `reason` |
/// | `informer_list_duration_seconds` (histogram) | `informer` |
/// | `informer_list_items` (gauge, last list) | `informer` |
/// | `informer_relists_total` | `informer`, `cause` |
/// | `informer_streaming_list_fallbacks_total` | `informer` |
/// | `informer_metadata_fallbacks_total` | `informer` |
/// | `informer_protobuf_fallbacks_total` | `informer`, `reason` |
/// | `informer_watches_total` | `informer` |
/// | `informer_watch_restarts_total` | `informer`, `cause` |
/// | `informer_watch_events_total` | `informer`, `type` |
/// | `informer_decode_failures_total` | `informer` |
/// | `informer_backoff_seconds` (histogram) | `informer` |
/// | `informer_last_sync_timestamp_seconds` | `informer` |
/// | `informer_handler_pending` | `informer`, `handler` |
#[derive(Clone, Debug)]
pub struct PrometheusInformerMetrics {
    lists: IntCounterVec,
    list_failures: IntCounterVec,
    list_duration: HistogramVec,
    list_items: IntGaugeVec,
    relists: IntCounterVec,
    streaming_fallbacks: IntCounterVec,
    metadata_fallbacks: IntCounterVec,
    protobuf_fallbacks: IntCounterVec,
    watches: IntCounterVec,
    watch_restarts: IntCounterVec,
    watch_events: IntCounterVec,
    decode_failures: IntCounterVec,
    backoff: HistogramVec,
    last_sync: GaugeVec,
    handler_pending: IntGaugeVec,
}

const SECONDS_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

impl PrometheusInformerMetrics {
    /// Creates the families and registers them on `registry`.
    pub fn new(registry: &Registry) -> Result<Self, MetricsError> {
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, MetricsError> {
                let c = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(c.clone()))?;
                Ok(c)
            };
        let histogram = |name: &str, help: &str| -> Result<HistogramVec, MetricsError> {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(SECONDS_BUCKETS.to_vec()),
                &["informer"],
            )?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let list_items = IntGaugeVec::new(
            Opts::new(
                "informer_list_items",
                "Objects in the informer's last full list",
            ),
            &["informer"],
        )?;
        registry.register(Box::new(list_items.clone()))?;
        let last_sync = GaugeVec::new(
            Opts::new(
                "informer_last_sync_timestamp_seconds",
                "Unix time the informer's store was last brought in step with the server",
            ),
            &["informer"],
        )?;
        registry.register(Box::new(last_sync.clone()))?;
        let handler_pending = IntGaugeVec::new(
            Opts::new(
                "informer_handler_pending",
                "Notifications waiting in one event handler's buffer",
            ),
            &["informer", "handler"],
        )?;
        registry.register(Box::new(handler_pending.clone()))?;
        Ok(PrometheusInformerMetrics {
            lists: counter("informer_lists_total", "Completed lists", &["informer"])?,
            list_failures: counter(
                "informer_list_failures_total",
                "Failed lists by Status reason",
                &["informer", "reason"],
            )?,
            list_duration: histogram("informer_list_duration_seconds", "Duration of full lists")?,
            list_items,
            relists: counter(
                "informer_relists_total",
                "Lists after the first, by cause",
                &["informer", "cause"],
            )?,
            streaming_fallbacks: counter(
                "informer_streaming_list_fallbacks_total",
                "Streaming lists that fell back to LIST",
                &["informer"],
            )?,
            metadata_fallbacks: counter(
                "informer_metadata_fallbacks_total",
                "Metadata-only informers switched to full objects (the server refused metadata-only requests)",
                &["informer"],
            )?,
            protobuf_fallbacks: counter(
                "informer_protobuf_fallbacks_total",
                "Informers switched from protobuf to JSON (refused, answered in JSON, or undecodable)",
                &["informer", "reason"],
            )?,
            watches: counter("informer_watches_total", "Watches opened", &["informer"])?,
            watch_restarts: counter(
                "informer_watch_restarts_total",
                "Watches opened again without a list, by cause",
                &["informer", "cause"],
            )?,
            watch_events: counter(
                "informer_watch_events_total",
                "Watch events received, by type",
                &["informer", "type"],
            )?,
            decode_failures: counter(
                "informer_decode_failures_total",
                "Objects or events that could not be decoded",
                &["informer"],
            )?,
            backoff: histogram(
                "informer_backoff_seconds",
                "Delays before retrying list or watch",
            )?,
            last_sync,
            handler_pending,
        })
    }
}

impl InformerMetrics for PrometheusInformerMetrics {
    fn list_completed(&self, informer: &str, items: usize, _pages: usize, duration: Duration) {
        self.lists.with_label_values(&[informer]).inc();
        self.list_duration
            .with_label_values(&[informer])
            .observe(duration.as_secs_f64());
        self.list_items
            .with_label_values(&[informer])
            .set(i64::try_from(items).unwrap_or(i64::MAX));
    }

    fn list_failed(&self, informer: &str, reason: &str) {
        self.list_failures
            .with_label_values(&[informer, reason])
            .inc();
    }

    fn relist(&self, informer: &str, cause: RelistCause) {
        self.relists
            .with_label_values(&[informer, cause.as_str()])
            .inc();
    }

    fn streaming_list_fallback(&self, informer: &str) {
        self.streaming_fallbacks
            .with_label_values(&[informer])
            .inc();
    }

    fn metadata_fallback(&self, informer: &str) {
        self.metadata_fallbacks.with_label_values(&[informer]).inc();
    }

    fn protobuf_fallback(&self, informer: &str, reason: &str) {
        self.protobuf_fallbacks
            .with_label_values(&[informer, reason])
            .inc();
    }

    fn watch_started(&self, informer: &str) {
        self.watches.with_label_values(&[informer]).inc();
    }

    fn watch_restart(&self, informer: &str, cause: WatchRestartCause) {
        self.watch_restarts
            .with_label_values(&[informer, cause.as_str()])
            .inc();
    }

    fn watch_event(&self, informer: &str, kind: WatchEventType) {
        self.watch_events
            .with_label_values(&[informer, kind.as_str()])
            .inc();
    }

    fn decode_failure(&self, informer: &str) {
        self.decode_failures.with_label_values(&[informer]).inc();
    }

    fn backoff(&self, informer: &str, delay: Duration) {
        self.backoff
            .with_label_values(&[informer])
            .observe(delay.as_secs_f64());
    }

    fn last_sync(&self, informer: &str, _resource_version: &str, at: SystemTime) {
        let secs = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        self.last_sync.with_label_values(&[informer]).set(secs);
    }

    fn handler_pending(&self, informer: &str, handler: &str, pending: usize) {
        self.handler_pending
            .with_label_values(&[informer, handler])
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }
}
