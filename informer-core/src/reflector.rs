//! The Reflector: keeps a store in step with the API server by LIST, then
//! WATCH from the list's resource version, for as long as it runs.
//!
//! Layer 3: imports the list-watch, the delta FIFO, the store, keys and metrics.
//!
//! This is client-go's `Reflector.ListAndWatch`, rule for rule:
//!
//! - The first LIST asks for `resourceVersion=0` (any version, cheap for the
//!   server); later lists ask for the last resource version the reflector
//!   synced to; after an "expired" or "too large resource version" answer it
//!   lists with `resourceVersion=""` (the newest data).
//! - Lists are paginated with `limit` (500 by default) and `continue`; if a
//!   continue token expires (410) the reflector fetches the whole list at once.
//!   Without an explicit page size, a relist from a specific resource version
//!   is not paginated unless the server paginated the first list (so it can
//!   be served from the watch cache), as client-go does. Such a list whose
//!   one answer goes over the lister-watcher's cap
//!   ([`ReadLimits`](crate::list_watch::ReadLimits)) is asked again at once
//!   in pages, as is every list after it.
//! - Every list ends in [`ReflectorStore::replace`]. Then the reflector
//!   WATCHes from the list's resource version with `allowWatchBookmarks=true`
//!   and `timeoutSeconds` drawn uniformly from `[300, 600)`. Bookmarks only
//!   move the resource version.
//! - A watch that ends normally is reopened from the last resource version
//!   (after a backoff if it ended within a second without a single event, so
//!   a server that closes every watch at once is not hammered; a watch silent
//!   for 30 s past its timeout is abandoned and reopened). 410 Gone / Expired
//!   leads to a relist, 429 to a backoff (at least its `Retry-After`, up to a
//!   minute) and a new watch, an unreachable server to a backoff and a new
//!   watch, other errors to a backoff and a relist. Backoff: 800 ms doubling
//!   to 30 s with jitter, reset after 2 minutes of health ([`BackoffConfig`]).
//! - Optionally the initial state comes from a streaming list (a WATCH with
//!   `sendInitialEvents=true`, ending at the bookmark annotated
//!   `k8s.io/initial-events-end: "true"`), falling back to LIST if refused.
//! - An object that cannot be decoded is logged with its key and counted
//!   ([`InformerMetrics::decode_failure`]); the reflector goes on.
//! - A resync timer calls [`ReflectorStore::resync`] every resync period.
//!
//! The reflector stops when its [`CancellationToken`] is cancelled.

mod backoff;
mod events;
mod fifo_store;
mod initial_events;
mod run;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use crate::list_watch::{ListWatchError, ListerWatcher};
use crate::metrics::{InformerMetrics, NoopMetrics};

pub use backoff::BackoffConfig;

/// The page size of paginated lists unless configured otherwise.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// The shortest server-side watch timeout; each watch asks for a timeout
/// drawn uniformly from `[min, 2 * min)`.
pub const DEFAULT_MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);

