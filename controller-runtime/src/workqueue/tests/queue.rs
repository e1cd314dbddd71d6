//! Unit tests for the basic queue rules (dirty/processing, len, shutdown)
//! and for priorities, on tokio's paused clock.

use std::time::Duration;

use tokio::time::timeout;

use super::support::soon;
use crate::workqueue::{AddOptions, Priority, Queue};

const SEC: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn items_come_out_in_fifo_order() {
    let q = Queue::new();
    for i in 0..5 {
        q.add(i);
    }
    for i in 0..5 {
        assert_eq!(soon(q.get()).await, Some(i));
    }
}

#[tokio::test(start_paused = true)]
async fn add_of_a_waiting_item_does_nothing() {
    let q = Queue::new();
    q.add("a");
    q.add("b");
    q.add("a");
    assert_eq!(q.len(), 2);
    assert_eq!(soon(q.get()).await, Some("a"), "a keeps its place");
    assert_eq!(soon(q.get()).await, Some("b"));
    assert_eq!(q.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn add_of_a_processing_item_marks_it_dirty_without_queueing() {
    let q = Queue::new();
    q.add("a");
    let a = soon(q.get()).await.unwrap();
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 0, "not queued while processing");
    assert!(
        timeout(SEC, q.get()).await.is_err(),
        "a second worker must not get an item being processed"
    );
    q.done(&a);
    assert_eq!(q.len(), 1, "queued again once, on done");
    assert_eq!(soon(q.get()).await, Some("a"));
    q.done(&"a");
    assert_eq!(q.len(), 0);
    assert_eq!(q.processing(), 0);
}

#[tokio::test(start_paused = true)]
async fn done_without_readd_forgets_the_item() {
    let q = Queue::new();
    q.add(1);
    let item = soon(q.get()).await.unwrap();
    assert_eq!(q.processing(), 1);
    q.done(&item);
    assert_eq!(q.processing(), 0);
    assert_eq!(q.len(), 0);
    q.done(&item); // not processing: nothing happens
    q.done(&42);
    assert_eq!(q.len(), 0);
    q.add(1);
    assert_eq!(q.len(), 1, "a finished item can be added again");
}

#[tokio::test(start_paused = true)]
async fn len_counts_waiting_items_only() {
    let q = Queue::new();
    q.add(1);
    q.add(2);
    q.add_after(3, SEC);
    assert_eq!(q.len(), 2);
    let _one = soon(q.get()).await.unwrap();
    assert_eq!(q.len(), 1, "processing items are not counted");
    assert!(!q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn get_waits_for_an_add() {
    let q = Queue::new();
    let worker = tokio::spawn({
        let q = q.clone();
        async move { soon(q.get()).await }
    });
    tokio::time::sleep(SEC).await;
    assert!(!worker.is_finished());
    q.add(7);
    assert_eq!(soon(worker).await.unwrap(), Some(7));
}

#[tokio::test(start_paused = true)]
async fn shut_down_ignores_adds_and_drains_ready_items() {
    let q = Queue::new();
    q.add(1);
    q.add(2);
    assert!(!q.is_shutting_down());
    q.shut_down();
    assert!(q.is_shutting_down());
    q.add(3);
    assert_eq!(q.len(), 2);
    assert_eq!(soon(q.get()).await, Some(1));
    assert_eq!(soon(q.get()).await, Some(2));
    assert_eq!(soon(q.get()).await, None);
    assert_eq!(soon(q.get()).await, None);
}

#[tokio::test(start_paused = true)]
async fn shut_down_wakes_every_waiting_worker() {
    let q: Queue<u8> = Queue::new();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { soon(q.get()).await })
        })
        .collect();
    tokio::task::yield_now().await;
    q.shut_down();
    for w in workers {
        assert_eq!(timeout(SEC, w).await.unwrap().unwrap(), None);
    }
}

#[tokio::test(start_paused = true)]
async fn item_dirty_at_shutdown_is_still_handed_out_after_done() {
    let q = Queue::new();
    q.add(1);
    let item = soon(q.get()).await.unwrap();
    q.add(1);
    q.shut_down();
    q.done(&item);
    assert_eq!(soon(q.get()).await, Some(1), "the add came before shutdown");
    q.done(&1);
    assert_eq!(soon(q.get()).await, None);
}

