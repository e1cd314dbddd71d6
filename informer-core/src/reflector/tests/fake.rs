//! Test doubles: a scripted lister-watcher, a recording store and metrics.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::list_watch::{
    Bookmark, DecodeFailure, ListPage, ListRequest, ListWatchError, ListerWatcher, WatchEvent,
    WatchRequest, WatchStream,
};
use crate::metrics::{InformerMetrics, RelistCause, WatchEventType, WatchRestartCause};
use crate::reflector::ReflectorStore;

pub type Obj = ConfigMap;

pub fn cm(name: &str, rv: &str) -> Obj {
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

pub fn bookmark(rv: &str) -> WatchEvent<Obj> {
    WatchEvent::Bookmark(Bookmark {
        resource_version: rv.into(),
        annotations: Default::default(),
    })
}

pub fn initial_events_end(rv: &str) -> WatchEvent<Obj> {
    WatchEvent::Bookmark(Bookmark {
        resource_version: rv.into(),
        annotations: [(
            crate::list_watch::INITIAL_EVENTS_END_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]
        .into(),
    })
}

pub fn undecodable(key: &str, rv: &str) -> WatchEvent<Obj> {
    WatchEvent::Undecodable(DecodeFailure {
        event_type: Some("MODIFIED".into()),
        key: Some(key.into()),
        resource_version: Some(rv.into()),
        error: "invalid type: sequence, expected a map".into(),
    })
}

pub fn page(rv: &str, names: &[&str], cont: Option<&str>) -> ListPage<Obj> {
    ListPage {
        items: names.iter().map(|n| cm(n, rv)).collect(),
        resource_version: rv.into(),
        continue_token: cont.map(str::to_owned),
        undecodable: Vec::new(),
    }
}

pub fn api_err(code: u16, reason: &str) -> ListWatchError {
    ListWatchError::api(code, reason, &format!("scripted {code}"))
}

/// One element of a scripted watch stream.
#[allow(clippy::large_enum_variant)] // test-only; events are moved once
pub enum Item {
    Event(WatchEvent<Obj>),
    Err(ListWatchError),
    /// Wait this long (on the tokio clock) before the next item.
    Delay(Duration),
    /// Never yield again.
    Hang,
}

/// What the next LIST or WATCH call answers.
pub enum Step {
    List(Result<ListPage<Obj>, ListWatchError>),
    /// Open a watch yielding these items, then end (unless it hangs).
    Watch(Vec<Item>),
    WatchErr(ListWatchError),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    List(ListRequest),
    Watch(WatchRequest),
}

#[derive(Debug, Clone)]
pub struct Record {
    pub call: Call,
    pub at: Instant,
}

/// Signals every change to the shared state, so tests wait on conditions.
#[derive(Clone)]
pub struct Bump(Arc<watch::Sender<u64>>);

impl Bump {
    pub fn new() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }

    pub fn bump(&self) {
        self.0.send_modify(|n| *n += 1);
    }

    /// Waits (up to an hour of tokio time) until `cond` holds.
    pub async fn until(&self, what: &str, cond: impl Fn() -> bool) {
        let mut rx = self.0.subscribe();
        let wait = async {
            loop {
                rx.borrow_and_update();
                if cond() {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(3600), wait)
            .await
            .is_err()
        {
            panic!("timed out waiting until {what}");
        }
    }
}

pub struct FakeLw {
    script: Mutex<VecDeque<Step>>,
    calls: Mutex<Vec<Record>>,
    hung: Arc<AtomicUsize>,
    bump: Bump,
}

impl FakeLw {
    pub fn new(bump: &Bump, steps: Vec<Step>) -> Arc<Self> {
        Arc::new(Self {
            script: Mutex::new(steps.into()),
            calls: Mutex::new(Vec::new()),
            hung: Arc::new(AtomicUsize::new(0)),
            bump: bump.clone(),
        })
    }

    /// How many scripted watch streams reached their `Hang`.
    pub fn hung(&self) -> usize {
        self.hung.load(Ordering::SeqCst)
    }

    pub fn calls(&self) -> Vec<Record> {
        self.calls.lock().clone()
    }

    pub fn lists(&self) -> Vec<ListRequest> {
        self.calls()
            .into_iter()
            .filter_map(|r| match r.call {
                Call::List(l) => Some(l),
                Call::Watch(_) => None,
            })
            .collect()
    }

    pub fn watches(&self) -> Vec<WatchRequest> {
        self.calls()
            .into_iter()
            .filter_map(|r| match r.call {
                Call::Watch(w) => Some(w),
                Call::List(_) => None,
            })
            .collect()
    }

    pub fn script_done(&self) -> bool {
        self.script.lock().is_empty()
    }

    fn next(&self, call: Call) -> Option<Step> {
        self.calls.lock().push(Record {
            call,
            at: Instant::now(),
        });
        let step = self.script.lock().pop_front();
        self.bump.bump();
        step
    }
}

fn scripted_stream(items: Vec<Item>, bump: Bump, hung: Arc<AtomicUsize>) -> WatchStream<Obj> {
    let state = (VecDeque::from(items), bump, hung);
    futures::stream::unfold(state, |(mut items, bump, hung)| async move {
        loop {
            match items.pop_front()? {
                Item::Event(e) => return Some((Ok(e), (items, bump, hung))),
                Item::Err(e) => return Some((Err(e), (items, bump, hung))),
                Item::Delay(d) => tokio::time::sleep(d).await,
                Item::Hang => {
                    hung.fetch_add(1, Ordering::SeqCst);
                    bump.bump();
                    futures::future::pending::<()>().await;
                }
            }
        }
    })
    .boxed()
}

impl ListerWatcher<Obj> for FakeLw {
    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListPage<Obj>, ListWatchError>> {
        let step = self.next(Call::List(req.clone()));
        async move {
            match step {
                Some(Step::List(result)) => result,
                None => futures::future::pending().await,
                Some(_) => panic!("script expected a watch, got list {req:?}"),
            }
        }
        .boxed()
    }

    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<WatchStream<Obj>, ListWatchError>> {
        let step = self.next(Call::Watch(req.clone()));
        let bump = self.bump.clone();
        let hung = self.hung.clone();
        async move {
            match step {
                Some(Step::Watch(items)) => Ok(scripted_stream(items, bump, hung)),
                Some(Step::WatchErr(e)) => Err(e),
                None => futures::future::pending().await,
                Some(Step::List(_)) => panic!("script expected a list, got watch {req:?}"),
            }
        }
        .boxed()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add(String, String),
    Update(String, String),
    Delete(String, String),
    Replace(Vec<String>, String),
    Resync,
}

fn name_rv(obj: &Obj) -> (String, String) {
    (
        obj.metadata.name.clone().unwrap_or_default(),
        obj.metadata.resource_version.clone().unwrap_or_default(),
    )
}

pub struct RecordingStore {
    ops: Mutex<Vec<Op>>,
    bump: Bump,
}

impl RecordingStore {
    pub fn new(bump: &Bump) -> Arc<Self> {
        Arc::new(Self {
            ops: Mutex::new(Vec::new()),
            bump: bump.clone(),
        })
    }

    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().clone()
    }

    fn push(&self, op: Op) {
        self.ops.lock().push(op);
        self.bump.bump();
    }
}

impl ReflectorStore<Obj> for RecordingStore {
    fn add(&self, obj: Obj) {
        let (n, rv) = name_rv(&obj);
        self.push(Op::Add(n, rv));
    }
    fn update(&self, obj: Obj) {
        let (n, rv) = name_rv(&obj);
        self.push(Op::Update(n, rv));
    }
    fn delete(&self, obj: Obj) {
        let (n, rv) = name_rv(&obj);
        self.push(Op::Delete(n, rv));
    }
    fn replace(&self, list: Vec<Obj>, resource_version: &str) {
        let names = list.iter().map(|o| name_rv(o).0).collect();
        self.push(Op::Replace(names, resource_version.to_owned()));
    }
    fn resync(&self) {
        self.push(Op::Resync);
    }
}

/// Counts every metrics call by a label like `relist:expired`.
pub struct CountingMetrics {
    counts: Mutex<HashMap<String, usize>>,
    pub backoffs: Mutex<Vec<Duration>>,
    bump: Bump,
}

impl CountingMetrics {
    pub fn new(bump: &Bump) -> Arc<Self> {
        Arc::new(Self {
            counts: Mutex::new(HashMap::new()),
            backoffs: Mutex::new(Vec::new()),
            bump: bump.clone(),
        })
    }

    pub fn count(&self, label: &str) -> usize {
        self.counts.lock().get(label).copied().unwrap_or(0)
    }

    fn inc(&self, label: String) {
        *self.counts.lock().entry(label).or_default() += 1;
        self.bump.bump();
    }
}

impl InformerMetrics for CountingMetrics {
    fn list_completed(&self, _: &str, items: usize, pages: usize, _: Duration) {
        self.inc("list".into());
        self.inc(format!("list_items:{items}"));
        self.inc(format!("list_pages:{pages}"));
    }
    fn list_failed(&self, _: &str, reason: &str) {
        self.inc(format!("list_failed:{reason}"));
    }
    fn relist(&self, _: &str, cause: RelistCause) {
        self.inc(format!("relist:{}", cause.as_str()));
    }
    fn streaming_list_fallback(&self, _: &str) {
        self.inc("streaming_fallback".into());
    }
    fn watch_started(&self, _: &str) {
        self.inc("watch".into());
    }
    fn watch_restart(&self, _: &str, cause: WatchRestartCause) {
        self.inc(format!("watch_restart:{}", cause.as_str()));
    }
    fn watch_event(&self, _: &str, kind: WatchEventType) {
        self.inc(format!("event:{kind}"));
    }
    fn decode_failure(&self, _: &str) {
        self.inc("decode_failure".into());
    }
    fn oversized_answer(&self, _: &str, part: &str) {
        self.inc(format!("oversized:{part}"));
    }
    fn backoff(&self, _: &str, delay: Duration) {
        self.backoffs.lock().push(delay);
        self.inc("backoff".into());
    }
    fn last_sync(&self, _: &str, _: &str, _: std::time::SystemTime) {
        self.inc("last_sync".into());
    }
}