/// Where a reflector writes what it learns. Implemented by
/// [`DeltaFifo`](crate::delta_fifo::DeltaFifo) (and by anything a test
/// wants to observe).
///
/// ```
/// use std::sync::Mutex;
/// use informer_core::reflector::ReflectorStore;
///
/// /// Remembers the names in the last replace.
/// #[derive(Default)]
/// struct Names(Mutex<Vec<String>>);
///
/// impl ReflectorStore<String> for Names {
///     fn add(&self, obj: String) { self.0.lock().unwrap().push(obj) }
///     fn update(&self, _obj: String) {}
///     fn delete(&self, obj: String) { self.0.lock().unwrap().retain(|n| *n != obj) }
///     fn replace(&self, list: Vec<String>, _rv: &str) { *self.0.lock().unwrap() = list }
///     fn resync(&self) {}
/// }
/// ```
pub trait ReflectorStore<K>: Send + Sync {
    /// A watch saw the object created.
    fn add(&self, obj: K);
    /// A watch saw the object change.
    fn update(&self, obj: K);
    /// A watch saw the object deleted (this is its last state).
    fn delete(&self, obj: K);
    /// A list returned exactly these objects at `resource_version`.
    fn replace(&self, list: Vec<K>, resource_version: &str);
    /// The resync period elapsed.
    fn resync(&self);
    /// One listed object, as its page arrives and before the list is
    /// complete. A store that transforms what enters it (a FIFO stripping
    /// `managedFields`) does it here, so the reflector never holds a whole
    /// untransformed list; what this returns reaches
    /// [`replace_prepared`](Self::replace_prepared). By default, the object
    /// as it is.
    fn prepare_listed(&self, obj: K) -> K {
        obj
    }
    /// Like [`replace`](Self::replace), for objects that went through
    /// [`prepare_listed`](Self::prepare_listed) (by default, `replace`).
    fn replace_prepared(&self, list: Vec<K>, resource_version: &str) {
        self.replace(list, resource_version);
    }
    /// Whether this store takes a LIST page by page: the reflector then
    /// calls [`replace_begin`](Self::replace_begin), hands each prepared page
    /// to [`replace_page`](Self::replace_page) as it arrives and ends with
    /// [`replace_finish`](Self::replace_finish), instead of collecting every
    /// page for one [`replace_prepared`](Self::replace_prepared). The store
    /// can then let go of the old objects while the list is still coming,
    /// rather than hold two full copies. By default `false`.
    fn replaces_by_page(&self) -> bool {
        false
    }
    /// A paged LIST starts (again, if an earlier one broke off): forget the
    /// keys listed so far. Called only when [`replaces_by_page`](Self::replaces_by_page).
    fn replace_begin(&self) {}
    /// One page of the paged LIST, its objects prepared. Called only when
    /// [`replaces_by_page`](Self::replaces_by_page).
    fn replace_page(&self, page: Vec<K>) {
        let _ = page;
    }
    /// The paged LIST is complete at `resource_version`: whatever the store
    /// holds that no page listed is gone. Called only when
    /// [`replaces_by_page`](Self::replaces_by_page).
    fn replace_finish(&self, resource_version: &str) {
        let _ = resource_version;
    }
    /// The changes of the watch events that arrived together (read in one
    /// wake-up), oldest first. The same as calling [`add`](Self::add),
    /// [`update`](Self::update) and [`delete`](Self::delete) for each in
    /// order, which is what the default does; a store can take them all
    /// under one lock and wake its reader once.
    fn watch_batch(&self, changes: Vec<WatchChange<K>>) {
        for change in changes {
            match change {
                WatchChange::Added(obj) => self.add(obj),
                WatchChange::Modified(obj) => self.update(obj),
                WatchChange::Deleted(obj) => self.delete(obj),
            }
        }
    }
}

/// One object change of a watch, as [`ReflectorStore::watch_batch`] takes
/// it (bookmarks only move the resource version and never reach the store).
///
/// ```
/// use informer_core::reflector::{ReflectorStore, WatchChange};
/// use std::sync::Mutex;
///
/// #[derive(Default)]
/// struct Log(Mutex<Vec<String>>);
///
/// impl ReflectorStore<String> for Log {
///     fn add(&self, obj: String) { self.0.lock().unwrap().push(format!("+{obj}")) }
///     fn update(&self, obj: String) { self.0.lock().unwrap().push(format!("~{obj}")) }
///     fn delete(&self, obj: String) { self.0.lock().unwrap().push(format!("-{obj}")) }
///     fn replace(&self, _list: Vec<String>, _rv: &str) {}
///     fn resync(&self) {}
/// }
///
/// let log = Log::default();
/// log.watch_batch(vec![
///     WatchChange::Added("a".into()),
///     WatchChange::Modified("a".into()),
///     WatchChange::Deleted("a".into()),
/// ]);
/// assert_eq!(*log.0.lock().unwrap(), ["+a", "~a", "-a"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchChange<K> {
    /// `ADDED`: for [`ReflectorStore::add`].
    Added(K),
    /// `MODIFIED`: for [`ReflectorStore::update`].
    Modified(K),
    /// `DELETED`: for [`ReflectorStore::delete`].
    Deleted(K),
}

impl<K> WatchChange<K> {
    /// The object changed.
    pub fn object(&self) -> &K {
        match self {
            Self::Added(o) | Self::Modified(o) | Self::Deleted(o) => o,
        }
    }
}

