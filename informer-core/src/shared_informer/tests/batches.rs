//! Watch events read in batches mean what they mean one at a time: for
//! random sequences of adds, updates, deletes, bookmarks and 410s, a
//! whole informer (reflector, DeltaFIFO, indexer, handler) fed the events
//! in random batch sizes ends with the same cache, the same resource
//! version and the same handler calls, key by key, as one fed one event
//! per wake-up. (Across keys the FIFO may order a burst differently: a
//! key already queued keeps its place, as in client-go.)

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use proptest::prelude::*;
use tokio_util::sync::CancellationToken;

use super::cm;
use crate::key::ObjectOrTombstone;
use crate::list_watch::{
    Bookmark, ListPage, ListRequest, ListWatchError, ListerWatcher, WatchEvent, WatchRequest,
    WatchStream,
};
use crate::shared_informer::{ResourceEventHandler, SharedIndexInformer};

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    Update(u8),
    Delete(u8),
    Bookmark,
    /// The watch ends with 410 Gone; the reflector lists again.
    Expire,
    /// The watch ends normally; the reflector watches again.
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..5u8).prop_map(Op::Add),
        4 => (0..5u8).prop_map(Op::Update),
        3 => (0..5u8).prop_map(Op::Delete),
        2 => Just(Op::Bookmark),
        1 => Just(Op::Expire),
        1 => Just(Op::Close),
    ]
}

/// One element of a scripted watch.
#[derive(Clone)]
enum Item {
    Event(WatchEvent<ConfigMap>),
    Expired,
}

/// What the lister-watcher answers, call after call.
#[derive(Clone)]
enum Step {
    List(ListPage<ConfigMap>),
    /// The watch's items, then its end (`false`: it hangs at the end).
    Watch(Vec<Item>, bool),
}

/// The script of `ops`: an initial list of `initial` names, then watches
/// split at every expiry (followed by a list of what exists then) and
/// every close, and what exists at the end (name -> resource version).
/// Resource versions count up from 1.
fn script(initial: &[u8], ops: &[Op]) -> (Vec<Step>, BTreeMap<String, String>) {
    let name = |n: u8| format!("o{n}");
    let mut rv = 1u64;
    let mut live: BTreeMap<u8, String> = BTreeMap::new();
    for n in initial {
        live.insert(*n, rv.to_string());
    }
    let list = |live: &BTreeMap<u8, String>, rv: u64| {
        Step::List(ListPage {
            items: live.iter().map(|(n, v)| cm(&name(*n), v)).collect(),
            resource_version: rv.to_string(),
            ..ListPage::default()
        })
    };
    let mut steps = vec![list(&live, rv)];
    let mut items = Vec::new();
    for op in ops {
        rv += 1;
        let v = rv.to_string();
        match op {
            Op::Add(n) => {
                live.insert(*n, v.clone());
                items.push(Item::Event(WatchEvent::Added(cm(&name(*n), &v))));
            }
            Op::Update(n) => {
                live.insert(*n, v.clone());
                items.push(Item::Event(WatchEvent::Modified(cm(&name(*n), &v))));
            }
            Op::Delete(n) => {
                live.remove(n);
                items.push(Item::Event(WatchEvent::Deleted(cm(&name(*n), &v))));
            }
            Op::Bookmark => items.push(Item::Event(WatchEvent::Bookmark(Bookmark {
                resource_version: v,
                ..Bookmark::default()
            }))),
            Op::Expire => {
                items.push(Item::Expired);
                steps.push(Step::Watch(std::mem::take(&mut items), true));
                steps.push(list(&live, rv));
            }
            Op::Close => steps.push(Step::Watch(std::mem::take(&mut items), true)),
        }
    }
    steps.push(Step::Watch(items, false));
    let live = live.into_iter().map(|(n, v)| (name(n), v)).collect();
    (steps, live)
}

/// A watch that hands out its items in chunks: each chunk's items are
/// ready one after the other, then the stream is pending once (waking
/// itself at once), so a reader takes exactly one chunk per wake-up.
struct Chunked {
    items: VecDeque<Item>,
    sizes: Arc<Mutex<VecDeque<usize>>>,
    /// Items left in the current chunk.
    left: usize,
    paused: bool,
    ends: bool,
    hung: Arc<AtomicUsize>,
}

impl Stream for Chunked {
    type Item = Result<WatchEvent<ConfigMap>, ListWatchError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.items.is_empty() {
            if self.ends {
                return Poll::Ready(None);
            }
            self.hung.fetch_add(1, Ordering::SeqCst);
            self.ends = true; // counted once; then pending for good
            return Poll::Pending;
        }
        if self.left == 0 {
            if !self.paused {
                self.paused = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.paused = false;
            let next = self.sizes.lock().pop_front();
            self.left = next.unwrap_or(1).max(1);
        }
        self.left -= 1;
        match self.items.pop_front() {
            Some(Item::Event(e)) => Poll::Ready(Some(Ok(e))),
            Some(Item::Expired) => Poll::Ready(Some(Err(ListWatchError::api(
                410,
                "Expired",
                "too old resource version",
            )))),
            None => Poll::Ready(None),
        }
    }
}

