//! Informer metrics on Prometheus: the adapter from informer-core's
//! [`InformerMetrics`] sink to `informer_*` series labelled by informer.

use std::time::{Duration, SystemTime};

use informer_core::metrics::{InformerMetrics, RelistCause, WatchEventType, WatchRestartCause};
use std::sync::Arc;

use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::{
    GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
};

use super::MetricsError;

/// The `informer_*` families on one registry; hand it (as
/// `Arc<dyn InformerMetrics>`) to informers.
///
/// Every family also carries `cluster`: `""` for the manager's own
/// cluster (a Prometheus server drops an empty label, so queries see no
/// difference), a fleet cluster's name in its informers' series (removed
/// when the cluster is disengaged, so the label stays bounded by the
/// engaged set).
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
/// | `informer_oversized_answers_total` | `informer`, `part` |
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
    oversized_answers: IntCounterVec,
    backoff: HistogramVec,
    last_sync: GaugeVec,
    handler_pending: IntGaugeVec,
}

const SECONDS_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

impl PrometheusInformerMetrics {
    fn labelled(&self) -> Labelled<'_> {
        Labelled {
            m: self,
            cluster: "",
        }
    }

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
                &["cluster", "informer"],
            )?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let list_items = IntGaugeVec::new(
            Opts::new(
                "informer_list_items",
                "Objects in the informer's last full list",
            ),
            &["cluster", "informer"],
        )?;
        registry.register(Box::new(list_items.clone()))?;
        let last_sync = GaugeVec::new(
            Opts::new(
                "informer_last_sync_timestamp_seconds",
                "Unix time the informer's store was last brought in step with the server",
            ),
            &["cluster", "informer"],
        )?;
        registry.register(Box::new(last_sync.clone()))?;
        let handler_pending = IntGaugeVec::new(
            Opts::new(
                "informer_handler_pending",
                "Notifications waiting in one event handler's buffer",
            ),
            &["cluster", "informer", "handler"],
        )?;
        registry.register(Box::new(handler_pending.clone()))?;
        Ok(PrometheusInformerMetrics {
            lists: counter(
                "informer_lists_total",
                "Completed lists",
                &["cluster", "informer"],
            )?,
            list_failures: counter(
                "informer_list_failures_total",
                "Failed lists by Status reason",
                &["cluster", "informer", "reason"],
            )?,
            list_duration: histogram("informer_list_duration_seconds", "Duration of full lists")?,
            list_items,
            relists: counter(
                "informer_relists_total",
                "Lists after the first, by cause",
                &["cluster", "informer", "cause"],
            )?,
            streaming_fallbacks: counter(
                "informer_streaming_list_fallbacks_total",
                "Streaming lists that fell back to LIST",
                &["cluster", "informer"],
            )?,
            metadata_fallbacks: counter(
                "informer_metadata_fallbacks_total",
                "Metadata-only informers switched to full objects (the server refused metadata-only requests)",
                &["cluster", "informer"],
            )?,
            protobuf_fallbacks: counter(
                "informer_protobuf_fallbacks_total",
                "Informers switched from protobuf to JSON (refused, answered in JSON, or undecodable)",
                &["cluster", "informer", "reason"],
            )?,
            watches: counter(
                "informer_watches_total",
                "Watches opened",
                &["cluster", "informer"],
            )?,
            watch_restarts: counter(
                "informer_watch_restarts_total",
                "Watches opened again without a list, by cause",
                &["cluster", "informer", "cause"],
            )?,
            watch_events: counter(
                "informer_watch_events_total",
                "Watch events received, by type",
                &["cluster", "informer", "type"],
            )?,
            decode_failures: counter(
                "informer_decode_failures_total",
                "Objects or events that could not be decoded",
                &["cluster", "informer"],
            )?,
            oversized_answers: counter(
                "informer_oversized_answers_total",
                "Watch events or LIST answers over the informer's read limits, by part",
                &["cluster", "informer", "part"],
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

/// The families with the `cluster` label set: `""` for the manager's own
/// cluster, the name of a fleet cluster otherwise.
struct Labelled<'a> {
    m: &'a PrometheusInformerMetrics,
    cluster: &'a str,
}

macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(fn $name(&self, $($arg: $ty),*) {
            self.labelled().$name($($arg),*)
        })*
    };
}

// Both sinks record through `labelled()`, from the one list of the trait's
// methods below: the trait's methods default to doing nothing, so a method
// missing from a second list would silently record nothing for that sink.
macro_rules! delegate_all {
    ($($sink:ty),*) => {
        $(impl InformerMetrics for $sink {
            delegate! {
            list_completed(informer: &str, items: usize, pages: usize, duration: Duration);
            list_failed(informer: &str, reason: &str);
            relist(informer: &str, cause: RelistCause);
            streaming_list_fallback(informer: &str);
            metadata_fallback(informer: &str);
            protobuf_fallback(informer: &str, reason: &str);
            watch_started(informer: &str);
            watch_restart(informer: &str, cause: WatchRestartCause);
            watch_event(informer: &str, kind: WatchEventType);
            decode_failure(informer: &str);
            oversized_answer(informer: &str, part: &str);
            backoff(informer: &str, delay: Duration);
            last_sync(informer: &str, resource_version: &str, at: SystemTime);
            handler_pending(informer: &str, handler: &str, pending: usize);
            }
        })*
    };
}

delegate_all!(PrometheusInformerMetrics, ClusterInformerMetrics);

