//! Observability hooks: the counters and gauges an informer reports.
//!
//! Layer 0: imports nothing else of this crate.
//!
//! `informer-core` does not depend on a metrics library. It calls an
//! [`InformerMetrics`] sink, whose methods all default to doing nothing, so
//! a user implements only what they publish. `controller-runtime` implements
//! it over Prometheus; tests implement it to count events. Every call names
//! the informer it comes from (the reflector's name, for example
//! `/api/v1/namespaces/default/configmaps`), so one sink serves many
//! informers.

use std::fmt;
use std::time::{Duration, SystemTime};

/// The kind of a watch event, as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// `ADDED`
    Added,
    /// `MODIFIED`
    Modified,
    /// `DELETED`
    Deleted,
    /// `BOOKMARK`
    Bookmark,
}

impl WatchEventType {
    /// The label value (`added`, `modified`, `deleted`, `bookmark`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Modified => "modified",
            Self::Deleted => "deleted",
            Self::Bookmark => "bookmark",
        }
    }
}

impl fmt::Display for WatchEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a reflector lists again after its first list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelistCause {
    /// The watch answered 410 Gone / Expired.
    Expired,
    /// A list or watch failed for another reason.
    Error,
}

impl RelistCause {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Expired => "expired",
            Self::Error => "error",
        }
    }
}

/// Why a watch was opened again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchRestartCause {
    /// The server ended the watch (timeout, dropped connection).
    Closed,
    /// The server answered 429 Too Many Requests.
    TooManyRequests,
    /// The server could not be reached.
    Transport,
}

impl WatchRestartCause {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::TooManyRequests => "too_many_requests",
            Self::Transport => "transport",
        }
    }
}

/// A sink for informer counters and gauges. Every method has a no-op
/// default body.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use informer_core::metrics::{InformerMetrics, WatchEventType};
///
/// #[derive(Default)]
/// struct CountEvents(AtomicU64);
///
/// impl InformerMetrics for CountEvents {
///     fn watch_event(&self, _informer: &str, _kind: WatchEventType) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let m = CountEvents::default();
/// m.watch_event("pods", WatchEventType::Added);
/// m.list_completed("pods", 3, 1, std::time::Duration::ZERO); // default: ignored
/// assert_eq!(m.0.load(Ordering::Relaxed), 1);
/// ```
pub trait InformerMetrics: Send + Sync {
    /// Counter: a (possibly paginated) LIST finished with `items` objects in
    /// `pages` pages and took `duration`.
    fn list_completed(&self, informer: &str, items: usize, pages: usize, duration: Duration) {
        let _ = (informer, items, pages, duration);
    }

    /// Counter: a LIST failed; `reason` is the `Status` reason or `transport`.
    fn list_failed(&self, informer: &str, reason: &str) {
        let _ = (informer, reason);
    }

    /// Counter: a list after the first one, and why.
    fn relist(&self, informer: &str, cause: RelistCause) {
        let _ = (informer, cause);
    }

    /// Counter: a streaming list (WATCH with `sendInitialEvents`) was
    /// refused or broke off, and the reflector fell back to LIST.
    fn streaming_list_fallback(&self, informer: &str) {
        let _ = informer;
    }

    /// Counter: the server refused metadata-only requests (406), so the
    /// lister-watcher reads full objects and keeps their metadata.
    fn metadata_fallback(&self, informer: &str) {
        let _ = informer;
    }

    /// Counter: a lister-watcher that asked for protobuf switched to JSON
    /// for good; `reason` is `refused` (406/415), `json_answer` (the server
    /// answered JSON) or `undecodable` (a protobuf body did not decode).
    fn protobuf_fallback(&self, informer: &str, reason: &str) {
        let _ = (informer, reason);
    }

    /// Counter: an answer went over a cap of the lister-watcher's
    /// [`ReadLimits`](crate::list_watch::ReadLimits) and the call ended
    /// there; `part` is `watch_event` or `list_page`
    /// ([`OversizedPart::as_str`](crate::list_watch::OversizedPart::as_str)).
    fn oversized_answer(&self, informer: &str, part: &str) {
        let _ = (informer, part);
    }

    /// Counter: a watch was opened.
    fn watch_started(&self, informer: &str) {
        let _ = informer;
    }

    /// Counter: a watch was opened again (without a list in between), and why.
    fn watch_restart(&self, informer: &str, cause: WatchRestartCause) {
        let _ = (informer, cause);
    }

    /// Counter: a watch event was received, by type.
    fn watch_event(&self, informer: &str, kind: WatchEventType) {
        let _ = (informer, kind);
    }

    /// Counter: an object or event could not be decoded and was skipped.
    fn decode_failure(&self, informer: &str) {
        let _ = informer;
    }

    /// Counter/histogram: the reflector waits `delay` before retrying.
    fn backoff(&self, informer: &str, delay: Duration) {
        let _ = (informer, delay);
    }

    /// Gauges: the store was last brought in step with the server at `at`,
    /// at `resource_version` (after a list, or a watch event or bookmark).
    fn last_sync(&self, informer: &str, resource_version: &str, at: SystemTime) {
        let _ = (informer, resource_version, at);
    }

    /// Gauge: notifications waiting in one handler's buffer.
    fn handler_pending(&self, informer: &str, handler: &str, pending: usize) {
        let _ = (informer, handler, pending);
    }
}

/// Metrics that go nowhere (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopMetrics;

impl InformerMetrics for NoopMetrics {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_stable() {
        assert_eq!(WatchEventType::Added.to_string(), "added");
        assert_eq!(WatchEventType::Bookmark.as_str(), "bookmark");
        assert_eq!(RelistCause::Expired.as_str(), "expired");
        assert_eq!(
            WatchRestartCause::TooManyRequests.as_str(),
            "too_many_requests"
        );
    }
}
