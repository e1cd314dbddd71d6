//! Prometheus metrics of a manager: controllers, workqueues and informers.
//!
//! A [`Metrics`] value owns one `prometheus::Registry` (a manager has its
//! own, so two managers in one process do not collide). It registers the
//! controller metrics under controller-runtime's names so existing
//! dashboards work:
//!
//! | metric | labels | kind |
//! |---|---|---|
//! | `controller_runtime_reconcile_total` | `controller`, `result` | counter |
//! | `controller_runtime_reconcile_errors_total` | `controller` | counter |
//! | `controller_runtime_terminal_reconcile_errors_total` | `controller` | counter |
//! | `controller_runtime_reconcile_panics_total` | `controller` | counter |
//! | `controller_runtime_reconcile_time_seconds` | `controller` | histogram |
//! | `controller_runtime_max_concurrent_reconciles` | `controller` | gauge |
//! | `controller_runtime_active_workers` | `controller` | gauge |
//! | `controller_runtime_fleet_reconcile_total` | `controller`, `cluster`, `result` | counter |
//! | `controller_runtime_fleet_reconcile_errors_total` | `controller`, `cluster` | counter |
//! | `controller_runtime_fleet_reconcile_time_seconds` | `controller`, `cluster` | histogram |
//!
//! A fleet controller counts each reconcile in the families without a
//! `cluster` label too; its `cluster`-labelled series exist while the
//! cluster is engaged (they are removed when it is disengaged).
//!
//! `result` is `success`, `error`, `requeue` or `requeue_after`. The
//! `workqueue_*` metrics ([`Metrics::workqueue_metrics`]) and the
//! `informer_*` metrics ([`Metrics::informer_metrics`], see
//! [`PrometheusInformerMetrics`]) are registered in the same registry, and
//! [`Metrics::encode`] renders everything in the Prometheus text format that
//! [`Metrics::router`] serves at `/metrics`.
//!
//! The controller layer resolves the `controller_runtime_*` series per
//! controller; this module only registers the families.
//!
//! [`SecureMetrics`] describes serving `/metrics` over HTTPS to clients
//! authenticated by a TokenReview and authorized by a SubjectAccessReview
//! (answers cached 10 s), as kubebuilder's scaffold does; the manager
//! serves it (`ManagerBuilder::metrics_secure`). Refused requests are
//! counted in `controller_runtime_metrics_requests_denied_total{code}`.
//!
//! Layer 2 (cache and metrics registry): imports the [`crate::workqueue`]
//! metrics provider and nothing above it (the scrape guard asks the API
//! server through kube-client directly).
//!
//! ```
//! use controller_runtime::metrics::Metrics;
//! let metrics = Metrics::new().unwrap();
//! let copies = prometheus::IntCounter::new("copies_total", "Copies written").unwrap();
//! metrics.register(Box::new(copies.clone())).unwrap();
//! copies.inc();
//! assert!(metrics.encode().unwrap().contains("copies_total 1"));
//! ```

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus::core::Collector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::workqueue::PrometheusMetricsProvider;
use informer_core::metrics::InformerMetrics;

