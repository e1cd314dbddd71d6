//! The handle returned when a handler is added to an informer: client-go's
//! `ResourceEventHandlerRegistration`. It says whether the handler has seen
//! the whole initial state of the cache, how far behind it is, and is what
//! [`SharedIndexInformer::remove_event_handler`](super::SharedIndexInformer::remove_event_handler) takes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::processor::{ListenerId, ListenerStats};

/// How often sync waits re-check their condition.
pub(crate) const SYNC_POLL: Duration = Duration::from_millis(10);

/// The informer's synced flag, as a receiver (`None` before the informer
/// runs, or once it is gone).
pub(crate) type UpstreamSynced = Arc<dyn Fn() -> Option<watch::Receiver<bool>> + Send + Sync>;

/// One handler's membership in an informer.
///
/// ```no_run
/// # async fn demo(informer: informer_core::shared_informer::SharedIndexInformer<k8s_openapi::api::core::v1::Pod>) {
/// use informer_core::shared_informer::handler_fn;
/// use k8s_openapi::api::core::v1::Pod;
///
/// let reg = informer
///     .add_event_handler(handler_fn::<Pod>().on_add(|pod, _| tracing::info!(?pod.metadata.name, "pod")))
///     .unwrap();
/// // true once the informer synced and this handler received every initial add
/// let synced = reg.wait_for_sync(std::time::Duration::from_secs(30)).await;
/// # let _ = synced;
/// informer.remove_event_handler(&reg).unwrap();
/// # }
/// ```
#[derive(Clone)]
pub struct ResourceEventHandlerRegistration {
    pub(crate) informer_id: usize,
    pub(crate) id: ListenerId,
    pub(crate) stats: Arc<ListenerStats>,
    pub(crate) upstream_synced: UpstreamSynced,
}

impl fmt::Debug for ResourceEventHandlerRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceEventHandlerRegistration")
            .field("id", &self.id)
            .field("pending", &self.stats.pending())
            .field("removed", &self.stats.is_removed())
            .finish()
    }
}

impl ResourceEventHandlerRegistration {
    /// True once the informer has synced and every `on_add(_, true)` queued to
    /// this handler (the first list, or the cache replay for a late handler)
    /// has been delivered.
    pub fn has_synced(&self) -> bool {
        self.upstream_has_synced() && self.stats.initial_pending() == 0
    }

    fn upstream_has_synced(&self) -> bool {
        (self.upstream_synced)().is_some_and(|rx| *rx.borrow())
    }

    /// Waits until [`has_synced`](Self::has_synced) or `timeout`; returns
    /// whether it synced.
    pub async fn wait_for_sync(&self, timeout: Duration) -> bool {
        let cancel = CancellationToken::new();
        tokio::select! {
            synced = self.wait_for_sync_until(&cancel) => synced,
            () = tokio::time::sleep(timeout) => self.has_synced(),
        }
    }

    /// Waits until [`has_synced`](Self::has_synced) or until `cancel` fires;
    /// returns whether it synced. Also gives up when the handler is removed.
    pub async fn wait_for_sync_until(&self, cancel: &CancellationToken) -> bool {
        loop {
            // Registered before looking, so that a change in between wakes us.
            let mut changed = std::pin::pin!(self.stats.changed());
            changed.as_mut().enable();
            if self.has_synced() {
                return true;
            }
            if self.stats.is_removed() {
                return false;
            }
            // Woken when the informer syncs (until it has) and when the last
            // initial add is delivered; the short sleep only covers an
            // informer not running yet.
            let upstream = (self.upstream_synced)();
            let upstream_done = upstream.as_ref().is_some_and(|rx| *rx.borrow());
            let upstream_synced = async {
                match upstream {
                    Some(mut rx) => {
                        let _ = rx.wait_for(|synced| *synced).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return self.has_synced(),
                () = changed => {}
                () = upstream_synced, if !upstream_done => {}
                () = tokio::time::sleep(SYNC_POLL) => {}
            }
        }
    }

    /// Notifications queued for this handler and not yet delivered.
    pub fn pending(&self) -> usize {
        self.stats.pending()
    }

    /// Handler calls that panicked so far.
    pub fn panics(&self) -> u64 {
        self.stats.panics()
    }

    /// Whether the handler was removed (or its informer stopped).
    pub fn is_removed(&self) -> bool {
        self.stats.is_removed()
    }
}
