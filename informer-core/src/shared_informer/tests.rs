//! Unit tests of the shared informer rules, on tokio's paused clock: delta
//! processing (add vs update, resync only to due handlers, deletes and
//! tombstones), resync periods, start-only settings, and a full run over a
//! scripted lister-watcher (initial list, live events, late handler, stop).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_stream_shim::UnboundedStream;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::delta_fifo::{Delta, DeltaType, Deltas};
use crate::key::{DeletedFinalStateUnknown, ObjectOrTombstone};
use crate::list_watch::{
    ListPage, ListRequest, ListWatchError, ListerWatcher, WatchEvent, WatchRequest, WatchStream,
};

/// A minimal stream over an unbounded receiver (no extra dependency).
mod tokio_stream_shim {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::sync::mpsc::UnboundedReceiver;

    pub struct UnboundedStream<T>(pub UnboundedReceiver<T>);

    impl<T> futures::Stream for UnboundedStream<T> {
        type Item = T;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
            self.0.poll_recv(cx)
        }
    }
}

fn cm(name: &str, rv: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

type Event = Result<WatchEvent<ConfigMap>, ListWatchError>;

/// A scripted collection: list returns the current objects; watches get the
/// events pushed after they opened.
#[derive(Default)]
struct FakeCluster {
    state: Mutex<FakeState>,
}

#[derive(Default)]
struct FakeState {
    objects: BTreeMap<String, ConfigMap>,
    rv: u64,
    watchers: Vec<mpsc::UnboundedSender<Event>>,
}

impl FakeCluster {
    fn apply(&self, name: &str, kind: &str) {
        let mut state = self.state.lock();
        state.rv += 1;
        let obj = cm(name, &state.rv.to_string());
        let event = match kind {
            "add" => {
                state.objects.insert(name.into(), obj.clone());
                WatchEvent::Added(obj)
            }
            "update" => {
                state.objects.insert(name.into(), obj.clone());
                WatchEvent::Modified(obj)
            }
            _ => {
                state.objects.remove(name);
                WatchEvent::Deleted(obj)
            }
        };
        state.watchers.retain(|w| w.send(Ok(event.clone())).is_ok());
    }
}

#[derive(Clone, Default)]
struct FakeLw(Arc<FakeCluster>);

impl ListerWatcher<ConfigMap> for FakeLw {
    fn list(
        &self,
        _req: ListRequest,
    ) -> BoxFuture<'_, Result<ListPage<ConfigMap>, ListWatchError>> {
        let state = self.0.state.lock();
        let page = ListPage {
            items: state.objects.values().cloned().collect(),
            resource_version: state.rv.to_string(),
            ..ListPage::default()
        };
        async move { Ok(page) }.boxed()
    }

    fn watch(
        &self,
        _req: WatchRequest,
    ) -> BoxFuture<'_, Result<WatchStream<ConfigMap>, ListWatchError>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.0.state.lock().watchers.push(tx);
        async move { Ok(UnboundedStream(rx).boxed()) }.boxed()
    }
}

/// Records calls as "add:name:initial", "update:name:old->new", "delete:name[:tombstone]".
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Recorder {
    fn seen(&self) -> Vec<String> {
        self.0.lock().clone()
    }
    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

fn rv(obj: &ConfigMap) -> &str {
    obj.metadata.resource_version.as_deref().unwrap_or("")
}

fn nm(obj: &ConfigMap) -> &str {
    obj.metadata.name.as_deref().unwrap_or("")
}

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: Arc<ConfigMap>, initial: bool) {
        self.0.lock().push(format!("add:{}:{initial}", nm(&obj)));
    }
    fn on_update(&self, old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        self.0
            .lock()
            .push(format!("update:{}:{}->{}", nm(&new), rv(&old), rv(&new)));
    }
    fn on_delete(&self, obj: ObjectOrTombstone<ConfigMap>) {
        let t = if obj.is_tombstone() { ":tombstone" } else { "" };
        self.0
            .lock()
            .push(format!("delete:{}{t}", nm(obj.object())));
    }
}

