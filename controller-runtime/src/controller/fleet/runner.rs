//! The running fleet controller: follows the fleet's attached clusters
//! (registering its watches on each cluster's informers as it arrives,
//! removing them as it leaves) and runs workers over one queue of
//! [`ClusterRequest`]s, each reconciled by that cluster's reconciler.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::ControllerError;
use super::super::metrics::{ClusterSeries, ControllerMetrics};
use super::super::outcome::{DynReconciler, QueueAction};
use super::super::source::{EventFilters, RequestSink, SourceRegistration};
use super::SourceFactory;
use crate::cluster::{Attached, Cluster, Fleet};
use crate::error::BoxError;
use crate::manager::Runnable;
use crate::metrics::Metrics;
use crate::reconcile::CallInfo;
use crate::request::{ClusterRequest, Request};
use crate::workqueue::{AddOptions, Priority, Queue};

/// How soon a request of a cluster that has its share of the workers is
/// looked at again.
const BUSY_RETRY: Duration = Duration::from_millis(50);

/// Makes the reconciler of one cluster (reading its cache, acting through
/// its client, its events reporting as the named controller).
pub(super) type ReconcilerFactory =
    Box<dyn Fn(&Cluster, &str) -> Arc<dyn DynReconciler> + Send + Sync>;

pub(super) struct FleetRunnable {
    pub(super) name: Arc<str>,
    pub(super) fleet: Fleet,
    pub(super) metrics: Metrics,
    pub(super) sources: Vec<SourceFactory>,
    pub(super) filters: EventFilters,
    pub(super) reconcilers: ReconcilerFactory,
    pub(super) queue: Queue<ClusterRequest>,
    pub(super) workers: usize,
    /// How many of the workers one cluster's requests may hold at once.
    pub(super) per_cluster: usize,
    pub(super) reconcile_timeout: Option<Duration>,
    pub(super) cache_sync_timeout: Duration,
    pub(super) controller_metrics: ControllerMetrics,
    pub(super) next_id: AtomicU64,
    /// The clusters this controller watches now, by name.
    pub(super) members: Mutex<HashMap<Arc<str>, Arc<Member>>>,
    /// Whether only the leader runs it.
    pub(super) leader_only: bool,
}

/// One cluster as the controller watches it.
pub(super) struct Member {
    cluster: Cluster,
    reconciler: Arc<dyn DynReconciler>,
    /// The handlers on the cluster's informers (removed when dropped).
    registrations: Mutex<Vec<SourceRegistration>>,
    synced: AtomicBool,
    /// Requests taken from the queue before the caches synced, put back
    /// when they do (`synced` turns true under this lock).
    parked: Mutex<HashSet<ClusterRequest>>,
    /// Reconciles of this cluster running now.
    in_flight: AtomicUsize,
    series: ClusterSeries,
    detached: CancellationToken,
}

impl Member {
    /// A worker slot of this cluster, unless `limit` reconciles of it run.
    fn take_slot(&self, limit: usize) -> Option<Slot<'_>> {
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(&self.in_flight))
    }

    /// The cluster left: its handlers go, its series go, its sync wait ends.
    fn detach(&self) {
        self.detached.cancel();
        self.registrations.lock().clear();
        self.series.remove();
    }
}

/// One running reconcile of a cluster; frees its slot when dropped.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Feeds one cluster's requests into the fleet controller's queue.
struct ClusterSink {
    cluster: Arc<str>,
    queue: Queue<ClusterRequest>,
}

impl RequestSink for ClusterSink {
    fn add(&self, req: Request, priority: Priority) {
        let req = ClusterRequest::new(Arc::clone(&self.cluster), req);
        if priority == Priority::NORMAL {
            self.queue.add(req);
        } else {
            self.queue
                .add_with(req, AddOptions::new().priority(priority));
        }
    }
}

impl Runnable for FleetRunnable {
    fn name(&self) -> String {
        format!("fleet controller {}", self.name)
    }

    fn needs_leader_election(&self) -> bool {
        self.leader_only
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move {
            self.run(stop).await;
            Ok(())
        })
    }
}

