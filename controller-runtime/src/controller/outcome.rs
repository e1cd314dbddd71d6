//! How one reconcile ended and what the controller does with it.
//!
//! [`run_reconcile`] calls a reconciler once with panic recovery and an
//! optional timeout and classifies the result as a [`ReconcileOutcome`];
//! [`ReconcileOutcome::queue_actions`] is the pure mapping from that outcome
//! to workqueue calls:
//!
//! | outcome                    | queue calls                    |
//! |----------------------------|--------------------------------|
//! | `Ok(Action::done())`       | `forget`                       |
//! | `Ok(Action::requeue_rate_limited())`    | `add_rate_limited`             |
//! | `Ok(requeue_after(d))`     | `forget`, `add_after(d)`       |
//! | `Err(e)`, panic, timeout   | `add_rate_limited`             |
//! | terminal error             | `forget` (never requeued)      |
//!
//! [`RESULTS`] is the one list of the `result` label values of
//! `controller_runtime_reconcile_total`.
//!
//! Controller layer: machinery of the controller, private to this crate.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use tracing::Instrument;

use crate::action::Action;
use crate::error::BoxError;
use crate::reconcile::{CallInfo, Reconciler};
use crate::request::Request;
use crate::terminal::Terminal;

/// The `result` label values of `controller_runtime_reconcile_total`:
/// `success`, `error`, `requeue`, `requeue_after` (in that order).
pub(crate) const RESULTS: [&str; 4] = ["success", "error", "requeue", "requeue_after"];

/// How one reconcile ended, as the controller loop sees it.
#[derive(Debug)]
pub(crate) enum ReconcileOutcome {
    /// `Ok(Action::done())`.
    Success,
    /// `Ok(Action::requeue_rate_limited())`.
    Requeue,
    /// `Ok(Action::requeue_after(d))`.
    RequeueAfter(Duration),
    /// The reconciler returned an error that retrying may fix.
    Error(BoxError),
    /// The reconciler returned a terminal error.
    Terminal(BoxError),
    /// The reconciler panicked; the message is the panic payload when it was
    /// a string.
    Panic(String),
    /// The reconcile did not finish within the timeout and was dropped.
    Timeout(Duration),
}

/// One workqueue call the controller makes for a request after a reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueAction {
    /// Reset the request's rate-limiter failures.
    Forget,
    /// `add_after(request, d)`.
    AddAfter(Duration),
    /// `add_rate_limited(request)`: back off per key.
    AddRateLimited,
}

impl ReconcileOutcome {
    /// The workqueue calls this outcome asks for, in order. The controller
    /// calls `done(request)` after them in every case.
    pub(crate) fn queue_actions(&self) -> Vec<QueueAction> {
        match self {
            ReconcileOutcome::Success | ReconcileOutcome::Terminal(_) => vec![QueueAction::Forget],
            ReconcileOutcome::RequeueAfter(d) => {
                vec![QueueAction::Forget, QueueAction::AddAfter(*d)]
            }
            ReconcileOutcome::Requeue
            | ReconcileOutcome::Error(_)
            | ReconcileOutcome::Panic(_)
            | ReconcileOutcome::Timeout(_) => vec![QueueAction::AddRateLimited],
        }
    }

    /// The `result` label of `controller_runtime_reconcile_total`:
    /// `success`, `error`, `requeue` or `requeue_after`.
    pub(crate) fn result_label(&self) -> &'static str {
        let [success, error, requeue, requeue_after] = RESULTS;
        match self {
            ReconcileOutcome::Success => success,
            ReconcileOutcome::Requeue => requeue,
            ReconcileOutcome::RequeueAfter(_) => requeue_after,
            ReconcileOutcome::Error(_)
            | ReconcileOutcome::Terminal(_)
            | ReconcileOutcome::Panic(_)
            | ReconcileOutcome::Timeout(_) => error,
        }
    }

    /// Whether this counts in `controller_runtime_reconcile_errors_total`
    /// (errors, terminal errors, panics and timeouts).
    pub(crate) fn is_error(&self) -> bool {
        self.result_label() == RESULTS[1]
    }

    /// Whether this counts in `controller_runtime_terminal_reconcile_errors_total`.
    pub(crate) fn is_terminal(&self) -> bool {
        matches!(self, ReconcileOutcome::Terminal(_))
    }

    /// Whether this counts in `controller_runtime_reconcile_panics_total`.
    pub(crate) fn is_panic(&self) -> bool {
        matches!(self, ReconcileOutcome::Panic(_))
    }
}

/// Calls `reconciler` once for `req`, catching a panic and, when `timeout`
/// is set, dropping the call once it has run that long. The call runs in a
/// `reconcile` tracing span carrying `controller`, `object` and
/// `reconcile_id`.
pub(crate) async fn run_reconcile<R: Reconciler + ?Sized>(
    reconciler: &R,
    req: Request,
    ctx: CallInfo,
    timeout: Option<Duration>,
) -> ReconcileOutcome {
    let span = tracing::info_span!(
        "reconcile",
        controller = %ctx.controller,
        object = %req,
        reconcile_id = ctx.reconcile_id,
        cluster = tracing::field::Empty,
    );
    if !ctx.cluster.is_empty() {
        span.record("cluster", &*ctx.cluster);
    }
    let call = AssertUnwindSafe(reconciler.reconcile(req, ctx).instrument(span)).catch_unwind();
    let caught = match timeout {
        Some(limit) => match tokio::time::timeout(limit, call).await {
            Ok(caught) => caught,
            Err(_) => return ReconcileOutcome::Timeout(limit),
        },
        None => call.await,
    };
    match caught {
        Ok(Ok(action)) => match action {
            Action {
                requeue_after: Some(d),
                ..
            } => ReconcileOutcome::RequeueAfter(d),
            Action { requeue: true, .. } => ReconcileOutcome::Requeue,
            Action { .. } => ReconcileOutcome::Success,
        },
        Ok(Err(error)) => {
            if error.is_terminal() {
                ReconcileOutcome::Terminal(Box::new(error))
            } else {
                ReconcileOutcome::Error(Box::new(error))
            }
        }
        Err(payload) => ReconcileOutcome::Panic(panic_message(payload.as_ref())),
    }
}

/// A [`Reconciler`] behind a trait object: every reconciler is one, so a
/// controller can keep `Arc<dyn DynReconciler>` instead of a type parameter.
pub(crate) trait DynReconciler: Send + Sync + 'static {
    /// [`run_reconcile`] on this reconciler.
    fn run(
        &self,
        req: Request,
        ctx: CallInfo,
        timeout: Option<Duration>,
    ) -> futures::future::BoxFuture<'_, ReconcileOutcome>;
}

impl<R: Reconciler> DynReconciler for R {
    fn run(
        &self,
        req: Request,
        ctx: CallInfo,
        timeout: Option<Duration>,
    ) -> futures::future::BoxFuture<'_, ReconcileOutcome> {
        Box::pin(run_reconcile(self, req, ctx, timeout))
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[cfg(test)]
mod tests;
