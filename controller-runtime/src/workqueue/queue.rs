//! The queue handle: add, get, done, shutdown.
//!
//! [`Queue`] is a cheap-to-clone handle (an `Arc` inside) shared by the event
//! handlers that add items and the workers that process them. Its rules are
//! client-go's: an item waiting in the queue is not queued twice; an item
//! added while a worker processes it is marked dirty and queued again when
//! the worker calls [`Queue::done`]. So no item is ever processed by two
//! workers at once, and no change that arrives during processing is lost.

use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use super::metrics::{MetricsProvider, QueueMetrics};
use super::priority::{AddOptions, Priority};
use super::rate_limiter::{RateLimiter, default_controller_rate_limiter};
use super::state::{Pop, State, Wake};

/// How often, by default, the unfinished-work and longest-running-processor
/// gauges are refreshed (client-go uses the same period).
pub const DEFAULT_METRICS_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// A delay far enough to mean "never" without overflowing an `Instant`.
const FAR_FUTURE: Duration = Duration::from_secs(60 * 60 * 24 * 365 * 30);

pub(super) struct Shared<T> {
    state: Mutex<State<T>>,
    /// Woken when an item may be ready, a delay deadline moved earlier, or
    /// the queue shuts down.
    available: Notify,
    /// Woken when processing becomes empty during shutdown.
    drained: Notify,
    pub(super) limiter: Box<dyn RateLimiter<T>>,
    pub(super) metrics: Option<Arc<dyn QueueMetrics>>,
    name: String,
}

/// A workqueue: deduplicating, never handing one item to two workers at once,
/// with delays, priorities and per-item rate limiting.
///
/// One type covers client-go's basic, delaying and rate-limiting queues and
/// controller-runtime's priority queue: [`Queue::add`], [`Queue::add_after`],
/// [`Queue::add_rate_limited`] and [`Queue::add_with`] all feed the same set
/// of pending items. Items must be cheap to clone and hash (a controller uses
/// a `Request { namespace, name }`).
///
/// ```
/// use controller_runtime::workqueue::Queue;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = Queue::new();
/// queue.add("default/web");
/// queue.add("default/web"); // already waiting: no second copy
/// assert_eq!(queue.len(), 1);
///
/// let item = queue.get().await.unwrap();
/// queue.add(item); // changed while being processed: marked dirty
/// assert_eq!(queue.len(), 0);
/// queue.done(&item); // ... and queued again now
/// assert_eq!(queue.len(), 1);
/// # }
/// ```
pub struct Queue<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Queue {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

/// A `get` asleep waiting for an item; uncounts itself when dropped (also
/// when the `get` future is cancelled).
struct Waiting<'a, T>(&'a Shared<T>);

impl<T> Drop for Waiting<'_, T> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.waiters = state.waiters.saturating_sub(1);
    }
}

/// Builds a [`Queue`] with a name, a rate limiter and metrics.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::{ItemExponentialFailureRateLimiter, Queue};
/// let queue: Queue<String> = Queue::builder()
///     .name("configmaps")
///     .rate_limiter(ItemExponentialFailureRateLimiter::new(
///         Duration::from_millis(10),
///         Duration::from_secs(60),
///     ))
///     .build();
/// assert_eq!(queue.name(), "configmaps");
/// ```
#[must_use]
pub struct QueueBuilder<T> {
    name: String,
    limiter: Option<Box<dyn RateLimiter<T>>>,
    metrics: Option<Arc<dyn MetricsProvider>>,
    metrics_update_period: Duration,
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> QueueBuilder<T> {
    /// The queue's name: the `name` and `controller` labels of its metrics.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The limiter behind [`Queue::add_rate_limited`]; default
    /// [`default_controller_rate_limiter`].
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// Reports the queue's metrics through `provider` (default: none).
    pub fn metrics(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics = Some(provider);
        self
    }

    /// How often the unfinished-work and longest-running-processor gauges
    /// are refreshed; default [`DEFAULT_METRICS_UPDATE_PERIOD`].
    pub fn metrics_update_period(mut self, period: Duration) -> Self {
        self.metrics_update_period = period;
        self
    }

    /// Builds the queue. With metrics and inside a tokio runtime, this also
    /// starts a small task that refreshes the time-based gauges until the
    /// queue is dropped or shut down and idle; outside a runtime, call
    /// [`Queue::refresh_metrics`] yourself (for example before a scrape).
    pub fn build(self) -> Queue<T> {
        let metrics = self
            .metrics
            .as_ref()
            .map(|provider| provider.queue_metrics(&self.name));
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new()),
            available: Notify::new(),
            drained: Notify::new(),
            limiter: self
                .limiter
                .unwrap_or_else(|| Box::new(default_controller_rate_limiter())),
            metrics,
            name: self.name,
        });
        if shared.metrics.is_some()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let period = self.metrics_update_period.max(Duration::from_millis(1));
            runtime.spawn(refresh_periodically(Arc::downgrade(&shared), period));
        }
        Queue { shared }
    }
}

