//! The fleet's metrics: how many clusters are engaged, which answer, and
//! how often each failed to. Series of a cluster are removed when it is
//! disengaged, so the `cluster` label stays bounded by the engaged set.
//!
//! | metric | labels | kind |
//! |---|---|---|
//! | `controller_runtime_fleet_clusters_engaged` | | gauge |
//! | `controller_runtime_fleet_cluster_ready` | `cluster` | gauge (1 ready: answers, synced, permitted; 0 not) |
//! | `controller_runtime_fleet_cluster_failures_total` | `cluster` | counter |

use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts};

use crate::metrics::{Metrics, MetricsError};

/// The fleet's metric families on one manager's registry.
#[derive(Clone)]
pub(crate) struct FleetMetrics {
    engaged: IntGauge,
    ready: IntGaugeVec,
    failures: IntCounterVec,
}

impl FleetMetrics {
    /// Creates the families and registers them with `metrics`.
    pub(crate) fn new(metrics: &Metrics) -> Result<Self, MetricsError> {
        let engaged = IntGauge::new(
            "controller_runtime_fleet_clusters_engaged",
            "Number of clusters engaged in the manager's fleet",
        )?;
        let ready = IntGaugeVec::new(
            Opts::new(
                "controller_runtime_fleet_cluster_ready",
                "Whether an engaged cluster was ready at its last look (1: answered, informers synced and permitted to list) or not (0)",
            ),
            &["cluster"],
        )?;
        let failures = IntCounterVec::new(
            Opts::new(
                "controller_runtime_fleet_cluster_failures_total",
                "Failed looks at an engaged cluster's API server",
            ),
            &["cluster"],
        )?;
        metrics.register(Box::new(engaged.clone()))?;
        metrics.register(Box::new(ready.clone()))?;
        metrics.register(Box::new(failures.clone()))?;
        Ok(FleetMetrics {
            engaged,
            ready,
            failures,
        })
    }

    pub(crate) fn engaged(&self, cluster: &str) {
        self.engaged.inc();
        self.ready.with_label_values(&[cluster]).set(0);
        self.failures.with_label_values(&[cluster]);
    }

    pub(crate) fn disengaged(&self, cluster: &str) {
        self.engaged.dec();
        let _ = self.ready.remove_label_values(&[cluster]);
        let _ = self.failures.remove_label_values(&[cluster]);
    }

    pub(crate) fn answered(&self, cluster: &str) {
        self.ready.with_label_values(&[cluster]).set(1);
    }

    pub(crate) fn failed(&self, cluster: &str) {
        self.ready.with_label_values(&[cluster]).set(0);
        self.failures.with_label_values(&[cluster]).inc();
    }
}
