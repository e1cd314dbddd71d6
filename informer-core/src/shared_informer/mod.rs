//! The shared informer: client-go's `SharedIndexInformer`. One informer owns
//! one [`Reflector`](crate::reflector::Reflector) (list + watch), one
//! [`DeltaFifo`](crate::delta_fifo::DeltaFifo) and one [`Indexer`](crate::store::Indexer); it pops the FIFO, keeps the indexer in
//! step, and fans every change out to any number of
//! [`ResourceEventHandler`]s, each with its own unbounded buffer and task
//! (see [`crate::processor`]).
//!
//! Layer 4: imports every layer below.
//!
//! Processing one popped key, delta by delta: `Sync`, `Replaced`, `Added` and
//! `Updated` update the cached object and notify `on_update(old, new)` when the
//! key was cached, else add it and notify `on_add(obj, is_in_initial_list)`;
//! `Deleted` removes it and notifies `on_delete(obj_or_tombstone)`. An update
//! whose resourceVersion did not change is a resync: it goes only to handlers
//! whose resync period is due.
//!
//! Handlers added after start first receive `on_add(obj, true)` for every
//! cached object; their [`ResourceEventHandlerRegistration`] reports synced
//! once the informer synced and that replay was delivered.

mod builder;
mod informer;
mod registration;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use crate::handler::{HandlerFns, ResourceEventHandler, handler_fn};
pub use builder::SharedIndexInformerBuilder;
pub use informer::{SharedIndexInformer, WatchErrorHandler};
pub use registration::ResourceEventHandlerRegistration;

use crate::store::StoreError;

/// The shortest resync period a handler may ask for; shorter ones are raised
/// to it (with a warning).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Errors of the shared informer.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// Something that may only be done before [`SharedIndexInformer::run`] was tried after.
    #[error("the informer has already started; {what} is only possible before start")]
    AlreadyStarted {
        /// What was attempted.
        what: &'static str,
    },
    /// The informer has stopped.
    #[error("the informer has stopped; {what} is no longer possible")]
    Stopped {
        /// What was attempted.
        what: &'static str,
    },
    /// The registration belongs to another informer.
    #[error("handler registration {id} does not belong to this informer")]
    ForeignRegistration {
        /// The registration's listener id.
        id: u64,
    },
    /// The cache did not sync in time.
    #[error("the cache did not sync within {0:?}")]
    SyncTimeout(Duration),
    /// The wait was cancelled (or the informer stopped) before the cache synced.
    #[error("cancelled before the cache synced")]
    SyncCancelled,
    /// The indexer refused an operation.
    #[error("indexer error: {0}")]
    Store(#[from] StoreError),
}
