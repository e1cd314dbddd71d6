//! Lanes: the clusters a controller reconciles in, each with its own
//! reconciler, watches, share of the workers and parked requests.
//!
//! Every request a controller queues names its cluster: the manager's own
//! (`""`, as [`Cluster::name`](crate::cluster::Cluster::name) spells it) or
//! a member of the fleet. Each cluster the controller reconciles in is a
//! [`Lane`]. A worker takes a request from the controller's one queue and
//! asks its lane to admit it. A lane whose caches have not synced, whose
//! cluster is failing, or whose reconciles hold its share of the workers
//! *parks* the request: the worker lets it go at once and nothing looks at
//! it again until the lane releases it. A lane releases every parked
//! request into the queue when it opens (caches synced, cluster healthy
//! again) and one each time one of its reconciles ends; a lane that closes
//! for good (its cluster left) drops them and cancels its running
//! reconciles.
//!
//! A fleet member's lane follows its cluster's
//! [health](crate::cluster::ClusterHealth) as the fleet reports it, woken
//! by each change (no polling): it parks on `Failing` (its running
//! reconciles let their workers go) and releases its parked requests on
//! `Ready`. `Pending` changes nothing: a lane that runs goes on running,
//! one parked stays parked. A member is `Pending` before its first sync,
//! when the lane is closed anyway until its own watches sync, and again
//! after having synced only while another informer started in it later
//! (another controller's, a fleet-wide index's) makes its first list:
//! the lane's own watches have synced and stay synced, so parking would
//! stall the cluster's requests for nothing, and an informer that does
//! not sync within the cache-sync timeout turns the member `Failing`,
//! which parks. A member that failed and answers again while an informer
//! of it still syncs (`Failing`, then `Pending`) stays parked until
//! `Ready`.
//!
//! [`ClusterBuckets`] is the overall token bucket of the default rate
//! limiter, one per cluster, so that one cluster's failures never slow the
//! retries of another.
//!
//! Controller layer: private to this crate.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::metrics::ClusterSeries;
use super::outcome::DynReconciler;
use super::source::{RequestSink, SourceRegistration, wait_for_sync};
use crate::cluster::{Cluster, ClusterHealth};
use crate::request::{ClusterRequest, Request};
use crate::workqueue::{AddOptions, BucketRateLimiter, Priority, Queue, RateLimiter};

/// The name of the manager's own cluster in a lane or a request.
pub(crate) const HUB: &str = "";

/// A controller's workqueue item: a request in one cluster.
pub(crate) trait WorkItem: Clone + Eq + Hash + fmt::Display + Send + Sync + 'static {
    /// The object to reconcile.
    fn request(&self) -> &Request;
    /// Its cluster's name ([`HUB`] for the manager's own).
    fn cluster(&self) -> &str;
    /// The item of `req` in the cluster `cluster`.
    fn in_cluster(cluster: &Arc<str>, req: Request) -> Self;
}

/// A hub controller's item: the manager's own cluster, always.
impl WorkItem for Request {
    fn request(&self) -> &Request {
        self
    }
    fn cluster(&self) -> &str {
        HUB
    }
    fn in_cluster(_: &Arc<str>, req: Request) -> Self {
        req
    }
}

impl WorkItem for ClusterRequest {
    fn request(&self) -> &Request {
        &self.request
    }
    fn cluster(&self) -> &str {
        &self.cluster
    }
    fn in_cluster(cluster: &Arc<str>, req: Request) -> Self {
        ClusterRequest::new(Arc::clone(cluster), req)
    }
}

/// Feeds one cluster's requests into a controller's queue.
pub(crate) struct LaneSink<T> {
    pub(crate) cluster: Arc<str>,
    pub(crate) queue: Queue<T>,
}

impl<T: WorkItem> RequestSink for LaneSink<T> {
    fn add(&self, req: Request, priority: Priority) {
        let item = T::in_cluster(&self.cluster, req);
        if priority == Priority::NORMAL {
            self.queue.add(item);
        } else {
            self.queue
                .add_with(item, AddOptions::new().priority(priority));
        }
    }
}

