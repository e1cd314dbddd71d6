//! Members: the fleet side of a running controller: follows the fleet's attached
//! clusters, giving each arriving cluster a [lane](super::lanes)
//! (its watches registered on the cluster's informers, its reconciler,
//! its sync wait) and closing the lane of each cluster that leaves; each
//! lane follows its cluster's health, woken by each change: a `Failing`
//! cluster's lane parks its requests and lets its running reconciles go of
//! their workers until the cluster is `Ready` again (the rule, `Pending`
//! included, is in [lanes](super::lanes)).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::ControllerError;
use super::lanes::{Lane, LaneSink, WorkItem};
use super::metrics::ClusterSeries;
use super::outcome::DynReconciler;
use super::source::{EventFilters, RequestSink, Source};
use super::worker::Engine;
use crate::cluster::{Attached, Cluster, Fleet};
use crate::metrics::Metrics;

/// Makes a watch's source for one cluster, with the controller-wide
/// filters.
pub(crate) type SourceFactory =
    Box<dyn Fn(&Cluster, &EventFilters) -> Box<dyn Source> + Send + Sync>;

/// Makes the reconciler of one cluster (reading its cache, acting through
/// its client, its events reporting as the named controller).
pub(crate) type ReconcilerFactory =
    Box<dyn Fn(&Cluster, &str) -> Arc<dyn DynReconciler> + Send + Sync>;

/// What a controller reconciling in the fleet's clusters runs with.
pub(crate) struct FleetSide {
    pub(crate) fleet: Fleet,
    pub(crate) metrics: Metrics,
    pub(crate) sources: Vec<SourceFactory>,
    pub(crate) filters: EventFilters,
    pub(crate) reconcilers: ReconcilerFactory,
}

impl FleetSide {
    /// Follows the fleet's clusters until `stop`.
    pub(crate) async fn follow<T: WorkItem>(
        &self,
        engine: &Arc<Engine<T>>,
        stop: &CancellationToken,
    ) {
        let mut attached = self.fleet.subscribe();
        let now = attached.borrow_and_update().clone();
        self.attach_and_detach(engine, &now);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                changed = attached.changed() => {
                    if changed.is_err() {
                        stop.cancelled().await;
                        break;
                    }
                    let now = attached.borrow_and_update().clone();
                    self.attach_and_detach(engine, &now);
                }
            }
        }
    }

    /// Closes the lanes of the clusters that left (or were engaged anew
    /// under their name) and opens those of the clusters that arrived.
    fn attach_and_detach<T: WorkItem>(&self, engine: &Arc<Engine<T>>, attached: &Attached) {
        for (name, lane) in engine.lanes() {
            if !lane.is_member() {
                continue;
            }
            let same = attached
                .get(&name)
                .zip(lane.member_of())
                .is_some_and(|(now, was)| now.same_as(was));
            if !same && engine.remove_lane(&name) {
                tracing::info!(controller = %engine.name, cluster = %name, "cluster left");
            }
        }
        for (name, cluster) in attached {
            if engine.lane(name).is_some() {
                continue;
            }
            match self.attach(engine, cluster) {
                Ok(lane) => engine.add_lane(lane),
                Err(error) => {
                    tracing::error!(controller = %engine.name, cluster = %name, %error, "cannot watch the cluster");
                }
            }
        }
    }

    /// Registers every watch on `cluster`'s informers (starting those
    /// requested now) and waits for them in the background.
    fn attach<T: WorkItem>(
        &self,
        engine: &Arc<Engine<T>>,
        cluster: &Cluster,
    ) -> Result<Arc<Lane<T>>, ControllerError> {
        let sink: Arc<dyn RequestSink> = Arc::new(LaneSink {
            cluster: cluster.name_arc(),
            queue: engine.queue.clone(),
        });
        let mut registrations = Vec::with_capacity(self.sources.len());
        for make in &self.sources {
            let source = make(cluster, &self.filters);
            let registration =
                source
                    .register(Arc::clone(&sink))
                    .map_err(|error| ControllerError::Watch {
                        controller: engine.name.to_string(),
                        watch: format!("{} in cluster {}", source.describe(), cluster.name()),
                        source: error,
                    })?;
            registrations.push(registration);
        }
        cluster.informer_factory().start();
        let lane = Arc::new(
            Lane::new(
                cluster.name_arc(),
                (self.reconcilers)(cluster, &engine.name),
                registrations,
                engine.config.per_cluster,
                Some(ClusterSeries::new(
                    &self.metrics,
                    &engine.name,
                    cluster.name(),
                )),
                engine.queue.clone(),
            )
            .of_member(cluster.clone()),
        );
        tokio::spawn(wait_for_sync(Arc::clone(engine), Arc::clone(&lane)));
        tokio::spawn(follow_health(
            Arc::clone(engine),
            Arc::clone(&lane),
            cluster.clone(),
        ));
        tracing::info!(controller = %engine.name, cluster = %cluster.name(), "watching cluster");
        Ok(lane)
    }
}

/// Parks `lane`'s requests while `cluster` fails and releases them once it
/// is `Ready` again, woken by each change of its health, until the lane
/// closes.
async fn follow_health<T: WorkItem>(engine: Arc<Engine<T>>, lane: Arc<Lane<T>>, cluster: Cluster) {
    lane.follow_health(cluster.watch_health(), |healthy| {
        if healthy {
            tracing::info!(controller = %engine.name, cluster = %lane.cluster, "cluster healthy again: its requests go on");
        } else {
            tracing::warn!(controller = %engine.name, cluster = %lane.cluster, "cluster failing: its requests wait, its reconciles let their workers go");
        }
    })
    .await;
}

/// Opens `lane` once every watch synced (its parked requests go into the
/// queue). Past the controller's cache-sync timeout the error is logged
/// once, as the manager's own cluster's would fail the controller, and the
/// wait goes on: one member's slow informers never fail the controller or
/// the other clusters (the fleet's health reports the member).
async fn wait_for_sync<T: WorkItem>(engine: Arc<Engine<T>>, lane: Arc<Lane<T>>) {
    let timeout = engine.config.cache_sync_timeout;
    let mut logged = false;
    loop {
        match lane.wait_synced(timeout).await {
            Ok(false) => return,
            Ok(true) => {
                let parked = lane.set_synced();
                tracing::info!(controller = %engine.name, cluster = %lane.cluster, parked, "cluster caches synced");
                return;
            }
            Err(unsynced) if !logged => {
                logged = true;
                let error = ControllerError::CacheSync {
                    controller: engine.name.to_string(),
                    timeout,
                    unsynced,
                };
                tracing::error!(controller = %engine.name, cluster = %lane.cluster, %error, "cluster caches not synced; still waiting");
            }
            Err(_) => {}
        }
    }
}