#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_processing_items() {
    let q = Queue::new();
    q.add(1);
    let item = soon(q.get()).await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    tokio::time::sleep(10 * SEC).await;
    assert!(!drain.is_finished(), "item 1 is still being processed");
    assert!(q.is_shutting_down());
    q.done(&item);
    timeout(SEC, drain).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_returns_at_once_when_idle() {
    let q: Queue<u8> = Queue::new();
    timeout(SEC, q.shut_down_with_drain()).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn clones_share_one_queue() {
    let q = Queue::new();
    let other = q.clone();
    q.add(1);
    assert_eq!(other.get().await, Some(1));
    assert_eq!(q.processing(), 1);
}

#[tokio::test(start_paused = true)]
async fn get_is_cancel_safe() {
    let q = Queue::new();
    assert!(timeout(SEC, q.get()).await.is_err());
    q.add(1);
    assert_eq!(soon(q.get()).await, Some(1));
}

/// A `get` that was woken for an item and then cancelled before it took the
/// item must not swallow the wake-up: another waiting `get` gets the item.
#[tokio::test(start_paused = true)]
async fn a_woken_get_cancelled_before_taking_passes_the_item_on() {
    use std::task::Poll;
    let q = Queue::new();
    let mut first = Box::pin(q.get());
    let mut second = Box::pin(q.get());
    assert_eq!(futures::poll!(first.as_mut()), Poll::Pending);
    assert_eq!(futures::poll!(second.as_mut()), Poll::Pending);
    q.add(1); // wakes one waiter: the first
    drop(first); // cancelled after its wake-up, before it ran
    assert_eq!(soon(second).await, Some(1));
    assert_eq!(q.processing(), 1);
}

#[tokio::test(start_paused = true)]
async fn ready_items_are_served_by_priority_then_fifo() {
    let q = Queue::new();
    q.add_with("low-1", AddOptions::new().priority(Priority::LOW));
    q.add("normal-1");
    q.add_with("high-1", AddOptions::new().priority(Priority::HIGH));
    q.add_with("low-2", AddOptions::new().priority(Priority::LOW));
    q.add("normal-2");
    q.add_with("high-2", AddOptions::new().priority(Priority::HIGH));
    let mut order = Vec::new();
    while !q.is_empty() {
        order.push(soon(q.get()).await.unwrap());
    }
    assert_eq!(
        order,
        ["high-1", "high-2", "normal-1", "normal-2", "low-1", "low-2"]
    );
}

#[tokio::test(start_paused = true)]
async fn readd_keeps_the_highest_priority() {
    let q = Queue::new();
    q.add("a");
    q.add("b");
    q.add_with("b", AddOptions::new().priority(Priority::LOW));
    assert_eq!(
        soon(q.get()).await,
        Some("a"),
        "a lower re-add does not demote b"
    );
    q.add_with("c", AddOptions::new().priority(Priority::LOW));
    q.add("d");
    q.add("c");
    assert_eq!(q.len(), 3);
    assert_eq!(soon(q.get()).await, Some("b"));
    assert_eq!(
        soon(q.get()).await,
        Some("d"),
        "c was raised: it joins the tail"
    );
    assert_eq!(soon(q.get()).await, Some("c"));
    assert_eq!(q.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn readd_keeps_the_earliest_time_and_the_highest_priority() {
    let q = Queue::new();
    q.add_with(
        "x",
        AddOptions::new().priority(Priority::HIGH).after(10 * SEC),
    );
    q.add_with("x", AddOptions::new().priority(Priority::LOW).after(SEC));
    q.add_with("y", AddOptions::new().priority(Priority::NORMAL));
    tokio::time::advance(SEC).await;
    assert_eq!(q.len(), 2);
    assert_eq!(
        soon(q.get()).await,
        Some("x"),
        "x: high priority, ready at 1 s"
    );
}

#[tokio::test(start_paused = true)]
async fn low_priority_resyncs_do_not_starve_real_changes() {
    let q = Queue::new();
    for i in 0..1000 {
        q.add_with(i, AddOptions::new().priority(Priority::for_event(true)));
    }
    q.add_with(5000, AddOptions::new().priority(Priority::for_event(false)));
    assert_eq!(soon(q.get()).await, Some(5000));
}

#[tokio::test(start_paused = true)]
async fn priority_item_added_while_processing_keeps_its_priority() {
    let q = Queue::new();
    q.add("a");
    let a = soon(q.get()).await.unwrap();
    q.add_with("a", AddOptions::new().priority(Priority::HIGH));
    q.add("b");
    q.done(&a);
    assert_eq!(soon(q.get()).await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn add_with_rate_limited_waits_the_longer_delay() {
    let q = Queue::new(); // default limiter: 5 ms first
    q.add_with("a", AddOptions::new().after(SEC).rate_limited());
    q.add_with("b", AddOptions::new().rate_limited());
    assert_eq!(q.num_requeues(&"a"), 1);
    tokio::time::advance(Duration::from_millis(5)).await;
    assert_eq!(q.len(), 1);
    tokio::time::advance(SEC).await;
    assert_eq!(q.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_get_does_not_swallow_the_wake_up_of_another() {
    let q = Queue::new();
    let waiting = tokio::spawn({
        let q = q.clone();
        async move { soon(q.get()).await }
    });
    // A second get gives up while both wait.
    assert!(timeout(SEC, q.get()).await.is_err());
    q.add(1);
    assert_eq!(timeout(SEC, waiting).await.unwrap().unwrap(), Some(1));
    // The queue does not think a waiter is still there: a later add and
    // get work as usual.
    q.add(2);
    assert_eq!(timeout(SEC, q.get()).await.unwrap(), Some(2));
}

#[tokio::test(start_paused = true)]
async fn try_get_takes_only_ready_items() {
    let q = Queue::new();
    q.add_after(1, SEC);
    assert_eq!(q.try_get(), None);
    tokio::time::advance(SEC).await;
    assert_eq!(q.try_get(), Some(1));
    assert_eq!(q.try_get(), None, "1 is being processed");
    q.add(1);
    q.done(&1);
    assert_eq!(q.try_get(), Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_delay_too_long_for_the_clock_waits_thirty_years() {
    const YEAR: Duration = Duration::from_secs(60 * 60 * 24 * 365);
    let q = Queue::new();
    q.add_after("x", Duration::MAX);
    tokio::time::advance(29 * YEAR).await;
    assert!(
        timeout(SEC, q.get()).await.is_err(),
        "not handed out before 30 years"
    );
    tokio::time::advance(YEAR).await;
    assert_eq!(soon(q.get()).await, Some("x"));
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_get_stops_counting_as_a_waiter() {
    let q = std::sync::Arc::new(Queue::<u32>::new());
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    while q.waiters() == 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(q.waiters(), 1);
    getter.abort();
    assert!(getter.await.is_err(), "cancelled");
    assert_eq!(q.waiters(), 0);
}

#[test]
fn a_queue_shows_its_name() {
    let q: Queue<u32> = Queue::builder().name("pods").build();
    assert_eq!(q.name(), "pods");
    assert!(format!("{q:?}").contains("\"pods\""), "{q:?}");
    assert_eq!(Queue::<u32>::new().name(), "");
}

#[test]
fn add_options_report_their_priority() {
    assert_eq!(AddOptions::new().get_priority(), Priority::NORMAL);
    assert_eq!(
        AddOptions::new().priority(Priority::HIGH).get_priority(),
        Priority::HIGH
    );
}

#[tokio::test(start_paused = true)]
async fn done_wakes_a_sleeping_get_for_an_item_re_added_while_processing() {
    let q = std::sync::Arc::new(Queue::new());
    q.add("x");
    let x = soon(q.get()).await.unwrap();
    q.add("x"); // dirty while processing: not ready until done
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    while q.waiters() == 0 {
        tokio::task::yield_now().await;
    }
    q.done(&x);
    assert_eq!(soon(getter).await.unwrap(), Some("x"));
}
