//! Fan-out of cache changes to many handlers: client-go's `sharedProcessor`
//! (the set of listeners of one informer) and `processorListener` (one
//! handler with its own unbounded buffer and its own task).
//!
//! Layer 2: imports the handler trait and keys, never the informer.
//!
//! The informer calls [`SharedProcessor::distribute`] while it holds its
//! delta lock; that only pushes onto each listener's unbounded channel, so it
//! never waits for a handler. Each listener's task drains its channel in
//! batches and calls the handler on tokio's blocking pool, one notification
//! after the other, so per handler the order is the order of distribution, a
//! slow (even blocking) handler only delays itself, and a panic is caught,
//! logged and counted before the next notification is delivered.
//!
//! Resync bookkeeping also lives here: each listener may ask for a resync
//! period; [`SharedProcessor::should_resync`] picks the listeners that are
//! due, and notifications distributed with `sync = true` go to those only.

use std::any::Any;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::handler::ResourceEventHandler;
use crate::key::ObjectOrTombstone;

/// How many queued notifications a listener hands to one blocking-pool job.
const MAX_BATCH: usize = 1024;

/// One change for a handler.
#[derive(Debug)]
pub enum Notification<K> {
    /// `on_add(obj, is_in_initial_list)`.
    Add {
        /// The object now in the cache.
        obj: Arc<K>,
        /// Part of the first list, or of the replay to a late handler.
        is_in_initial_list: bool,
    },
    /// `on_update(old, new)`.
    Update {
        /// The cached object before the change.
        old: Arc<K>,
        /// The cached object after the change.
        new: Arc<K>,
    },
    /// `on_delete(obj_or_tombstone)`.
    Delete(ObjectOrTombstone<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add {
                obj,
                is_in_initial_list,
            } => Self::Add {
                obj: Arc::clone(obj),
                is_in_initial_list: *is_in_initial_list,
            },
            Self::Update { old, new } => Self::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Self::Delete(ObjectOrTombstone::Object(o)) => {
                Self::Delete(ObjectOrTombstone::Object(Arc::clone(o)))
            }
            Self::Delete(ObjectOrTombstone::Tombstone(t)) => Self::Delete(
                ObjectOrTombstone::Tombstone(crate::key::DeletedFinalStateUnknown {
                    key: t.key.clone(),
                    obj: Arc::clone(&t.obj),
                }),
            ),
        }
    }
}

impl<K> Notification<K> {
    fn is_initial_add(&self) -> bool {
        matches!(
            self,
            Self::Add {
                is_in_initial_list: true,
                ..
            }
        )
    }
}

/// Identifies a listener within its processor.
pub type ListenerId = u64;

/// Live counters of one listener, shared by its task and its registration.
#[derive(Debug, Default)]
pub struct ListenerStats {
    pending: AtomicUsize,
    initial_pending: AtomicUsize,
    delivered: AtomicU64,
    panics: AtomicU64,
    removed: AtomicBool,
    /// Woken when `initial_pending` reaches zero or the listener is removed.
    changed: tokio::sync::Notify,
}

impl ListenerStats {
    /// Notifications queued for the handler and not yet delivered.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// `on_add(_, true)` notifications queued and not yet delivered.
    pub fn initial_pending(&self) -> usize {
        self.initial_pending.load(Ordering::Acquire)
    }

    /// Notifications the handler has been called with (panicked ones included).
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Acquire)
    }

    /// Handler calls that panicked.
    pub fn panics(&self) -> u64 {
        self.panics.load(Ordering::Acquire)
    }

    /// Whether the listener was removed (it delivers nothing more).
    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Resolves at the next moment `initial_pending` reaches zero or the
    /// listener is removed. Create it (and `enable` it) before looking at
    /// either, so that no change is missed.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

/// Called with `(listener, pending)` whenever a listener's pending count
/// changes by a batch; the informer forwards it to its metrics.
pub type PendingObserver = Arc<dyn Fn(ListenerId, usize) + Send + Sync>;

/// A listener's receiver and handler, waiting for the processor to run.
type Unstarted<K> = (
    mpsc::UnboundedReceiver<Notification<K>>,
    Arc<dyn ResourceEventHandler<K>>,
);

struct Listener<K> {
    tx: mpsc::UnboundedSender<Notification<K>>,
    stats: Arc<ListenerStats>,
    resync_period: Option<Duration>,
    next_resync: Instant,
    /// Receiver and handler, kept until the processor runs.
    unstarted: Option<Unstarted<K>>,
}

struct State<K> {
    next_id: ListenerId,
    listeners: BTreeMap<ListenerId, Listener<K>>,
    syncing: HashSet<ListenerId>,
    runtime: Option<tokio::runtime::Handle>,
    stopped: bool,
}

