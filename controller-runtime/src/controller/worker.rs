//! The one worker loop of every controller, of the manager's own cluster,
//! of the fleet, or of both: bounded workers over one workqueue whose
//! requests name their cluster, each reconciled in its cluster's
//! [lane](super::lanes).
//!
//! Each worker loops: take a request (never one another worker holds: the
//! workqueue guarantees it), let its lane admit it (or park it), reconcile
//! it inside a `reconcile` span carrying `controller`, `object`,
//! `reconcile_id` and, in a fleet member, `cluster`, record the outcome,
//! apply the outcome's workqueue calls (forget, add after a delay, add
//! rate-limited) and mark the request done. A reconcile whose cluster
//! starts failing lets its worker go (it goes on in the background and
//! finishes the same way), so stalled clusters never hold the workers; one
//! whose cluster leaves is dropped. When the controller is asked to stop,
//! workers take no new request and finish the one in hand; if the
//! controller's task is dropped instead (lost leadership), everything stops
//! at once.
//!
//! Controller layer.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lanes::{ClusterBuckets, Lane, WorkItem};
use super::metrics::ControllerMetrics;
use super::outcome::{QueueAction, ReconcileOutcome};
use crate::reconcile::CallInfo;
use crate::workqueue::{ItemExponentialFailureRateLimiter, MaxOfRateLimiter, Queue, RateLimiter};

/// What a controller is run with besides its watches and reconcilers.
pub(crate) struct EngineConfig {
    pub(crate) workers: usize,
    /// How many workers one cluster's reconciles may hold.
    pub(crate) per_cluster: usize,
    pub(crate) reconcile_timeout: Option<Duration>,
    pub(crate) cache_sync_timeout: Duration,
}

/// A running controller's workers, queue and lanes.
pub(crate) struct Engine<T> {
    pub(crate) name: Arc<str>,
    pub(crate) queue: Queue<T>,
    pub(crate) config: EngineConfig,
    metrics: ControllerMetrics,
    next_id: AtomicU64,
    lanes: Mutex<HashMap<Arc<str>, Arc<Lane<T>>>>,
    /// The default limiter's buckets (none with the user's limiter).
    buckets: Option<Arc<ClusterBuckets>>,
}

impl<T: WorkItem> Engine<T> {
    /// The engine of the controller `name`; its queue uses `limiter`, or
    /// the default: per-request exponential backoff (5 ms to 1000 s) and
    /// a 10/s burst-100 bucket per cluster.
    pub(crate) fn new(
        name: Arc<str>,
        config: EngineConfig,
        limiter: Option<Box<dyn RateLimiter<T>>>,
        mgr: &crate::manager::Manager,
    ) -> Arc<Self> {
        let (limiter, buckets) = match limiter {
            Some(limiter) => (limiter, None),
            None => {
                let buckets = Arc::new(ClusterBuckets::default());
                let limiter: Box<dyn RateLimiter<T>> = Box::new(MaxOfRateLimiter::new(vec![
                    Box::new(ItemExponentialFailureRateLimiter::default()),
                    Box::new(Arc::clone(&buckets)),
                ]));
                (limiter, Some(buckets))
            }
        };
        let queue = Queue::builder()
            .name(name.to_string())
            .rate_limiter(limiter)
            .metrics(mgr.workqueue_metrics())
            .build();
        Arc::new(Engine {
            metrics: ControllerMetrics::new(mgr.metrics(), &name),
            name,
            queue,
            config,
            next_id: AtomicU64::new(1),
            lanes: Mutex::new(HashMap::new()),
            buckets,
        })
    }

    /// The lane of `cluster`, if the controller reconciles there now.
    pub(crate) fn lane(&self, cluster: &str) -> Option<Arc<Lane<T>>> {
        self.lanes.lock().get(cluster).cloned()
    }

    /// The clusters the controller reconciles in now, with their lanes.
    pub(crate) fn lanes(&self) -> Vec<(Arc<str>, Arc<Lane<T>>)> {
        let lanes = self.lanes.lock();
        lanes
            .iter()
            .map(|(n, l)| (Arc::clone(n), Arc::clone(l)))
            .collect()
    }

    pub(crate) fn add_lane(&self, lane: Arc<Lane<T>>) {
        let previous = self.lanes.lock().insert(Arc::clone(&lane.cluster), lane);
        if let Some(previous) = previous {
            previous.detach();
        }
    }

    /// Closes the lane of `cluster` for good (its cluster left).
    pub(crate) fn remove_lane(&self, cluster: &str) -> bool {
        let Some(lane) = self.lanes.lock().remove(cluster) else {
            return false;
        };
        lane.detach();
        if let Some(buckets) = &self.buckets {
            buckets.remove(cluster);
        }
        true
    }

    /// Starts the workers; they run until `stop` or the queue shuts down.
    pub(crate) fn start_workers(self: &Arc<Self>, stop: &CancellationToken) -> JoinSet<()> {
        let workers = self.config.workers;
        tracing::info!(controller = %self.name, workers, "starting workers");
        self.metrics.set_max_concurrent_reconciles(workers);
        let mut set = JoinSet::new();
        for _ in 0..workers {
            let (this, stop) = (Arc::clone(self), stop.clone());
            set.spawn(async move { this.worker(stop).await });
        }
        set
    }

