//! Scenario 2, relist: a cache synced over N ConfigMaps is forced to list
//! again. The bench writes once elsewhere (so the cache's resourceVersion is
//! behind the server's), then asks `envtest-server --admin` to compact its
//! watch history and drop every watch: the cache's watch resumes from its
//! last resourceVersion, gets 410 Gone and relists all N objects.
//!
//! Measured, both sides: the heap the synced cache holds (steady state,
//! above the heap before it started) and the most heap in use at once from
//! the trigger until the relist has been applied and the heap has settled
//! again (above the same start), as a multiple of the steady state. Listed
//! objects are new allocations, so a cache that builds the whole new list
//! before it drops the old one holds two copies at its peak.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::metrics::InformerMetrics;
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Patch, PatchParams};
use kube_client::{Api, Client};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::heap::Window;
use crate::record::{KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan};

const LIMIT: Duration = Duration::from_secs(300);
/// How long one trigger may take to make the cache relist before it is
/// triggered again (a watch bookmark can move the cache's resourceVersion
/// to the server's between the write and the compaction, and then its
/// resume is not refused).
const TRIGGER_WAIT: Duration = Duration::from_secs(20);
const PAGE: u32 = 500;

/// One measured relist.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Heap the synced cache holds, above the heap before it started.
    pub steady: i64,
    /// Most heap in use at once during the relist, above the same start.
    pub peak: i64,
}

/// Counts completed LISTs (the reflector reports each one once it has been
/// handed to the store).
#[derive(Default)]
struct Lists {
    done: AtomicUsize,
    changed: Notify,
}

impl InformerMetrics for Lists {
    fn list_completed(&self, _informer: &str, _items: usize, _pages: usize, _d: Duration) {
        self.done.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// Counts completed initial lists on the kube-runtime side (`InitDone`).
#[derive(Default)]
struct InitDones {
    done: AtomicUsize,
    changed: Notify,
}

/// Waits until `count()` reaches `want`, re-triggering the relist whenever
/// it takes longer than [`TRIGGER_WAIT`].
async fn relist_until(
    client: &Client,
    changed: &Notify,
    count: impl Fn() -> usize,
    want: usize,
) -> Result<(), BenchError> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    while count() < want {
        trigger(client).await?;
        let round = tokio::time::Instant::now() + TRIGGER_WAIT;
        while count() < want && tokio::time::Instant::now() < round {
            let notified = changed.notified();
            if count() >= want {
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), notified).await;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(BenchError("the cache did not relist".into()));
        }
    }
    Ok(())
}

/// Moves the server's resourceVersion on (a write outside the measured
/// namespace), then compacts and drops every watch.
async fn trigger(client: &Client) -> Result<(), BenchError> {
    let marks: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mark = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "relist-mark"},
        "data": {"at": format!("{:?}", std::time::SystemTime::now())},
    });
    marks
        .patch(
            "relist-mark",
            &PatchParams::apply("informer-bench").force(),
            &Patch::Apply(&mark),
        )
        .await
        .map_err(BenchError::msg)?;
    for path in ["/envtest/v1/compact", "/envtest/v1/drop-watches"] {
        let req = http::Request::post(path)
            .body(Vec::new())
            .map_err(BenchError::msg)?;
        client.request_text(req).await.map_err(|e| {
            BenchError(format!(
                "POST {path} (is the server started with --admin?): {e}"
            ))
        })?;
    }
    Ok(())
}

