//! Unit tests: one per DeltaFIFO rule.

mod paged;
mod props;
mod shrink;
mod synced;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube_core::ObjectMeta;

use super::*;
use crate::store::Indexer;

fn cm(name: &str, rv: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn rv(d: &Delta<ConfigMap>) -> String {
    d.object
        .object()
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default()
}

/// A delta as (kind, resource version, is tombstone).
type Summary = (DeltaType, String, bool);

fn summary(d: &Deltas<ConfigMap>) -> Vec<Summary> {
    d.deltas
        .iter()
        .map(|d| (d.kind, rv(d), d.object.is_tombstone()))
        .collect()
}

fn pop_now(fifo: &DeltaFifo<ConfigMap>) -> Deltas<ConfigMap> {
    fifo.pop(|d| d)
        .now_or_never()
        .expect("an item is queued")
        .expect("not closed")
}

fn s(kind: DeltaType, rv: &str, tombstone: bool) -> Summary {
    (kind, rv.to_owned(), tombstone)
}

fn with_known() -> (DeltaFifo<ConfigMap>, Indexer<ConfigMap>) {
    let indexer = Indexer::new();
    (DeltaFifo::new(Some(Arc::new(indexer.clone()))), indexer)
}

use DeltaType::*;

#[test]
fn add_update_delete_queue_their_kinds() {
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.update(cm("a", "2"));
    fifo.delete(cm("a", "3"));
    let d = pop_now(&fifo);
    assert_eq!(&*d.key, "ns/a");
    assert_eq!(
        summary(&d),
        [
            s(Added, "1", false),
            s(Updated, "2", false),
            s(Deleted, "3", false)
        ]
    );
    assert_eq!(d.oldest().unwrap().kind, Added);
    assert_eq!(d.newest().unwrap().kind, Deleted);
    assert!(fifo.is_empty());
}

#[test]
fn queued_key_keeps_its_place_and_new_keys_go_to_the_tail() {
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.add(cm("b", "1"));
    fifo.update(cm("a", "2"));
    fifo.add(cm("c", "1"));
    assert_eq!(fifo.list_keys(), ["ns/a", "ns/b", "ns/c"]);
    assert_eq!(fifo.len(), 3);
    assert_eq!(pop_now(&fifo).deltas.len(), 2);
    // Once popped, the key is new again and goes to the tail.
    fifo.update(cm("a", "3"));
    assert_eq!(fifo.list_keys(), ["ns/b", "ns/c", "ns/a"]);
}

#[test]
fn two_trailing_deletes_keep_the_older_unless_it_is_a_tombstone() {
    // Both plain: keep the older.
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.delete(cm("a", "2"));
    fifo.delete(cm("a", "3"));
    assert_eq!(
        summary(&pop_now(&fifo)),
        [s(Added, "1", false), s(Deleted, "2", false)]
    );

    // Older is a tombstone (from a relist): keep the newer.
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.replace(vec![], "9"); // tombstone for ns/a carrying rv 1
    fifo.delete(cm("a", "5"));
    assert_eq!(
        summary(&pop_now(&fifo)),
        [s(Added, "1", false), s(Deleted, "5", false)]
    );

    // Newer is a tombstone, older plain: keep the older.
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.delete(cm("a", "2"));
    fifo.replace(vec![], "9");
    assert_eq!(
        summary(&pop_now(&fifo)),
        [s(Added, "1", false), s(Deleted, "2", false)]
    );

    // Non-adjacent deletes are not collapsed.
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.delete(cm("a", "2"));
    fifo.add(cm("a", "3"));
    fifo.delete(cm("a", "4"));
    assert_eq!(summary(&pop_now(&fifo)).len(), 4);
}

#[test]
fn delete_of_an_unknown_key_is_dropped() {
    let (fifo, indexer) = with_known();
    fifo.delete(cm("ghost", "1"));
    assert!(fifo.is_empty());
    // Known (in the indexer) but not queued: queued.
    indexer.add(Arc::new(cm("known", "1"))).unwrap();
    fifo.delete(cm("known", "2"));
    // Queued but not known: queued.
    fifo.add(cm("queued", "1"));
    fifo.delete(cm("queued", "2"));
    assert_eq!(fifo.list_keys(), ["ns/known", "ns/queued"]);
    assert_eq!(summary(&pop_now(&fifo)), [s(Deleted, "2", false)]);
    assert_eq!(
        summary(&pop_now(&fifo)),
        [s(Added, "1", false), s(Deleted, "2", false)]
    );

    // Without known objects only queued keys count.
    let fifo = DeltaFifo::new(None);
    fifo.delete(cm("a", "1"));
    assert!(fifo.is_empty());
}

#[test]
fn replace_queues_replaced_then_tombstones_with_the_newest_object() {
    let (fifo, indexer) = with_known();
    let known_gone = Arc::new(cm("known-gone", "4"));
    indexer.add(known_gone.clone()).unwrap();
    indexer.add(Arc::new(cm("known-kept", "4"))).unwrap();
    indexer.add(Arc::new(cm("known-queued-gone", "1"))).unwrap();
    fifo.add(cm("queued-gone", "1"));
    fifo.update(cm("queued-gone", "2"));
    fifo.update(cm("known-queued-gone", "3"));
    fifo.replace(vec![cm("known-kept", "5"), cm("new", "5")], "42");
    assert_eq!(fifo.last_sync_resource_version().as_deref(), Some("42"));
    assert_eq!(
        fifo.list_keys(),
        [
            "ns/queued-gone",
            "ns/known-queued-gone",
            "ns/known-kept",
            "ns/new",
            "ns/known-gone"
        ]
    );
    let d = pop_now(&fifo);
    assert_eq!(
        summary(&d),
        [
            s(Added, "1", false),
            s(Updated, "2", false),
            s(Deleted, "2", true)
        ]
    );
    let ObjectOrTombstone::Tombstone(t) = &d.deltas[2].object else {
        unreachable!()
    };
    assert_eq!(&*t.key, "ns/queued-gone");
    assert!(
        Arc::ptr_eq(&t.obj, d.deltas[1].object.object()),
        "tombstone carries the queued Arc"
    );
    // Queued and known: the newest queued object wins over the known one.
    assert_eq!(
        summary(&pop_now(&fifo)),
        [s(Updated, "3", false), s(Deleted, "3", true)]
    );
    assert_eq!(summary(&pop_now(&fifo)), [s(Replaced, "5", false)]);
    assert_eq!(summary(&pop_now(&fifo)), [s(Replaced, "5", false)]);
    let d = pop_now(&fifo);
    assert_eq!(summary(&d), [s(Deleted, "4", true)]);
    assert!(
        Arc::ptr_eq(d.deltas[0].object.object(), &known_gone),
        "tombstone carries the known Arc"
    );
}

#[test]
fn replace_tombstone_of_a_tombstone_unwraps_it() {
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.replace(vec![], "2");
    fifo.replace(vec![], "3");
    let d = pop_now(&fifo);
    // The second tombstone replaced the first and carries the object, not a tombstone.
    assert_eq!(summary(&d), [s(Added, "1", false), s(Deleted, "1", true)]);
}

#[test]
fn has_synced_after_the_first_replace_is_fully_popped() {
    let (fifo, indexer) = with_known();
    assert!(!fifo.has_synced());
    indexer.add(Arc::new(cm("stale", "1"))).unwrap();
    fifo.replace(vec![cm("a", "1"), cm("b", "1"), cm("a", "2")], "1");
    // a (twice listed, once queued), b, and the tombstone of "stale".
    assert_eq!(fifo.len(), 3);
    fifo.add(cm("c", "1"));
    for _ in 0..3 {
        assert!(!fifo.has_synced());
        assert!(pop_now(&fifo).is_in_initial_list);
    }
    assert!(fifo.has_synced());
    assert!(
        !pop_now(&fifo).is_in_initial_list,
        "watch item after the initial list"
    );
    // A later replace does not un-sync.
    fifo.replace(vec![cm("d", "1")], "2");
    assert!(fifo.has_synced());
    assert!(!pop_now(&fifo).is_in_initial_list);
}

#[test]
fn has_synced_when_populated_by_add_or_an_empty_replace() {
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    assert!(
        fifo.has_synced(),
        "populated by an add, no initial list pending"
    );
    fifo.replace(vec![cm("b", "1")], "1");
    assert!(fifo.has_synced());

    let fifo: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    fifo.replace(vec![], "1");
    assert!(fifo.has_synced());

    let fifo: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    fifo.delete(cm("a", "1")); // dropped, but it counts as population
    assert!(fifo.has_synced());
}

#[tokio::test(start_paused = true)]
async fn pop_waits_while_empty() {
    let fifo = Arc::new(DeltaFifo::<ConfigMap>::new(None));
    let popper = tokio::spawn({
        let fifo = fifo.clone();
        async move { fifo.pop(|d| d.key.to_string()).await }
    });
    tokio::task::yield_now().await;
    assert!(!popper.is_finished());
    assert!(
        fifo.pop(|d| d.key.to_string()).now_or_never().is_none(),
        "pop must wait on an empty FIFO"
    );
    fifo.add(cm("a", "1"));
    let key = tokio::time::timeout(std::time::Duration::from_secs(5), popper)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(key.unwrap(), "ns/a");
}

#[tokio::test(start_paused = true)]
async fn close_drains_then_reports_closed() {
    let fifo = Arc::new(DeltaFifo::<ConfigMap>::new(None));
    let waiting = tokio::spawn({
        let fifo = fifo.clone();
        async move { fifo.pop(|d| d.key.to_string()).await }
    });
    tokio::task::yield_now().await;
    assert!(!fifo.is_closed());
    fifo.close();
    assert!(fifo.is_closed());
    let woken = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(woken, Err(FifoClosed));

    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.add(cm("b", "1"));
    fifo.close();
    assert_eq!(fifo.pop(|d| d.key.to_string()).await.unwrap(), "ns/a");
    assert_eq!(fifo.pop(|d| d.key.to_string()).await.unwrap(), "ns/b");
    assert_eq!(fifo.pop(|d| d.key.to_string()).await, Err(FifoClosed));
    assert_eq!(
        FifoClosed.to_string(),
        "the DeltaFIFO is closed and drained"
    );
}

#[test]
fn resync_queues_sync_only_for_known_keys_without_queued_deltas() {
    let (fifo, indexer) = with_known();
    for name in ["a", "b", "c"] {
        indexer.add(Arc::new(cm(name, "1"))).unwrap();
    }
    fifo.update(cm("b", "2"));
    fifo.resync();
    assert_eq!(fifo.list_keys(), ["ns/b", "ns/a", "ns/c"]);
    assert_eq!(
        summary(&pop_now(&fifo)),
        [s(Updated, "2", false)],
        "pending update not resynced over"
    );
    let d = pop_now(&fifo);
    assert_eq!(summary(&d), [s(Sync, "1", false)]);
    assert!(Arc::ptr_eq(
        d.deltas[0].object.object(),
        &indexer.get_by_key("ns/a").unwrap()
    ));
    // Without known objects, resync does nothing.
    let fifo: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    fifo.resync();
    assert!(fifo.is_empty());
}

#[test]
fn transform_runs_once_per_entering_object_and_never_on_tombstones_or_resyncs() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counting: Transform<ConfigMap> = {
        let calls = calls.clone();
        Arc::new(move |mut o: ConfigMap| {
            calls.fetch_add(1, Ordering::SeqCst);
            o.metadata
                .labels
                .get_or_insert_default()
                .insert("transformed".into(), "yes".into());
            o
        })
    };
    let indexer = Indexer::new();
    let fifo = DeltaFifo::new(Some(Arc::new(indexer.clone()))).with_transform(counting);
    fifo.add(cm("a", "1"));
    fifo.update(cm("a", "2"));
    fifo.delete(cm("a", "3"));
    fifo.replace(vec![cm("b", "1")], "1");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    indexer.add(Arc::new(cm("k", "1"))).unwrap();
    fifo.replace(vec![], "2"); // tombstones only
    fifo.resync();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "tombstones and resyncs are not transformed"
    );
    let d = pop_now(&fifo);
    for delta in &d.deltas {
        assert!(
            delta
                .object
                .object()
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("transformed"))
        );
    }
}

