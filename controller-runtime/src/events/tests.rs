use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use kube_core::Status;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::writer::truncate;
use super::*;

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Create {
        name: String,
        namespace: String,
        count: Option<i32>,
    },
    Series {
        name: String,
        count: i32,
    },
}

#[derive(Clone, Default)]
struct FakeSink {
    calls: Arc<Mutex<Vec<Call>>>,
    events: Arc<Mutex<Vec<Event>>>,
    /// When set, each write waits for a permit.
    gate: Option<Arc<Semaphore>>,
    /// Series updates answer 404 (the Event expired on the server).
    series_not_found: Arc<Mutex<bool>>,
}

impl FakeSink {
    async fn pass_gate(&self) {
        if let Some(gate) = &self.gate {
            gate.acquire().await.unwrap().forget();
        }
    }
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().clone()
    }
}

impl EventSink for FakeSink {
    fn create(&self, event: Event) -> BoxFuture<'_, Result<Event, EventsError>> {
        Box::pin(async move {
            self.pass_gate().await;
            self.calls.lock().push(Call::Create {
                name: event.metadata.name.clone().unwrap(),
                namespace: event.metadata.namespace.clone().unwrap(),
                count: event.series.as_ref().map(|s| s.count),
            });
            self.events.lock().push(event.clone());
            Ok(event)
        })
    }
    fn update_series<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        series: EventSeries,
    ) -> BoxFuture<'a, Result<Event, EventsError>> {
        Box::pin(async move {
            self.pass_gate().await;
            if *self.series_not_found.lock() {
                return Err(EventsError::Api {
                    op: "patch",
                    namespace: namespace.into(),
                    name: name.into(),
                    source: kube_client::Error::Api(
                        Status::failure("gone", "NotFound").with_code(404).boxed(),
                    ),
                });
            }
            self.calls.lock().push(Call::Series {
                name: name.into(),
                count: series.count,
            });
            let mut events = self.events.lock();
            let ev = events
                .iter_mut()
                .find(|e| e.metadata.name.as_deref() == Some(name))
                .unwrap();
            ev.series = Some(series);
            Ok(ev.clone())
        })
    }
}

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.namespace = Some("ns".into());
    c.metadata.uid = Some(format!("uid-{name}"));
    c
}

async fn wait_until(mut f: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("condition not reached");
}

fn start(
    sink: &FakeSink,
    config: RecorderConfig,
) -> (
    EventRecorder,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let (rec, writer) = EventRecorder::new(sink.clone(), config);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(writer.run(cancel.clone()));
    (rec, cancel, task)
}