async fn eventually(cond: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

fn deltas(name: &str, initial: bool, items: &[(DeltaType, &str)]) -> Deltas<ConfigMap> {
    Deltas {
        key: format!("ns/{name}").into(),
        deltas: items
            .iter()
            .map(|(kind, rv)| Delta {
                kind: *kind,
                object: ObjectOrTombstone::Object(Arc::new(cm(name, rv))),
            })
            .collect(),
        is_in_initial_list: initial,
    }
}

fn informer() -> SharedIndexInformer<ConfigMap> {
    SharedIndexInformer::new(FakeLw::default(), Duration::ZERO)
}

#[tokio::test(start_paused = true)]
async fn deltas_for_unknown_keys_add_and_for_known_keys_update() {
    let inf = informer();
    let rec = Arc::new(Recorder::default());
    inf.add_event_handler(rec.clone()).unwrap();
    inf.inner.processor.run();

    inf.inner
        .handle_deltas(deltas("a", true, &[(DeltaType::Replaced, "1")]));
    inf.inner
        .handle_deltas(deltas("b", false, &[(DeltaType::Added, "2")]));
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Updated, "3")]));
    inf.inner
        .handle_deltas(deltas("b", false, &[(DeltaType::Replaced, "4")]));
    assert!(eventually(|| rec.len() == 4).await);
    assert_eq!(
        rec.seen(),
        vec![
            "add:a:true",
            "add:b:false",
            "update:a:1->3",
            "update:b:2->4"
        ]
    );
    assert_eq!(rv(&inf.indexer().get_by_key("ns/a").unwrap()), "3");
    assert_eq!(rv(&inf.indexer().get_by_key("ns/b").unwrap()), "4");
}

#[tokio::test(start_paused = true)]
async fn several_deltas_of_one_key_apply_in_order() {
    let inf = informer();
    let rec = Arc::new(Recorder::default());
    inf.add_event_handler(rec.clone()).unwrap();
    inf.inner.processor.run();
    inf.inner.handle_deltas(deltas(
        "a",
        false,
        &[
            (DeltaType::Added, "1"),
            (DeltaType::Updated, "2"),
            (DeltaType::Deleted, "2"),
            (DeltaType::Added, "5"),
        ],
    ));
    assert!(eventually(|| rec.len() == 4).await);
    assert_eq!(
        rec.seen(),
        vec!["add:a:false", "update:a:1->2", "delete:a", "add:a:false"]
    );
    assert_eq!(rv(&inf.indexer().get_by_key("ns/a").unwrap()), "5");
}

#[tokio::test(start_paused = true)]
async fn deletes_remove_from_the_cache_and_pass_tombstones_through() {
    let inf = informer();
    let rec = Arc::new(Recorder::default());
    inf.add_event_handler(rec.clone()).unwrap();
    inf.inner.processor.run();
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Added, "1")]));
    inf.inner.handle_deltas(Deltas {
        key: "ns/a".into(),
        deltas: vec![Delta {
            kind: DeltaType::Deleted,
            object: ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
                key: "ns/a".into(),
                obj: Arc::new(cm("a", "1")),
            }),
        }],
        is_in_initial_list: false,
    });
    assert!(eventually(|| rec.len() == 2).await);
    assert_eq!(rec.seen(), vec!["add:a:false", "delete:a:tombstone"]);
    assert!(inf.indexer().get_by_key("ns/a").is_none());
}

#[tokio::test(start_paused = true)]
async fn unchanged_resource_versions_reach_only_handlers_due_for_resync() {
    let inf = informer();
    let due = Arc::new(Recorder::default());
    let never = Arc::new(Recorder::default());
    let later = Arc::new(Recorder::default());
    inf.add_event_handler_with_resync(due.clone(), Duration::from_secs(1))
        .unwrap();
    inf.add_event_handler(never.clone()).unwrap();
    inf.add_event_handler_with_resync(later.clone(), Duration::from_secs(10))
        .unwrap();
    assert_eq!(inf.resync_check_period(), Some(Duration::from_secs(1)));
    inf.inner.processor.run();
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Added, "1")]));

    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(inf.inner.processor.should_resync());
    // A Sync delta, a Replaced and an Updated with the same RV: all resyncs.
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Sync, "1")]));
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Replaced, "1")]));
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Updated, "1")]));
    // A real change goes to everyone.
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Updated, "2")]));

    assert!(eventually(|| due.len() == 5 && never.len() == 2 && later.len() == 2).await);
    assert_eq!(
        due.seen(),
        vec![
            "add:a:false",
            "update:a:1->1",
            "update:a:1->1",
            "update:a:1->1",
            "update:a:1->2"
        ]
    );
    assert_eq!(never.seen(), vec!["add:a:false", "update:a:1->2"]);
    assert_eq!(later.seen(), never.seen());
}

