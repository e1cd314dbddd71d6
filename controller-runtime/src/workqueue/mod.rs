//! The workqueue between event handlers and reconcile workers.
//!
//! Layer 1 (building blocks): imports nothing else of this crate.
//!
//! Handlers [`add`](Queue::add) keys of objects that changed; workers
//! [`get`](Queue::get) a key, reconcile it and call [`done`](Queue::done).
//! The queue keeps client-go's guarantees:
//!
//! - an item waiting in the queue is not queued twice (many changes to one
//!   object cost one reconcile);
//! - an item is never handed to two workers at once: an item added while it
//!   is being processed is marked dirty and queued again on `done`, so that
//!   change is not lost;
//! - [`shut_down`](Queue::shut_down) stops accepting adds and lets workers
//!   drain what is ready; [`shut_down_with_drain`](Queue::shut_down_with_drain)
//!   also waits for the work in progress.
//!
//! On top of that one [`Queue`] offers what client-go spreads over several
//! queue types: delays ([`Queue::add_after`], the earlier ready time wins),
//! per-item retries with backoff ([`Queue::add_rate_limited`], with the
//! [`RateLimiter`]s in this module), and priorities ([`Queue::add_with`],
//! [`Priority`]; initial-list adds and resyncs go at [`Priority::LOW`]).
//! Metrics under the standard `workqueue_*` names come from a
//! [`MetricsProvider`], such as [`PrometheusMetricsProvider`].
//!
//! # How adds combine
//!
//! Each item has at most one pending entry. Every kind of add merges into
//! it: the entry keeps the **earliest** ready time and the **highest**
//! priority of all its adds, so `add_after(x, 10s)` then `add_after(x, 2s)`
//! makes `x` ready at 2 s, and a plain `add(x)` makes a delayed `x` ready
//! now. Ready items are served highest priority first, FIFO within a
//! priority (an item whose priority is raised joins the tail of its new
//! priority). A delay that was overtaken by an earlier add does not fire
//! again later, unlike client-go's delaying queue, where it would add the
//! item a second time.
//!
//! Adds caused by an informer's initial list or by a resync should use
//! [`Priority::LOW`] (see [`Priority::for_event`]), so that thousands of
//! unchanged objects do not delay the real changes queued at the same time.
//!
//! Delays use tokio's clock (they follow `tokio::time::pause` in tests) and
//! need no background task: waiting workers sleep until the earliest ready
//! time. On [`Queue::shut_down`], delayed items are dropped.
//!
//! ```
//! use controller_runtime::workqueue::Queue;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! #[derive(Clone, PartialEq, Eq, Hash, Debug)]
//! struct Request { namespace: String, name: String }
//!
//! let queue: Queue<Request> = Queue::builder().name("configmaps").build();
//! let worker = {
//!     let queue = queue.clone();
//!     tokio::spawn(async move {
//!         let mut seen = 0;
//!         while let Some(req) = queue.get().await {
//!             seen += 1; // reconcile `req` here
//!             queue.forget(&req);
//!             queue.done(&req);
//!         }
//!         seen
//!     })
//! };
//! queue.add(Request { namespace: "default".into(), name: "web".into() });
//! queue.shut_down_with_drain().await;
//! // Shutdown lets workers drain what was ready: the request was handled.
//! assert_eq!(worker.await.unwrap(), 1);
//! # }
//! ```

mod delaying;
mod metrics;
mod priority;
mod queue;
mod rate_limiter;
mod rate_limiting;
mod state;

#[cfg(test)]
mod tests;

pub use metrics::{
    ADDS_TOTAL, DEPTH, LABELS, LONGEST_RUNNING_PROCESSOR_SECONDS, MetricsProvider,
    NoopMetricsProvider, NoopQueueMetrics, PrometheusMetricsProvider, QUEUE_DURATION_SECONDS,
    QueueMetrics, RETRIES_TOTAL, UNFINISHED_WORK_SECONDS, WORK_DURATION_SECONDS,
};
pub use priority::{AddOptions, Priority};
pub use queue::{DEFAULT_METRICS_UPDATE_PERIOD, Queue, QueueBuilder};
pub use rate_limiter::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
};

/// Errors from building workqueue parts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A token bucket needs a positive, finite rate and a burst of at least 1.
    #[error(
        "invalid token bucket: rate {rate}/s must be positive and finite and burst {burst} at least 1"
    )]
    InvalidBucket {
        /// The rate asked for, in tokens per second.
        rate: f64,
        /// The burst asked for.
        burst: u32,
    },
    /// A workqueue metric family could not be created or registered.
    #[error("registering workqueue metric {name}: {source}")]
    MetricRegistration {
        /// The metric family's name.
        name: &'static str,
        /// What Prometheus said.
        #[source]
        source: prometheus::Error,
    },
}
