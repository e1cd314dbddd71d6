//! The processor's bookkeeping, as its users read it: the pending counts the
//! observer hears (the informer's pending-notifications metric), the
//! listener set and its resync periods, the phase its `Debug` shows, and the
//! end of each listener's task once its processor is gone. Each test here
//! was written against a mutant (`cargo mutants`) the other tests let live.

use super::*;

/// An observer that records every `(listener, pending)` call.
fn recording_observer() -> (PendingObserver, Arc<Mutex<Vec<(ListenerId, usize)>>>) {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&heard);
    let observer: PendingObserver = Arc::new(move |id, n| sink.lock().push((id, n)));
    (observer, heard)
}

/// A late handler's replay is pending the moment it is registered, so the
/// metric must show it at once; an empty replay has nothing to report.
#[tokio::test(start_paused = true)]
async fn the_observer_hears_a_late_listeners_replay_at_registration() {
    let (observer, heard) = recording_observer();
    let processor = SharedProcessor::<ConfigMap>::new(Some(observer));
    processor.run();

    let (empty, stats) = processor.add_listener(Arc::new(Recorder::default()), None, []);
    assert_eq!(stats.pending(), 0);
    assert_eq!(*heard.lock(), vec![], "no replay, nothing to report");
    assert!(processor.remove_listener(empty));
    heard.lock().clear();

    let rec = Arc::new(Recorder::default());
    let (id, stats) = processor.add_listener(
        rec.clone(),
        None,
        [cm("x", "1"), cm("y", "1"), cm("z", "1")],
    );
    assert_eq!(
        heard.lock().first(),
        Some(&(id, 3)),
        "the replay of 3 is reported as pending before it is delivered"
    );
    assert!(wait_until(Duration::from_secs(5), || rec.count() == 3).await);
    assert!(
        wait_until(Duration::from_secs(5), || heard.lock().last()
            == Some(&(id, 0)))
        .await
    );
    assert_eq!(stats.pending(), 0);
}

/// `distribute` reports a listener's backlog when it starts (1 pending) and
/// at every 1024th notification while it grows, not on every push.
#[tokio::test(start_paused = true)]
async fn the_observer_hears_the_first_and_every_1024th_pending_notification() {
    let (observer, heard) = recording_observer();
    let processor = SharedProcessor::<ConfigMap>::new(Some(observer));
    let rec = Arc::new(Recorder::default());
    // Not running yet, so nothing drains while the backlog grows.
    let (id, stats) = processor.add_listener(rec.clone(), None, []);
    for i in 0..2050 {
        processor.distribute(add(&format!("cm{i}")), false);
    }
    assert_eq!(stats.pending(), 2050);
    assert_eq!(*heard.lock(), vec![(id, 1), (id, 1024), (id, 2048)]);

    processor.run();
    assert!(wait_until(Duration::from_secs(10), || rec.count() == 2050).await);
    assert!(
        wait_until(Duration::from_secs(5), || heard.lock().last()
            == Some(&(id, 0)))
        .await
    );
}

#[tokio::test(start_paused = true)]
async fn len_is_empty_and_resync_period_follow_the_listener_set() {
    let processor = SharedProcessor::<ConfigMap>::default();
    assert!(processor.is_empty());
    assert_eq!(processor.len(), 0);

    let three = Duration::from_secs(3);
    let (periodic, _) = processor.add_listener(Arc::new(Recorder::default()), Some(three), []);
    let (plain, _) = processor.add_listener(Arc::new(Recorder::default()), None, []);
    assert!(!processor.is_empty());
    assert_eq!(processor.len(), 2);
    assert_eq!(processor.resync_period(periodic), Some(three));
    assert_eq!(processor.resync_period(plain), None);

    assert!(processor.remove_listener(periodic));
    assert_eq!(processor.resync_period(periodic), None, "removed");
    assert_eq!(processor.len(), 1);
    assert!(!processor.is_empty());
}

/// `Debug` shows the listener count and the phase; a processor stopped
/// before it ran does not start when `run` is called afterwards.
#[tokio::test(start_paused = true)]
async fn debug_shows_the_phase_and_a_stopped_processor_never_runs() {
    let processor = SharedProcessor::<ConfigMap>::default();
    processor.add_listener(Arc::new(Recorder::default()), None, []);
    assert_eq!(
        format!("{processor:?}"),
        "SharedProcessor { listeners: 1, running: false, stopped: false }"
    );
    processor.run();
    assert_eq!(
        format!("{processor:?}"),
        "SharedProcessor { listeners: 1, running: true, stopped: false }"
    );

    let never_ran = SharedProcessor::<ConfigMap>::default();
    never_ran.stop();
    never_ran.run();
    assert_eq!(
        format!("{never_ran:?}"),
        "SharedProcessor { listeners: 0, running: false, stopped: true }"
    );
}

// Real clock: a listener task that never ends keeps the blocking pool busy,
// which would freeze a paused clock instead of failing the wait.
/// A processor dropped without `stop` (its informer dropped) closes every
/// listener's channel; each listener task must then end and release its
/// handler instead of living on.
#[tokio::test]
async fn dropping_the_processor_ends_its_listener_tasks() {
    let processor = SharedProcessor::<ConfigMap>::default();
    let rec = Arc::new(Recorder::default());
    processor.add_listener(rec.clone(), None, []);
    processor.run();
    processor.distribute(add("a"), false);
    assert!(wait_until(Duration::from_secs(5), || rec.count() == 1).await);

    drop(processor);
    assert!(
        wait_until(Duration::from_secs(5), || Arc::strong_count(&rec) == 1).await,
        "the listener task still holds its handler after the processor was dropped"
    );
    assert_eq!(rec.seen(), vec!["add:a:false"]);
}