    /// Stops taking requests, lets the busy workers finish, then closes
    /// every lane.
    pub(crate) async fn stop_workers(&self, mut workers: JoinSet<()>) {
        tracing::info!(controller = %self.name, "stopping: finishing in-flight reconciles");
        // Idle workers wake on the shut-down queue; busy ones finish first.
        self.queue.shut_down();
        while let Some(joined) = workers.join_next().await {
            if let Err(error) = joined
                && error.is_panic()
            {
                tracing::error!(controller = %self.name, %error, "worker panicked");
            }
        }
        self.close();
        tracing::info!(controller = %self.name, "all workers finished");
    }

    /// Shuts the queue down and closes every lane (the controller's task
    /// ended, returned or dropped).
    pub(crate) fn close(&self) {
        self.queue.shut_down();
        let lanes: Vec<Arc<Lane<T>>> = self.lanes.lock().drain().map(|(_, l)| l).collect();
        for lane in lanes {
            lane.detach();
        }
    }

    async fn worker(self: Arc<Self>, stop: CancellationToken) {
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

    async fn process(self: &Arc<Self>, req: T) {
        let Some(lane) = self.lane(req.cluster()) else {
            // Its cluster left (or never came): the request goes with it.
            self.queue.forget(&req);
            self.queue.done(&req);
            return;
        };
        let Some(slot) = lane.admit(&req) else {
            // Parked by its lane until the lane releases it.
            self.queue.done(&req);
            return;
        };
        let active = self.metrics.worker_active();
        let reconcile_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let retries = usize::try_from(self.queue.num_requeues(&req)).unwrap_or(usize::MAX);
        let ctx = CallInfo::new(Arc::clone(&self.name), reconcile_id)
            .with_retries(retries)
            .in_cluster(Arc::clone(&lane.cluster));
        let started = Instant::now();
        let reconciler = Arc::clone(&lane.reconciler);
        let (request, timeout) = (req.request().clone(), self.config.reconcile_timeout);
        let mut run: BoxFuture<'static, ReconcileOutcome> =
            Box::pin(async move { reconciler.run(request, ctx, timeout).await });
        let (detached, failing) = (lane.detached(), lane.failing());
        enum Ended {
            Left,
            Failing,
            Done(ReconcileOutcome),
        }
        let ended = tokio::select! {
            biased;
            // A cluster that leaves takes its running reconciles with it:
            // they are dropped at their next await (one waiting on a
            // stalled API server included).
            () = detached.cancelled() => Ended::Left,
            () = failing => Ended::Failing,
            outcome = &mut run => Ended::Done(outcome),
        };
        match ended {
            Ended::Left => self.cancelled(&req),
            Ended::Done(outcome) => self.finish(&lane, req, reconcile_id, outcome, started),
            Ended::Failing => {
                // The cluster fails (its API server may hang): the
                // reconcile goes on without a worker, and the lane parks
                // the cluster's requests until it is healthy again.
                drop((slot, active));
                tracing::debug!(controller = %self.name, object = %req, "cluster failing: reconcile goes on without its worker");
                let this = Arc::clone(self);
                tokio::spawn(async move {
                    tokio::select! {
                        biased;
                        () = detached.cancelled() => this.cancelled(&req),
                        outcome = run => this.finish(&lane, req, reconcile_id, outcome, started),
                    }
                });
                return;
            }
        }
        drop((slot, active));
    }

    fn cancelled(&self, req: &T) {
        tracing::info!(controller = %self.name, object = %req, "reconcile cancelled: its cluster left");
        self.queue.forget(req);
        self.queue.done(req);
    }

    /// Records one finished reconcile and makes its workqueue calls.
    fn finish(
        &self,
        lane: &Lane<T>,
        req: T,
        reconcile_id: u64,
        outcome: ReconcileOutcome,
        started: Instant,
    ) {
        let elapsed = started.elapsed();
        self.metrics.observe(&outcome, elapsed);
        if let Some(series) = &lane.series {
            series.observe(&outcome, elapsed);
        }
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.name,
            object = %req.request(),
            reconcile_id,
            cluster = tracing::field::Empty,
        );
        if lane.is_member() {
            span.record("cluster", &*lane.cluster);
        }
        span.in_scope(|| log_outcome(&outcome));
        if lane.detached().is_cancelled() {
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

fn log_outcome(outcome: &ReconcileOutcome) {
    match outcome {
        ReconcileOutcome::Success => tracing::debug!("reconciled"),
        ReconcileOutcome::Requeue => tracing::debug!("reconciled; requeue with backoff"),
        ReconcileOutcome::RequeueAfter(d) => tracing::debug!(after = ?d, "reconciled; requeue"),
        ReconcileOutcome::Error(error) => {
            tracing::error!(%error, "reconcile failed; retry with backoff")
        }
        ReconcileOutcome::Terminal(error) => {
            tracing::error!(%error, "reconcile failed with a terminal error; not retried")
        }
        ReconcileOutcome::Panic(message) => {
            tracing::error!(panic = %message, "reconcile panicked; retry with backoff")
        }
        ReconcileOutcome::Timeout(limit) => {
            tracing::error!(timeout = ?limit, "reconcile timed out; retry with backoff")
        }
    }
}