impl<K, S: ReflectorStore<K> + ?Sized> ReflectorStore<K> for Arc<S> {
    fn add(&self, obj: K) {
        (**self).add(obj);
    }
    fn update(&self, obj: K) {
        (**self).update(obj);
    }
    fn delete(&self, obj: K) {
        (**self).delete(obj);
    }
    fn replace(&self, list: Vec<K>, resource_version: &str) {
        (**self).replace(list, resource_version);
    }
    fn resync(&self) {
        (**self).resync();
    }
    fn prepare_listed(&self, obj: K) -> K {
        (**self).prepare_listed(obj)
    }
    fn replace_prepared(&self, list: Vec<K>, resource_version: &str) {
        (**self).replace_prepared(list, resource_version);
    }
    fn replaces_by_page(&self) -> bool {
        (**self).replaces_by_page()
    }
    fn replace_begin(&self) {
        (**self).replace_begin();
    }
    fn replace_page(&self, page: Vec<K>) {
        (**self).replace_page(page);
    }
    fn replace_finish(&self, resource_version: &str) {
        (**self).replace_finish(resource_version);
    }
    fn watch_batch(&self, changes: Vec<WatchChange<K>>) {
        (**self).watch_batch(changes);
    }
}

/// Why a list or watch ended; handed to the watch-error handler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReflectorError {
    /// A LIST failed.
    #[error("list of {informer} failed: {source}")]
    List {
        /// The reflector's name.
        informer: String,
        /// What the lister-watcher said.
        #[source]
        source: ListWatchError,
    },
    /// A WATCH could not be opened or ended with an error.
    #[error("watch of {informer} failed: {source}")]
    Watch {
        /// The reflector's name.
        informer: String,
        /// What the lister-watcher said.
        #[source]
        source: ListWatchError,
    },
    /// A streaming list ended before its initial-events-end bookmark.
    #[error(
        "streaming list of {informer} ended after {events} events without the initial-events-end bookmark"
    )]
    StreamingListIncomplete {
        /// The reflector's name.
        informer: String,
        /// How many events arrived before the end.
        events: usize,
    },
}

impl ReflectorError {
    /// The lister-watcher error underneath, if any.
    pub fn list_watch_error(&self) -> Option<&ListWatchError> {
        match self {
            Self::List { source, .. } | Self::Watch { source, .. } => Some(source),
            Self::StreamingListIncomplete { .. } => None,
        }
    }

    /// Whether the error is a 410 Gone / Expired answer.
    pub fn is_expired(&self) -> bool {
        self.list_watch_error()
            .is_some_and(ListWatchError::is_expired)
    }
}

/// Called with every error that ends a list or a watch (client-go's
/// `WatchErrorHandler`). The default logs it.
pub type WatchErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

/// Asked at each resync tick whether to resync now (the shared informer
/// answers whether any handler's resync period is due). Default: always.
pub type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;

/// A read handle on the resource version a reflector last synced to.
#[derive(Debug, Clone, Default)]
pub struct SyncedResourceVersion(Arc<RwLock<Option<String>>>);

impl SyncedResourceVersion {
    /// The resource version of the last list, watch event or bookmark;
    /// `None` before the first list.
    pub fn get(&self) -> Option<String> {
        self.0.read().clone()
    }

    pub(crate) fn set(&self, rv: &str) {
        let mut slot = self.0.write();
        match slot.as_mut() {
            Some(cur) => {
                cur.clear();
                cur.push_str(rv);
            }
            None => *slot = Some(rv.to_owned()),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) page_size: Option<u32>,
    pub(crate) resync_period: Option<Duration>,
    pub(crate) streaming_list: bool,
    pub(crate) backoff: BackoffConfig,
    pub(crate) min_watch_timeout: Duration,
}

/// Lists and watches one collection into a [`ReflectorStore`].
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
/// use informer_core::reflector::{Reflector, ReflectorStore};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_client::{Api, Client};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn demo(client: Client, store: Arc<dyn ReflectorStore<ConfigMap>>) {
/// let lw = ApiListerWatcher::new(Api::<ConfigMap>::all(client), ListWatchOptions::default());
/// let reflector = Reflector::builder(lw, store)
///     .resync_period(Duration::from_secs(600))
///     .build();
/// let synced = reflector.synced_resource_version();
/// let cancel = CancellationToken::new();
/// let task = tokio::spawn(reflector.run(cancel.clone()));
/// // ... later
/// println!("synced to {:?}", synced.get());
/// cancel.cancel();
/// task.await.unwrap();
/// # }
/// ```
pub struct Reflector<K> {
    pub(crate) name: String,
    pub(crate) lister_watcher: Arc<dyn ListerWatcher<K>>,
    pub(crate) store: Arc<dyn ReflectorStore<K>>,
    pub(crate) config: Config,
    pub(crate) metrics: Arc<dyn InformerMetrics>,
    pub(crate) watch_error_handler: Option<WatchErrorHandler>,
    pub(crate) should_resync: Option<ShouldResync>,
    pub(crate) synced: SyncedResourceVersion,
}

impl<K> std::fmt::Debug for Reflector<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.name)
            .field("last_sync_resource_version", &self.synced.get())
            .finish_non_exhaustive()
    }
}

