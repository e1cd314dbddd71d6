//! The list-and-watch loop of a [`Reflector`].

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use kube_core::Resource;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, debug_span, info, info_span, warn};

use super::backoff::Backoff;
use super::initial_events::InitialEvents;
use super::{DEFAULT_PAGE_SIZE, Reflector, ReflectorError};
use crate::list_watch::{
    DecodeFailure, ListRequest, ListWatchError, OversizedPart, WatchEvent, WatchRequest,
    WatchStream,
};
use crate::metrics::{RelistCause, WatchRestartCause};

/// A watch that ends this quickly without a single event counts as a
/// failure, so a server that closes every watch at once is not hammered.
const SHORT_WATCH: Duration = Duration::from_secs(1);

/// How long past its server-side timeout a watch may stay silent before the
/// reflector gives up on the connection.
const WATCH_DEADLINE_SLACK: Duration = Duration::from_secs(30);

/// The longest `Retry-After` the reflector honours.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// What the loop remembers between lists and watches.
pub(super) struct State {
    /// The resource version of the last list, event or bookmark ("" before any).
    pub(super) last_rv: String,
    /// The last resource version was refused as expired or too large: list with "".
    rv_unavailable: bool,
    /// Page every list: the server paginated the first list, so it honours
    /// `limit` (no watch cache), or a list in one answer went over the
    /// lister-watcher's cap.
    paginated_result: bool,
    backoff: Backoff,
}

/// What follows a failed watch.
enum Next {
    /// Open a new watch from the last resource version.
    Rewatch(WatchRestartCause),
    /// List again.
    Relist(RelistCause),
}

impl State {
    /// The resource version the next list asks for.
    fn relist_resource_version(&self) -> String {
        if self.rv_unavailable {
            String::new()
        } else if self.last_rv.is_empty() {
            "0".to_owned()
        } else {
            self.last_rv.clone()
        }
    }
}

pub(super) async fn run<K>(reflector: Reflector<K>, cancel: CancellationToken)
where
    K: Resource + Send + Sync + 'static,
{
    let span = info_span!("reflector", informer = %reflector.name);
    async move {
        info!("reflector starting");
        let mut state = State {
            last_rv: String::new(),
            rv_unavailable: false,
            paginated_result: false,
            backoff: Backoff::new(reflector.config.backoff),
        };
        tokio::select! {
            () = cancel.cancelled() => {}
            () = reflector.list_and_watch_forever(&mut state) => {}
            () = reflector.resync_forever() => {}
        }
        info!("reflector stopped");
    }
    .instrument(span)
    .await;
}