#[test]
fn strip_managed_fields_clears_them() {
    let fifo = DeltaFifo::new(None).with_transform(strip_managed_fields());
    let mut obj = cm("a", "1");
    obj.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("kubectl".into()),
        ..Default::default()
    }]);
    fifo.add(obj);
    let d = pop_now(&fifo);
    assert!(
        d.deltas[0]
            .object
            .object()
            .metadata
            .managed_fields
            .is_none()
    );
    assert_eq!(
        d.deltas[0].object.object().metadata.name.as_deref(),
        Some("a")
    );
}

#[test]
fn pop_runs_process_under_the_fifo_lock() {
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    let locked = fifo
        .pop(|_| fifo.state.try_lock().is_none())
        .now_or_never()
        .unwrap()
        .unwrap();
    assert!(locked, "process must run while the FIFO lock is held");
    assert!(
        fifo.state.try_lock().is_some(),
        "and the lock is released afterwards"
    );
}

#[test]
fn pop_future_is_send() {
    fn assert_send<T: Send>(_: T) {}
    let fifo: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    assert_send(fifo.pop(|d| d.key.to_string()));
    assert!(format!("{fifo:?}").contains("len: 0"));
}

fn capacities(fifo: &DeltaFifo<ConfigMap>) -> (usize, usize) {
    fifo.state.lock().capacities()
}

