//! [`PageAhead`]: the next page of a paginated LIST, requested while the
//! current one is still being decoded.
//!
//! A paginated list is a chain of requests, each naming the page after the
//! one before it (`continue`). Made strictly one after the other, the server
//! renders page n+1 only once the client has finished decoding page n, so
//! the two never work at the same time. [`ApiListerWatcher`] reads a page's
//! continue token before its items and starts the request for the next page
//! at once; the caller's request for that page then takes the answer already
//! on its way. One page ahead at most: starting another one drops (and
//! aborts) the one before, and so does asking for any other page.
//!
//! [`ApiListerWatcher`]: super::ApiListerWatcher

use std::future::Future;

use parking_lot::Mutex;
use tokio::task::JoinHandle;

/// At most one request made ahead of being asked for, by the URL it fetches.
pub(super) struct PageAhead<T> {
    slot: Mutex<Option<Pending<T>>>,
}

/// A request under way; aborted when dropped unless it was awaited.
pub(super) struct Pending<T> {
    url: String,
    task: JoinHandle<T>,
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<T: Send + 'static> Pending<T> {
    /// The request's answer, or `None` if its task was lost (it panicked
    /// or the runtime is shutting down): the caller then asks again.
    pub(super) async fn answer(mut self) -> Option<T> {
        (&mut self.task).await.ok()
    }
}

impl<T> Default for PageAhead<T> {
    fn default() -> Self {
        Self {
            slot: Mutex::new(None),
        }
    }
}

impl<T: Send + 'static> PageAhead<T> {
    /// Starts `fetch` for `url` in a task of its own, in place of whatever
    /// was pending. Outside a tokio runtime nothing is started: the page is
    /// then fetched when asked for, as without this.
    pub(super) fn start<F>(&self, url: String, fetch: F)
    where
        F: Future<Output = T> + Send + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let task = runtime.spawn(fetch);
        // The previous one, if any, is dropped (aborted) outside the lock.
        let previous = self.slot.lock().replace(Pending { url, task });
        drop(previous);
    }

    /// The request started for exactly `url`, if any. Whatever else was
    /// pending is dropped: the caller went another way.
    pub(super) fn take(&self, url: &str) -> Option<Pending<T>> {
        let pending = self.slot.lock().take()?;
        (pending.url == url).then_some(pending)
    }

    /// Drops whatever is pending (the list it belonged to is over).
    pub(super) fn clear(&self) {
        let pending = self.slot.lock().take();
        drop(pending);
    }

    /// Whether a request is pending (for tests).
    #[cfg(test)]
    pub(super) fn is_pending(&self) -> bool {
        self.slot.lock().is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    #[tokio::test]
    async fn the_page_asked_for_is_the_one_fetched_ahead() {
        let ahead = PageAhead::default();
        ahead.start("/a?continue=1".into(), async { 7 });
        assert!(ahead.take("/a?continue=2").is_none(), "another URL");
        // Asking for another page dropped the pending one.
        assert!(!ahead.is_pending());
        ahead.start("/a?continue=1".into(), async { 8 });
        let pending = ahead.take("/a?continue=1").expect("pending");
        assert_eq!(pending.answer().await, Some(8));
        assert!(!ahead.is_pending());
    }

    /// A request replaced, passed over or cleared is aborted, so it holds
    /// no connection and no page once nobody wants it.
    #[tokio::test]
    async fn a_request_nobody_wants_is_aborted() {
        let ahead: PageAhead<()> = PageAhead::default();
        for how in ["replaced", "passed over", "cleared"] {
            let (started_tx, started_rx) = oneshot::channel::<()>();
            let (_never_tx, never_rx) = oneshot::channel::<()>();
            let finished = Arc::new(AtomicBool::new(false));
            let (dropped_tx, dropped_rx) = oneshot::channel::<()>();
            let guard = DropSignal(Some(dropped_tx));
            ahead.start("/a?continue=1".into(), {
                let finished = Arc::clone(&finished);
                async move {
                    let _guard = guard;
                    let _ = started_tx.send(());
                    let _ = never_rx.await;
                    finished.store(true, Ordering::SeqCst);
                }
            });
            started_rx.await.expect("the task runs");
            match how {
                "replaced" => ahead.start("/a?continue=2".into(), async {}),
                "passed over" => assert!(ahead.take("/b").is_none()),
                _ => ahead.clear(),
            }
            tokio::time::timeout(Duration::from_secs(10), dropped_rx)
                .await
                .unwrap_or_else(|_| panic!("{how}: the task was not aborted"))
                .ok();
            assert!(!finished.load(Ordering::SeqCst), "{how}");
            ahead.clear();
        }
    }

    #[test]
    fn outside_a_runtime_nothing_is_started() {
        let ahead = PageAhead::default();
        ahead.start("/a".into(), async { 1 });
        assert!(!ahead.is_pending());
    }

    /// Sends on its channel when dropped (as an aborted task drops its future).
    struct DropSignal(Option<oneshot::Sender<()>>);

    impl Drop for DropSignal {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }
}
