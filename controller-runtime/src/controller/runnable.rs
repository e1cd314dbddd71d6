//! A controller as the manager runs it: the manager's own cluster (its
//! watches registered, its caches synced within the manager's cache-sync
//! timeout or the controller fails), the fleet's clusters (followed as
//! they come and go), or both, served by one [engine](super::worker).
//!
//! Controller layer.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::ControllerError;
use super::lanes::{HUB, Lane, LaneSink, WorkItem};
use super::members::FleetSide;
use super::outcome::DynReconciler;
use super::source::{RequestSink, Source};
use super::worker::Engine;
use crate::error::BoxError;
use crate::manager::Runnable;

/// The manager's own cluster as a controller reconciles in it.
pub(crate) struct HubSide {
    pub(crate) sources: Vec<Box<dyn Source>>,
    pub(crate) reconciler: Arc<dyn DynReconciler>,
}

/// A controller registered with the manager.
pub(crate) struct ControllerRunnable<T> {
    pub(crate) engine: Arc<Engine<T>>,
    pub(crate) hub: Option<HubSide>,
    pub(crate) fleet: Option<FleetSide>,
    /// Whether only the leader runs it.
    pub(crate) leader_only: bool,
}

impl<T: WorkItem> Runnable for ControllerRunnable<T> {
    fn name(&self) -> String {
        format!("controller {}", self.engine.name)
    }

    fn needs_leader_election(&self) -> bool {
        self.leader_only
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move { self.run(stop).await.map_err(Into::into) })
    }
}

/// Shuts the queue down and closes every lane however the controller's
/// task ends (returned or dropped).
struct CloseOnDrop<T: WorkItem>(Arc<Engine<T>>);

impl<T: WorkItem> Drop for CloseOnDrop<T> {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl<T: WorkItem> ControllerRunnable<T> {
    async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), ControllerError> {
        let engine = &self.engine;
        let _close = CloseOnDrop(Arc::clone(engine));
        if let Some(hub) = &self.hub {
            let lane = hub.lane(engine)?;
            tracing::info!(controller = %engine.name, "waiting for caches to sync");
            let timeout = engine.config.cache_sync_timeout;
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                synced = lane.wait_synced(timeout) => {
                    synced.map_err(|unsynced| ControllerError::CacheSync {
                        controller: engine.name.to_string(),
                        timeout,
                        unsynced,
                    })?;
                }
            }
            lane.set_synced();
            engine.add_lane(lane);
        }
        let workers = engine.start_workers(&stop);
        match &self.fleet {
            Some(fleet) => fleet.follow(engine, &stop).await,
            None => stop.cancelled().await,
        }
        engine.stop_workers(workers).await;
        Ok(())
    }
}

impl HubSide {
    /// The lane of the manager's own cluster, its watches registered.
    fn lane<T: WorkItem>(&self, engine: &Engine<T>) -> Result<Arc<Lane<T>>, ControllerError> {
        let hub: Arc<str> = Arc::from(HUB);
        let sink: Arc<dyn RequestSink> = Arc::new(LaneSink {
            cluster: Arc::clone(&hub),
            queue: engine.queue.clone(),
        });
        let mut registrations = Vec::with_capacity(self.sources.len());
        for source in &self.sources {
            let registration =
                source
                    .register(Arc::clone(&sink))
                    .map_err(|error| ControllerError::Watch {
                        controller: engine.name.to_string(),
                        watch: source.describe(),
                        source: error,
                    })?;
            registrations.push(registration);
        }
        Ok(Arc::new(Lane::new(
            hub,
            Arc::clone(&self.reconciler),
            registrations,
            engine.config.per_cluster,
            None,
            engine.queue.clone(),
        )))
    }
}
