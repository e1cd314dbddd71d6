//! Workqueue metrics: what a queue reports, and a Prometheus implementation
//! under the names client-go and controller-runtime use.
//!
//! A [`MetricsProvider`] hands each named queue a [`QueueMetrics`], which
//! the queue updates as items move: depth, adds, time spent waiting, time
//! spent processing, work in progress, and retries. [`NoopMetricsProvider`]
//! reports nothing (queues without a provider skip the calls entirely);
//! [`PrometheusMetricsProvider`] registers the standard `workqueue_*`
//! families, labelled `name` and `controller` (both the queue's name), on a
//! [`prometheus::Registry`] of your choice, so existing dashboards work.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};

use super::Error;

/// `workqueue_depth`: items waiting for a worker.
pub const DEPTH: &str = "workqueue_depth";
/// `workqueue_adds_total`: adds that made an item pending.
pub const ADDS_TOTAL: &str = "workqueue_adds_total";
/// `workqueue_queue_duration_seconds`: time from ready to handed out.
pub const QUEUE_DURATION_SECONDS: &str = "workqueue_queue_duration_seconds";
/// `workqueue_work_duration_seconds`: time from handed out to done.
pub const WORK_DURATION_SECONDS: &str = "workqueue_work_duration_seconds";
/// `workqueue_unfinished_work_seconds`: summed age of work in progress.
pub const UNFINISHED_WORK_SECONDS: &str = "workqueue_unfinished_work_seconds";
/// `workqueue_longest_running_processor_seconds`: age of the oldest work in
/// progress.
pub const LONGEST_RUNNING_PROCESSOR_SECONDS: &str = "workqueue_longest_running_processor_seconds";
/// `workqueue_retries_total`: delayed re-adds (every `add_after`, every
/// rate-limited add), as client-go counts them.
pub const RETRIES_TOTAL: &str = "workqueue_retries_total";

/// The label names of every workqueue metric.
pub const LABELS: [&str; 2] = ["name", "controller"];

/// Makes the metrics of one named queue.
pub trait MetricsProvider: Send + Sync {
    /// The metrics for the queue called `name`.
    fn queue_metrics(&self, name: &str) -> Arc<dyn QueueMetrics>;
}

/// The measurements one queue reports. Every method has a no-op default, so
/// an implementation overrides only what it records. Methods are called
/// while the queue's lock is held: keep them cheap and never block.
pub trait QueueMetrics: Send + Sync {
    /// Items waiting for a worker (ready, or re-added while processing).
    fn set_depth(&self, _depth: usize) {}
    /// An add made an item pending (re-adds of a pending item do not count).
    fn inc_adds(&self) {}
    /// An item was handed out `waited` after it became ready.
    fn observe_queue_duration(&self, _waited: Duration) {}
    /// An item was done `worked` after it was handed out.
    fn observe_work_duration(&self, _worked: Duration) {}
    /// Summed seconds of every item being processed right now.
    fn set_unfinished_work(&self, _seconds: f64) {}
    /// Seconds the longest-running item being processed has run.
    fn set_longest_running_processor(&self, _seconds: f64) {}
    /// A delayed or rate-limited re-add.
    fn inc_retries(&self) {}
}

/// Reports nothing.
///
/// ```
/// use std::sync::Arc;
/// use controller_runtime::workqueue::{NoopMetricsProvider, Queue};
/// let queue: Queue<u32> = Queue::builder().metrics(Arc::new(NoopMetricsProvider)).build();
/// queue.add(1);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopMetricsProvider;

/// The metrics [`NoopMetricsProvider`] hands out: every call does nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopQueueMetrics;

impl QueueMetrics for NoopQueueMetrics {}

impl MetricsProvider for NoopMetricsProvider {
    fn queue_metrics(&self, _name: &str) -> Arc<dyn QueueMetrics> {
        Arc::new(NoopQueueMetrics)
    }
}

/// The standard `workqueue_*` metric families on a Prometheus registry.
///
/// Create one per registry (registering the families twice on one registry
/// fails) and share it between queues; each queue's series carry
/// `name` and `controller` labels set to the queue's name.
///
/// ```
/// use std::sync::Arc;
/// use controller_runtime::workqueue::{PrometheusMetricsProvider, Queue};
/// use prometheus::{Encoder, TextEncoder};
///
/// let registry = prometheus::Registry::new();
/// let provider = Arc::new(PrometheusMetricsProvider::new(&registry)?);
/// let queue: Queue<&str> = Queue::builder().name("pods").metrics(provider).build();
/// queue.add("default/web");
///
/// let mut text = Vec::new();
/// TextEncoder::new().encode(&registry.gather(), &mut text).unwrap();
/// let text = String::from_utf8(text).unwrap();
/// assert!(text.contains(r#"workqueue_depth{controller="pods",name="pods"} 1"#));
/// # Ok::<(), controller_runtime::workqueue::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PrometheusMetricsProvider {
    depth: IntGaugeVec,
    adds: IntCounterVec,
    queue_duration: HistogramVec,
    work_duration: HistogramVec,
    unfinished: GaugeVec,
    longest: GaugeVec,
    retries: IntCounterVec,
}

