//! Delayed adds: an item becomes ready only after a given time.
//!
//! [`Queue::add_after`] is client-go's delaying queue on the same pending set
//! as every other add: a zero delay adds now, and of several adds of one
//! waiting item the earliest ready time wins (so does an immediate
//! [`Queue::add`] of a delayed item). Unlike client-go, a delayed add that
//! was overtaken by an earlier add does not fire again later: the item has
//! one pending record, and once it is handed out that record is gone.
//!
//! Time is tokio's clock, so delays follow `tokio::time::pause` and
//! `advance` in tests. No background task is needed: waiting workers sleep
//! until the earliest ready time.

use std::hash::Hash;
use std::time::Duration;

use super::priority::Priority;
use super::queue::Queue;

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Queue<T> {
    /// Adds `item` once `delay` has passed; `Duration::ZERO` adds now. If the
    /// item is already pending, the earlier of its ready times is kept.
    /// Every call counts one retry in `workqueue_retries_total`, as in
    /// client-go.
    ///
    /// ```
    /// use std::time::Duration;
    /// use controller_runtime::workqueue::Queue;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let queue = Queue::new();
    /// queue.add_after("x", Duration::from_secs(10));
    /// queue.add_after("x", Duration::from_secs(2)); // earlier wins
    /// assert_eq!(queue.len(), 0);
    /// tokio::time::advance(Duration::from_secs(2)).await;
    /// assert_eq!(queue.len(), 1);
    /// # }
    /// ```
    pub fn add_after(&self, item: T, delay: Duration) {
        self.count_retry();
        self.insert(item, Priority::NORMAL, delay);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::{Instant, advance};

    use crate::workqueue::Queue;
    use crate::workqueue::tests::support::soon;

    const SEC: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn zero_delay_adds_now() {
        let q = Queue::new();
        q.add_after(1, Duration::ZERO);
        assert_eq!(q.len(), 1);
        assert_eq!(q.delayed(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn item_becomes_ready_exactly_at_its_time() {
        let q = Queue::new();
        q.add_after(1, 5 * SEC);
        assert_eq!(q.delayed(), 1);
        advance(5 * SEC - Duration::from_millis(1)).await;
        assert_eq!(q.len(), 0);
        advance(Duration::from_millis(1)).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.delayed(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn second_add_after_keeps_the_earlier_time() {
        let q = Queue::new();
        q.add_after(1, 2 * SEC);
        q.add_after(1, 10 * SEC);
        advance(2 * SEC).await;
        assert_eq!(q.len(), 1, "the later add must not push the time back");

        let q = Queue::new();
        q.add_after(1, 10 * SEC);
        q.add_after(1, 2 * SEC);
        advance(2 * SEC).await;
        assert_eq!(q.len(), 1, "the earlier add must pull the time forward");
        assert_eq!(q.delayed(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn add_of_a_delayed_item_makes_it_ready_now_once() {
        let q = Queue::new();
        q.add_after(1, 10 * SEC);
        q.add(1);
        assert_eq!(q.len(), 1);
        assert_eq!(q.delayed(), 0);
        let item = soon(q.get()).await.unwrap();
        q.done(&item);
        advance(20 * SEC).await;
        assert_eq!(q.len(), 0, "the overtaken delayed add does not fire later");
    }

    #[tokio::test(start_paused = true)]
    async fn get_sleeps_until_the_earliest_ready_item() {
        let q = Queue::new();
        let start = Instant::now();
        q.add_after("late", 7 * SEC);
        q.add_after("early", 3 * SEC);
        assert_eq!(soon(q.get()).await, Some("early"));
        assert_eq!(start.elapsed(), 3 * SEC);
        assert_eq!(soon(q.get()).await, Some("late"));
        assert_eq!(start.elapsed(), 7 * SEC);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_worker_sees_a_new_earlier_deadline() {
        let q = Queue::new();
        let start = Instant::now();
        q.add_after("late", 100 * SEC);
        let worker = tokio::spawn({
            let q = q.clone();
            async move { soon(q.get()).await }
        });
        tokio::task::yield_now().await;
        q.add_after("early", SEC);
        assert_eq!(soon(worker).await.unwrap(), Some("early"));
        assert_eq!(start.elapsed(), SEC);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_item_arrives_even_if_the_get_timing_it_is_cancelled() {
        let q = Queue::new();
        let start = Instant::now();
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { soon(q.get()).await }
        });
        tokio::task::yield_now().await;
        // This get learns the deadline, then gives up before it.
        let cancelled = tokio::time::timeout(SEC, async {
            q.add_after("x", 5 * SEC);
            soon(q.get()).await
        });
        assert!(cancelled.await.is_err());
        let got = tokio::time::timeout(60 * SEC, waiting).await;
        assert_eq!(got.unwrap().unwrap(), Some("x"));
        assert_eq!(start.elapsed(), 5 * SEC);
    }

    #[tokio::test(start_paused = true)]
    async fn every_idle_worker_gets_items_that_became_ready_together() {
        let q = Queue::new();
        let mut workers = Vec::new();
        for _ in 0..3 {
            let q = q.clone();
            workers.push(tokio::spawn(async move { soon(q.get()).await }));
        }
        tokio::task::yield_now().await;
        for i in 0..3 {
            q.add_after(i, SEC);
        }
        let mut got = Vec::new();
        for w in workers {
            got.push(soon(w).await.unwrap().unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(q.processing(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_while_processing_waits_for_done_and_its_time() {
        let q = Queue::new();
        q.add(1);
        let item = soon(q.get()).await.unwrap();
        q.add_after(1, 5 * SEC);
        advance(6 * SEC).await;
        assert_eq!(q.len(), 0, "not handed out while processing");
        q.done(&item);
        assert_eq!(q.len(), 1, "its time has passed: ready at done");

        let item = soon(q.get()).await.unwrap();
        q.add_after(1, 5 * SEC);
        q.done(&item);
        assert_eq!(q.len(), 0);
        assert_eq!(q.delayed(), 1);
        advance(5 * SEC).await;
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_drops_delayed_items() {
        let q = Queue::new();
        q.add_after(1, SEC);
        q.add(2);
        q.shut_down();
        assert_eq!(q.delayed(), 0);
        q.add_after(3, Duration::ZERO);
        assert_eq!(soon(q.get()).await, Some(2));
        assert_eq!(soon(q.get()).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn huge_delays_do_not_overflow() {
        let q = Queue::new();
        q.add_after(1, Duration::MAX);
        assert_eq!(q.delayed(), 1);
        advance(1000 * SEC).await;
        assert_eq!(q.len(), 0);
    }
}
