//! Recording Kubernetes Events (`events.k8s.io/v1`) about the objects a
//! controller manages.
//!
//! Layer 1 (building blocks): imports only the vocabulary; the [manager](crate::manager) runs the writer.
//!
//! An [`EventRecorder`] is cheap to clone and never blocks its caller:
//! [`EventRecorder::publish`] puts the event on a bounded queue and returns
//! at once; when the queue is full the event is dropped and counted
//! ([`EventRecorder::dropped`]). A background [`EventWriter`] takes events
//! off the queue and writes them through an [`EventSink`] (normally the API
//! server, [`ApiEventSink`]).
//!
//! Repeats are folded into a series: an event with the same regarding
//! object, reason, action, type and note as one written within the series
//! window does not create a new Event; the existing one gets
//! `series.count` and `series.lastObservedTime` updated. Repeats that arrive
//! together are coalesced into one write.
//!
//! A [`Manager`](crate::manager::Manager) owns one writer (a runnable that
//! starts with the manager and writes what is still queued when it shuts
//! down); `mgr.event_recorder("foo-controller")` hands out recorders that
//! report as that controller:
//!
//! ```no_run
//! use controller_runtime::events::EventInfo;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! # async fn demo(mgr: controller_runtime::manager::Manager, cm: ConfigMap) {
//! let recorder = mgr.event_recorder("config-controller");
//! recorder.publish(&cm, EventInfo::normal("Synced", "Reconcile").note("config applied"));
//! # }
//! ```

mod sink;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube_core::Resource;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use sink::{ApiEventSink, EventSink};
pub use writer::EventWriter;

/// Errors of event recording.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventsError {
    /// Writing an event to the API server failed.
    #[error("{op} of event {namespace}/{name} failed: {source}")]
    Api {
        /// create or patch.
        op: &'static str,
        /// Namespace of the Event.
        namespace: String,
        /// Name of the Event.
        name: String,
        /// The client error, with the API `Status` when there was one.
        #[source]
        source: kube_client::Error,
    },
}

impl EventsError {
    /// Whether the server answered 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, EventsError::Api { source: kube_client::Error::Api(s), .. } if s.code == 404)
    }
}

/// The `type` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Nothing to worry about.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    /// `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Who reports events, and the recorder's limits.
#[derive(Debug, Clone)]
#[must_use]
pub struct RecorderConfig {
    /// `reportingController`, e.g. `example.com/my-operator`.
    pub reporting_controller: String,
    /// `reportingInstance`, e.g. the pod name.
    pub reporting_instance: String,
    /// Capacity of the queue between `publish` and the writer (default 1000).
    pub queue_capacity: usize,
    /// How long after its last repeat an event still folds new repeats into
    /// its series (default 6 minutes).
    pub series_window: Duration,
    /// How many distinct events are remembered for folding (default 4096;
    /// the least recently seen is forgotten first).
    pub cache_capacity: usize,
}

impl RecorderConfig {
    /// Defaults for `reporting_controller` running as `reporting_instance`.
    pub fn new(
        reporting_controller: impl Into<String>,
        reporting_instance: impl Into<String>,
    ) -> Self {
        RecorderConfig {
            reporting_controller: reporting_controller.into(),
            reporting_instance: reporting_instance.into(),
            queue_capacity: 1000,
            series_window: Duration::from_secs(6 * 60),
            cache_capacity: 4096,
        }
    }

    /// Sets the queue capacity (at least 1).
    pub fn queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n.max(1);
        self
    }

    /// Sets the series window.
    pub fn series_window(mut self, d: Duration) -> Self {
        self.series_window = d;
        self
    }

    /// Sets the cache capacity (at least 1).
    pub fn cache_capacity(mut self, n: usize) -> Self {
        self.cache_capacity = n.max(1);
        self
    }
}

