//! Unit tests of the processor rules: order per handler, isolation of slow
//! and panicking handlers, late-handler replay, resync due logic, removal.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;
use parking_lot::Mutex;

use super::*;
use crate::handler::{ResourceEventHandler, handler_fn};
use crate::key::ObjectOrTombstone;

fn cm(name: &str, rv: &str) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    })
}

fn add(name: &str) -> Notification<ConfigMap> {
    Notification::Add {
        obj: cm(name, "1"),
        is_in_initial_list: false,
    }
}

/// Records every call as a string, e.g. "add:a:false", "update:a", "delete:a".
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl Recorder {
    fn seen(&self) -> Vec<String> {
        self.seen.lock().clone()
    }
    fn count(&self) -> usize {
        self.seen.lock().len()
    }
}

fn name(obj: &ConfigMap) -> String {
    obj.metadata.name.clone().unwrap_or_default()
}

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: Arc<ConfigMap>, initial: bool) {
        self.seen
            .lock()
            .push(format!("add:{}:{initial}", name(&obj)));
    }
    fn on_update(&self, _old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        self.seen.lock().push(format!("update:{}", name(&new)));
    }
    fn on_delete(&self, obj: ObjectOrTombstone<ConfigMap>) {
        self.seen
            .lock()
            .push(format!("delete:{}", name(obj.object())));
    }
}

/// Polls `cond` until it holds or `limit` passes (tokio time).
async fn wait_until(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while !cond() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    true
}

#[tokio::test(start_paused = true)]
async fn notifications_arrive_in_order_per_handler() {
    let processor = SharedProcessor::<ConfigMap>::default();
    let rec = Arc::new(Recorder::default());
    processor.add_listener(rec.clone(), None, []);
    processor.run();
    let mut expected = Vec::new();
    for i in 0..3000 {
        let n = format!("cm{i}");
        match i % 3 {
            0 => processor.distribute(add(&n), false),
            1 => processor.distribute(
                Notification::Update {
                    old: cm(&n, "1"),
                    new: cm(&n, "2"),
                },
                false,
            ),
            _ => processor.distribute(
                Notification::Delete(ObjectOrTombstone::Object(cm(&n, "2"))),
                false,
            ),
        }
        expected.push(match i % 3 {
            0 => format!("add:{n}:false"),
            1 => format!("update:{n}"),
            _ => format!("delete:{n}"),
        });
    }
    assert!(wait_until(Duration::from_secs(10), || rec.count() == 3000).await);
    assert_eq!(rec.seen(), expected);
}

#[tokio::test(start_paused = true)]
async fn listeners_added_before_run_buffer_until_run() {
    let processor = SharedProcessor::<ConfigMap>::default();
    let rec = Arc::new(Recorder::default());
    let (_, stats) = processor.add_listener(rec.clone(), None, []);
    processor.distribute(add("a"), false);
    tokio::task::yield_now().await;
    assert_eq!(rec.count(), 0);
    assert_eq!(stats.pending(), 1);
    processor.run();
    assert!(wait_until(Duration::from_secs(5), || rec.count() == 1).await);
    assert_eq!(stats.pending(), 0);
}