#[tokio::test(start_paused = true)]
async fn first_event_is_created_with_all_fields() {
    let sink = FakeSink::default();
    let (rec, cancel, task) = start(&sink, RecorderConfig::new("example.com/op", "pod-a"));
    assert!(rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Warning, "FailedSync", "Reconcile").note("boom")
    ));
    wait_until(|| !sink.events.lock().is_empty()).await;
    let ev = sink.events.lock()[0].clone();
    assert_eq!(ev.metadata.namespace.as_deref(), Some("ns"));
    assert!(ev.metadata.name.as_deref().unwrap().starts_with("a."));
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert_eq!(ev.reason.as_deref(), Some("FailedSync"));
    assert_eq!(ev.action.as_deref(), Some("Reconcile"));
    assert_eq!(ev.note.as_deref(), Some("boom"));
    assert_eq!(ev.reporting_controller.as_deref(), Some("example.com/op"));
    assert_eq!(ev.reporting_instance.as_deref(), Some("pod-a"));
    let regarding = ev.regarding.unwrap();
    assert_eq!(
        (
            regarding.kind.as_deref(),
            regarding.name.as_deref(),
            regarding.uid.as_deref()
        ),
        (Some("ConfigMap"), Some("a"), Some("uid-a"))
    );
    assert!(ev.event_time.is_some());
    assert!(ev.series.is_none());
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn repeats_fold_into_a_series_on_the_same_event() {
    let sink = FakeSink::default();
    let (rec, cancel, task) = start(&sink, RecorderConfig::new("op", "i"));
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
    );
    wait_until(|| sink.calls().len() == 1).await;
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        rec.publish(
            &cm("a"),
            EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
        );
    }
    wait_until(|| sink.calls().len() == 3).await;
    let calls = sink.calls();
    let Call::Create { name, .. } = &calls[0] else {
        panic!("{calls:?}")
    };
    assert_eq!(
        calls[1],
        Call::Series {
            name: name.clone(),
            count: 2
        }
    );
    assert_eq!(
        calls[2],
        Call::Series {
            name: name.clone(),
            count: 3
        }
    );
    assert_eq!(sink.events.lock().len(), 1);
    assert_eq!(sink.events.lock()[0].series.as_ref().unwrap().count, 3);
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn events_differing_in_any_key_field_are_separate() {
    let sink = FakeSink::default();
    let (rec, cancel, task) = start(&sink, RecorderConfig::new("op", "i"));
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
    );
    rec.publish(
        &cm("b"),
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
    );
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Warning, "Synced", "Reconcile").note("ok"),
    );
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Other", "Reconcile").note("ok"),
    );
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Synced", "Delete").note("ok"),
    );
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("different note"),
    );
    wait_until(|| sink.calls().len() == 6).await;
    assert!(
        sink.calls()
            .iter()
            .all(|c| matches!(c, Call::Create { count: None, .. }))
    );
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn repeats_queued_together_are_written_once() {
    let sink = FakeSink::default();
    let (rec, writer) = EventRecorder::new(sink.clone(), RecorderConfig::new("op", "i"));
    for _ in 0..5 {
        rec.publish(
            &cm("a"),
            EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
        );
    }
    let cancel = CancellationToken::new();
    let task = tokio::spawn(writer.run(cancel.clone()));
    wait_until(|| !sink.calls().is_empty()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(sink.calls().len(), 1, "{:?}", sink.calls());
    assert!(matches!(
        sink.calls()[0],
        Call::Create { count: Some(5), .. }
    ));
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn after_the_series_window_a_repeat_creates_a_new_event() {
    let sink = FakeSink::default();
    let config = RecorderConfig::new("op", "i").series_window(Duration::from_secs(60));
    let (rec, cancel, task) = start(&sink, config);
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
    );
    wait_until(|| sink.calls().len() == 1).await;
    tokio::time::sleep(Duration::from_secs(61)).await;
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
    );
    wait_until(|| sink.calls().len() == 2).await;
    assert!(matches!(sink.calls()[1], Call::Create { count: None, .. }));
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn series_on_a_vanished_event_is_written_as_a_new_event() {
    let sink = FakeSink::default();
    let (rec, cancel, task) = start(&sink, RecorderConfig::new("op", "i"));
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
    );
    wait_until(|| sink.calls().len() == 1).await;
    *sink.series_not_found.lock() = true;
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
    );
    wait_until(|| sink.calls().len() == 2).await;
    assert!(matches!(
        sink.calls()[1],
        Call::Create { count: Some(2), .. }
    ));
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn full_queue_drops_and_counts_without_blocking() {
    let gate = Arc::new(Semaphore::new(0));
    let sink = FakeSink {
        gate: Some(gate.clone()),
        ..Default::default()
    };
    let (rec, cancel, task) = start(&sink, RecorderConfig::new("op", "i").queue_capacity(3));
    // The writer takes the first event and blocks on the sink.
    assert!(rec.publish(
        &cm("first"),
        EventInfo::new(EventType::Normal, "R", "A").note("n")
    ));
    tokio::time::sleep(Duration::from_millis(10)).await;
    let before = tokio::time::Instant::now();
    let accepted: usize = (0..10)
        .map(|i| {
            rec.publish(
                &cm(&format!("c{i}")),
                EventInfo::new(EventType::Normal, "R", "A").note("n"),
            )
        })
        .filter(|ok| *ok)
        .count();
    assert_eq!(before.elapsed(), Duration::ZERO, "publish never waits");
    assert_eq!(accepted, 3);
    assert_eq!(rec.dropped(), 7);
    gate.add_permits(100);
    wait_until(|| sink.calls().len() == 4).await;
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn queued_events_are_written_when_cancelled_and_publish_after_stop_counts_a_drop() {
    let sink = FakeSink::default();
    let (rec, writer) = EventRecorder::new(sink.clone(), RecorderConfig::new("op", "i"));
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "R", "A").note("n"),
    );
    let cancel = CancellationToken::new();
    cancel.cancel();
    writer.run(cancel).await;
    assert_eq!(sink.calls().len(), 1);
    assert!(!rec.publish(
        &cm("b"),
        EventInfo::new(EventType::Normal, "R", "A").note("n")
    ));
    assert_eq!(rec.dropped(), 1);
}