/// What happened, as a controller publishes it: type, reason, action, note
/// and an optional second object involved.
///
/// ```
/// use controller_runtime::events::{EventInfo, EventType};
/// use k8s_openapi::api::apps::v1::Deployment;
/// let mut web = Deployment::default();
/// web.metadata.name = Some("web".into());
/// let info = EventInfo::warning("ErrResourceExists", "Adopt")
///     .note("deployment web is not controlled by this Foo")
///     .related(&web);
/// assert_eq!(info.type_, EventType::Warning);
/// assert_eq!(info.related.unwrap().name.as_deref(), Some("web"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct EventInfo {
    /// Normal or Warning.
    pub type_: EventType,
    /// Why, in UpperCamelCase (`Synced`, `FailedCreate`).
    pub reason: String,
    /// What was done or failed (`Reconcile`, `CreateConfigMap`).
    pub action: String,
    /// A human-readable description (truncated to 1 KiB when written).
    pub note: String,
    /// A second object involved (the Event's `related`).
    pub related: Option<ObjectReference>,
}

impl EventInfo {
    /// An event of `type_` with `reason` and `action` and no note.
    pub fn new(type_: EventType, reason: impl Into<String>, action: impl Into<String>) -> Self {
        EventInfo {
            type_,
            reason: reason.into(),
            action: action.into(),
            note: String::new(),
            related: None,
        }
    }

    /// A `Normal` event.
    pub fn normal(reason: impl Into<String>, action: impl Into<String>) -> Self {
        EventInfo::new(EventType::Normal, reason, action)
    }

    /// A `Warning` event.
    pub fn warning(reason: impl Into<String>, action: impl Into<String>) -> Self {
        EventInfo::new(EventType::Warning, reason, action)
    }

    /// Sets the note.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    /// Sets the related object.
    pub fn related<K: Resource<DynamicType = ()>>(mut self, obj: &K) -> Self {
        self.related = Some(obj.object_ref(&()));
        self
    }
}

/// One event as published, before it is folded and written.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// The controller reporting it; `None` for the writer's configured
    /// `reporting_controller`.
    pub reporting_controller: Option<Arc<str>>,
    /// The object the event is about.
    pub regarding: ObjectReference,
    /// A second object involved.
    pub related: Option<ObjectReference>,
    /// Normal or Warning.
    pub type_: EventType,
    /// Why, in UpperCamelCase (`Synced`, `FailedCreate`).
    pub reason: String,
    /// What was done or failed (`Reconcile`, `CreateConfigMap`).
    pub action: String,
    /// A human-readable description (truncated to 1 KiB when written).
    pub note: String,
}

/// Publishes events without blocking. Clones share the queue.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<EventRecord>,
    dropped: Arc<AtomicU64>,
    reporting_controller: Option<Arc<str>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder and the writer that drains its queue into `sink`; run the
    /// writer with [`EventWriter::run`].
    pub fn new<S: EventSink>(sink: S, config: RecorderConfig) -> (EventRecorder, EventWriter<S>) {
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let recorder = EventRecorder {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
            reporting_controller: None,
        };
        (recorder, EventWriter::new(rx, sink, config))
    }

    /// A recorder writing to the API server through `client`, with its
    /// writer spawned on the current tokio runtime until `cancel` fires.
    pub fn spawn(
        client: kube_client::Client,
        config: RecorderConfig,
        cancel: CancellationToken,
    ) -> EventRecorder {
        let (recorder, writer) = EventRecorder::new(ApiEventSink::new(client), config);
        tokio::spawn(writer.run(cancel));
        recorder
    }

    /// A recorder on the same queue whose events report `controller` as
    /// their `reportingController`.
    pub fn for_controller(&self, controller: impl Into<Arc<str>>) -> EventRecorder {
        EventRecorder {
            reporting_controller: Some(controller.into()),
            ..self.clone()
        }
    }

    /// Queues `info` about `regarding`; never waits. Returns `false` (and
    /// counts it) when the queue was full or the writer has stopped.
    pub fn publish<K: Resource<DynamicType = ()>>(&self, regarding: &K, info: EventInfo) -> bool {
        self.publish_ref(&regarding.object_ref(&()), info)
    }

    /// [`publish`](Self::publish) about an object named by reference.
    pub fn publish_ref(&self, regarding: &ObjectReference, info: EventInfo) -> bool {
        let record = EventRecord {
            reporting_controller: self.reporting_controller.clone(),
            regarding: regarding.clone(),
            related: info.related,
            type_: info.type_,
            reason: info.reason,
            action: info.action,
            note: info.note,
        };
        match self.tx.try_send(record) {
            Ok(()) => true,
            Err(error) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%error, "event dropped");
                false
            }
        }
    }

    /// How many events were dropped because the queue was full or closed.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
