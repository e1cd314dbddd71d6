//! The webhook server's Prometheus series, under controller-runtime's names
//! so its dashboards work:
//!
//! | metric | labels | kind |
//! |---|---|---|
//! | `controller_runtime_webhook_requests_total` | `webhook` (the path), `code` (HTTP status) | counter |
//! | `controller_runtime_webhook_requests_in_flight` | `webhook` | gauge |
//! | `controller_runtime_webhook_latency_seconds` | `webhook` | histogram |
//! | `controller_runtime_webhook_panics_total` | | counter |
//!
//! Part of the manager layer's webhook server; registered in the manager's
//! registry (or any `prometheus::Registry`).

use std::time::Instant;

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
};

/// The three series, registered once per server.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    requests: IntCounterVec,
    in_flight: IntGaugeVec,
    latency: HistogramVec,
    panics: IntCounter,
}

impl WebhookMetrics {
    /// Creates the series and registers them in `registry`.
    ///
    /// ```
    /// use controller_runtime::webhook::WebhookMetrics;
    /// let registry = prometheus::Registry::new();
    /// let metrics = WebhookMetrics::new(&registry).unwrap();
    /// assert_eq!(metrics.requests("/convert", 200), 0);
    /// ```
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "controller_runtime_webhook_requests_total",
                "Total number of admission requests by HTTP status code.",
            ),
            &["webhook", "code"],
        )?;
        let in_flight = IntGaugeVec::new(
            Opts::new(
                "controller_runtime_webhook_requests_in_flight",
                "Current number of admission requests being served.",
            ),
            &["webhook"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "controller_runtime_webhook_latency_seconds",
                "Histogram of the latency of processing admission requests",
            ),
            &["webhook"],
        )?;
        let panics = IntCounter::new(
            "controller_runtime_webhook_panics_total",
            "Total number of webhook panics",
        )?;
        registry.register(Box::new(panics.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(in_flight.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        Ok(WebhookMetrics {
            requests,
            in_flight,
            latency,
            panics,
        })
    }

    /// Marks a request to `webhook` in flight until the returned guard is
    /// finished (or dropped, counted as a 500).
    pub(crate) fn start(&self, webhook: &str) -> InFlight {
        self.in_flight.with_label_values(&[webhook]).inc();
        InFlight {
            metrics: self.clone(),
            webhook: webhook.to_owned(),
            started: Instant::now(),
            done: false,
        }
    }

    /// A handler panicked.
    pub(crate) fn panicked(&self) {
        self.panics.inc();
    }

    /// Panics so far.
    pub fn panics(&self) -> u64 {
        self.panics.get()
    }

    /// Requests to `webhook` answered with `code` so far.
    pub fn requests(&self, webhook: &str, code: u16) -> u64 {
        self.requests
            .with_label_values(&[webhook, &code.to_string()])
            .get()
    }

    /// Requests to `webhook` in flight now.
    pub fn in_flight(&self, webhook: &str) -> i64 {
        self.in_flight.with_label_values(&[webhook]).get()
    }
}

/// One request in flight; see [`WebhookMetrics::start`].
#[derive(Debug)]
pub(crate) struct InFlight {
    metrics: WebhookMetrics,
    webhook: String,
    started: Instant,
    done: bool,
}

impl InFlight {
    /// The request was answered with `code`.
    pub(crate) fn finish(mut self, code: u16) {
        self.record(code);
    }

    fn record(&mut self, code: u16) {
        if self.done {
            return;
        }
        self.done = true;
        let m = &self.metrics;
        m.in_flight.with_label_values(&[&self.webhook]).dec();
        m.latency
            .with_label_values(&[&self.webhook])
            .observe(self.started.elapsed().as_secs_f64());
        m.requests
            .with_label_values(&[&self.webhook, &code.to_string()])
            .inc();
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The connection went away before an answer: count it as an error.
        self.record(500);
    }
}
