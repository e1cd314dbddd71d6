//! Things a manager runs: controllers, and whatever else a program adds.
//!
//! A [`Runnable`] is started once with a stop token and runs until the token
//! fires (or it fails). Runnables that need leader election (controllers, by
//! default) start only once this replica leads and are stopped at once if it
//! stops leading; the others start with the manager.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::error::BoxError;

/// Something the manager starts and stops.
pub trait Runnable: Send + Sync + 'static {
    /// A name for logs and errors.
    fn name(&self) -> String;

    /// Whether it runs only on the leader (default `true`, as in
    /// controller-runtime).
    fn needs_leader_election(&self) -> bool {
        true
    }

    /// Runs until `stop` fires, then returns after finishing its work in
    /// flight. An error stops the whole manager.
    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>>;
}

/// A [`Runnable`] from a closure; see [`runnable_fn`].
pub struct RunnableFn<F> {
    name: String,
    leader_only: bool,
    run: F,
}

/// A runnable named `name` that calls `run(stop)`; `leader_only` says whether
/// it waits for leadership.
///
/// ```
/// use controller_runtime::manager::{Runnable, runnable_fn};
/// let r = runnable_fn("janitor", false, |stop: tokio_util::sync::CancellationToken| async move {
///     stop.cancelled().await;
///     Ok(())
/// });
/// assert_eq!(r.name(), "janitor");
/// assert!(!r.needs_leader_election());
/// ```
pub fn runnable_fn<F, Fut>(name: impl Into<String>, leader_only: bool, run: F) -> RunnableFn<F>
where
    F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    RunnableFn {
        name: name.into(),
        leader_only,
        run,
    }
}

impl<F, Fut> Runnable for RunnableFn<F>
where
    F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    fn name(&self) -> String {
        self.name.clone()
    }

    fn needs_leader_election(&self) -> bool {
        self.leader_only
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin((self.run)(stop))
    }
}