impl<K> Reflector<K>
where
    K: Resource + Send + Sync + 'static,
{
    async fn list_and_watch_forever(&self, st: &mut State) {
        let mut relist_cause: Option<RelistCause> = None;
        loop {
            if let Some(cause) = relist_cause {
                self.metrics.relist(&self.name, cause);
            }
            let mut stream = None;
            if self.config.streaming_list {
                match self.streaming_list(st).await {
                    Ok(s) => stream = Some(s),
                    Err(e) => {
                        warn!(error = %e, "streaming list failed; falling back to LIST");
                        self.metrics.streaming_list_fallback(&self.name);
                        self.report(&e);
                    }
                }
            }
            if stream.is_none()
                && let Err(e) = self.list(st).await
            {
                self.report(&e);
                relist_cause = Some(RelistCause::Error);
                let retry_after = e.list_watch_error().and_then(ListWatchError::retry_after);
                self.wait_backoff(st, retry_after).await;
                continue;
            }
            relist_cause = Some(self.watch_until_relist(st, stream).await);
        }
    }

    /// One LIST (all pages) and a `replace`; retries at once with
    /// `resourceVersion=""` if the resource version is expired or too large.
    async fn list(&self, st: &mut State) -> Result<(), ReflectorError> {
        let started = Instant::now();
        let mut rv = st.relist_resource_version();
        let result = match self.list_pages(st, &rv).await {
            Err(e) if e.is_expired() || e.is_too_large_resource_version() => {
                info!(resource_version = %rv, error = %e, "resource version unavailable; listing the newest data");
                st.rv_unavailable = true;
                rv = st.relist_resource_version();
                self.list_pages(st, &rv).await
            }
            Err(e)
                if e.oversized() == Some(OversizedPart::ListPage)
                    && self.page_limit(st, &rv).is_none()
                    && self.config.page_size != Some(0) =>
            {
                warn!(resource_version = %rv, error = %e, "a list in one answer is over the cap; listing in pages");
                self.metrics
                    .oversized_answer(&self.name, OversizedPart::ListPage.as_str());
                st.paginated_result = true;
                self.list_pages(st, &rv).await
            }
            other => other,
        };
        let (items, list_rv, pages, count) = result.map_err(|source| {
            self.metrics
                .list_failed(&self.name, failure_reason(&source));
            ReflectorError::List {
                informer: self.name.clone(),
                source,
            }
        })?;
        if rv == "0" && pages > 1 {
            st.paginated_result = true;
        }
        st.rv_unavailable = false;
        if self.store.replaces_by_page() {
            self.store.replace_finish(&list_rv);
        } else {
            self.store.replace_prepared(items, &list_rv);
        }
        self.set_resource_version(st, &list_rv);
        self.metrics
            .list_completed(&self.name, count, pages, started.elapsed());
        debug!(items = count, pages, resource_version = %list_rv, "list synced");
        Ok(())
    }

    /// Fetches every page of a list at `rv`. Returns the items (none when
    /// the store takes pages as they come: each went to
    /// [`replace_page`](ReflectorStore::replace_page)), the list's resource
    /// version, the number of requests made and the number of items.
    async fn list_pages(
        &self,
        st: &State,
        rv: &str,
    ) -> Result<(Vec<K>, String, usize, usize), ListWatchError> {
        let limit = self.page_limit(st, rv);
        let span = debug_span!("list", resource_version = %rv, limit = ?limit);
        async move {
            let first = ListRequest {
                limit,
                resource_version: rv.to_owned(),
                ..ListRequest::default()
            };
            let mut req = first.clone();
            let by_page = self.store.replaces_by_page();
            if by_page {
                self.store.replace_begin();
            }
            // Pages the store does not take one by one are kept as they come
            // and joined once at the end into a vector of the exact size: no
            // regrowing (and copying) of one vector that ends up with up to
            // twice the capacity it needs.
            let mut pages_items: Vec<Vec<K>> = Vec::new();
            let mut pages = 0usize;
            let mut count = 0usize;
            loop {
                let page = match self.lister_watcher.list(req.clone()).await {
                    Ok(page) => page,
                    Err(e) if e.is_expired() && req.continue_token.is_some() => {
                        warn!(error = %e, pages, "continue token expired; listing everything at once");
                        drop(pages_items);
                        let full = ListRequest {
                            limit: None,
                            ..first.clone()
                        };
                        let page = self.lister_watcher.list(full).await?;
                        pages += 1;
                        self.skip_undecodable(&page.undecodable);
                        let items = self.prepare_page(page.items);
                        let count = items.len();
                        if by_page {
                            // The pages taken so far are superseded: start over.
                            self.store.replace_begin();
                            self.store.replace_page(items);
                            return Ok((Vec::new(), page.resource_version, pages, count));
                        }
                        return Ok((items, page.resource_version, pages, count));
                    }
                    Err(e) => return Err(e),
                };
                pages += 1;
                self.skip_undecodable(&page.undecodable);
                let items = self.prepare_page(page.items);
                count += items.len();
                if by_page {
                    self.store.replace_page(items);
                } else {
                    pages_items.push(items);
                }
                match page.continue_token {
                    Some(token) => req.continue_token = Some(token),
                    None => {
                        let items = join_pages(pages_items);
                        return Ok((items, page.resource_version, pages, count));
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// The page size of a list at `rv` (`None`: all in one answer).
    fn page_limit(&self, st: &State, rv: &str) -> Option<u32> {
        match self.config.page_size {
            Some(0) => None,
            Some(n) => Some(n),
            None if st.paginated_result => Some(DEFAULT_PAGE_SIZE),
            // Let the server answer from its watch cache rather than page through storage.
            None if !rv.is_empty() && rv != "0" => None,
            None => Some(DEFAULT_PAGE_SIZE),
        }
    }

    /// Hands one list page's objects to the store's
    /// [`prepare_listed`](ReflectorStore::prepare_listed) as the page
    /// arrives (in place: the page's vector is reused).
    fn prepare_page(&self, items: Vec<K>) -> Vec<K> {
        items
            .into_iter()
            .map(|o| {
                let mut o = self.store.prepare_listed(o);
                fit_metadata(&mut o);
                o
            })
            .collect()
    }

    /// Opens (or continues) watches until a relist is needed.
    async fn watch_until_relist(
        &self,
        st: &mut State,
        mut carried: Option<(WatchStream<K>, Instant)>,
    ) -> RelistCause {
        loop {
            let (stream, deadline) = match carried.take() {
                Some(open) => open,
                None => match self.open_watch(st).await {
                    Ok(open) => open,
                    Err(e) => match self.after_watch_error(st, e).await {
                        Next::Rewatch(cause) => {
                            self.metrics.watch_restart(&self.name, cause);
                            continue;
                        }
                        Next::Relist(cause) => return cause,
                    },
                },
            };
            let started = Instant::now();
            let span = debug_span!("watch_events", from_resource_version = %st.last_rv);
            let (events, error) = self.consume(st, stream, deadline).instrument(span).await;
            let cause = match error {
                None => WatchRestartCause::Closed,
                // A connection that broke mid-stream is resumed like a closed watch.
                Some(e) if e.is_transport() => {
                    self.report(&ReflectorError::Watch {
                        informer: self.name.clone(),
                        source: e,
                    });
                    WatchRestartCause::Transport
                }
                Some(e) => match self.after_watch_error(st, e).await {
                    Next::Rewatch(cause) => {
                        self.metrics.watch_restart(&self.name, cause);
                        continue;
                    }
                    Next::Relist(cause) => return cause,
                },
            };
            if events == 0 && started.elapsed() < SHORT_WATCH {
                debug!("watch ended at once without events; backing off");
                self.wait_backoff(st, None).await;
            }
            self.metrics.watch_restart(&self.name, cause);
        }
    }

    /// Reports a watch that could not open or ended with an error, waits
    /// as the error requires and says what comes next: 410 relists at once,
    /// 429 and unreachable servers back off and watch again, anything else
    /// backs off and relists.
    async fn after_watch_error(&self, st: &mut State, err: ListWatchError) -> Next {
        let expired = err.is_expired();
        let rewatch = if err.is_too_many_requests() {
            Some(WatchRestartCause::TooManyRequests)
        } else if err.is_transport() {
            Some(WatchRestartCause::Transport)
        } else {
            None
        };
        let retry_after = err.retry_after();
        self.report(&ReflectorError::Watch {
            informer: self.name.clone(),
            source: err,
        });
        if expired {
            return Next::Relist(RelistCause::Expired);
        }
        self.wait_backoff(st, retry_after).await;
        match rewatch {
            Some(cause) => Next::Rewatch(cause),
            None => Next::Relist(RelistCause::Error),
        }
    }

    async fn open_watch(&self, st: &State) -> Result<(WatchStream<K>, Instant), ListWatchError> {
        let timeout = self.watch_timeout_seconds();
        let req = WatchRequest {
            resource_version: st.last_rv.clone(),
            timeout_seconds: Some(timeout),
            allow_bookmarks: true,
            send_initial_events: false,
        };
        let span = debug_span!("watch", resource_version = %st.last_rv, timeout_seconds = timeout);
        self.metrics.watch_started(&self.name);
        let stream = self.lister_watcher.watch(req).instrument(span).await?;
        Ok((stream, Self::deadline(timeout)))
    }

    fn watch_timeout_seconds(&self) -> u32 {
        let min = u32::try_from(self.config.min_watch_timeout.as_secs())
            .unwrap_or(u32::MAX / 2)
            .max(1);
        rand::random_range(min..min.saturating_mul(2))
    }

    fn deadline(timeout_seconds: u32) -> Instant {
        Instant::now() + Duration::from_secs(u64::from(timeout_seconds)) + WATCH_DEADLINE_SLACK
    }

    pub(super) fn set_resource_version(&self, st: &mut State, rv: &str) {
        st.last_rv.clear();
        st.last_rv.push_str(rv);
        self.synced.set(rv);
        self.metrics.last_sync(&self.name, rv, SystemTime::now());
    }

    pub(super) fn skip_undecodable(&self, failures: &[DecodeFailure]) {
        for f in failures {
            warn!(
                key = f.key.as_deref().unwrap_or("<unknown>"),
                event_type = f.event_type.as_deref().unwrap_or("<unknown>"),
                error = %f.error,
                "skipping an object that could not be decoded"
            );
            self.metrics.decode_failure(&self.name);
        }
    }

    /// The initial state from a WATCH with `sendInitialEvents=true`: events
    /// up to the initial-events-end bookmark become one `replace` (paged,
    /// as they arrive, for a store that takes a LIST by page). Returns
    /// the stream, which goes on as a normal watch.
    async fn streaming_list(
        &self,
        st: &mut State,
    ) -> Result<(WatchStream<K>, Instant), ReflectorError> {
        let started = Instant::now();
        let rv = if st.rv_unavailable {
            String::new()
        } else {
            st.last_rv.clone()
        };
        let timeout = self.watch_timeout_seconds();
        let req = WatchRequest {
            resource_version: rv.clone(),
            timeout_seconds: Some(timeout),
            allow_bookmarks: true,
            send_initial_events: true,
        };
        let watch_error = |source| ReflectorError::Watch {
            informer: self.name.clone(),
            source,
        };
        let span = debug_span!("streaming_list", resource_version = %rv, timeout_seconds = timeout);
        self.metrics.watch_started(&self.name);
        let mut stream = self
            .lister_watcher
            .watch(req)
            .instrument(span)
            .await
            .map_err(|e| {
                if e.is_expired() || e.is_too_large_resource_version() {
                    st.rv_unavailable = true;
                }
                watch_error(e)
            })?;
        let deadline = Self::deadline(timeout);
        let page_size = match self.config.page_size {
            Some(n) if n > 0 => n,
            _ => DEFAULT_PAGE_SIZE,
        };
        let mut initial = InitialEvents::begin(
            &*self.store,
            usize::try_from(page_size).unwrap_or(usize::MAX),
        );
        let mut events = 0usize;
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                () = tokio::time::sleep_until(deadline) => None,
            };
            let event = match next {
                None => {
                    return Err(ReflectorError::StreamingListIncomplete {
                        informer: self.name.clone(),
                        events,
                    });
                }
                Some(Err(e)) => {
                    if e.is_expired() || e.is_too_large_resource_version() {
                        st.rv_unavailable = true;
                    }
                    return Err(watch_error(e));
                }
                Some(Ok(event)) => event,
            };
            events += 1;
            match event {
                WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                    // Transformed as it arrives, like a listed page, so the
                    // whole untransformed state is never held.
                    initial.upsert(&*self.store, self.store.prepare_listed(obj));
                }
                WatchEvent::Deleted(obj) => initial.delete(&*self.store, obj),
                WatchEvent::Undecodable(failure) => {
                    self.skip_undecodable(std::slice::from_ref(&failure))
                }
                WatchEvent::Bookmark(b) if b.is_initial_events_end() => {
                    st.rv_unavailable = false;
                    let count = initial.finish(&*self.store, &b.resource_version);
                    self.set_resource_version(st, &b.resource_version);
                    self.metrics
                        .list_completed(&self.name, count, 1, started.elapsed());
                    debug!(items = count, resource_version = %b.resource_version, "streaming list synced");
                    return Ok((stream, deadline));
                }
                WatchEvent::Bookmark(_) => {}
            }
        }
    }

    async fn wait_backoff(&self, st: &mut State, retry_after: Option<Duration>) {
        let mut delay = st.backoff.next_delay();
        if let Some(asked) = retry_after {
            delay = delay.max(asked.min(MAX_RETRY_AFTER));
        }
        self.metrics.backoff(&self.name, delay);
        debug!(
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "backing off"
        );
        tokio::time::sleep(delay).await;
    }

    fn report(&self, err: &ReflectorError) {
        if let Some(part) = err.list_watch_error().and_then(ListWatchError::oversized) {
            self.metrics.oversized_answer(&self.name, part.as_str());
        }
        match &self.watch_error_handler {
            Some(handler) => handler(err),
            None if err.is_expired() => info!(error = %err, "watch ended; relisting"),
            None => warn!(error = %err, "list/watch failed"),
        }
    }

    async fn resync_forever(&self) {
        let Some(period) = self.config.resync_period else {
            return std::future::pending().await;
        };
        let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if self.should_resync.as_ref().is_none_or(|should| should()) {
                debug!("resync");
                self.store.resync();
            }
        }
    }
}

/// The metric label of a failed call: the `Status` reason, or what kind of
/// failure it was when the server gave none.
fn failure_reason(err: &ListWatchError) -> &str {
    match err.reason() {
        Some(reason) => reason,
        None if err.is_transport() => "transport",
        None if err.oversized().is_some() => "oversized",
        None => "error",
    }
}

/// Gives back the spare room of the metadata lists a JSON decoder grew by
/// doubling: serde_json gives no length up front, so one managedFields entry
/// (about 170 B) otherwise sits in room for four, about 500 B per cached
/// object for nothing.
pub(super) fn fit_metadata<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    if let Some(v) = meta.managed_fields.as_mut() {
        v.shrink_to_fit();
    }
    if let Some(v) = meta.owner_references.as_mut() {
        v.shrink_to_fit();
    }
    if let Some(v) = meta.finalizers.as_mut() {
        v.shrink_to_fit();
    }
}