impl FleetRunnable {
    async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut attached = self.fleet.subscribe();
        self.controller_metrics
            .set_max_concurrent_reconciles(self.workers);
        tracing::info!(controller = %self.name, workers = self.workers, "starting fleet workers");
        let mut workers = JoinSet::new();
        for _ in 0..self.workers {
            let (this, stop) = (Arc::clone(&self), stop.clone());
            workers.spawn(async move { this.worker(stop).await });
        }
        loop {
            let now = attached.borrow_and_update().clone();
            self.follow(&now);
            tokio::select! {
                () = stop.cancelled() => break,
                changed = attached.changed() => {
                    if changed.is_err() {
                        stop.cancelled().await;
                        break;
                    }
                }
            }
        }
        tracing::info!(controller = %self.name, "stopping: finishing in-flight reconciles");
        self.queue.shut_down();
        while let Some(joined) = workers.join_next().await {
            if let Err(error) = joined
                && error.is_panic()
            {
                tracing::error!(controller = %self.name, %error, "worker panicked");
            }
        }
        for (_, member) in self.members.lock().drain() {
            member.detach();
        }
        tracing::info!(controller = %self.name, "all fleet workers finished");
    }

    /// Detaches the clusters that left (or were engaged anew under their
    /// name) and attaches those that arrived.
    fn follow(self: &Arc<Self>, attached: &Attached) {
        let mut members = self.members.lock();
        let gone: Vec<Arc<str>> = members
            .iter()
            .filter(|(name, m)| attached.get(*name).is_none_or(|c| !c.same_as(&m.cluster)))
            .map(|(name, _)| Arc::clone(name))
            .collect();
        for name in gone {
            if let Some(member) = members.remove(&name) {
                member.detach();
                tracing::info!(controller = %self.name, cluster = %name, "cluster left");
            }
        }
        for (name, cluster) in attached {
            if members.contains_key(name) {
                continue;
            }
            match self.attach(cluster) {
                Ok(member) => {
                    members.insert(Arc::clone(name), member);
                }
                Err(error) => {
                    tracing::error!(controller = %self.name, cluster = %name, %error, "cannot watch the cluster");
                }
            }
        }
    }

    /// Registers every watch on `cluster`'s informers (starting those
    /// requested now) and waits for them in the background.
    fn attach(self: &Arc<Self>, cluster: &Cluster) -> Result<Arc<Member>, ControllerError> {
        let sink: Arc<dyn RequestSink> = Arc::new(ClusterSink {
            cluster: cluster.name_arc(),
            queue: self.queue.clone(),
        });
        let mut registrations = Vec::with_capacity(self.sources.len());
        for make in &self.sources {
            let source = make(cluster, &self.filters);
            let registration = source.register(Arc::clone(&sink)).map_err(|source_error| {
                ControllerError::Watch {
                    controller: self.name.to_string(),
                    watch: format!("{} in cluster {}", source.describe(), cluster.name()),
                    source: source_error,
                }
            })?;
            registrations.push(registration);
        }
        cluster.informer_factory().start();
        let member = Arc::new(Member {
            cluster: cluster.clone(),
            reconciler: (self.reconcilers)(cluster, &self.name),
            registrations: Mutex::new(registrations),
            synced: AtomicBool::new(false),
            parked: Mutex::new(HashSet::new()),
            in_flight: AtomicUsize::new(0),
            series: ClusterSeries::new(&self.metrics, &self.name, cluster.name()),
            detached: CancellationToken::new(),
        });
        tokio::spawn(wait_for_sync(
            Arc::clone(&self.name),
            Arc::clone(&member),
            self.queue.clone(),
            self.cache_sync_timeout,
        ));
        tracing::info!(controller = %self.name, cluster = %cluster.name(), "watching cluster");
        Ok(member)
    }

    async fn worker(&self, stop: CancellationToken) {
        loop {
            let req = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                req = self.queue.get() => match req {
                    Some(req) => req,
                    None => return,
                },
            };
            self.process(req).await;
        }
    }

    async fn process(&self, req: ClusterRequest) {
        let member = self.members.lock().get(&req.cluster).cloned();
        let Some(member) = member else {
            // The cluster left: its requests go with it.
            self.queue.forget(&req);
            self.queue.done(&req);
            return;
        };
        if !member.synced.load(Ordering::Acquire) {
            let mut parked = member.parked.lock();
            // Looked at again under the lock the sync releases them under.
            if !member.synced.load(Ordering::Acquire) {
                parked.insert(req.clone());
                drop(parked);
                self.queue.done(&req);
                return;
            }
        }
        let Some(_slot) = member.take_slot(self.per_cluster) else {
            // The cluster holds its share of the workers (its API server
            // may hang): the other clusters' requests go first.
            self.queue.add_after(req.clone(), BUSY_RETRY);
            self.queue.done(&req);
            return;
        };
        let _active = self.controller_metrics.worker_active();
        let reconcile_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let retries = usize::try_from(self.queue.num_requeues(&req)).unwrap_or(usize::MAX);
        let ctx = CallInfo::new(Arc::clone(&self.name), reconcile_id)
            .with_retries(retries)
            .in_cluster(Arc::clone(&req.cluster));
        let started = Instant::now();
        let run = member
            .reconciler
            .run(req.request.clone(), ctx, self.reconcile_timeout);
        // A cluster that leaves takes its running reconciles with it: they
        // are dropped at their next await (one waiting on a stalled API
        // server included), and their workers serve the others.
        let outcome = tokio::select! {
            biased;
            () = member.detached.cancelled() => {
                tracing::info!(controller = %self.name, object = %req, "reconcile cancelled: its cluster left");
                self.queue.forget(&req);
                self.queue.done(&req);
                return;
            }
            outcome = run => outcome,
        };
        let elapsed = started.elapsed();
        self.controller_metrics.observe(&outcome, elapsed);
        member.series.observe(&outcome, elapsed);
        if let Some(error) = outcome_error(&outcome) {
            tracing::error!(controller = %self.name, object = %req, %error, "reconcile failed; retry with backoff");
        }
        if member.detached.is_cancelled() {
            self.queue.forget(&req);
        } else {
            for action in outcome.queue_actions() {
                match action {
                    QueueAction::Forget => self.queue.forget(&req),
                    QueueAction::AddAfter(d) => self.queue.add_after(req.clone(), d),
                    QueueAction::AddRateLimited => self.queue.add_rate_limited(req.clone()),
                }
            }
        }
        self.queue.done(&req);
    }
}

