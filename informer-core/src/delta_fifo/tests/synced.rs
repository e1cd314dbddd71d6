//! `DeltaFifo::synced`: its waiters wake when `has_synced` turns true (after
//! the last object of the first list was popped and processed), not before,
//! and at once when it already is.

use std::pin::pin;

use futures::FutureExt;

use super::*;

#[tokio::test]
async fn waiters_wake_once_the_last_listed_object_was_processed() {
    let fifo = DeltaFifo::new(None);
    let mut waiter = pin!(fifo.synced());
    assert!(
        waiter.as_mut().now_or_never().is_none(),
        "nothing listed yet"
    );
    fifo.replace(vec![cm("a", "1"), cm("b", "1")], "1");
    assert!(
        waiter.as_mut().now_or_never().is_none(),
        "two objects to pop"
    );
    pop_now(&fifo);
    assert!(
        waiter.as_mut().now_or_never().is_none(),
        "one object to pop"
    );
    // While the last one is processed, the waiters are not told yet.
    let told_during = fifo
        .pop(|_| *fifo.synced.borrow())
        .now_or_never()
        .expect("queued")
        .expect("open");
    assert!(!told_during);
    assert!(fifo.has_synced());
    assert!(
        waiter.as_mut().now_or_never().is_some(),
        "told once processed"
    );
    // Later waiters resolve at once, whatever comes next.
    fifo.add(cm("c", "2"));
    assert!(fifo.synced().now_or_never().is_some());
}

#[tokio::test]
async fn an_empty_first_list_syncs_at_once() {
    let fifo: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    let mut waiter = pin!(fifo.synced());
    assert!(waiter.as_mut().now_or_never().is_none());
    fifo.replace(Vec::new(), "1");
    assert!(waiter.as_mut().now_or_never().is_some());
}

#[tokio::test]
async fn a_paged_first_list_syncs_when_its_last_object_was_popped() {
    let fifo = DeltaFifo::new(None);
    let mut waiter = pin!(fifo.synced());
    fifo.replace_begin();
    fifo.replace_page(vec![cm("a", "1")]);
    pop_now(&fifo);
    // The list is not finished: popping all that came so far is not a sync.
    assert!(waiter.as_mut().now_or_never().is_none());
    fifo.replace_page(vec![cm("b", "1")]);
    fifo.replace_finish("1");
    assert!(waiter.as_mut().now_or_never().is_none());
    pop_now(&fifo);
    assert!(waiter.as_mut().now_or_never().is_some());
}