fn registered<C>(registry: &Registry, name: &'static str, collector: C) -> Result<C, Error>
where
    C: prometheus::core::Collector + Clone + 'static,
{
    registry
        .register(Box::new(collector.clone()))
        .map_err(|source| Error::MetricRegistration { name, source })?;
    Ok(collector)
}

fn build_error(name: &'static str) -> impl Fn(prometheus::Error) -> Error {
    move |source| Error::MetricRegistration { name, source }
}

/// Buckets from 10 ns to 1000 s, one per power of ten (as client-go).
fn duration_buckets() -> Vec<f64> {
    vec![
        1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0,
    ]
}

impl PrometheusMetricsProvider {
    /// Creates the seven `workqueue_*` families and registers them on
    /// `registry`.
    ///
    /// # Errors
    /// [`Error::MetricRegistration`] if a family is already registered there.
    pub fn new(registry: &Registry) -> Result<Self, Error> {
        let histogram = |name: &'static str, help: &str| {
            let opts = HistogramOpts::new(name, help).buckets(duration_buckets());
            HistogramVec::new(opts, &LABELS).map_err(build_error(name))
        };
        Ok(PrometheusMetricsProvider {
            depth: registered(
                registry,
                DEPTH,
                IntGaugeVec::new(Opts::new(DEPTH, "Items waiting in the workqueue."), &LABELS)
                    .map_err(build_error(DEPTH))?,
            )?,
            adds: registered(
                registry,
                ADDS_TOTAL,
                IntCounterVec::new(
                    Opts::new(
                        ADDS_TOTAL,
                        "Adds that made an item pending in the workqueue.",
                    ),
                    &LABELS,
                )
                .map_err(build_error(ADDS_TOTAL))?,
            )?,
            queue_duration: registered(
                registry,
                QUEUE_DURATION_SECONDS,
                histogram(
                    QUEUE_DURATION_SECONDS,
                    "Seconds an item waited in the workqueue before a worker took it.",
                )?,
            )?,
            work_duration: registered(
                registry,
                WORK_DURATION_SECONDS,
                histogram(
                    WORK_DURATION_SECONDS,
                    "Seconds a worker spent on an item from the workqueue.",
                )?,
            )?,
            unfinished: registered(
                registry,
                UNFINISHED_WORK_SECONDS,
                GaugeVec::new(
                    Opts::new(
                        UNFINISHED_WORK_SECONDS,
                        "Summed seconds of work in progress not yet in the work duration; \
                         a steady rise points to stuck workers.",
                    ),
                    &LABELS,
                )
                .map_err(build_error(UNFINISHED_WORK_SECONDS))?,
            )?,
            longest: registered(
                registry,
                LONGEST_RUNNING_PROCESSOR_SECONDS,
                GaugeVec::new(
                    Opts::new(
                        LONGEST_RUNNING_PROCESSOR_SECONDS,
                        "Seconds the longest-running item in progress has been processed.",
                    ),
                    &LABELS,
                )
                .map_err(build_error(LONGEST_RUNNING_PROCESSOR_SECONDS))?,
            )?,
            retries: registered(
                registry,
                RETRIES_TOTAL,
                IntCounterVec::new(
                    Opts::new(RETRIES_TOTAL, "Rate-limited adds to the workqueue."),
                    &LABELS,
                )
                .map_err(build_error(RETRIES_TOTAL))?,
            )?,
        })
    }
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn queue_metrics(&self, name: &str) -> Arc<dyn QueueMetrics> {
        let labels = [name, name];
        Arc::new(PrometheusQueueMetrics {
            depth: self.depth.with_label_values(&labels),
            adds: self.adds.with_label_values(&labels),
            queue_duration: self.queue_duration.with_label_values(&labels),
            work_duration: self.work_duration.with_label_values(&labels),
            unfinished: self.unfinished.with_label_values(&labels),
            longest: self.longest.with_label_values(&labels),
            retries: self.retries.with_label_values(&labels),
        })
    }
}

/// One queue's series, with the label lookup done once.
struct PrometheusQueueMetrics {
    depth: IntGauge,
    adds: IntCounter,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished: Gauge,
    longest: Gauge,
    retries: IntCounter,
}

impl QueueMetrics for PrometheusQueueMetrics {
    fn set_depth(&self, depth: usize) {
        self.depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
    }
    fn inc_adds(&self) {
        self.adds.inc();
    }
    fn observe_queue_duration(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
    }
    fn observe_work_duration(&self, worked: Duration) {
        self.work_duration.observe(worked.as_secs_f64());
    }
    fn set_unfinished_work(&self, seconds: f64) {
        self.unfinished.set(seconds);
    }
    fn set_longest_running_processor(&self, seconds: f64) {
        self.longest.set(seconds);
    }
    fn inc_retries(&self) {
        self.retries.inc();
    }
}

#[cfg(test)]
mod tests;