/// Joins list pages into one vector of exactly their total length (a single
/// page is passed on as it is).
fn join_pages<K>(mut pages: Vec<Vec<K>>) -> Vec<K> {
    if pages.len() == 1 {
        return pages.pop().unwrap_or_default();
    }
    let mut items = Vec::with_capacity(pages.iter().map(Vec::len).sum());
    for page in pages {
        items.extend(page);
    }
    items
}

#[cfg(test)]
mod join_tests {
    use super::{fit_metadata, join_pages};
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn decoded_metadata_lists_keep_no_spare_room() {
        let json = r#"{"metadata":{"name":"a","finalizers":["f"],
            "managedFields":[{"manager":"m","operation":"Update"}]}}"#;
        let mut cm: ConfigMap = serde_json::from_str(json).unwrap();
        let grown = |cm: &ConfigMap| cm.metadata.managed_fields.as_ref().unwrap().capacity();
        assert!(grown(&cm) > 1, "the decoder grows by doubling");
        fit_metadata(&mut cm);
        assert_eq!(grown(&cm), 1);
        assert_eq!(cm.metadata.finalizers.as_ref().unwrap().capacity(), 1);
        let entry: &ManagedFieldsEntry = &cm.metadata.managed_fields.as_ref().unwrap()[0];
        assert_eq!(entry.manager.as_deref(), Some("m"));
    }

    #[test]
    fn pages_join_in_order_into_an_exact_fit() {
        let joined = join_pages(vec![vec![1, 2], vec![], vec![3], vec![4, 5, 6]]);
        assert_eq!(joined, [1, 2, 3, 4, 5, 6]);
        assert_eq!(joined.capacity(), 6, "no spare capacity");
        assert!(join_pages::<u8>(Vec::new()).is_empty());
        assert_eq!(join_pages(vec![vec![7, 8]]), [7, 8]);
    }
}