/// What decides whether a lane's requests run.
struct Gate<T> {
    synced: bool,
    healthy: bool,
    /// Reconciles holding a worker.
    in_flight: usize,
    parked: HashSet<T>,
}

impl<T> Gate<T> {
    fn open(&self) -> bool {
        self.synced && self.healthy
    }
}

/// One cluster as a controller reconciles in it.
pub(crate) struct Lane<T> {
    /// The cluster's name ([`HUB`] for the manager's own).
    pub(crate) cluster: Arc<str>,
    pub(crate) reconciler: Arc<dyn DynReconciler>,
    /// The fleet member the lane reconciles in (none for the manager's own
    /// cluster).
    member: Option<Cluster>,
    /// The `cluster`-labelled series of a fleet member.
    pub(crate) series: Option<ClusterSeries>,
    /// The handlers on the cluster's informers (removed when dropped).
    registrations: Mutex<Option<Arc<Vec<SourceRegistration>>>>,
    gate: Mutex<Gate<T>>,
    /// How many workers the lane's reconciles may hold at once.
    limit: usize,
    /// Whether the cluster fails now (its running reconciles let their
    /// workers go).
    failing: watch::Sender<bool>,
    detached: CancellationToken,
    queue: Queue<T>,
}

/// A worker held by one reconcile of a lane; given back when dropped.
pub(crate) struct Slot<'a, T: WorkItem>(&'a Lane<T>);

impl<T: WorkItem> Drop for Slot<'_, T> {
    fn drop(&mut self) {
        self.0.slot_freed();
    }
}

impl<T: WorkItem> Lane<T> {
    /// A lane of `cluster` whose requests go back to `queue`, closed until
    /// its caches sync.
    pub(crate) fn new(
        cluster: Arc<str>,
        reconciler: Arc<dyn DynReconciler>,
        registrations: Vec<SourceRegistration>,
        limit: usize,
        series: Option<ClusterSeries>,
        queue: Queue<T>,
    ) -> Self {
        Lane {
            cluster,
            reconciler,
            member: None,
            series,
            registrations: Mutex::new(Some(Arc::new(registrations))),
            gate: Mutex::new(Gate {
                synced: false,
                healthy: true,
                in_flight: 0,
                parked: HashSet::new(),
            }),
            limit: limit.max(1),
            failing: watch::Sender::new(false),
            detached: CancellationToken::new(),
            queue,
        }
    }

    /// The lane of the fleet member `cluster`.
    pub(crate) fn of_member(mut self, cluster: Cluster) -> Self {
        self.member = Some(cluster);
        self
    }

    /// The fleet member the lane reconciles in.
    pub(crate) fn member_of(&self) -> Option<&Cluster> {
        self.member.as_ref()
    }

    /// Whether the lane is a fleet member's (not the manager's own cluster).
    pub(crate) fn is_member(&self) -> bool {
        &*self.cluster != HUB
    }

