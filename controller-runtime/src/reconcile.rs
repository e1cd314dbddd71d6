//! What a controller asks a reconciler to do, and what it does with the answer.
//!
//! A [`Request`] names one object (`namespace`/`name`); a [`Reconciler`]
//! brings the world in line with that object and answers with an [`Action`]
//! (done, or look again after a while) or an error. [`run_reconcile`] calls a
//! reconciler once with panic recovery and an optional timeout and classifies
//! the result as a [`ReconcileOutcome`]; [`ReconcileOutcome::queue_actions`]
//! is the pure mapping from that outcome to workqueue calls:
//!
//! | outcome                    | queue calls                    |
//! |----------------------------|--------------------------------|
//! | `Ok(Action::done())`       | `forget`                       |
//! | `Ok(Action::requeue())`    | `add_rate_limited`             |
//! | `Ok(requeue_after(d))`     | `forget`, `add_after(d)`       |
//! | `Err(e)`, panic, timeout   | `add_rate_limited`             |
//! | terminal error             | `forget` (never requeued)      |
//!
//! An object that is gone by the time it is reconciled is a normal case: the
//! reconciler sees "not found" from its reader and returns `Action::done()`.
//!
//! Most controllers implement the typed form instead,
//! [`ObjectReconciler<K>`](object::ObjectReconciler), which receives the
//! object from the cache and a ready [`ObjectContext`]; it runs through this
//! same path (see [`object`]).
//!
//! Whether an error is retried is decided by the error type ([`Terminal`]),
//! so a [`TerminalError`] stays terminal however it is wrapped.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube_core::Resource;
use tracing::Instrument;

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A workqueue key could not be turned into a [`Request`].
    #[error("invalid request key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An object without `metadata.name` cannot be reconciled.
    #[error("object has no metadata.name")]
    MissingName,
}

/// One object to reconcile: the workqueue item of a controller.
///
/// Displays as its key, `namespace/name` or `name` for cluster-scoped objects.
///
/// ```
/// use controller_runtime::reconcile::Request;
/// let req = Request::new(Some("default"), "web");
/// assert_eq!(req.to_string(), "default/web");
/// assert_eq!("default/web".parse::<Request>().unwrap(), req);
/// assert_eq!(Request::new(None::<String>, "node-1").to_string(), "node-1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request {
    /// Namespace of the object; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name of the object.
    pub name: String,
}