#[tokio::test(start_paused = true)]
async fn resync_periods_have_a_minimum_and_the_check_period_is_the_smallest_before_start() {
    let inf = SharedIndexInformer::new(FakeLw::default(), Duration::from_secs(30));
    assert_eq!(inf.resync_check_period(), Some(Duration::from_secs(30)));
    let a = inf.add_event_handler(Recorder::default()).unwrap();
    assert_eq!(
        inf.inner.processor.resync_period(a.id),
        Some(Duration::from_secs(30))
    );
    let b = inf
        .add_event_handler_with_resync(Recorder::default(), Duration::from_millis(100))
        .unwrap();
    assert_eq!(
        inf.inner.processor.resync_period(b.id),
        Some(MINIMUM_RESYNC_PERIOD)
    );
    assert_eq!(inf.resync_check_period(), Some(MINIMUM_RESYNC_PERIOD));
    let c = inf
        .add_event_handler_with_resync(Recorder::default(), Duration::ZERO)
        .unwrap();
    assert_eq!(inf.inner.processor.resync_period(c.id), None);
}

#[tokio::test(start_paused = true)]
async fn after_start_a_shorter_resync_period_is_raised_to_the_check_period() {
    let inf = SharedIndexInformer::new(FakeLw::default(), Duration::from_secs(20));
    inf.add_event_handler(Recorder::default()).unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let inf = inf.clone();
        let stop = stop.clone();
        async move { inf.run(stop).await }
    });
    assert!(eventually(|| inf.has_synced()).await);
    let late = inf
        .add_event_handler_with_resync(Recorder::default(), Duration::from_secs(5))
        .unwrap();
    assert_eq!(
        inf.inner.processor.resync_period(late.id),
        Some(Duration::from_secs(20))
    );
    assert_eq!(inf.resync_check_period(), Some(Duration::from_secs(20)));
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_full_run_lists_watches_replays_to_late_handlers_and_stops() {
    let lw = FakeLw::default();
    lw.0.apply("a", "add");
    lw.0.apply("b", "add");
    let inf = SharedIndexInformer::new(lw.clone(), Duration::ZERO);
    let early = Arc::new(Recorder::default());
    let early_reg = inf.add_event_handler(early.clone()).unwrap();
    assert!(!early_reg.has_synced());
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let inf = inf.clone();
        let stop = stop.clone();
        async move { inf.run(stop).await }
    });
    inf.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(early_reg.wait_for_sync(Duration::from_secs(30)).await);
    assert_eq!(early.seen(), vec!["add:a:true", "add:b:true"]);
    assert_eq!(inf.last_sync_resource_version().as_deref(), Some("2"));

    // Running twice is refused; start-only settings are refused.
    assert!(matches!(
        inf.run(CancellationToken::new()).await,
        Err(InformerError::AlreadyStarted { .. })
    ));
    assert!(inf.set_transform(Arc::new(|o| o)).is_err());

    // Wait for the watch to be open before changing anything.
    assert!(eventually(|| !lw.0.state.lock().watchers.is_empty()).await);
    lw.0.apply("c", "add");
    lw.0.apply("a", "update");
    assert!(eventually(|| early.len() == 4).await);
    let late = Arc::new(Recorder::default());
    let late_reg = inf.add_event_handler(late.clone()).unwrap();
    assert!(late_reg.wait_for_sync(Duration::from_secs(30)).await);
    let mut replay = late.seen();
    replay.sort();
    assert_eq!(replay, vec!["add:a:true", "add:b:true", "add:c:true"]);
    lw.0.apply("b", "delete");
    assert!(eventually(|| early.len() == 5 && late.len() == 4).await);
    assert_eq!(
        early.seen()[2..],
        ["add:c:false", "update:a:1->4", "delete:b"]
    );
    assert_eq!(late.seen()[3], "delete:b");
    assert_eq!(inf.last_sync_resource_version().as_deref(), Some("5"));

    stop.cancel();
    task.await.unwrap().unwrap();
    assert!(inf.is_stopped());
    assert!(early_reg.is_removed());
    assert!(matches!(
        inf.add_event_handler(Recorder::default()),
        Err(InformerError::Stopped { .. })
    ));
    // A stopped informer that had synced stays synced, and a sync wait on
    // it answers at once instead of polling forever.
    assert!(inf.has_synced());
    let answered = tokio::time::timeout(
        Duration::from_secs(1),
        inf.wait_for_cache_sync_until(&CancellationToken::new()),
    )
    .await;
    assert_eq!(answered.ok(), Some(true));
}

#[tokio::test(start_paused = true)]
async fn stop_before_run_prevents_running() {
    let inf = informer();
    inf.stop();
    assert!(inf.is_stopped());
    assert!(matches!(
        inf.run(CancellationToken::new()).await,
        Err(InformerError::Stopped { .. })
    ));
    // It never synced and never will: a sync wait without a cancel token
    // must give up (false) rather than wait forever.
    let answered = tokio::time::timeout(
        Duration::from_secs(1),
        inf.wait_for_cache_sync_until(&CancellationToken::new()),
    )
    .await;
    assert_eq!(answered.ok(), Some(false));
}

