//! The running controller: waits for its caches, then runs bounded workers
//! that take requests from the workqueue and reconcile them.
//!
//! Each worker loops: take a request (never one another worker holds: the
//! workqueue guarantees it), reconcile it inside a `reconcile` span carrying
//! `controller`, `object` and `reconcile_id`, record the outcome, apply the
//! outcome's workqueue calls (forget, add after a delay, add rate-limited)
//! and mark the request done. When the controller is asked to stop, workers
//! take no new request and finish the one in hand; if the controller's task
//! is dropped instead (lost leadership), everything stops at once.
//!
//! Controller layer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ControllerError;
use super::metrics::ControllerMetrics;
use super::outcome::{DynReconciler, QueueAction, ReconcileOutcome};
use super::source::{Source, SourceRegistration, wait_for_sync};
use crate::error::BoxError;
use crate::manager::Runnable;
use crate::reconcile::CallInfo;
use crate::request::Request;
use crate::workqueue::Queue;

/// The controller as the manager runs it: everything a started controller
/// needs.
pub(crate) struct ControllerRunnable {
    pub(crate) name: Arc<str>,
    pub(crate) reconciler: Arc<dyn DynReconciler>,
    pub(crate) queue: Queue<Request>,
    pub(crate) sources: Vec<Box<dyn Source>>,
    pub(crate) workers: usize,
    pub(crate) reconcile_timeout: Option<Duration>,
    pub(crate) cache_sync_timeout: Duration,
    pub(crate) metrics: ControllerMetrics,
    pub(crate) next_id: AtomicU64,
}

impl Runnable for ControllerRunnable {
    fn name(&self) -> String {
        format!("controller {}", self.name)
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move { self.run(stop).await.map_err(Into::into) })
    }
}

/// Shuts the queue down and removes the informer handlers however the
/// controller's task ends (returned or dropped).
struct StopGuard {
    queue: Queue<Request>,
    _registered: Vec<SourceRegistration>,
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.queue.shut_down();
    }
}

impl ControllerRunnable {
    async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), ControllerError> {
        let mut registered = Vec::with_capacity(self.sources.len());
        for src in &self.sources {
            let reg = src
                .register(Arc::new(self.queue.clone()))
                .map_err(|source| ControllerError::Watch {
                    controller: self.name.to_string(),
                    watch: src.describe(),
                    source,
                })?;
            registered.push(reg);
        }
        tracing::info!(controller = %self.name, "waiting for caches to sync");
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            synced = wait_for_sync(&registered, self.cache_sync_timeout) => {
                synced.map_err(|unsynced| ControllerError::CacheSync {
                    controller: self.name.to_string(),
                    timeout: self.cache_sync_timeout,
                    unsynced,
                })?;
            }
        }
        let guard = StopGuard {
            queue: self.queue.clone(),
            _registered: registered,
        };

        tracing::info!(controller = %self.name, workers = self.workers, "starting workers");
        self.metrics.set_max_concurrent_reconciles(self.workers);
        let mut workers = JoinSet::new();
        for _ in 0..self.workers {
            let this = Arc::clone(&self);
            let stop = stop.clone();
            workers.spawn(async move { this.worker(stop).await });
        }
        stop.cancelled().await;
        tracing::info!(controller = %self.name, "stopping: finishing in-flight reconciles");
        // Stop the queue so that idle workers wake; busy ones finish first.
        drop(guard);
        while let Some(joined) = workers.join_next().await {
            if let Err(error) = joined
                && error.is_panic()
            {
                tracing::error!(controller = %self.name, %error, "worker panicked");
            }
        }
        tracing::info!(controller = %self.name, "all workers finished");
        Ok(())
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

    async fn process(&self, req: Request) {
        let _active = self.metrics.worker_active();
        let reconcile_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let retries = usize::try_from(self.queue.num_requeues(&req)).unwrap_or(usize::MAX);
        let ctx = CallInfo::new(Arc::clone(&self.name), reconcile_id).with_retries(retries);
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.name,
            object = %req,
            reconcile_id,
        );
        let started = Instant::now();
        // run_reconcile runs the call in its own `reconcile` span; `span`
        // carries the same fields for the outcome's log line.
        let outcome = self
            .reconciler
            .run(req.clone(), ctx, self.reconcile_timeout)
            .await;
        self.metrics.observe(&outcome, started.elapsed());
        span.in_scope(|| log_outcome(&outcome));
        for action in outcome.queue_actions() {
            match action {
                QueueAction::Forget => self.queue.forget(&req),
                QueueAction::AddAfter(d) => self.queue.add_after(req.clone(), d),
                QueueAction::AddRateLimited => self.queue.add_rate_limited(req.clone()),
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
