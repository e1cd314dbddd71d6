//! What a user implements: a [`Reconciler`] (the request form: a
//! [`Request`] in, an [`Action`] or an error out) or, usually, an
//! [`ObjectReconciler<K>`] (the typed form: the object from the cache and a
//! ready [`ObjectContext`]), plus [`Cleanup`] for a finalizer.
//!
//! An object that is gone by the time it is reconciled is a normal case:
//! the request form sees "not found" from its reader and returns
//! `Action::done()`; the typed form gets [`ObjectReconciler::deleted`].
//!
//! Whether an error is retried is decided by the error type ([`Terminal`]),
//! so a [`TerminalError`] stays terminal however it is wrapped.
//!
//! Layer 3 (typed reconcile): built from the [cache](crate::cache), the
//! client and an [event recorder](crate::events), never from the manager;
//! the vocabulary ([`Request`], [`Action`], [`Terminal`]) lives below, at
//! the crate root. The [controller](crate::controller) runs reconcilers.

use std::future::Future;
use std::sync::Arc;

use crate::action::Action;
use crate::request::Request;
use crate::terminal::Terminal;

/// Per-call information a controller hands its reconciler: which
/// controller calls, which call this is, how often it was retried.
///
/// State the reconciler needs (clients, readers, recorders) lives in the
/// reconciler itself; the context says which call this is.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// Name of the controller making the call.
    pub controller: Arc<str>,
    /// Identifier of this reconcile, for logs and traces.
    pub reconcile_id: u64,
    /// How many times this request has been requeued through the rate
    /// limiter since it last succeeded.
    pub retries: usize,
    /// The cluster the object is in: a fleet member's name, or `""` for
    /// the manager's own cluster (as [`ClusterRequest::cluster`](crate::request::ClusterRequest)
    /// and [`Cluster::name`](crate::cluster::Cluster::name) spell it).
    pub cluster: Arc<str>,
}

impl CallInfo {
    /// A context for call `reconcile_id` of `controller`, with no retries.
    pub fn new(controller: impl Into<Arc<str>>, reconcile_id: u64) -> Self {
        CallInfo {
            controller: controller.into(),
            reconcile_id,
            retries: 0,
            cluster: Arc::from(""),
        }
    }

    /// The same context for an object in the fleet cluster `cluster`
    /// (`""` is the manager's own, the default).
    ///
    /// ```
    /// use controller_runtime::reconcile::CallInfo;
    /// assert_eq!(&*CallInfo::new("copier", 1).cluster, "");
    /// let call = CallInfo::new("copier", 1).in_cluster("edge-1");
    /// assert_eq!(&*call.cluster, "edge-1");
    /// ```
    #[must_use]
    pub fn in_cluster(mut self, cluster: impl Into<Arc<str>>) -> Self {
        self.cluster = cluster.into();
        self
    }

    /// The same context with the retry count set.
    #[must_use]
    pub fn with_retries(mut self, retries: usize) -> Self {
        self.retries = retries;
        self
    }
}

/// Brings the cluster in line with one object.
///
/// Implement it with `async fn`; the returned future must be `Send` so that a
/// controller can run it on its workers.
///
/// ```
/// use controller_runtime::reconcile::{CallInfo, Reconciler};
/// use controller_runtime::{Action, Request};
///
/// struct Greeter;
///
/// impl Reconciler for Greeter {
///     type Error = std::io::Error;
///     async fn reconcile(&self, req: Request, _ctx: CallInfo) -> Result<Action, Self::Error> {
///         tracing::info!(object = %req, "hello");
///         Ok(Action::done())
///     }
/// }
/// ```
pub trait Reconciler: Send + Sync + 'static {
    /// The error a reconcile can fail with; it says whether it is terminal
    /// ([`Terminal`]).
    type Error: Terminal;

    /// Reconciles the object named by `req`.
    fn reconcile(
        &self,
        req: Request,
        ctx: CallInfo,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

impl<R: Reconciler> Reconciler for Arc<R> {
    type Error = R::Error;

    fn reconcile(
        &self,
        req: Request,
        ctx: CallInfo,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        R::reconcile(self, req, ctx)
    }
}

pub(crate) mod adapter;
mod cleanup;
mod object;

pub use adapter::{ByObject, ByRequest, IntoReconciler};
pub use cleanup::Cleanup;
pub use object::{ObjectContext, ObjectReconciler};