#[tokio::test(start_paused = true)]
async fn wait_for_cache_sync_times_out_before_run() {
    let inf = informer();
    let err = inf
        .wait_for_cache_sync(Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(matches!(err, InformerError::SyncTimeout(_)));
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert!(!inf.wait_for_cache_sync_until(&cancel).await);
}

#[tokio::test(start_paused = true)]
async fn registrations_of_another_informer_are_refused() {
    let one = informer();
    let other = informer();
    let reg = one.add_event_handler(Recorder::default()).unwrap();
    assert!(matches!(
        other.remove_event_handler(&reg),
        Err(InformerError::ForeignRegistration { .. })
    ));
    one.remove_event_handler(&reg).unwrap();
    assert!(reg.is_removed());
}

#[tokio::test(start_paused = true)]
async fn a_transform_set_before_start_applies_to_cached_objects() {
    let lw = FakeLw::default();
    lw.0.apply("a", "add");
    let inf = SharedIndexInformer::new(lw, Duration::ZERO);
    inf.set_transform(Arc::new(|mut o: ConfigMap| {
        o.data = Some([("t".to_string(), "1".to_string())].into());
        o
    }))
    .unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let inf = inf.clone();
        let stop = stop.clone();
        async move { inf.run(stop).await }
    });
    inf.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let cached = inf.indexer().get_by_key("ns/a").unwrap();
    assert_eq!(cached.data.as_ref().unwrap().get("t").unwrap(), "1");
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[derive(Default)]
struct PendingMetrics(Mutex<Vec<(String, String, usize)>>);

impl crate::metrics::InformerMetrics for PendingMetrics {
    fn handler_pending(&self, informer: &str, handler: &str, pending: usize) {
        self.0
            .lock()
            .push((informer.into(), handler.into(), pending));
    }
}

#[tokio::test(start_paused = true)]
async fn pending_notifications_are_reported_per_handler() {
    let metrics = Arc::new(PendingMetrics::default());
    let inf = SharedIndexInformer::builder(FakeLw::default())
        .metrics(metrics.clone())
        .build()
        .unwrap();
    inf.add_event_handler(Recorder::default()).unwrap();
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Added, "1")]));
    let name = FakeLw::default().describe();
    assert_eq!(
        metrics.0.lock().last().cloned(),
        Some((name.clone(), "handler-0".to_string(), 1))
    );
    inf.inner.processor.run();
    assert!(eventually(|| metrics.0.lock().last().is_some_and(|m| m.2 == 0)).await);
    assert_eq!(
        metrics.0.lock().last().cloned(),
        Some((name, "handler-0".to_string(), 0))
    );
}

#[tokio::test(start_paused = true)]
async fn builder_indexers_are_available_on_the_cache() {
    let by_name: crate::store::IndexFn<ConfigMap> =
        Arc::new(|cm: &ConfigMap| Ok(cm.metadata.name.clone().into_iter().collect()));
    let inf = SharedIndexInformer::builder(FakeLw::default())
        .indexer("by-name", by_name.clone())
        .build()
        .unwrap();
    inf.inner
        .handle_deltas(deltas("a", false, &[(DeltaType::Added, "1")]));
    assert_eq!(inf.indexer().by_index("by-name", "a").unwrap().len(), 1);
    assert!(
        SharedIndexInformer::builder(FakeLw::default())
            .indexer("by-name", by_name.clone())
            .indexer("by-name", by_name)
            .build()
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_run_future_stops_the_informer() {
    let lw = FakeLw::default();
    lw.0.apply("a", "add");
    let inf = SharedIndexInformer::new(lw.clone(), Duration::ZERO);
    let reg = inf.add_event_handler(Recorder::default()).unwrap();
    let task = tokio::spawn({
        let inf = inf.clone();
        async move { inf.run(CancellationToken::new()).await }
    });
    assert!(eventually(|| inf.has_synced()).await);
    assert!(eventually(|| !lw.0.state.lock().watchers.is_empty()).await);
    task.abort();
    let _ = task.await;
    assert!(inf.is_stopped());
    assert!(reg.is_removed());
    // The reflector task ended too: its watch stream was dropped.
    assert!(
        eventually(|| {
            lw.0.apply("probe", "update");
            lw.0.state.lock().watchers.is_empty()
        })
        .await
    );
}

mod batches;
mod late_handlers;
mod options;
mod sync_wait;
