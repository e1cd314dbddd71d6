//! A watch's events, applied in batches: every event the stream has ready
//! when the reflector wakes up is read at once, and the object changes among
//! them reach the store in one [`ReflectorStore::watch_batch`] call (one
//! lock and one wake-up of the informer for a burst, rather than one per
//! event).
//!
//! Per-event meaning is kept exactly: changes reach the store in the order
//! they arrived; bookmarks and undecodable events only move the resource
//! version; the resource version recorded after a batch is the last one an
//! event of it carried (what recording each in turn would leave); an error
//! after some events ends the watch once the events before it are applied.

use std::future::poll_fn;
use std::task::{Context, Poll};

use futures::StreamExt;
use kube_core::Resource;
use tokio::time::Instant;
use tracing::warn;

use super::run::{State, fit_metadata};
use super::{Reflector, ReflectorStore, WatchChange};
use crate::list_watch::{ListWatchError, WatchEvent, WatchStream};
use crate::metrics::WatchEventType;

/// The most events read before they are applied (a stream that always has
/// more ready still hands them over in bounded batches).
pub(super) const MAX_BATCH: usize = 1024;

/// How reading the ready events ended.
pub(super) enum Read {
    /// Nothing more is ready now (or the batch is full); the watch goes on.
    Open,
    /// The stream ended.
    Ended,
    /// The stream failed, after the events read before the error.
    Failed(ListWatchError),
}

/// Moves every event `stream` has ready into `batch` (up to `max` in all);
/// pending only while none is ready, so no event read is ever left behind
/// in a dropped future.
pub(super) fn poll_ready_events<K>(
    stream: &mut WatchStream<K>,
    cx: &mut Context<'_>,
    batch: &mut Vec<WatchEvent<K>>,
    max: usize,
) -> Poll<Read> {
    loop {
        if batch.len() >= max {
            return Poll::Ready(Read::Open);
        }
        match stream.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(event))) => batch.push(event),
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Read::Failed(e)),
            Poll::Ready(None) => return Poll::Ready(Read::Ended),
            Poll::Pending if batch.is_empty() => return Poll::Pending,
            Poll::Pending => return Poll::Ready(Read::Open),
        }
    }
}

/// The resource version an event moves the reflector to, if any.
fn event_resource_version<K: Resource>(event: &WatchEvent<K>) -> Option<&str> {
    let rv = match event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
            o.meta().resource_version.as_deref()
        }
        WatchEvent::Bookmark(b) => Some(b.resource_version.as_str()),
        WatchEvent::Undecodable(f) => f.resource_version.as_deref(),
    };
    rv.filter(|rv| !rv.is_empty())
}

impl<K> Reflector<K>
where
    K: Resource + Send + Sync + 'static,
{
    /// Applies a watch stream's events to the store, a batch per wake-up,
    /// until it ends (or goes past its deadline). Returns the number of
    /// events and the error that ended it, if any.
    pub(super) async fn consume(
        &self,
        st: &mut State,
        mut stream: WatchStream<K>,
        deadline: Instant,
    ) -> (usize, Option<ListWatchError>) {
        let mut events = 0usize;
        let mut batch = Vec::new();
        let outlived = tokio::time::sleep_until(deadline);
        let mut outlived = std::pin::pin!(outlived);
        loop {
            let read = tokio::select! {
                read = poll_fn(|cx| poll_ready_events(&mut stream, cx, &mut batch, MAX_BATCH)) => read,
                () = &mut outlived => {
                    warn!("watch outlived its timeout; reopening it");
                    return (events, None);
                }
            };
            events += batch.len();
            self.apply_batch(st, &mut batch);
            match read {
                Read::Open => {}
                Read::Ended => return (events, None),
                Read::Failed(e) => return (events, Some(e)),
            }
        }
    }

    /// Applies the events of `batch` (which is left empty), in order: the
    /// object changes in one store call, then the counts and the resource
    /// version of the batch's last event that carries one.
    pub(super) fn apply_batch(&self, st: &mut State, batch: &mut Vec<WatchEvent<K>>) {
        let last_rv = batch
            .iter()
            .rev()
            .find_map(event_resource_version)
            .map(str::to_owned);
        let mut changes = Vec::with_capacity(batch.len());
        let mut kinds = Vec::with_capacity(batch.len());
        for event in batch.drain(..) {
            match event {
                WatchEvent::Added(mut obj) => {
                    fit_metadata(&mut obj);
                    changes.push(WatchChange::Added(obj));
                    kinds.push(WatchEventType::Added);
                }
                WatchEvent::Modified(mut obj) => {
                    fit_metadata(&mut obj);
                    changes.push(WatchChange::Modified(obj));
                    kinds.push(WatchEventType::Modified);
                }
                WatchEvent::Deleted(mut obj) => {
                    fit_metadata(&mut obj);
                    changes.push(WatchChange::Deleted(obj));
                    kinds.push(WatchEventType::Deleted);
                }
                WatchEvent::Bookmark(_) => kinds.push(WatchEventType::Bookmark),
                WatchEvent::Undecodable(failure) => {
                    self.skip_undecodable(std::slice::from_ref(&failure));
                }
            }
        }
        if !changes.is_empty() {
            self.store.watch_batch(changes);
        }
        for kind in kinds {
            self.metrics.watch_event(&self.name, kind);
        }
        if let Some(rv) = last_rv {
            self.set_resource_version(st, &rv);
        }
    }
}