// Real clock: the blocked handler sits on the blocking pool, which freezes a
// paused clock, so a broken rule would hang instead of failing.
#[tokio::test]
async fn a_blocked_handler_does_not_delay_others_or_the_distributor() {
    let processor = SharedProcessor::<ConfigMap>::default();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let slow_calls = Arc::new(AtomicUsize::new(0));
    let slow_calls2 = slow_calls.clone();
    let slow = handler_fn::<ConfigMap>().on_add(move |_, _| {
        slow_calls2.fetch_add(1, Ordering::SeqCst);
        // Block this handler's thread until the test releases it.
        let _ = release_rx.lock().recv();
    });
    let (_, slow_stats) = processor.add_listener(Arc::new(slow), None, []);
    let fast = Arc::new(Recorder::default());
    processor.add_listener(fast.clone(), None, []);
    processor.run();

    for i in 0..500 {
        processor.distribute(add(&format!("cm{i}")), false);
    }
    // distribute returned for all 500 although the slow handler is stuck on #1.
    assert!(wait_until(Duration::from_secs(10), || fast.count() == 500).await);
    assert_eq!(slow_calls.load(Ordering::SeqCst), 1);
    assert_eq!(slow_stats.pending(), 500);

    for _ in 0..500 {
        release_tx.send(()).unwrap();
    }
    assert!(wait_until(Duration::from_secs(10), || slow_stats.pending() == 0).await);
    assert_eq!(slow_calls.load(Ordering::SeqCst), 500);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_goes_on_with_the_next_notification() {
    let processor = SharedProcessor::<ConfigMap>::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let panicky = handler_fn::<ConfigMap>().on_add(move |obj, _| {
        let n = name(&obj);
        if n == "boom" {
            panic!("handler failure on {n}");
        }
        seen2.lock().push(n);
    });
    let (_, stats) = processor.add_listener(Arc::new(panicky), None, []);
    let other = Arc::new(Recorder::default());
    processor.add_listener(other.clone(), None, []);
    processor.run();
    for n in ["a", "boom", "b", "boom", "c"] {
        processor.distribute(add(n), false);
    }
    assert!(wait_until(Duration::from_secs(5), || stats.delivered() == 5).await);
    assert_eq!(*seen.lock(), vec!["a", "b", "c"]);
    assert_eq!(stats.panics(), 2);
    assert_eq!(stats.pending(), 0);
    assert!(wait_until(Duration::from_secs(5), || other.count() == 5).await);
}

#[tokio::test(start_paused = true)]
async fn a_late_listener_gets_the_replay_first_and_tracks_it() {
    let processor = SharedProcessor::<ConfigMap>::default();
    processor.run();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let rec = Arc::new(Recorder::default());
    let rec2 = rec.clone();
    // Blocks before recording the first call so the test sees the count > 0.
    let gated = handler_fn::<ConfigMap>()
        .on_add(move |obj, initial| {
            let _ = release_rx.lock().recv();
            rec2.on_add(obj, initial);
        })
        .on_update({
            let rec = rec.clone();
            move |o, n| rec.on_update(o, n)
        });
    let (_, stats) = processor.add_listener(Arc::new(gated), None, [cm("x", "1"), cm("y", "1")]);
    assert_eq!(stats.initial_pending(), 2);
    processor.distribute(
        Notification::Update {
            old: cm("x", "1"),
            new: cm("x", "2"),
        },
        false,
    );
    assert_eq!(stats.pending(), 3);
    release_tx.send(()).unwrap();
    release_tx.send(()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || rec.count() == 3).await);
    assert_eq!(stats.initial_pending(), 0);
    assert_eq!(rec.seen(), vec!["add:x:true", "add:y:true", "update:x"]);
}