impl<K> Reflector<K>
where
    K: kube_core::Resource + Send + Sync + 'static,
{
    /// Starts configuring a reflector that reads `lister_watcher` into `store`.
    pub fn builder(
        lister_watcher: impl ListerWatcher<K>,
        store: impl ReflectorStore<K> + 'static,
    ) -> ReflectorBuilder<K> {
        let lister_watcher: Arc<dyn ListerWatcher<K>> = Arc::new(lister_watcher);
        ReflectorBuilder {
            name: None,
            lister_watcher,
            store: Arc::new(store),
            config: Config {
                page_size: None,
                resync_period: None,
                streaming_list: false,
                backoff: BackoffConfig::default(),
                min_watch_timeout: DEFAULT_MIN_WATCH_TIMEOUT,
            },
            metrics: Arc::new(NoopMetrics),
            watch_error_handler: None,
            should_resync: None,
        }
    }

    /// The name used in logs and metrics.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The resource version of the last list, watch event or bookmark;
    /// `None` before the first list.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.synced.get()
    }

    /// A handle that keeps reading the synced resource version after
    /// [`run`](Self::run) has taken the reflector.
    pub fn synced_resource_version(&self) -> SyncedResourceVersion {
        self.synced.clone()
    }

    /// Lists and watches until `cancel` is cancelled.
    pub fn run(self, cancel: CancellationToken) -> impl Future<Output = ()> + Send + 'static {
        run::run(self, cancel)
    }
}

/// Configures a [`Reflector`].
#[must_use]
pub struct ReflectorBuilder<K> {
    name: Option<String>,
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    store: Arc<dyn ReflectorStore<K>>,
    config: Config,
    metrics: Arc<dyn InformerMetrics>,
    watch_error_handler: Option<WatchErrorHandler>,
    should_resync: Option<ShouldResync>,
}

impl<K> ReflectorBuilder<K>
where
    K: kube_core::Resource + Send + Sync + 'static,
{
    /// The name used in logs and metrics (default: the lister-watcher's description).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Always paginate with this many items per page (0: never paginate).
    /// Without it, lists use [`DEFAULT_PAGE_SIZE`] except for relists from a
    /// specific resource version on a server that did not paginate the first list.
    pub fn page_size(mut self, page_size: u32) -> Self {
        self.config.page_size = Some(page_size);
        self
    }

    /// Call [`ReflectorStore::resync`] this often (zero or unset: never).
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.config.resync_period = Some(period).filter(|p| !p.is_zero());
        self
    }

    /// Get the initial state from a streaming list instead of LIST (falls
    /// back to LIST when the server refuses it).
    pub fn streaming_list(mut self, enabled: bool) -> Self {
        self.config.streaming_list = enabled;
        self
    }

    /// Backoff between retries.
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// The shortest server-side watch timeout (default 300 s); each watch
    /// asks for a timeout drawn uniformly from `[min, 2 * min)`.
    pub fn min_watch_timeout(mut self, min: Duration) -> Self {
        self.config.min_watch_timeout = min.max(Duration::from_secs(1));
        self
    }

    /// Where counters and gauges go (default: nowhere).
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Called with every error that ends a list or watch (default: log it).
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&ReflectorError) + Send + Sync + 'static,
    ) -> Self {
        self.watch_error_handler = Some(Arc::new(handler));
        self
    }

    /// Asked at each resync tick whether to resync (default: always).
    pub fn should_resync(mut self, should: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.should_resync = Some(Arc::new(should));
        self
    }

    /// Builds the reflector.
    pub fn build(self) -> Reflector<K> {
        Reflector {
            name: self.name.unwrap_or_else(|| self.lister_watcher.describe()),
            lister_watcher: self.lister_watcher,
            store: self.store,
            config: self.config,
            metrics: self.metrics,
            watch_error_handler: self.watch_error_handler,
            should_resync: self.should_resync,
            synced: SyncedResourceVersion::default(),
        }
    }
}

#[cfg(test)]
mod tests;
