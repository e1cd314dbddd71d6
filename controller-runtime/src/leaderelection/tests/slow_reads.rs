//! Leader election when reads take time: a follower must date what it saw
//! from when the read returned, never from when it was sent.

use super::*;

/// The reproduction of the two-leaders bug: the follower's first GET is sent
/// at 1.2 s and answered at 10.2 s with the leader's renewal of 10 s; the
/// leader goes dark at 10.5 s and stops leading at 20 s (renew deadline
/// after its last renewal). Dating that observation at 1.2 s let the
/// follower take over at about 16-17 s, with two leaders until 20 s.
#[tokio::test(start_paused = true)]
async fn a_slow_read_does_not_shorten_the_followers_wait() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let t0 = Instant::now();
    let (_a, lock_a, _ca, mut rxa, ra) = start_leading(&store, "a", &timeline).await;
    tokio::time::sleep_until(t0 + Duration::from_millis(1200)).await;
    let (b, lock_b) = candidate(&store, "b", &timeline);
    lock_b.slow_gets.lock().push_back(Duration::from_secs(9));
    let cb = CancellationToken::new();
    let mut rxb = b.subscribe();
    let rb = spawn(&b, &cb);

    tokio::time::sleep_until(t0 + Duration::from_millis(10_500)).await;
    assert_eq!(
        b.observed_leader().as_deref(),
        Some("a"),
        "the slow read answered"
    );
    lock_a.down.store(true, Ordering::SeqCst);
    assert!(wait_for_leading(&mut rxa, false, Duration::from_secs(15)).await);
    let a_stopped = Instant::now();
    assert_eq!(
        a_stopped - t0,
        Duration::from_secs(20),
        "renew deadline after 10 s"
    );
    assert!(ra.await.unwrap().is_err());

    assert!(wait_for_leading(&mut rxb, true, Duration::from_secs(30)).await);
    let b_started = Instant::now();
    assert_never_two_leaders(&timeline);
    // The lease (15 s) runs from the answer at 10.2 s, not the send at 1.2 s.
    assert!(
        b_started - t0 >= Duration::from_millis(25_200),
        "b started at {:?}, before the lease seen at 10.2 s expired",
        b_started - t0
    );
    // And no later than one retry period (+ jitter) after that.
    assert!(b_started - t0 <= Duration::from_millis(25_200 + 2_400 + 10));
    cb.cancel();
    rb.await.unwrap().unwrap();
}

/// Every attempt's read is slow (3 s, longer than the retry period): the
/// follower still waits a full lease duration from the last answer that
/// showed a change, and the leader, whose renewals are slow too, keeps the
/// lease as long as its writes succeed.
#[tokio::test(start_paused = true)]
async fn slow_reads_on_both_sides_never_give_two_leaders() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (_a, lock_a, ca, _rxa, ra) = start_leading(&store, "a", &timeline).await;
    let (b, lock_b) = candidate(&store, "b", &timeline);
    for lock in [&lock_a, &lock_b] {
        lock.slow_gets.lock().extend([Duration::from_secs(3); 64]);
    }
    let cb = CancellationToken::new();
    let mut rxb = b.subscribe();
    let rb = spawn(&b, &cb);
    assert!(
        !wait_for_leading(&mut rxb, true, Duration::from_secs(60)).await,
        "the leader renews (slowly) and keeps the lease"
    );
    assert_eq!(timeline.lock().len(), 1);
    lock_a.down.store(true, Ordering::SeqCst);
    assert!(ra.await.unwrap().is_err());
    assert!(wait_for_leading(&mut rxb, true, Duration::from_secs(40)).await);
    assert_never_two_leaders(&timeline);
    ca.cancel();
    cb.cancel();
    rb.await.unwrap().unwrap();
}