/// This crate's `SharedIndexInformer`, synced, then relisted.
pub async fn ours(client: &Client, namespace: &str, objects: usize) -> Result<Sample, BenchError> {
    crate::heap::settle().await;
    let heap = Window::start();
    let lists = Arc::new(Lists::default());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let informer = SharedIndexInformer::builder(
        ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(false),
    )
    .metrics(lists.clone())
    // The scenario measures a paged LIST relist.
    .streaming_list(false)
    .build()
    .map_err(BenchError::msg)?;
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, stop) = (informer.clone(), stop.clone());
        async move { informer.run(stop).await }
    });
    informer
        .wait_for_cache_sync(LIMIT)
        .await
        .map_err(BenchError::msg)?;
    crate::heap::settle().await;
    let steady = heap.retained();
    heap.reset_peak();
    let before = lists.done.load(Ordering::SeqCst);
    relist_until(
        client,
        &lists.changed,
        || lists.done.load(Ordering::SeqCst),
        before + 1,
    )
    .await?;
    crate::heap::settle().await;
    let peak = heap.peak();
    let len = informer.indexer().len();
    stop.cancel();
    let _ = task.await;
    BenchError::expect_len("informer-rs cache after relist", len, objects)?;
    Ok(Sample { steady, peak })
}

/// kube-runtime's `watcher` + `reflector` store, synced, then relisted.
pub async fn kube(client: &Client, namespace: &str, objects: usize) -> Result<Sample, BenchError> {
    use kube_runtime::watcher::Event;
    use kube_runtime::{reflector, watcher};
    crate::heap::settle().await;
    let heap = Window::start();
    let inits = Arc::new(InitDones::default());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let (store, writer) = reflector::store::<ConfigMap>();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (stop, inits) = (stop.clone(), inits.clone());
        async move {
            let events = watcher(api, watcher::Config::default().page_size(PAGE));
            let drive = reflector(writer, events).for_each(|ev| {
                if let Ok(Event::InitDone) = ev {
                    inits.done.fetch_add(1, Ordering::SeqCst);
                    inits.changed.notify_waiters();
                }
                async {}
            });
            tokio::select! {
                () = drive => {}
                () = stop.cancelled() => {}
            }
        }
    });
    crate::fixtures::kube_store_ready(&store, LIMIT).await?;
    crate::heap::settle().await;
    let steady = heap.retained();
    heap.reset_peak();
    let before = inits.done.load(Ordering::SeqCst);
    relist_until(
        client,
        &inits.changed,
        || inits.done.load(Ordering::SeqCst),
        before + 1,
    )
    .await?;
    crate::heap::settle().await;
    let peak = heap.peak();
    let len = store.state().len();
    stop.cancel();
    let _ = task.await;
    BenchError::expect_len("kube-runtime store after relist", len, objects)?;
    Ok(Sample { steady, peak })
}

/// Runs the scenario for every size of `plan`.
pub async fn run(client: &Client, plan: &Plan, out: &mut Records) -> Result<(), BenchError> {
    for &objects in &plan.sync_sizes {
        let namespace = format!("relist-{objects}");
        crate::fixtures::seed(client, &namespace, objects)
            .await
            .map_err(BenchError::msg)?;
        let case = format!("{objects} objects, managedFields kept");
        for run in 0..plan.runs {
            let (a, b) = if run % 2 == 0 {
                let a = ours(client, &namespace, objects).await?;
                (a, kube(client, &namespace, objects).await?)
            } else {
                let b = kube(client, &namespace, objects).await?;
                (ours(client, &namespace, objects).await?, b)
            };
            for (side, s) in [(OURS, a), (KUBE, b)] {
                push(out, &case, side, s, objects);
            }
            eprintln!(
                "relist {case} run {run}: peak / steady informer-rs {:.2}, kube-runtime {:.2}",
                ratio(a),
                ratio(b)
            );
        }
    }
    Ok(())
}

fn ratio(s: Sample) -> f64 {
    s.peak as f64 / s.steady.max(1) as f64
}

fn push(out: &mut Records, case: &str, side: &str, s: Sample, objects: usize) {
    let n = objects.max(1) as f64;
    let metric = |metric, unit| Metric {
        scenario: "relist",
        case,
        metric,
        unit,
        higher_is_better: false,
    };
    out.push(
        &metric("peak heap during relist / steady state", "×"),
        side,
        ratio(s),
    );
    out.push(
        &metric("steady-state heap once synced", "B/object"),
        side,
        s.steady as f64 / n,
    );
    out.push(
        &metric("peak heap during relist", "B/object"),
        side,
        s.peak as f64 / n,
    );
}