#[test]
fn draining_gives_back_capacity_and_keeps_order() {
    const N: usize = 10_000;
    let fifo = DeltaFifo::new(None);
    fifo.replace((0..N).map(|i| cm(&format!("o{i:05}"), "1")).collect(), "1");
    let (queue, map) = capacities(&fifo);
    assert!(queue >= N && map >= N, "holds the list: {queue}, {map}");
    let mut popped = Vec::with_capacity(N);
    for i in 0..N {
        let key = fifo
            .pop(|d| d.key.to_string())
            .now_or_never()
            .unwrap()
            .unwrap();
        popped.push(key);
        let left = N - i - 1;
        let (queue, map) = capacities(&fifo);
        assert!(queue >= left && map >= left, "never below what is queued");
        // Shrinking lags by at most a factor of four (plus the floor).
        let bound = (4 * left).max(state::RETAINED_CAPACITY) * 2;
        assert!(
            queue <= bound && map <= bound,
            "{left} left, capacities {queue}, {map}"
        );
    }
    let want: Vec<String> = (0..N).map(|i| format!("ns/o{i:05}")).collect();
    assert_eq!(popped, want, "shrinking kept the queue order");
    let (queue, map) = capacities(&fifo);
    assert!(
        queue <= 2 * state::RETAINED_CAPACITY && map <= 2 * state::RETAINED_CAPACITY,
        "a drained FIFO keeps no per-object capacity: {queue}, {map}"
    );
    assert!(fifo.has_synced());
}

#[test]
fn steady_trickle_keeps_its_small_capacity() {
    let fifo = DeltaFifo::new(None);
    fifo.add(cm("a", "1"));
    fifo.pop(|_| ()).now_or_never().unwrap().unwrap();
    let before = capacities(&fifo);
    for i in 0..100 {
        fifo.update(cm("a", &i.to_string()));
        fifo.pop(|_| ()).now_or_never().unwrap().unwrap();
    }
    assert_eq!(capacities(&fifo), before, "no reallocation per event");
}
