//! The manager's event writer: one queue and one writer for every
//! controller's recorder, run as a runnable on every replica and flushed
//! when the manager shuts down.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::Runnable;
use crate::cluster::Cluster;
use crate::error::BoxError;
use crate::events::RecorderConfig;

/// The `reportingInstance` of a manager's events when none is configured:
/// `POD_NAME`, else `HOSTNAME`, else `controller-runtime`.
pub(super) fn default_recorder_config() -> RecorderConfig {
    let instance = ["POD_NAME", "HOSTNAME"]
        .into_iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "controller-runtime".to_string());
    RecorderConfig::new("controller-runtime", instance)
}

/// Runs the event writer of the manager's own cluster (taken from it once,
/// when the manager starts it).
pub(super) struct EventWriterRunnable {
    cluster: Cluster,
}

impl EventWriterRunnable {
    pub(super) fn new(cluster: Cluster) -> Self {
        EventWriterRunnable { cluster }
    }
}

impl Runnable for EventWriterRunnable {
    fn name(&self) -> String {
        "event writer".to_string()
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        let writer = self.cluster.take_event_writer();
        Box::pin(async move {
            if let Some(writer) = writer {
                writer.run(stop).await;
            }
            Ok(())
        })
    }
}
