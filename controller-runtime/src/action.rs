//! [`Action`]: what a reconciler answers after a successful reconcile
//! (done, requeue with backoff, or look again after a while).
//!
//! Layer 0 (vocabulary): imports nothing from this crate.

use std::time::Duration;

/// What the controller should do after a successful reconcile.
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
    /// Nothing more to do until the object changes.
    pub fn done() -> Self {
        Action::default()
    }

    /// Reconcile again after `d`. A zero duration requeues at once.
    pub fn requeue_after(d: Duration) -> Self {
        Action {
            requeue_after: Some(d),
            requeue: false,
        }
    }

    /// Reconcile again after the rate limiter's per-key backoff.
    pub fn requeue() -> Self {
        Action {
            requeue_after: None,
            requeue: true,
        }
    }
}
