//! Rate-limited adds: retry an item after a delay its failures decide.
//!
//! [`Queue::add_rate_limited`] asks the queue's [`RateLimiter`] how long the
//! item should wait and adds it after that delay; [`Queue::forget`] tells the
//! limiter the item succeeded so its backoff starts over. This is client-go's
//! rate-limiting queue; the reconcile loop calls `add_rate_limited` on error
//! and `forget` on success.
//!
//! [`RateLimiter`]: super::RateLimiter

use std::hash::Hash;
use std::time::Duration;

use super::priority::Priority;
use super::queue::Queue;

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Queue<T> {
    /// Adds `item` after the delay the rate limiter gives it (which also
    /// counts a failure for it) and counts one retry in the metrics, as
    /// [`Queue::add_after`] does.
    ///
    /// ```
    /// use std::time::Duration;
    /// use controller_runtime::workqueue::{ItemExponentialFailureRateLimiter, Queue};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let queue = Queue::builder()
    ///     .rate_limiter(ItemExponentialFailureRateLimiter::new(
    ///         Duration::from_secs(1),
    ///         Duration::from_secs(60),
    ///     ))
    ///     .build();
    /// queue.add_rate_limited("flaky"); // waits 1 s
    /// assert_eq!(queue.num_requeues(&"flaky"), 1);
    /// assert_eq!(queue.get().await, Some("flaky"));
    /// queue.forget(&"flaky"); // it succeeded: backoff starts over
    /// queue.done(&"flaky");
    /// assert_eq!(queue.num_requeues(&"flaky"), 0);
    /// # }
    /// ```
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.rate_limited_delay(&item);
        self.count_retry();
        self.insert(item, Priority::NORMAL, delay);
    }

    /// The limiter's delay for `item` (the limiter counts a failure).
    pub(super) fn rate_limited_delay(&self, item: &T) -> Duration {
        self.shared().limiter.when(item)
    }

    /// Counts a delayed re-add in `workqueue_retries_total`, as client-go's
    /// delaying queue does on every `AddAfter` (not only rate-limited ones);
    /// nothing is counted once the queue is shutting down, because the add
    /// is dropped.
    pub(super) fn count_retry(&self) {
        if let Some(metrics) = &self.shared().metrics
            && !self.is_shutting_down()
        {
            metrics.inc_retries();
        }
    }

    /// Clears the limiter's failure history for `item` (it succeeded). It
    /// does not remove the item from the queue.
    pub fn forget(&self, item: &T) {
        self.shared().limiter.forget(item);
    }

    /// How many times `item` was rate-limited since it was last forgotten.
    #[must_use]
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.shared().limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::{Instant, advance};

    use crate::workqueue::tests::support::soon;
    use crate::workqueue::{
        BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, Queue,
    };

    fn exp_queue() -> Queue<&'static str> {
        Queue::builder()
            .rate_limiter(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(100),
                Duration::from_secs(1),
            ))
            .build()
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_waits_the_limiters_delay_and_backs_off() {
        let q = exp_queue();
        let mut delays = Vec::new();
        for _ in 0..6 {
            let start = Instant::now();
            q.add_rate_limited("k");
            let item = soon(q.get()).await.unwrap();
            delays.push(start.elapsed().as_millis());
            q.done(&item);
        }
        assert_eq!(delays, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(q.num_requeues(&"k"), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn forget_resets_the_backoff_of_that_item_only() {
        let q = exp_queue();
        q.add_rate_limited("a");
        q.add_rate_limited("a");
        q.add_rate_limited("b");
        q.forget(&"a");
        assert_eq!(q.num_requeues(&"a"), 0);
        assert_eq!(q.num_requeues(&"b"), 1);
        advance(Duration::from_millis(100)).await;
        assert_eq!(q.len(), 2, "forget does not remove a pending item");
    }

    #[tokio::test(start_paused = true)]
    async fn default_limiter_is_the_controller_default() {
        let q: Queue<u32> = Queue::new();
        q.add_rate_limited(1);
        assert_eq!(q.delayed(), 1);
        advance(Duration::from_millis(5)).await;
        assert_eq!(q.len(), 1, "first retry after 5 ms");
    }

    #[tokio::test(start_paused = true)]
    async fn a_custom_max_of_limiter_is_used() {
        let q = Queue::builder()
            .rate_limiter(MaxOfRateLimiter::new(vec![
                Box::new(ItemExponentialFailureRateLimiter::new(
                    Duration::from_millis(1),
                    Duration::from_secs(1),
                )),
                Box::new(BucketRateLimiter::new(1.0, 1).unwrap()),
            ]))
            .build();
        q.add_rate_limited(1);
        q.add_rate_limited(2);
        advance(Duration::from_millis(1)).await;
        assert_eq!(q.len(), 1, "the bucket had one token");
        advance(Duration::from_secs(1)).await;
        assert_eq!(q.len(), 2);
    }
}