#[tokio::test(start_paused = true)]
async fn cache_capacity_forgets_the_least_recently_seen() {
    let sink = FakeSink::default();
    let (rec, cancel, task) = start(&sink, RecorderConfig::new("op", "i").cache_capacity(2));
    for name in ["a", "b", "c"] {
        rec.publish(
            &cm(name),
            EventInfo::new(EventType::Normal, "R", "A").note("n"),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    wait_until(|| sink.calls().len() == 3).await;
    // "a" was forgotten: a repeat creates a new Event; "c" is still folded.
    rec.publish(
        &cm("a"),
        EventInfo::new(EventType::Normal, "R", "A").note("n"),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    rec.publish(
        &cm("c"),
        EventInfo::new(EventType::Normal, "R", "A").note("n"),
    );
    wait_until(|| sink.calls().len() == 5).await;
    let calls = sink.calls();
    assert!(
        matches!(calls[3], Call::Create { count: None, .. }),
        "{calls:?}"
    );
    assert!(
        matches!(calls[4], Call::Series { count: 2, .. }),
        "{calls:?}"
    );
    cancel.cancel();
    task.await.unwrap();
}

#[test]
fn notes_are_truncated_on_char_boundaries() {
    assert_eq!(truncate("hello", 10), "hello");
    assert_eq!(truncate("héllo", 2), "h");
    assert_eq!(truncate(&"x".repeat(2000), 1024).len(), 1024);
}

#[test]
fn cluster_scoped_objects_get_default_namespace() {
    let (rec, writer) = EventRecorder::new(FakeSink::default(), RecorderConfig::new("op", "i"));
    let mut ns = k8s_openapi::api::core::v1::Namespace::default();
    ns.metadata.name = Some("team".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sink = writer.sink_for_tests();
    rec.publish(&ns, EventInfo::new(EventType::Normal, "R", "A").note("n"));
    let cancel = CancellationToken::new();
    cancel.cancel();
    rt.block_on(writer.run(cancel));
    assert!(matches!(&sink.calls()[0], Call::Create { namespace, .. } if namespace == "default"));
}

mod props {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// However publishes of a few distinct events interleave (and however
        /// they are batched), each distinct event is created once and its final
        /// series count is the number of times it was published.
        #[test]
        fn every_publish_is_counted_in_exactly_one_series(
            seq in proptest::collection::vec((0usize..3, 0usize..2, any::<bool>()), 1..60)
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
            rt.block_on(async move {
                let sink = FakeSink::default();
                let (rec, cancel, task) = start(&sink, RecorderConfig::new("op", "i"));
                let mut expected: HashMap<(String, String), i32> = HashMap::new();
                for (obj, reason, pause) in seq {
                    let name = format!("o{obj}");
                    let reason = format!("R{reason}");
                    assert!(rec.publish(&cm(&name), EventInfo::new(EventType::Normal, &reason, "A").note("n")));
                    *expected.entry((name, reason)).or_default() += 1;
                    if pause {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                cancel.cancel();
                task.await.unwrap();
                let events = sink.events.lock().clone();
                assert_eq!(events.len(), expected.len(), "one Event per distinct event");
                for ev in events {
                    let key = (ev.regarding.unwrap().name.unwrap(), ev.reason.unwrap());
                    let count = ev.series.map_or(1, |s| s.count);
                    assert_eq!(count, expected[&key], "{key:?}");
                }
            });
        }
    }
}

#[tokio::test(start_paused = true)]
async fn recorders_for_controllers_report_their_name_and_do_not_fold_together() {
    let sink = FakeSink::default();
    let (rec, cancel, task) = start(&sink, RecorderConfig::new("default-op", "pod-a"));
    let foo = rec.for_controller("foo-controller");
    let bar = rec.for_controller("bar-controller");
    let info = EventInfo::warning("ErrResourceExists", "Adopt")
        .note("not ours")
        .related(&cm("other"));
    assert!(foo.publish(&cm("a"), info.clone()));
    assert!(bar.publish(&cm("a"), info));
    assert!(rec.publish(&cm("a"), EventInfo::normal("Synced", "Reconcile")));
    wait_until(|| sink.events.lock().len() == 3).await;
    let events = sink.events.lock().clone();
    let reporters: Vec<_> = events
        .iter()
        .map(|e| e.reporting_controller.clone().unwrap())
        .collect();
    assert_eq!(
        reporters,
        ["foo-controller", "bar-controller", "default-op"]
    );
    let related = events[0].related.as_ref().unwrap();
    assert_eq!(related.name.as_deref(), Some("other"));
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(events[2].related.is_none());
    cancel.cancel();
    task.await.unwrap();
}