    /// A worker for `req`, or `None` when the lane parks it (closed, or
    /// running its share of the workers).
    pub(crate) fn admit(&self, req: &T) -> Option<Slot<'_, T>> {
        let mut gate = self.gate.lock();
        if gate.open() && gate.in_flight < self.limit {
            gate.in_flight += 1;
            Some(Slot(self))
        } else {
            gate.parked.insert(req.clone());
            None
        }
    }

    fn slot_freed(&self) {
        let mut gate = self.gate.lock();
        gate.in_flight = gate.in_flight.saturating_sub(1);
        if gate.open()
            && let Some(next) = gate.parked.iter().next().cloned()
        {
            gate.parked.remove(&next);
            self.queue.add(next);
        }
    }

    /// How many requests the lane holds back now.
    #[cfg(test)]
    pub(crate) fn parked(&self) -> usize {
        self.gate.lock().parked.len()
    }

    /// Opens the lane for good as far as its caches go.
    pub(crate) fn set_synced(&self) -> usize {
        let mut gate = self.gate.lock();
        gate.synced = true;
        self.release(&mut gate)
    }

    /// Records whether the cluster is healthy; `true` if that changed.
    /// Turning unhealthy lets the lane's running reconciles go of their
    /// workers; turning healthy releases the parked requests.
    pub(crate) fn set_healthy(&self, healthy: bool) -> bool {
        let mut gate = self.gate.lock();
        if gate.healthy == healthy {
            return false;
        }
        gate.healthy = healthy;
        self.failing.send_replace(!healthy);
        self.release(&mut gate);
        true
    }

    /// Puts every parked request back into the queue if the lane is open;
    /// how many.
    fn release(&self, gate: &mut Gate<T>) -> usize {
        if !gate.open() {
            return 0;
        }
        let parked = std::mem::take(&mut gate.parked);
        let n = parked.len();
        for req in parked {
            self.queue.add(req);
        }
        n
    }

    /// Follows the cluster's health until the lane closes, woken by each
    /// change: parks the lane on `Failing`, releases it on `Ready`,
    /// leaves it as it is on `Pending` (see the
    /// [module documentation](self)). `changed` is told each time the lane
    /// turns healthy (`true`) or not (`false`).
    pub(crate) async fn follow_health(
        &self,
        mut health: watch::Receiver<ClusterHealth>,
        changed: impl Fn(bool),
    ) {
        loop {
            let healthy = match &*health.borrow_and_update() {
                ClusterHealth::Ready => Some(true),
                ClusterHealth::Failing { .. } => Some(false),
                ClusterHealth::Pending => None,
            };
            if let Some(healthy) = healthy
                && self.set_healthy(healthy)
            {
                changed(healthy);
            }
            tokio::select! {
                () = self.detached.cancelled() => return,
                next = health.changed() => {
                    if next.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Resolves once the cluster fails (at once if it does now).
    pub(crate) fn failing(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut failing = self.failing.subscribe();
        async move {
            if failing.wait_for(|f| *f).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Cancelled when the lane closes for good.
    pub(crate) fn detached(&self) -> CancellationToken {
        self.detached.clone()
    }

    /// Closes the lane for good: its running reconciles are dropped, its
    /// parked requests and handlers and series go.
    pub(crate) fn detach(&self) {
        self.detached.cancel();
        self.registrations.lock().take();
        self.gate.lock().parked.clear();
        if let Some(series) = &self.series {
            series.remove();
        }
    }

    /// Waits until every watch of the lane synced: `Ok(true)`, or
    /// `Ok(false)` if the lane closed first, or, after `timeout`, the
    /// descriptions of the watches not synced yet.
    pub(crate) async fn wait_synced(&self, timeout: Duration) -> Result<bool, Vec<String>> {
        let Some(registrations) = self.registrations.lock().clone() else {
            return Ok(false);
        };
        tokio::select! {
            () = self.detached.cancelled() => Ok(false),
            synced = wait_for_sync(&registrations, timeout) => synced.map(|()| true),
        }
    }
}

/// The overall token bucket of the default rate limiter (10 per second,
/// burst 100), one per cluster.
#[derive(Default)]
pub(crate) struct ClusterBuckets(Mutex<HashMap<Arc<str>, BucketRateLimiter>>);

impl ClusterBuckets {
    /// Forgets the bucket of a cluster that left.
    pub(crate) fn remove(&self, cluster: &str) {
        self.0.lock().remove(cluster);
    }
}

impl<T: WorkItem> RateLimiter<T> for ClusterBuckets {
    fn when(&self, item: &T) -> Duration {
        let mut buckets = self.0.lock();
        if let Some(bucket) = buckets.get(item.cluster()) {
            return RateLimiter::<()>::when(bucket, &());
        }
        let bucket = BucketRateLimiter::default();
        let wait = RateLimiter::<()>::when(&bucket, &());
        buckets.insert(Arc::from(item.cluster()), bucket);
        wait
    }
    fn forget(&self, _: &T) {}
    fn num_requeues(&self, _: &T) -> u32 {
        0
    }
}

#[cfg(test)]
mod tests;
