//! [`Action`]: what a reconciler answers after a successful reconcile
//! (done, look again after a while, or requeue through the rate limiter).
//!
//! Layer 0 (vocabulary): imports nothing from this crate.

use std::time::Duration;

/// What the controller should do after a successful reconcile: Go's
/// `reconcile.Result`.
///
/// | here | Go controller-runtime | kube-rs |
/// |---|---|---|
/// | [`Action::done()`] | `Result{}` | `Action::await_change()` |
/// | [`Action::requeue_after(d)`](Action::requeue_after) | `Result{RequeueAfter: d}` | `Action::requeue(d)` |
/// | [`Action::requeue_rate_limited()`] | `Result{Requeue: true}` (deprecated in v0.21) | none |
///
/// There is no `Action::requeue`: kube-rs's takes a delay and Go's
/// `Requeue: true` is rate limited, so either reading would surprise
/// someone.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::Action;
/// assert_eq!(Action::done().requeue_after, None);
/// assert_eq!(Action::requeue_after(Duration::from_secs(30)).requeue_after, Some(Duration::from_secs(30)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Action {
    /// Reconcile again after this long (the per-key backoff is reset first).
    pub requeue_after: Option<Duration>,
    /// Reconcile again through the rate limiter, as after an error but
    /// without counting one. Ignored when `requeue_after` is set.
    pub requeue: bool,
}

impl Action {
    /// Nothing more to do until the object changes (kube-rs's
    /// `await_change`).
    #[doc(alias = "await_change")]
    pub fn done() -> Self {
        Action::default()
    }

    /// Reconcile again after `d` (Go's `RequeueAfter`, kube-rs's
    /// `requeue(d)`). A zero duration requeues at once.
    #[doc(alias = "requeue")]
    pub fn requeue_after(d: Duration) -> Self {
        Action {
            requeue_after: Some(d),
            requeue: false,
        }
    }

    /// Reconcile again after the rate limiter's per-key backoff, as after an
    /// error but without counting one: Go's `Result{Requeue: true}`, which
    /// Go deprecated in controller-runtime v0.21 in favour of `RequeueAfter`
    /// or returning an error. Prefer [`Action::requeue_after`] for polling
    /// and an error for a failure.
    ///
    /// ```
    /// use controller_runtime::Action;
    /// let action = Action::requeue_rate_limited();
    /// assert!(action.requeue && action.requeue_after.is_none());
    /// ```
    pub fn requeue_rate_limited() -> Self {
        Action {
            requeue_after: None,
            requeue: true,
        }
    }
}