fn outcome_error(outcome: &super::super::outcome::ReconcileOutcome) -> Option<String> {
    use super::super::outcome::ReconcileOutcome as O;
    match outcome {
        O::Error(e) | O::Terminal(e) => Some(e.to_string()),
        O::Panic(message) => Some(format!("panic: {message}")),
        O::Timeout(limit) => Some(format!("timed out after {limit:?}")),
        O::Success | O::Requeue | O::RequeueAfter(_) => None,
    }
}

/// Marks `member` synced once every watch synced, and puts the requests
/// parked meanwhile back into `queue`; warns (once) when that takes longer
/// than `timeout`, and goes on waiting: one cluster's slow informers never
/// fail the controller or the other clusters. Woken by the watches' own
/// sync waits, with a look every 20 ms besides.
async fn wait_for_sync(
    controller: Arc<str>,
    member: Arc<Member>,
    queue: Queue<ClusterRequest>,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    let mut warned = false;
    loop {
        let (unsynced, waits): (Vec<String>, Vec<_>) = member
            .registrations
            .lock()
            .iter()
            .filter(|r| !r.has_synced())
            .map(|r| (r.description.clone(), r.sync_wait()))
            .unzip();
        if unsynced.is_empty() {
            let parked = {
                let mut parked = member.parked.lock();
                member.synced.store(true, Ordering::Release);
                std::mem::take(&mut *parked)
            };
            tracing::info!(controller = %controller, cluster = %member.cluster.name(), parked = parked.len(), "cluster caches synced");
            for req in parked {
                queue.add(req);
            }
            return;
        }
        if !warned && Instant::now() >= deadline {
            warned = true;
            tracing::warn!(controller = %controller, cluster = %member.cluster.name(), ?unsynced, ?timeout, "cluster caches not synced yet; still waiting");
        }
        tokio::select! {
            () = member.detached.cancelled() => return,
            _ = futures::future::select_all(waits) => {}
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
}
