//! The manager's event writer: one queue and one writer for every
//! controller's recorder, run as a runnable on every replica and flushed
//! when the manager shuts down.

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::Runnable;
use crate::error::BoxError;
use crate::events::{ApiEventSink, EventRecorder, EventWriter, RecorderConfig};

/// The `reportingInstance` of a manager's events when none is configured:
/// `POD_NAME`, else `HOSTNAME`, else `controller-runtime`.
pub(super) fn default_recorder_config() -> RecorderConfig {
    let instance = ["POD_NAME", "HOSTNAME"]
        .into_iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "controller-runtime".to_string());
    RecorderConfig::new("controller-runtime", instance)
}

/// The writer half, taken once when the manager starts it.
pub(super) struct WriterRunnable {
    writer: Mutex<Option<EventWriter<ApiEventSink>>>,
}

/// The recorder every `event_recorder(name)` derives from, and the runnable
/// that writes its events.
pub(super) fn recorder_and_writer(
    client: kube_client::Client,
    config: RecorderConfig,
) -> (EventRecorder, WriterRunnable) {
    let (recorder, writer) = EventRecorder::new(ApiEventSink::new(client), config);
    let runnable = WriterRunnable {
        writer: Mutex::new(Some(writer)),
    };
    (recorder, runnable)
}

impl Runnable for WriterRunnable {
    fn name(&self) -> String {
        "event writer".to_string()
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        let writer = self.writer.lock().take();
        Box::pin(async move {
            if let Some(writer) = writer {
                writer.run(stop).await;
            }
            Ok(())
        })
    }
}
