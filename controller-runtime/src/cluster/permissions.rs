//! Whether a member lets the fleet's informers list what they watch: the
//! informers' metric calls pass through [`ListAccess`], which remembers
//! the informers whose last list was refused (403), so that the fleet
//! reports such a member `Failing` (health means reached, and permitted)
//! instead of `Ready` while its requests wait for caches that never sync.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use informer_core::metrics::{InformerMetrics, RelistCause, WatchEventType, WatchRestartCause};
use parking_lot::Mutex;

/// The `Status` reason of a 403, as the reflector reports a failed list.
const FORBIDDEN: &str = "Forbidden";

/// Forwards every call to the cluster's informer metrics and notes which
/// informers' last list was forbidden.
pub(crate) struct ListAccess {
    metrics: Arc<dyn InformerMetrics>,
    forbidden: Mutex<BTreeSet<String>>,
}

impl ListAccess {
    pub(crate) fn new(metrics: Arc<dyn InformerMetrics>) -> Self {
        ListAccess {
            metrics,
            forbidden: Mutex::new(BTreeSet::new()),
        }
    }

    /// The informers whose last list was forbidden, sorted.
    pub(crate) fn forbidden(&self) -> Vec<String> {
        self.forbidden.lock().iter().cloned().collect()
    }
}

impl InformerMetrics for ListAccess {
    fn list_completed(&self, informer: &str, items: usize, pages: usize, duration: Duration) {
        self.forbidden.lock().remove(informer);
        self.metrics
            .list_completed(informer, items, pages, duration);
    }

    fn list_failed(&self, informer: &str, reason: &str) {
        if reason == FORBIDDEN {
            self.forbidden.lock().insert(informer.to_string());
        }
        self.metrics.list_failed(informer, reason);
    }

    fn relist(&self, informer: &str, cause: RelistCause) {
        self.metrics.relist(informer, cause);
    }

    fn streaming_list_fallback(&self, informer: &str) {
        self.metrics.streaming_list_fallback(informer);
    }

    fn metadata_fallback(&self, informer: &str) {
        self.metrics.metadata_fallback(informer);
    }

    fn protobuf_fallback(&self, informer: &str, reason: &str) {
        self.metrics.protobuf_fallback(informer, reason);
    }

    fn watch_started(&self, informer: &str) {
        self.metrics.watch_started(informer);
    }

    fn watch_restart(&self, informer: &str, cause: WatchRestartCause) {
        self.metrics.watch_restart(informer, cause);
    }

    fn watch_event(&self, informer: &str, kind: WatchEventType) {
        self.metrics.watch_event(informer, kind);
    }

    fn decode_failure(&self, informer: &str) {
        self.metrics.decode_failure(informer);
    }

    fn backoff(&self, informer: &str, delay: Duration) {
        self.metrics.backoff(informer, delay);
    }

    fn last_sync(&self, informer: &str, resource_version: &str, at: SystemTime) {
        self.metrics.last_sync(informer, resource_version, at);
    }

    fn handler_pending(&self, informer: &str, handler: &str, pending: usize) {
        self.metrics.handler_pending(informer, handler, pending);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl InformerMetrics for Count {
        fn list_failed(&self, _: &str, _: &str) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn list_completed(&self, _: &str, _: usize, _: usize, _: Duration) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_forbidden_list_is_remembered_until_one_succeeds() {
        let count = Arc::new(Count::default());
        let access = ListAccess::new(count.clone());
        access.list_failed("pods", "transport");
        assert!(access.forbidden().is_empty(), "only a 403 counts");
        access.list_failed("pods", FORBIDDEN);
        access.list_failed("configmaps", FORBIDDEN);
        assert_eq!(access.forbidden(), ["configmaps", "pods"]);
        access.list_completed("pods", 0, 1, Duration::ZERO);
        assert_eq!(access.forbidden(), ["configmaps"]);
        assert_eq!(count.0.load(Ordering::Relaxed), 4, "every call forwarded");
    }
}