/// The `informer_*` sink of one fleet cluster: the families of a
/// [`PrometheusInformerMetrics`] with `cluster` set to its name. Its series
/// are removed by [`ClusterInformerMetrics::remove_series`] (the fleet does
/// when it disengages the cluster), so the label stays bounded by the
/// engaged set.
#[derive(Debug, Clone)]
pub(crate) struct ClusterInformerMetrics {
    families: Arc<PrometheusInformerMetrics>,
    cluster: String,
}

impl ClusterInformerMetrics {
    /// The sink of `cluster` on `families`.
    pub(crate) fn new(
        families: Arc<PrometheusInformerMetrics>,
        cluster: impl Into<String>,
    ) -> Self {
        ClusterInformerMetrics {
            families,
            cluster: cluster.into(),
        }
    }

    /// Removes every series of this cluster.
    pub(crate) fn remove_series(&self) {
        let m = &self.families;
        let c = self.cluster.as_str();
        remove_where(&m.lists, c);
        remove_where(&m.list_failures, c);
        remove_where(&m.list_duration, c);
        remove_where(&m.list_items, c);
        remove_where(&m.relists, c);
        remove_where(&m.streaming_fallbacks, c);
        remove_where(&m.metadata_fallbacks, c);
        remove_where(&m.protobuf_fallbacks, c);
        remove_where(&m.watches, c);
        remove_where(&m.watch_restarts, c);
        remove_where(&m.watch_events, c);
        remove_where(&m.decode_failures, c);
        remove_where(&m.oversized_answers, c);
        remove_where(&m.backoff, c);
        remove_where(&m.last_sync, c);
        remove_where(&m.handler_pending, c);
    }

    fn labelled(&self) -> Labelled<'_> {
        Labelled {
            m: &self.families,
            cluster: &self.cluster,
        }
    }
}

/// Removes the series of `vec` whose `cluster` label is `cluster` (the
/// collected label pairs come sorted by name; the values are put back in
/// the family's order).
fn remove_where<T: MetricVecBuilder>(vec: &MetricVec<T>, cluster: &str) {
    let names: Vec<String> = vec
        .desc()
        .first()
        .map(|d| d.variable_labels.clone())
        .unwrap_or_default();
    let mut doomed: Vec<Vec<String>> = Vec::new();
    for family in vec.collect() {
        for metric in family.get_metric() {
            let labels = metric.get_label();
            let value_of = |name: &str| {
                labels
                    .iter()
                    .find(|l| l.name() == name)
                    .map(|l| l.value().to_string())
                    .unwrap_or_default()
            };
            if value_of("cluster") == cluster {
                doomed.push(names.iter().map(|n| value_of(n)).collect());
            }
        }
    }
    for values in doomed {
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let _ = vec.remove_label_values(&values);
    }
}

impl InformerMetrics for Labelled<'_> {
    fn list_completed(&self, informer: &str, items: usize, _pages: usize, duration: Duration) {
        self.m
            .lists
            .with_label_values(&[self.cluster, informer])
            .inc();
        self.m
            .list_duration
            .with_label_values(&[self.cluster, informer])
            .observe(duration.as_secs_f64());
        self.m
            .list_items
            .with_label_values(&[self.cluster, informer])
            .set(i64::try_from(items).unwrap_or(i64::MAX));
    }

    fn list_failed(&self, informer: &str, reason: &str) {
        self.m
            .list_failures
            .with_label_values(&[self.cluster, informer, reason])
            .inc();
    }

    fn relist(&self, informer: &str, cause: RelistCause) {
        self.m
            .relists
            .with_label_values(&[self.cluster, informer, cause.as_str()])
            .inc();
    }

    fn streaming_list_fallback(&self, informer: &str) {
        self.m
            .streaming_fallbacks
            .with_label_values(&[self.cluster, informer])
            .inc();
    }

    fn metadata_fallback(&self, informer: &str) {
        self.m
            .metadata_fallbacks
            .with_label_values(&[self.cluster, informer])
            .inc();
    }

    fn protobuf_fallback(&self, informer: &str, reason: &str) {
        self.m
            .protobuf_fallbacks
            .with_label_values(&[self.cluster, informer, reason])
            .inc();
    }

    fn watch_started(&self, informer: &str) {
        self.m
            .watches
            .with_label_values(&[self.cluster, informer])
            .inc();
    }

    fn watch_restart(&self, informer: &str, cause: WatchRestartCause) {
        self.m
            .watch_restarts
            .with_label_values(&[self.cluster, informer, cause.as_str()])
            .inc();
    }

    fn watch_event(&self, informer: &str, kind: WatchEventType) {
        self.m
            .watch_events
            .with_label_values(&[self.cluster, informer, kind.as_str()])
            .inc();
    }

    fn decode_failure(&self, informer: &str) {
        self.m
            .decode_failures
            .with_label_values(&[self.cluster, informer])
            .inc();
    }

    fn oversized_answer(&self, informer: &str, part: &str) {
        self.m
            .oversized_answers
            .with_label_values(&[self.cluster, informer, part])
            .inc();
    }

    fn backoff(&self, informer: &str, delay: Duration) {
        self.m
            .backoff
            .with_label_values(&[self.cluster, informer])
            .observe(delay.as_secs_f64());
    }

    fn last_sync(&self, informer: &str, _resource_version: &str, at: SystemTime) {
        let secs = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        self.m
            .last_sync
            .with_label_values(&[self.cluster, informer])
            .set(secs);
    }

    fn handler_pending(&self, informer: &str, handler: &str, pending: usize) {
        self.m
            .handler_pending
            .with_label_values(&[self.cluster, informer, handler])
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }
}
