//! Whether an error is worth retrying: [`Terminal`], decided by the error
//! type, and [`TerminalError`], the mark that stays terminal however it is
//! wrapped.
//!
//! Every error the framework hands a reconciler implements [`Terminal`],
//! each with its own documented rule, so a reconciler can use it as its
//! `Error` and `?` on it: `kube_client::Error` (400 and 422 terminal),
//! [`ClientError`](crate::client::ClientError),
//! [`CreateOrUpdateError`](crate::client::CreateOrUpdateError),
//! [`FinalizerError`](crate::finalizer::FinalizerError),
//! [`CacheError`](crate::cache::CacheError) (never terminal),
//! [`RequestError`](crate::RequestError) (always), `serde_json::Error` and
//! `std::io::Error` (only with a [`TerminalError`] inside).
//!
//! ```no_run
//! use controller_runtime::client::{ClientError, CreateOrUpdateError, create_or_update, patch_status};
//! use controller_runtime::finalizer::FinalizerError;
//! use controller_runtime::prelude::*;
//! use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Status;
//! impl ObjectReconciler<ConfigMap> for Status {
//!     type Error = ClientError;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &ObjectContext<ConfigMap>) -> Result<Action, ClientError> {
//!         patch_status(ctx.api(), &cm.name_any(), &serde_json::json!({"ok": true})).await?;
//!         Ok(Action::done())
//!     }
//! }
//!
//! struct Copy;
//! impl ObjectReconciler<ConfigMap> for Copy {
//!     type Error = CreateOrUpdateError;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &ObjectContext<ConfigMap>) -> Result<Action, CreateOrUpdateError> {
//!         let mut copy = ConfigMap::default();
//!         copy.metadata.name = Some(format!("{}-copy", cm.name_any()));
//!         create_or_update(ctx.api(), copy, |c| { c.data = cm.data.clone(); Ok(()) }).await?;
//!         Ok(Action::done())
//!     }
//! }
//!
//! struct Guarded;
//! impl ObjectReconciler<ConfigMap> for Guarded {
//!     type Error = FinalizerError<kube_client::Error>;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
//!         ctx.finalizer("example.com/guard", cm, |_event| async { Ok(Action::done()) }).await
//!     }
//! }
//!
//! struct Plain;
//! impl ObjectReconciler<ConfigMap> for Plain {
//!     type Error = kube_client::Error;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
//!         ctx.api().get(&cm.name_any()).await?;
//!         Ok(Action::done())
//!     }
//! }
//!
//! # fn demo(mgr: Manager) -> Result<(), ManagerError> {
//! mgr.controller::<ConfigMap>().named("status").complete(Status)?;
//! mgr.controller::<ConfigMap>().named("copy").complete(Copy)?;
//! mgr.controller::<ConfigMap>().named("guarded").complete(Guarded)?;
//! mgr.controller::<ConfigMap>().named("plain").complete(Plain)?;
//! # Ok(()) }
//! ```
//!
//! Layer 0 (vocabulary): imports only [`crate::error`].

use std::error::Error as StdError;
use std::fmt;

use crate::error::BoxError;

/// Marks an error that retrying cannot fix: the controller logs and counts it
/// but does not requeue the request.
///
/// A reconciler returns it directly (`type Error = TerminalError`) or keeps it
/// inside one of its own error variants, with `#[source]` or with
/// `#[error(transparent)]`: [`is_terminal`] finds it either way, because its
/// `source()` is a marker that a transparent wrapper passes on.
///
/// ```
/// use controller_runtime::{is_terminal, TerminalError};
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
/// use controller_runtime::{Terminal, TerminalError};
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
///             other => controller_runtime::is_terminal(other),
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

/// An API error is terminal when the server refused the request itself:
/// 400 Bad Request (a malformed request: the same code sends it again) and
/// 422 Invalid (a field the server validates, an immutable field changed:
/// the object must change first, and that change is a new reconcile).
///
/// Everything else may pass on a retry, so it is not terminal: 409
/// Conflict (read again), 404 Not Found (the cache may lag), 403 Forbidden
/// (RBAC may be granted, a terminating namespace may go), 408, 429 and 504
/// (timeouts and throttling), 5xx, and every transport error (connection,
/// TLS, a response that did not decode).
///
/// A JSON patch whose `test` operation fails is also answered 422: a
/// reconciler using `test` as a guard turns that case into a retry itself
/// (the [finalizer](crate::finalizer) helper does).
///
/// ```
/// use controller_runtime::Terminal;
/// use controller_runtime::kube_client::{Error, core::Status};
/// let answer = |code| Error::Api(Box::new(Status { code, ..Status::failure("no", "") }));
/// assert!(answer(422).is_terminal());
/// assert!(answer(400).is_terminal());
/// assert!(!answer(409).is_terminal());
/// assert!(!answer(504).is_terminal());
/// ```
impl Terminal for kube_client::Error {
    fn is_terminal(&self) -> bool {
        match self {
            kube_client::Error::Api(status) => matches!(status.code, 400 | 422),
            _ => is_terminal(self),
        }
    }
}
impl Terminal for serde_json::Error {}