impl Request {
    /// A request for `name` in `namespace`.
    pub fn new(namespace: Option<impl Into<String>>, name: impl Into<String>) -> Self {
        Request {
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    /// The request that names `obj`. An empty namespace counts as none.
    pub fn from_object<K: Resource>(obj: &K) -> Result<Self, ReconcileError> {
        let meta = obj.meta();
        let name = meta.name.clone().ok_or(ReconcileError::MissingName)?;
        let namespace = meta.namespace.clone().filter(|ns| !ns.is_empty());
        Ok(Request { namespace, name })
    }

    /// The object's key: `namespace/name`, or `name` when cluster-scoped.
    pub fn key(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl FromStr for Request {
    type Err = ReconcileError;

    fn from_str(key: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| ReconcileError::InvalidKey {
            key: key.to_string(),
            reason,
        };
        let mut parts = key.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(""), None, None) => Err(invalid("empty key")),
            (Some(name), None, None) => Ok(Request::new(None::<String>, name)),
            (Some(_), Some(""), None) => Err(invalid("empty name")),
            (Some(""), Some(_), None) => Err(invalid("empty namespace")),
            (Some(ns), Some(name), None) => Ok(Request::new(Some(ns), name)),
            _ => Err(invalid("more than one '/'")),
        }
    }
}

/// What the controller should do after a successful reconcile.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::reconcile::Action;
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

/// Per-call information a controller hands its reconciler.
///
/// State the reconciler needs (clients, readers, recorders) lives in the
/// reconciler itself; the context says which call this is.
#[derive(Debug, Clone)]
pub struct Context {
    /// Name of the controller making the call.
    pub controller: Arc<str>,
    /// Identifier of this reconcile, for logs and traces.
    pub reconcile_id: u64,
    /// How many times this request has been requeued through the rate
    /// limiter since it last succeeded.
    pub retries: usize,
}

impl Context {
    /// A context for call `reconcile_id` of `controller`, with no retries.
    pub fn new(controller: impl Into<Arc<str>>, reconcile_id: u64) -> Self {
        Context {
            controller: controller.into(),
            reconcile_id,
            retries: 0,
        }
    }

    /// The same context with the retry count set.
    #[must_use]
    pub fn with_retries(mut self, retries: usize) -> Self {
        self.retries = retries;
        self
    }
}

/// A boxed error as carried by [`ReconcileOutcome`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Marks an error that retrying cannot fix: the controller logs and counts it
/// but does not requeue the request.
///
/// A reconciler returns it directly (`type Error = TerminalError`) or keeps it
/// inside one of its own error variants, with `#[source]` or with
/// `#[error(transparent)]`: [`is_terminal`] finds it either way, because its
/// `source()` is a marker that a transparent wrapper passes on.
///
/// ```
/// use controller_runtime::reconcile::{is_terminal, TerminalError};
/// let e = TerminalError::new(std::io::Error::other("spec.replicas must be positive"));
/// assert!(is_terminal(&e));
/// assert!(!is_terminal(&std::io::Error::other("timeout")));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("terminal error: {cause}")]
pub struct TerminalError {
    #[source]
    cause: TerminalCause,
}

/// The source of a [`TerminalError`]: the wrapped error, marked so that
/// `#[error(transparent)]` wrappers (which forward `source()`) keep the mark.
#[derive(Debug)]
struct TerminalCause(BoxError);

impl fmt::Display for TerminalCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for TerminalCause {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl TerminalError {
    /// Wraps `error` as terminal.
    pub fn new(error: impl Into<BoxError>) -> Self {
        TerminalError {
            cause: TerminalCause(error.into()),
        }
    }

    /// The wrapped error.
    pub fn inner(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self.cause.0.as_ref()
    }
}

/// Whether `error` carries a [`TerminalError`]: the error itself, or anything
/// in its source chain, including through `#[error(transparent)]` wrappers.
pub fn is_terminal(error: &(dyn StdError + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.is::<TerminalError>() || e.is::<TerminalCause>() {
            return true;
        }
        current = e.source();
    }
    false
}

/// The error of a reconcile says whether retrying can fix it.
///
/// The controller asks the error, not the reconciler: a terminal error is
/// logged and counted but never requeued. The default answer is
/// [`is_terminal`] (a [`TerminalError`] anywhere inside, `#[source]` or
/// `#[error(transparent)]`); override it to decide by variant.
///
/// ```
/// use controller_runtime::reconcile::{Terminal, TerminalError};
///
/// #[derive(Debug, thiserror::Error)]
/// enum FooError {
///     #[error(transparent)]
///     Invalid(#[from] TerminalError),
///     #[error("spec.size {0} is too large")]
///     TooLarge(u32),
///     #[error("talking to the API server: {0}")]
///     Api(#[source] std::io::Error),
/// }
///
/// impl Terminal for FooError {
///     fn is_terminal(&self) -> bool {
///         match self {
///             FooError::TooLarge(_) => true,
///             other => controller_runtime::reconcile::is_terminal(other),
///         }
///     }
/// }
///
/// assert!(FooError::from(TerminalError::new("bad spec")).is_terminal());
/// assert!(FooError::TooLarge(9).is_terminal());
/// assert!(!FooError::Api(std::io::Error::other("timeout")).is_terminal());
/// ```
pub trait Terminal: StdError + Send + Sync + Sized + 'static {
    /// Whether retrying cannot fix this error. By default: [`is_terminal`].
    fn is_terminal(&self) -> bool {
        is_terminal(self)
    }
}

impl Terminal for TerminalError {}
impl Terminal for std::convert::Infallible {}
impl Terminal for std::io::Error {}
impl Terminal for std::fmt::Error {}
impl Terminal for kube_client::Error {}
impl Terminal for serde_json::Error {}
impl Terminal for ReconcileError {}
impl Terminal for crate::manager::CacheError {}

/// Brings the cluster in line with one object.
///
/// Implement it with `async fn`; the returned future must be `Send` so that a
/// controller can run it on its workers.
///
/// ```
/// use controller_runtime::reconcile::{Action, Context, Reconciler, Request};
///
/// struct Greeter;
///
/// impl Reconciler for Greeter {
///     type Error = std::io::Error;
///     async fn reconcile(&self, req: Request, _ctx: Context) -> Result<Action, Self::Error> {
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
        ctx: Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

impl<R: Reconciler> Reconciler for Arc<R> {
    type Error = R::Error;

    fn reconcile(
        &self,
        req: Request,
        ctx: Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        R::reconcile(self, req, ctx)
    }
}

/// How one reconcile ended, as the controller loop sees it.
#[derive(Debug)]
pub enum ReconcileOutcome {
    /// `Ok(Action::done())`.
    Success,
    /// `Ok(Action::requeue())`.
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
pub enum QueueAction {
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
    ///
    /// ```
    /// use std::time::Duration;
    /// use controller_runtime::reconcile::{QueueAction, ReconcileOutcome};
    /// let d = Duration::from_secs(5);
    /// assert_eq!(ReconcileOutcome::RequeueAfter(d).queue_actions(),
    ///            vec![QueueAction::Forget, QueueAction::AddAfter(d)]);
    /// ```
    pub fn queue_actions(&self) -> Vec<QueueAction> {
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
    pub fn result_label(&self) -> &'static str {
        match self {
            ReconcileOutcome::Success => "success",
            ReconcileOutcome::Requeue => "requeue",
            ReconcileOutcome::RequeueAfter(_) => "requeue_after",
            ReconcileOutcome::Error(_)
            | ReconcileOutcome::Terminal(_)
            | ReconcileOutcome::Panic(_)
            | ReconcileOutcome::Timeout(_) => "error",
        }
    }

    /// Whether this counts in `controller_runtime_reconcile_errors_total`
    /// (errors, terminal errors, panics and timeouts).
    pub fn is_error(&self) -> bool {
        self.result_label() == "error"
    }

    /// Whether this counts in `controller_runtime_terminal_reconcile_errors_total`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, ReconcileOutcome::Terminal(_))
    }

    /// Whether this counts in `controller_runtime_reconcile_panics_total`.
    pub fn is_panic(&self) -> bool {
        matches!(self, ReconcileOutcome::Panic(_))
    }
}

/// Calls `reconciler` once for `req`, catching a panic and, when `timeout`
/// is set, dropping the call once it has run that long. The call runs in a
/// `reconcile` tracing span carrying `controller`, `object` and
/// `reconcile_id`.
///
/// ```
/// # use controller_runtime::reconcile::*;
/// struct Boom;
/// impl Reconciler for Boom {
///     type Error = std::io::Error;
///     async fn reconcile(&self, _: Request, _: Context) -> Result<Action, Self::Error> {
///         panic!("bug")
///     }
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let out = run_reconcile(&Boom, Request::new(None::<String>, "x"), Context::new("c", 1), None).await;
/// assert!(out.is_panic());
/// assert_eq!(out.queue_actions(), vec![QueueAction::AddRateLimited]);
/// # });
/// ```
pub async fn run_reconcile<R: Reconciler + ?Sized>(
    reconciler: &R,
    req: Request,
    ctx: Context,
    timeout: Option<Duration>,
) -> ReconcileOutcome {
    let span = tracing::info_span!(
        "reconcile",
        controller = %ctx.controller,
        object = %req,
        reconcile_id = ctx.reconcile_id,
    );
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
///
/// ```
/// # use std::sync::Arc;
/// # use controller_runtime::reconcile::*;
/// struct Noop;
/// impl Reconciler for Noop {
///     type Error = std::io::Error;
///     async fn reconcile(&self, _: Request, _: Context) -> Result<Action, Self::Error> {
///         Ok(Action::done())
///     }
/// }
/// let erased: Arc<dyn DynReconciler> = Arc::new(Noop);
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let out = erased.run(Request::new(None::<String>, "x"), Context::new("c", 1), None).await;
/// assert!(matches!(out, ReconcileOutcome::Success));
/// # });
/// ```
pub trait DynReconciler: Send + Sync + 'static {
    /// [`run_reconcile`] on this reconciler.
    fn run(
        &self,
        req: Request,
        ctx: Context,
        timeout: Option<Duration>,
    ) -> futures::future::BoxFuture<'_, ReconcileOutcome>;
}

impl<R: Reconciler> DynReconciler for R {
    fn run(
        &self,
        req: Request,
        ctx: Context,
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

pub mod object;
pub use object::{ObjectContext, ObjectReconciler};

#[cfg(test)]
mod tests;