/// The listeners of one informer. Cheap to share behind an `Arc`.
pub struct SharedProcessor<K> {
    state: Mutex<State<K>>,
    observer: Option<PendingObserver>,
}

impl<K> fmt::Debug for SharedProcessor<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("SharedProcessor")
            .field("listeners", &state.listeners.len())
            .field("running", &state.runtime.is_some())
            .field("stopped", &state.stopped)
            .finish()
    }
}

impl<K: Send + Sync + 'static> Default for SharedProcessor<K> {
    fn default() -> Self {
        Self::new(None)
    }
}

impl<K: Send + Sync + 'static> SharedProcessor<K> {
    /// An empty processor; `observer` hears about pending counts.
    pub fn new(observer: Option<PendingObserver>) -> Self {
        Self {
            state: Mutex::new(State {
                next_id: 0,
                listeners: BTreeMap::new(),
                syncing: HashSet::new(),
                runtime: None,
                stopped: false,
            }),
            observer,
        }
    }

    /// Adds a listener. `initial` objects are queued to it first as
    /// `on_add(obj, true)` (the cache replay for a late handler), before any
    /// notification distributed after this call. Its first resync is due one
    /// `resync_period` from now. If the processor runs, the listener's task
    /// starts at once; otherwise when [`run`](Self::run) is called. On a
    /// stopped processor nothing is added: the returned stats already say
    /// the listener is removed, so a sync wait on it ends instead of waiting
    /// for a replay nobody will deliver.
    pub fn add_listener(
        &self,
        handler: Arc<dyn ResourceEventHandler<K>>,
        resync_period: Option<Duration>,
        initial: impl IntoIterator<Item = Arc<K>>,
    ) -> (ListenerId, Arc<ListenerStats>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(ListenerStats::default());
        let mut state = self.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        if state.stopped {
            stats.removed.store(true, Ordering::Release);
            return (id, stats);
        }
        let mut queued = 0;
        for obj in initial {
            stats.initial_pending.fetch_add(1, Ordering::AcqRel);
            stats.pending.fetch_add(1, Ordering::AcqRel);
            queued += 1;
            // The receiver is alive: it is stored below or moved into the task.
            let _ = tx.send(Notification::Add {
                obj,
                is_in_initial_list: true,
            });
        }
        let unstarted = match (&state.runtime, state.stopped) {
            (Some(rt), false) => {
                rt.spawn(run_listener(
                    rx,
                    handler,
                    Arc::clone(&stats),
                    self.observer_for(id),
                ));
                None
            }
            _ => Some((rx, handler)),
        };
        state.listeners.insert(
            id,
            Listener {
                tx,
                stats: Arc::clone(&stats),
                resync_period,
                next_resync: Instant::now() + resync_period.unwrap_or_default(),
                unstarted,
            },
        );
        drop(state);
        if queued > 0 {
            self.observe(id, stats.pending());
        }
        (id, stats)
    }

    /// Removes a listener: nothing more is delivered to it once the call it is
    /// in (if any) returns; queued notifications are dropped. Returns whether
    /// the listener existed.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        let removed = {
            let mut state = self.state.lock();
            state.syncing.remove(&id);
            state.listeners.remove(&id)
        };
        match removed {
            Some(listener) => {
                listener.stats.removed.store(true, Ordering::Release);
                listener.stats.pending.store(0, Ordering::Release);
                listener.stats.initial_pending.store(0, Ordering::Release);
                listener.stats.changed.notify_waiters();
                self.observe(id, 0);
                true
            }
            None => false,
        }
    }

    /// Queues `notification` to every listener, or with `sync` only to the
    /// listeners picked by the last [`should_resync`](Self::should_resync).
    /// Never waits for a handler.
    pub fn distribute(&self, notification: Notification<K>, sync: bool) {
        let initial = notification.is_initial_add();
        let state = self.state.lock();
        for (id, listener) in &state.listeners {
            if sync && !state.syncing.contains(id) {
                continue;
            }
            if initial {
                listener
                    .stats
                    .initial_pending
                    .fetch_add(1, Ordering::AcqRel);
            }
            let pending = listener.stats.pending.fetch_add(1, Ordering::AcqRel) + 1;
            if listener.tx.send(notification.clone()).is_err() {
                tracing::debug!(listener = id, "listener task is gone; notification dropped");
            }
            if pending == 1 || pending % 1024 == 0 {
                self.observe(*id, pending);
            }
        }
    }

    /// Picks the listeners whose resync period is due at the current
    /// (tokio) time, schedules their next resync, and says whether any is
    /// due. The informer calls this at its resync check period and queues a
    /// FIFO resync when it returns true.
    pub fn should_resync(&self) -> bool {
        let now = Instant::now();
        let mut state = self.state.lock();
        let state = &mut *state;
        state.syncing.clear();
        for (id, listener) in state.listeners.iter_mut() {
            if let Some(period) = listener.resync_period
                && now >= listener.next_resync
            {
                state.syncing.insert(*id);
                listener.next_resync = now + period;
            }
        }
        !state.syncing.is_empty()
    }

    /// Starts the task of every listener added so far (later ones start as
    /// they are added). Must be called inside a tokio runtime.
    pub fn run(&self) {
        let handle = tokio::runtime::Handle::current();
        let mut state = self.state.lock();
        if state.stopped || state.runtime.is_some() {
            return;
        }
        for (id, listener) in state.listeners.iter_mut() {
            if let Some((rx, handler)) = listener.unstarted.take() {
                handle.spawn(run_listener(
                    rx,
                    handler,
                    Arc::clone(&listener.stats),
                    self.observer_for(*id),
                ));
            }
        }
        state.runtime = Some(handle);
    }

    /// Removes every listener; distributing afterwards reaches nobody.
    pub fn stop(&self) {
        let ids: Vec<ListenerId> = {
            let mut state = self.state.lock();
            state.stopped = true;
            state.listeners.keys().copied().collect()
        };
        for id in ids {
            self.remove_listener(id);
        }
    }

    /// Number of listeners.
    pub fn len(&self) -> usize {
        self.state.lock().listeners.len()
    }

    /// Whether there is no listener.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The resync period a listener was added with.
    pub fn resync_period(&self, id: ListenerId) -> Option<Duration> {
        self.state
            .lock()
            .listeners
            .get(&id)
            .and_then(|l| l.resync_period)
    }

    fn observe(&self, id: ListenerId, pending: usize) {
        if let Some(observer) = &self.observer {
            observer(id, pending);
        }
    }

    fn observer_for(&self, id: ListenerId) -> Option<(ListenerId, PendingObserver)> {
        self.observer.as_ref().map(|o| (id, Arc::clone(o)))
    }
}

