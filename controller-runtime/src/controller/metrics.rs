//! The `controller_runtime_*` series of one controller: reconcile totals by
//! result, errors, terminal errors, panics, reconcile time, workers.
//!
//! The families are registered by the [metrics registry](crate::metrics);
//! this module resolves them for one controller and records each
//! [`ReconcileOutcome`].
//!
//! Controller layer: private to this crate.

use std::time::Duration;

use prometheus::{Histogram, IntCounter, IntGauge};

use super::outcome::{RESULTS, ReconcileOutcome};
use crate::metrics::Metrics;

/// The metrics of one controller, with the label values resolved once.
#[derive(Clone)]
pub(crate) struct ControllerMetrics {
    /// `controller_runtime_reconcile_total`, one per [`RESULTS`] value.
    results: [IntCounter; 4],
    errors: IntCounter,
    terminal: IntCounter,
    panics: IntCounter,
    time: Histogram,
    max_concurrent: IntGauge,
    active_workers: IntGauge,
}

impl std::fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerMetrics").finish_non_exhaustive()
    }
}

impl ControllerMetrics {
    /// The series of the controller called `name`. Its `reconcile_total`
    /// series start at zero for every result, so dashboards see them before
    /// the first reconcile.
    pub(crate) fn new(metrics: &Metrics, name: &str) -> Self {
        let v = metrics.controller_vecs();
        let total = |result: &str| v.reconcile_total.with_label_values(&[name, result]);
        ControllerMetrics {
            results: RESULTS.map(total),
            errors: v.reconcile_errors.with_label_values(&[name]),
            terminal: v.terminal_errors.with_label_values(&[name]),
            panics: v.panics.with_label_values(&[name]),
            time: v.reconcile_time.with_label_values(&[name]),
            max_concurrent: v.max_concurrent.with_label_values(&[name]),
            active_workers: v.active_workers.with_label_values(&[name]),
        }
    }

    /// Records one finished reconcile that took `elapsed`.
    pub(crate) fn observe(&self, outcome: &ReconcileOutcome, elapsed: Duration) {
        self.time.observe(elapsed.as_secs_f64());
        let label = outcome.result_label();
        if let Some(i) = RESULTS.iter().position(|r| *r == label) {
            self.results[i].inc();
        }
        if outcome.is_error() {
            self.errors.inc();
        }
        if outcome.is_terminal() {
            self.terminal.inc();
        }
        if outcome.is_panic() {
            self.panics.inc();
        }
    }

    /// Sets `controller_runtime_max_concurrent_reconciles`.
    pub(crate) fn set_max_concurrent_reconciles(&self, n: usize) {
        self.max_concurrent
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts one worker as busy until the returned guard is dropped.
    pub(crate) fn worker_active(&self) -> ActiveWorker {
        self.active_workers.inc();
        ActiveWorker {
            gauge: self.active_workers.clone(),
        }
    }
}

/// The `cluster`-labelled series of one fleet controller in one cluster,
/// removed when the cluster leaves (so the label stays bounded by the
/// engaged clusters).
pub(crate) struct ClusterSeries {
    vecs: crate::metrics::ControllerVecs,
    controller: String,
    cluster: String,
    results: [IntCounter; 4],
    errors: IntCounter,
    time: Histogram,
}

impl ClusterSeries {
    pub(crate) fn new(metrics: &Metrics, controller: &str, cluster: &str) -> Self {
        let v = metrics.controller_vecs().clone();
        let total = |result: &str| {
            v.fleet_reconcile_total
                .with_label_values(&[controller, cluster, result])
        };
        ClusterSeries {
            results: RESULTS.map(total),
            errors: v
                .fleet_reconcile_errors
                .with_label_values(&[controller, cluster]),
            time: v
                .fleet_reconcile_time
                .with_label_values(&[controller, cluster]),
            vecs: v,
            controller: controller.to_string(),
            cluster: cluster.to_string(),
        }
    }

    /// Records one finished reconcile in this cluster that took `elapsed`.
    pub(crate) fn observe(&self, outcome: &ReconcileOutcome, elapsed: Duration) {
        self.time.observe(elapsed.as_secs_f64());
        let label = outcome.result_label();
        if let Some(i) = RESULTS.iter().position(|r| *r == label) {
            self.results[i].inc();
        }
        if outcome.is_error() {
            self.errors.inc();
        }
    }

    /// Removes the series (the cluster left the controller).
    pub(crate) fn remove(&self) {
        let (controller, cluster) = (self.controller.as_str(), self.cluster.as_str());
        for result in RESULTS {
            let _ = self
                .vecs
                .fleet_reconcile_total
                .remove_label_values(&[controller, cluster, result]);
        }
        let _ = self
            .vecs
            .fleet_reconcile_errors
            .remove_label_values(&[controller, cluster]);
        let _ = self
            .vecs
            .fleet_reconcile_time
            .remove_label_values(&[controller, cluster]);
    }
}

/// Keeps `controller_runtime_active_workers` raised by one while alive.
#[derive(Debug)]
pub(crate) struct ActiveWorker {
    gauge: IntGauge,
}

impl Drop for ActiveWorker {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

#[cfg(test)]
mod tests;