#[tokio::test(start_paused = true)]
async fn initial_list_adds_are_tracked_for_listeners_added_before_start() {
    let processor = SharedProcessor::<ConfigMap>::default();
    let (_, stats) = processor.add_listener(Arc::new(Recorder::default()), None, []);
    processor.distribute(
        Notification::Add {
            obj: cm("a", "1"),
            is_in_initial_list: true,
        },
        false,
    );
    processor.distribute(add("b"), false);
    assert_eq!(stats.initial_pending(), 1);
    assert_eq!(stats.pending(), 2);
    processor.run();
    assert!(wait_until(Duration::from_secs(5), || stats.pending() == 0).await);
    assert_eq!(stats.initial_pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn resync_goes_only_to_listeners_whose_period_is_due() {
    let processor = SharedProcessor::<ConfigMap>::default();
    let every_1s = Arc::new(Recorder::default());
    let every_3s = Arc::new(Recorder::default());
    let never = Arc::new(Recorder::default());
    processor.add_listener(every_1s.clone(), Some(Duration::from_secs(1)), []);
    processor.add_listener(every_3s.clone(), Some(Duration::from_secs(3)), []);
    processor.add_listener(never.clone(), None, []);
    processor.run();
    let resync = || Notification::Update {
        old: cm("a", "1"),
        new: cm("a", "1"),
    };

    // Nothing is due at registration time.
    assert!(!processor.should_resync());
    let mut due_at = Vec::new();
    for second in 1..=6 {
        tokio::time::advance(Duration::from_secs(1)).await;
        if processor.should_resync() {
            due_at.push(second);
            processor.distribute(resync(), true);
        }
    }
    assert_eq!(due_at, vec![1, 2, 3, 4, 5, 6]);
    // A real (non-sync) change still reaches everybody.
    processor.distribute(add("b"), false);
    assert!(wait_until(Duration::from_secs(5), || every_1s.count() == 7).await);
    assert!(wait_until(Duration::from_secs(5), || every_3s.count() == 3).await);
    assert!(wait_until(Duration::from_secs(5), || never.count() == 1).await);
    assert_eq!(never.seen(), vec!["add:b:false"]);
}

#[tokio::test(start_paused = true)]
async fn should_resync_is_false_without_resyncing_listeners() {
    let processor = SharedProcessor::<ConfigMap>::default();
    processor.add_listener(Arc::new(Recorder::default()), None, []);
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert!(!processor.should_resync());
}

#[tokio::test(start_paused = true)]
async fn a_removed_listener_receives_nothing_more() {
    let processor = SharedProcessor::<ConfigMap>::default();
    processor.run();
    let rec = Arc::new(Recorder::default());
    let other = Arc::new(Recorder::default());
    let (id, stats) = processor.add_listener(rec.clone(), None, []);
    processor.add_listener(other.clone(), None, []);
    processor.distribute(add("a"), false);
    assert!(wait_until(Duration::from_secs(5), || rec.count() == 1).await);
    assert!(processor.remove_listener(id));
    assert!(!processor.remove_listener(id));
    assert!(stats.is_removed());
    processor.distribute(add("b"), false);
    assert!(wait_until(Duration::from_secs(5), || other.count() == 2).await);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(rec.seen(), vec!["add:a:false"]);
    assert_eq!(processor.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_observer_sees_pending_counts_rise_and_fall() {
    let last = Arc::new(Mutex::new(Vec::<(ListenerId, usize)>::new()));
    let last2 = last.clone();
    let processor = SharedProcessor::<ConfigMap>::new(Some(Arc::new(move |id, n| {
        last2.lock().push((id, n));
    })));
    let (id, stats) = processor.add_listener(Arc::new(Recorder::default()), None, []);
    processor.distribute(add("a"), false);
    processor.distribute(add("b"), false);
    assert_eq!(last.lock().last(), Some(&(id, 1)));
    processor.run();
    assert!(wait_until(Duration::from_secs(5), || stats.pending() == 0).await);
    assert!(
        wait_until(Duration::from_secs(5), || last.lock().last()
            == Some(&(id, 0)))
        .await
    );
}

/// A listener added to a stopped processor (an informer that is shutting
/// down) must not be left waiting forever: it is reported removed at once
/// and nothing is queued or kept for it.
#[tokio::test(start_paused = true)]
async fn a_listener_added_after_stop_is_removed_at_once() {
    let processor = SharedProcessor::<ConfigMap>::default();
    processor.run();
    processor.stop();
    let rec = Arc::new(Recorder::default());
    let (_, stats) = processor.add_listener(rec.clone(), None, [cm("a", "1"), cm("b", "1")]);
    assert!(stats.is_removed(), "a stopped processor takes no listener");
    assert_eq!(stats.initial_pending(), 0, "no replay is pending");
    assert_eq!(processor.len(), 0);
}

#[test]
fn panic_messages_are_extracted() {
    assert_eq!(panic_message(&"static"), "static");
    assert_eq!(panic_message(&String::from("owned")), "owned");
    assert_eq!(panic_message(&42_u8), "non-string panic payload");
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// For any sequence of notifications and any subset on which one
        /// handler panics, that handler gets every other notification in
        /// order, and a second handler gets all of them in order.
        #[test]
        fn order_is_kept_per_handler_whatever_panics(
            plan in proptest::collection::vec((0u8..3, any::<bool>()), 0..200)
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let processor = SharedProcessor::<ConfigMap>::default();
                let good = Arc::new(Recorder::default());
                let survivor = Arc::new(Mutex::new(Vec::<String>::new()));
                let panicky = handler_fn::<ConfigMap>()
                    .on_add({
                        let survivor = survivor.clone();
                        move |obj, _| {
                            let n = name(&obj);
                            assert!(!n.ends_with("!"), "planned panic");
                            survivor.lock().push(format!("add:{n}"));
                        }
                    })
                    .on_update({
                        let survivor = survivor.clone();
                        move |_, new| {
                            let n = name(&new);
                            assert!(!n.ends_with("!"), "planned panic");
                            survivor.lock().push(format!("update:{n}"));
                        }
                    })
                    .on_delete({
                        let survivor = survivor.clone();
                        move |obj| {
                            let n = name(obj.object());
                            assert!(!n.ends_with("!"), "planned panic");
                            survivor.lock().push(format!("delete:{n}"));
                        }
                    });
                let (_, stats) = processor.add_listener(Arc::new(panicky), None, []);
                processor.add_listener(good.clone(), None, []);
                processor.run();

                let mut all = Vec::new();
                let mut expected_survivor = Vec::new();
                for (i, (kind, panics)) in plan.iter().enumerate() {
                    let n = if *panics { format!("o{i}!") } else { format!("o{i}") };
                    let (notification, label) = match kind {
                        0 => (add(&n), format!("add:{n}")),
                        1 => (
                            Notification::Update { old: cm(&n, "1"), new: cm(&n, "2") },
                            format!("update:{n}"),
                        ),
                        _ => (
                            Notification::Delete(ObjectOrTombstone::Object(cm(&n, "2"))),
                            format!("delete:{n}"),
                        ),
                    };
                    processor.distribute(notification, false);
                    all.push(match kind {
                        0 => format!("add:{n}:false"),
                        _ => label.clone(),
                    });
                    if !panics {
                        expected_survivor.push(label);
                    }
                }
                let total = plan.len();
                assert!(wait_until(Duration::from_secs(30), || {
                    good.count() == total && stats.delivered() == total as u64
                }).await);
                assert_eq!(good.seen(), all);
                assert_eq!(*survivor.lock(), expected_survivor);
                assert_eq!(stats.panics(), plan.iter().filter(|(_, p)| *p).count() as u64);
            });
        }
    }
}

mod bookkeeping;
