//! [`BoxError`]: the type-erased error that runnables, the manager and the
//! controller carry when the concrete type does not matter.
//!
//! Layer 0 (vocabulary): imports nothing from this crate.

/// A boxed error, `Send + Sync + 'static`.
///
/// ```
/// use controller_runtime::BoxError;
/// let e: BoxError = "no such thing".into();
/// assert_eq!(e.to_string(), "no such thing");
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
