//! Whether an error is worth retrying: [`Terminal`], decided by the error
//! type, and [`TerminalError`], the mark that stays terminal however it is
//! wrapped.
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
/// use controller_runtime::terminal::{is_terminal, TerminalError};
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
/// use controller_runtime::terminal::{Terminal, TerminalError};
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
///             other => controller_runtime::terminal::is_terminal(other),
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