async fn refresh_periodically<T: Clone + Eq + Hash + Send + Sync + 'static>(
    shared: Weak<Shared<T>>,
    period: Duration,
) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let queue = Queue { shared };
        queue.refresh_metrics();
        let state = queue.shared.state.lock();
        if state.is_shutting_down() && state.processing_len() == 0 {
            return;
        }
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Queue<T> {
    /// An unnamed queue with the default controller rate limiter and no
    /// metrics.
    #[must_use]
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Starts building a queue.
    pub fn builder() -> QueueBuilder<T> {
        QueueBuilder {
            name: String::new(),
            limiter: None,
            metrics: None,
            metrics_update_period: DEFAULT_METRICS_UPDATE_PERIOD,
        }
    }

    pub(super) fn shared(&self) -> &Shared<T> {
        &self.shared
    }

    /// `get` calls asleep waiting for an item (for tests).
    #[cfg(test)]
    pub(super) fn waiters(&self) -> usize {
        self.shared.state.lock().waiters
    }

    /// The queue's name (empty if none was given).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Adds `item` now. Does nothing if the item is already waiting or the
    /// queue is shutting down; if a worker is processing the item, it is
    /// marked dirty and queued again on [`Queue::done`]. A delayed item
    /// becomes ready now (the earlier time wins).
    pub fn add(&self, item: T) {
        self.insert(item, Priority::NORMAL, Duration::ZERO);
    }

    /// Adds with a priority and a delay: the one path every add takes.
    pub(super) fn insert(&self, item: T, priority: Priority, delay: Duration) {
        // Reading tokio's clock is not free; an immediate add without
        // metrics needs no precise time (see `State::clock_hint`).
        let precise = (!delay.is_zero() || self.shared.metrics.is_some()).then(Instant::now);
        let (wake, waiters) = {
            let mut state = self.shared.state.lock();
            let now = precise.unwrap_or_else(|| state.clock_hint());
            let ready_at = now
                .checked_add(delay)
                .or_else(|| now.checked_add(FAR_FUTURE))
                .unwrap_or(now);
            let outcome = state.add(item, priority, ready_at, now);
            if let Some(metrics) = &self.shared.metrics {
                if outcome.new {
                    metrics.inc_adds();
                }
                metrics.set_depth(state.depth());
            }
            (outcome.wake, state.waiters > 0)
        };
        if waiters {
            self.wake(wake);
        }
    }

    /// The time for an operation under the lock: the real time when it
    /// matters (metrics, delayed items, shutdown), else the state's hint.
    fn now(&self, state: &State<T>) -> Instant {
        if self.shared.metrics.is_some() || state.delayed_len() > 0 || state.is_shutting_down() {
            Instant::now()
        } else {
            state.clock_hint()
        }
    }

    fn wake(&self, wake: Wake) {
        match wake {
            Wake::None => {}
            Wake::One => self.shared.available.notify_one(),
            Wake::All => self.shared.available.notify_waiters(),
        }
    }

    /// Waits for the next item, marks it as being processed and returns it;
    /// the caller must call [`Queue::done`] with it when finished. Returns
    /// `None` once the queue is shutting down and no item is ready.
    ///
    /// Cancel-safe: dropping the future never loses an item.
    pub async fn get(&self) -> Option<T> {
        loop {
            // Fast path: something is ready, no need to register as a waiter.
            match self.try_pop() {
                Pop::Item { item, .. } => return Some(item),
                Pop::Closed => return None,
                Pop::Empty { .. } => {}
            }
            // Register, then look again, so no wake-up falls in between;
            // count ourselves as a waiter so adds know to wake someone.
            let notified = self.shared.available.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let pop = self.pop_or_wait();
            let _waiting = matches!(pop, Pop::Empty { .. }).then(|| Waiting(&self.shared));
            match pop {
                Pop::Item { item, .. } => return Some(item),
                Pop::Closed => return None,
                Pop::Empty {
                    next_ready: Some(deadline),
                } => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(deadline) => {}
                    }
                }
                Pop::Empty { next_ready: None } => notified.await,
            }
        }
    }

    /// Takes the next ready item without waiting, marking it as being
    /// processed like [`Queue::get`]; `None` if nothing is ready.
    ///
    /// ```
    /// use controller_runtime::workqueue::Queue;
    /// let queue = Queue::new();
    /// assert_eq!(queue.try_get(), None);
    /// queue.add(1);
    /// assert_eq!(queue.try_get(), Some(1));
    /// queue.done(&1);
    /// ```
    pub fn try_get(&self) -> Option<T> {
        match self.pop_inner(false) {
            Pop::Item { item, .. } => Some(item),
            Pop::Empty { .. } | Pop::Closed => None,
        }
    }

    fn try_pop(&self) -> Pop<T> {
        self.pop_inner(false)
    }

    /// Like `try_pop`, but if nothing is ready, counts the caller as a
    /// waiter in the same critical section (undone by dropping [`Waiting`]).
    fn pop_or_wait(&self) -> Pop<T> {
        self.pop_inner(true)
    }

    /// Promotes due delayed items and takes the next ready one, if any.
    fn pop_inner(&self, wait: bool) -> Pop<T> {
        let (pop, also_ready) = {
            let mut state = self.shared.state.lock();
            let now = self.now(&state);
            let promoted = state.promote(now);
            let pop = state.pop(now);
            if let (Some(metrics), Pop::Item { waited, .. }) = (&self.shared.metrics, &pop) {
                metrics.observe_queue_duration(*waited);
                metrics.set_depth(state.depth());
            }
            if wait && matches!(pop, Pop::Empty { .. }) {
                state.waiters += 1;
            }
            let also_ready = if state.waiters > 0 {
                promoted.min(state.len())
            } else {
                0
            };
            (pop, also_ready)
        };
        // Items that became ready here may have other waiters to serve.
        for _ in 0..also_ready {
            self.shared.available.notify_one();
        }
        pop
    }

    /// Marks `item` as no longer being processed. If it was added again
    /// meanwhile, it is queued now (or when its delay passes). Calling it for
    /// an item that is not being processed does nothing.
    pub fn done(&self, item: &T) {
        let (wake, waiters, drained) = {
            let mut state = self.shared.state.lock();
            let now = self.now(&state);
            let outcome = state.done(item, now);
            if let Some(metrics) = &self.shared.metrics {
                if let Some(worked) = outcome.worked {
                    metrics.observe_work_duration(worked);
                }
                metrics.set_depth(state.depth());
            }
            let drained = state.is_shutting_down() && state.processing_len() == 0;
            (outcome.wake, state.waiters > 0, drained)
        };
        if waiters {
            self.wake(wake);
        }
        if drained {
            self.shared.drained.notify_waiters();
        }
    }

    /// How many items are ready and waiting for a worker. Items being
    /// processed, and delayed items whose time has not come, are not
    /// counted.
    #[must_use]
    pub fn len(&self) -> usize {
        let (len, promoted) = {
            let mut state = self.shared.state.lock();
            let now = self.now(&state);
            let promoted = state.promote(now);
            (state.len(), promoted)
        };
        for _ in 0..promoted {
            self.shared.available.notify_one();
        }
        len
    }

    /// Whether no item is ready (see [`Queue::len`]).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items are being processed (handed out by [`Queue::get`] and
    /// not yet [`Queue::done`]).
    #[must_use]
    pub fn processing(&self) -> usize {
        self.shared.state.lock().processing_len()
    }

    /// How many items wait for their delay to pass.
    #[must_use]
    pub fn delayed(&self) -> usize {
        self.shared.state.lock().delayed_len()
    }

    /// Stops accepting adds. Ready items can still be taken with
    /// [`Queue::get`], which returns `None` once they are gone; delayed
    /// items are dropped.
    ///
    /// ```
    /// use controller_runtime::workqueue::Queue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = Queue::new();
    /// queue.add(1);
    /// queue.shut_down();
    /// queue.add(2); // ignored
    /// assert_eq!(queue.get().await, Some(1));
    /// assert_eq!(queue.get().await, None);
    /// # }
    /// ```
    pub fn shut_down(&self) {
        let processing = {
            let mut state = self.shared.state.lock();
            state.shut_down();
            if let Some(metrics) = &self.shared.metrics {
                metrics.set_depth(state.depth());
            }
            state.processing_len()
        };
        self.shared.available.notify_waiters();
        if processing == 0 {
            self.shared.drained.notify_waiters();
        }
    }

    /// Shuts down like [`Queue::shut_down`], then waits until no item is
    /// being processed (every item handed out got its [`Queue::done`]).
    /// Wrap it in a timeout if workers might never finish.
    ///
    /// ```
    /// use controller_runtime::workqueue::Queue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = Queue::new();
    /// queue.add("a");
    /// let worker = {
    ///     let queue = queue.clone();
    ///     tokio::spawn(async move {
    ///         while let Some(item) = queue.get().await {
    ///             queue.done(&item);
    ///         }
    ///     })
    /// };
    /// queue.shut_down_with_drain().await;
    /// assert_eq!(queue.processing(), 0);
    /// worker.await.unwrap();
    /// # }
    /// ```
    pub async fn shut_down_with_drain(&self) {
        self.shut_down();
        loop {
            let drained = self.shared.drained.notified();
            let mut drained = std::pin::pin!(drained);
            drained.as_mut().enable();
            if self.shared.state.lock().processing_len() == 0 {
                return;
            }
            drained.await;
        }
    }

    /// Whether [`Queue::shut_down`] was called.
    #[must_use]
    pub fn is_shutting_down(&self) -> bool {
        self.shared.state.lock().is_shutting_down()
    }

    /// Sets the depth, unfinished-work and longest-running-processor gauges
    /// from the queue's current state. Runs periodically on its own inside a
    /// tokio runtime (see [`QueueBuilder::build`]).
    pub fn refresh_metrics(&self) {
        let Some(metrics) = &self.shared.metrics else {
            return;
        };
        let now = Instant::now();
        let promoted = {
            let mut state = self.shared.state.lock();
            let promoted = state.promote(now);
            let (_, unfinished, longest) = state.processing_stats(now);
            metrics.set_depth(state.depth());
            metrics.set_unfinished_work(unfinished);
            metrics.set_longest_running_processor(longest);
            promoted
        };
        for _ in 0..promoted {
            self.shared.available.notify_one();
        }
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Queue<T> {
    /// Adds `item` with a priority, an optional delay and optional rate
    /// limiting. The pending item keeps the highest priority and the earliest
    /// ready time of all its adds.
    ///
    /// ```
    /// use controller_runtime::workqueue::{AddOptions, Priority, Queue};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = Queue::new();
    /// queue.add_with("resync", AddOptions::new().priority(Priority::LOW));
    /// queue.add("changed");
    /// assert_eq!(queue.get().await, Some("changed"));
    /// assert_eq!(queue.get().await, Some("resync"));
    /// # }
    /// ```
    pub fn add_with(&self, item: T, opts: AddOptions) {
        let mut delay = opts.after;
        if opts.rate_limited {
            delay = delay.max(self.rate_limited_delay(&item));
        }
        if opts.rate_limited || !opts.after.is_zero() {
            // A delayed or rate-limited add is a retry, as `add_after` is.
            self.count_retry();
        }
        self.insert(item, opts.priority, delay);
    }
}