/// Plays a script; watches deliver their items in chunks of `sizes`.
struct ScriptedLw {
    steps: Mutex<VecDeque<Step>>,
    sizes: Arc<Mutex<VecDeque<usize>>>,
    hung: Arc<AtomicUsize>,
}

impl ListerWatcher<ConfigMap> for ScriptedLw {
    fn list(&self, _: ListRequest) -> BoxFuture<'_, Result<ListPage<ConfigMap>, ListWatchError>> {
        let step = self.steps.lock().pop_front();
        async move {
            match step {
                Some(Step::List(page)) => Ok(page),
                _ => futures::future::pending().await,
            }
        }
        .boxed()
    }

    fn watch(
        &self,
        _: WatchRequest,
    ) -> BoxFuture<'_, Result<WatchStream<ConfigMap>, ListWatchError>> {
        let step = self.steps.lock().pop_front();
        let (sizes, hung) = (Arc::clone(&self.sizes), Arc::clone(&self.hung));
        async move {
            match step {
                Some(Step::Watch(items, ends)) => Ok(Chunked {
                    items: items.into(),
                    sizes,
                    left: 0,
                    paused: true,
                    ends,
                    hung,
                }
                .boxed()),
                _ => futures::future::pending().await,
            }
        }
        .boxed()
    }
}

/// Every handler call, by key, in order.
#[derive(Default)]
struct Calls(Mutex<BTreeMap<String, Vec<String>>>);

fn rv(o: &ConfigMap) -> &str {
    o.metadata.resource_version.as_deref().unwrap_or_default()
}

fn key(o: &ConfigMap) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

impl ResourceEventHandler<ConfigMap> for Calls {
    fn on_add(&self, obj: Arc<ConfigMap>, initial: bool) {
        let call = format!("add {} initial={initial}", rv(&obj));
        self.0.lock().entry(key(&obj)).or_default().push(call);
    }
    fn on_update(&self, old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        let call = format!("update {} -> {}", rv(&old), rv(&new));
        self.0.lock().entry(key(&new)).or_default().push(call);
    }
    fn on_delete(&self, obj: ObjectOrTombstone<ConfigMap>) {
        let call = format!(
            "delete {} tombstone={}",
            rv(obj.object()),
            obj.is_tombstone()
        );
        self.0
            .lock()
            .entry(key(obj.object()))
            .or_default()
            .push(call);
    }
}

/// What an informer ended with: its cache (name -> resource version), its
/// last resource version and the handler's calls by key.
type Outcome = (
    BTreeMap<String, String>,
    Option<String>,
    BTreeMap<String, Vec<String>>,
);

/// Runs an informer over `steps`, its watches read in chunks of `sizes`,
/// until the last watch hangs and every change reached the handler.
fn run(steps: Vec<Step>, sizes: Vec<usize>) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let hung = Arc::new(AtomicUsize::new(0));
        let lw = ScriptedLw {
            steps: Mutex::new(steps.into()),
            sizes: Arc::new(Mutex::new(sizes.into())),
            hung: Arc::clone(&hung),
        };
        let informer = SharedIndexInformer::builder(lw)
            .streaming_list(false)
            .build()
            .expect("an informer");
        let calls = Arc::new(Calls::default());
        let registration = informer
            .add_event_handler(Arc::clone(&calls))
            .expect("a handler");
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, stop) = (informer.clone(), stop.clone());
            async move { informer.run(stop).await }
        });
        let done = || {
            hung.load(Ordering::SeqCst) == 1
                && informer.inner.fifo.get().is_some_and(|f| f.is_empty())
                && registration.pending() == 0
        };
        let waited = tokio::time::timeout(Duration::from_secs(3600), async {
            while !done() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "the informer did not take in the whole script"
        );
        stop.cancel();
        let _ = task.await;
        let cache = informer
            .indexer()
            .list()
            .iter()
            .map(|o| (key(o), rv(o).to_owned()))
            .collect();
        let calls = std::mem::take(&mut *calls.0.lock());
        (cache, informer.last_sync_resource_version(), calls)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random batch sizes change nothing a handler or a lister can see.
    #[test]
    fn batches_mean_what_single_events_mean(
        initial in proptest::collection::btree_set(0..5u8, 0..4),
        ops in proptest::collection::vec(op(), 0..60),
        sizes in proptest::collection::vec(1..12usize, 0..60),
    ) {
        let initial: Vec<u8> = initial.into_iter().collect();
        let (steps, live) = script(&initial, &ops);
        let one_by_one = run(steps.clone(), Vec::new());
        prop_assert_eq!(&one_by_one.0, &live, "one at a time, the cache is what exists");
        let batched = run(steps, sizes);
        prop_assert_eq!(&batched.0, &one_by_one.0, "cache");
        prop_assert_eq!(&batched.1, &one_by_one.1, "resource version");
        prop_assert_eq!(&batched.2, &one_by_one.2, "handler calls");
    }
}