mod auth;
mod informer;
mod secure;
pub(crate) use auth::MetricsAuth;
pub(crate) use informer::ClusterInformerMetrics;
pub use informer::PrometheusInformerMetrics;
pub(crate) use secure::MetricsCerts;
pub use secure::{
    DEFAULT_AUTH_CACHE_CAPACITY, DEFAULT_AUTH_CACHE_TTL, DEFAULT_MAX_TOKEN_BYTES,
    DEFAULT_REVIEW_TIMEOUT, SecureMetrics,
};

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// Creating or registering a collector failed (for example a name
    /// registered twice).
    #[error("prometheus registry: {0}")]
    Prometheus(#[from] prometheus::Error),
    /// Registering the workqueue metrics failed.
    #[error("workqueue metrics: {0}")]
    Workqueue(#[from] crate::workqueue::Error),
    /// The text encoder produced bytes that are not UTF-8.
    #[error("encoding metrics: {0}")]
    Encoding(#[from] std::string::FromUtf8Error),
    /// The secure metrics server's certificate could not be made or loaded.
    #[error("the metrics serving certificate: {0}")]
    Certificate(String),
}

/// Buckets of `controller_runtime_reconcile_time_seconds`, as in
/// controller-runtime.
pub const RECONCILE_TIME_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The controller metric families, registered with the registry; the
/// controller layer resolves them per controller and per result.
#[derive(Clone)]
pub(crate) struct ControllerVecs {
    pub(crate) reconcile_total: IntCounterVec,
    pub(crate) reconcile_errors: IntCounterVec,
    pub(crate) terminal_errors: IntCounterVec,
    pub(crate) panics: IntCounterVec,
    pub(crate) reconcile_time: HistogramVec,
    pub(crate) max_concurrent: IntGaugeVec,
    pub(crate) active_workers: IntGaugeVec,
    pub(crate) fleet_reconcile_total: IntCounterVec,
    pub(crate) fleet_reconcile_errors: IntCounterVec,
    pub(crate) fleet_reconcile_time: HistogramVec,
}

impl ControllerVecs {
    fn new() -> Result<Self, prometheus::Error> {
        let counter = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels)
        };
        let gauge =
            |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), &["controller"]);
        Ok(ControllerVecs {
            reconcile_total: counter(
                "controller_runtime_reconcile_total",
                "Total number of reconciliations per controller",
                &["controller", "result"],
            )?,
            reconcile_errors: counter(
                "controller_runtime_reconcile_errors_total",
                "Total number of reconciliation errors per controller",
                &["controller"],
            )?,
            terminal_errors: counter(
                "controller_runtime_terminal_reconcile_errors_total",
                "Total number of terminal reconciliation errors per controller",
                &["controller"],
            )?,
            panics: counter(
                "controller_runtime_reconcile_panics_total",
                "Total number of reconciliation panics per controller",
                &["controller"],
            )?,
            reconcile_time: HistogramVec::new(
                HistogramOpts::new(
                    "controller_runtime_reconcile_time_seconds",
                    "Length of time per reconciliation per controller",
                )
                .buckets(RECONCILE_TIME_BUCKETS.to_vec()),
                &["controller"],
            )?,
            max_concurrent: gauge(
                "controller_runtime_max_concurrent_reconciles",
                "Maximum number of concurrent reconciles per controller",
            )?,
            active_workers: gauge(
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
            )?,
            fleet_reconcile_total: counter(
                "controller_runtime_fleet_reconcile_total",
                "Total number of reconciliations per fleet controller and cluster",
                &["controller", "cluster", "result"],
            )?,
            fleet_reconcile_errors: counter(
                "controller_runtime_fleet_reconcile_errors_total",
                "Total number of reconciliation errors per fleet controller and cluster",
                &["controller", "cluster"],
            )?,
            fleet_reconcile_time: HistogramVec::new(
                HistogramOpts::new(
                    "controller_runtime_fleet_reconcile_time_seconds",
                    "Length of time per reconciliation per fleet controller and cluster",
                )
                .buckets(RECONCILE_TIME_BUCKETS.to_vec()),
                &["controller", "cluster"],
            )?,
        })
    }

    fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.reconcile_total.clone()),
            Box::new(self.reconcile_errors.clone()),
            Box::new(self.terminal_errors.clone()),
            Box::new(self.panics.clone()),
            Box::new(self.reconcile_time.clone()),
            Box::new(self.max_concurrent.clone()),
            Box::new(self.active_workers.clone()),
            Box::new(self.fleet_reconcile_total.clone()),
            Box::new(self.fleet_reconcile_errors.clone()),
            Box::new(self.fleet_reconcile_time.clone()),
        ]
    }
}

struct Inner {
    registry: Registry,
    controllers: ControllerVecs,
    workqueue: Arc<PrometheusMetricsProvider>,
    informer: Arc<PrometheusInformerMetrics>,
}

/// The metrics registry of one manager. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// The `workqueue_*` metrics provider on this registry, for queues.
    pub fn workqueue_metrics(&self) -> Arc<PrometheusMetricsProvider> {
        Arc::clone(&self.inner.workqueue)
    }

    /// The `informer_*` metrics sink on this registry, for informers.
    pub fn informer_metrics(&self) -> Arc<dyn InformerMetrics> {
        Arc::clone(&self.inner.informer) as Arc<dyn InformerMetrics>
    }

    /// The `informer_*` families, for a fleet cluster's sink.
    pub(crate) fn informer_families(&self) -> Arc<PrometheusInformerMetrics> {
        Arc::clone(&self.inner.informer)
    }

    /// A new registry with the controller, workqueue and informer metrics
    /// registered.
    pub fn new() -> Result<Self, MetricsError> {
        Self::with_registry(Registry::new())
    }

    /// Uses `registry` (for example one shared with the rest of a program)
    /// and registers the controller, workqueue and informer metrics in it.
    pub fn with_registry(registry: Registry) -> Result<Self, MetricsError> {
        let controllers = ControllerVecs::new()?;
        for collector in controllers.collectors() {
            registry.register(collector)?;
        }
        let workqueue = Arc::new(PrometheusMetricsProvider::new(&registry)?);
        let informer = Arc::new(PrometheusInformerMetrics::new(&registry)?);
        Ok(Metrics {
            inner: Arc::new(Inner {
                registry,
                controllers,
                workqueue,
                informer,
            }),
        })
    }

    /// The underlying registry, to register more collectors.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Registers one more collector.
    pub fn register(&self, collector: Box<dyn Collector>) -> Result<(), MetricsError> {
        Ok(self.inner.registry.register(collector)?)
    }

    /// The controller metric families (for the controller layer).
    pub(crate) fn controller_vecs(&self) -> &ControllerVecs {
        &self.inner.controllers
    }

    /// Everything registered, in the Prometheus text exposition format.
    pub fn encode(&self) -> Result<String, MetricsError> {
        let families = self.inner.registry.gather();
        let mut buf = Vec::new();
        TextEncoder::new().encode(&families, &mut buf)?;
        Ok(String::from_utf8(buf)?)
    }

    /// An axum router serving `GET /metrics`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/metrics", get(serve_metrics))
            .with_state(self.clone())
    }
}

async fn serve_metrics(State(metrics): State<Metrics>) -> Response {
    match metrics.encode() {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
            body,
        )
            .into_response(),
        Err(error) => {
            tracing::warn!(%error, "cannot encode metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response()
        }
    }
}

#[cfg(test)]
mod tests;