/// The task of one listener: drain the channel in batches, deliver each batch
/// on the blocking pool, in order.
async fn run_listener<K: Send + Sync + 'static>(
    mut rx: mpsc::UnboundedReceiver<Notification<K>>,
    handler: Arc<dyn ResourceEventHandler<K>>,
    stats: Arc<ListenerStats>,
    observer: Option<(ListenerId, PendingObserver)>,
) {
    let mut batch = Vec::with_capacity(64);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        if stats.is_removed() {
            break;
        }
        let job_handler = Arc::clone(&handler);
        let job_stats = Arc::clone(&stats);
        let job = std::mem::take(&mut batch);
        match tokio::task::spawn_blocking(move || deliver_batch(&*job_handler, job, &job_stats))
            .await
        {
            Ok(emptied) => batch = emptied,
            Err(err) => {
                tracing::error!(error = %err, "handler delivery job failed; listener stops");
                break;
            }
        }
        if let Some((id, observer)) = &observer
            && !stats.is_removed()
        {
            observer(*id, stats.pending());
        }
    }
    tracing::debug!(delivered = stats.delivered(), "listener task ends");
}

/// Calls the handler for each notification, catching panics. Returns the
/// emptied vector for reuse.
fn deliver_batch<K: 'static>(
    handler: &dyn ResourceEventHandler<K>,
    mut batch: Vec<Notification<K>>,
    stats: &ListenerStats,
) -> Vec<Notification<K>> {
    for notification in batch.drain(..) {
        if stats.is_removed() {
            break;
        }
        let initial = notification.is_initial_add();
        let outcome = catch_unwind(AssertUnwindSafe(|| match notification {
            Notification::Add {
                obj,
                is_in_initial_list,
            } => handler.on_add(obj, is_in_initial_list),
            Notification::Update { old, new } => handler.on_update(old, new),
            Notification::Delete(obj) => handler.on_delete(obj),
        }));
        if let Err(payload) = outcome {
            stats.panics.fetch_add(1, Ordering::AcqRel);
            tracing::error!(
                panic = panic_message(payload.as_ref()),
                "resource event handler panicked; continuing with the next notification"
            );
        }
        stats.delivered.fetch_add(1, Ordering::AcqRel);
        if initial {
            let before =
                stats
                    .initial_pending
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            if before == Ok(1) {
                stats.changed.notify_waiters();
            }
        }
        let _ = stats
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
    batch
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

#[cfg(test)]
mod tests;
