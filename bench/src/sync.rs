//! Scenario 1, initial sync: a cache starts over N existing ConfigMaps
//! (lists in pages of 500, then watches) and reports synced. Measured: the
//! time to synced, the peak heap while syncing and the heap retained once
//! synced, per object, with managedFields kept and stripped on both sides.
//!
//! The floor decodes the same list pages, already in memory, into the same
//! typed objects (`Arc<ConfigMap>` in a `Vec`): no network, no cache. Its
//! retained heap is the objects' own size.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use informer_core::delta_fifo::strip_managed_fields;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::SharedIndexInformer;
use informer_core::store::Indexer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::ListParams;
use kube_client::{Api, Client};
use kube_core::{ObjectList, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::heap::Window;
use crate::record::{FLOOR, KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan, fixtures};

const LIMIT: Duration = Duration::from_secs(300);
const PAGE: u32 = 500;

/// One measured sync.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Start to synced.
    pub elapsed: Duration,
    /// Most heap in use at once meanwhile, above the start.
    pub peak: i64,
    /// Heap in use once synced, above the start.
    pub retained: i64,
    /// Of that, what an `Indexer` holding the same `Arc`s costs beyond the
    /// objects (informer-rs only; zero elsewhere).
    pub indexer: i64,
}

/// This crate's `SharedIndexInformer` over `namespace`.
pub async fn ours(
    client: &Client,
    namespace: &str,
    objects: usize,
    strip: bool,
) -> Result<Sample, BenchError> {
    crate::heap::settle().await;
    let heap = Window::start();
    let start = Instant::now();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    // This scenario measures LIST in pages (streaming lists: the scope scenario).
    let mut builder = SharedIndexInformer::builder(
        ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(false),
    )
    .streaming_list(false);
    if strip {
        builder = builder.transform(strip_managed_fields());
    }
    let informer = builder.build().map_err(BenchError::msg)?;
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, stop) = (informer.clone(), stop.clone());
        async move { informer.run(stop).await }
    });
    informer
        .wait_for_cache_sync(LIMIT)
        .await
        .map_err(BenchError::msg)?;
    let elapsed = start.elapsed();
    let (peak, retained) = (heap.peak(), heap.retained());
    let len = informer.indexer().len();
    let indexer = indexer_bookkeeping(&informer.indexer().list())?;
    stop.cancel();
    let _ = task.await;
    BenchError::expect_len("informer-rs cache", len, objects)?;
    Ok(Sample {
        elapsed,
        peak,
        retained,
        indexer,
    })
}

/// The heap a fresh `Indexer` costs for `objects` (shared, not copied).
fn indexer_bookkeeping(objects: &[Arc<ConfigMap>]) -> Result<i64, BenchError> {
    let heap = Window::start();
    let indexer = Indexer::new();
    for obj in objects {
        indexer.add(Arc::clone(obj)).map_err(BenchError::msg)?;
    }
    let bytes = heap.retained();
    drop(indexer);
    Ok(bytes)
}

/// kube-runtime's `watcher` + `reflector` store over `namespace`.
pub async fn kube(
    client: &Client,
    namespace: &str,
    objects: usize,
    strip: bool,
) -> Result<Sample, BenchError> {
    use kube_runtime::{WatchStreamExt, reflector, watcher};
    crate::heap::settle().await;
    let heap = Window::start();
    let start = Instant::now();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let (store, writer) = reflector::store::<ConfigMap>();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let events = watcher(api, watcher::Config::default().page_size(PAGE));
            let events = if strip {
                events.modify(|cm| cm.managed_fields_mut().clear()).boxed()
            } else {
                events.boxed()
            };
            let drive = reflector(writer, events).for_each(|_| async {});
            tokio::select! {
                () = drive => {}
                () = stop.cancelled() => {}
            }
        }
    });
    crate::fixtures::kube_store_ready(&store, LIMIT).await?;
    let elapsed = start.elapsed();
    let (peak, retained) = (heap.peak(), heap.retained());
    let len = store.state().len();
    stop.cancel();
    let _ = task.await;
    BenchError::expect_len("kube-runtime store", len, objects)?;
    Ok(Sample {
        elapsed,
        peak,
        retained,
        indexer: 0,
    })
}

/// The list pages of `namespace`, fetched once, as the server sent them.
pub async fn fetch_pages(client: &Client, namespace: &str) -> Result<Vec<String>, BenchError> {
    let request = kube_core::Request::new(format!("/api/v1/namespaces/{namespace}/configmaps"));
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let req = request.list(&params).map_err(BenchError::msg)?;
        let body = client.request_text(req).await.map_err(BenchError::msg)?;
        let list: ObjectList<serde::de::IgnoredAny> =
            serde_json::from_str(&body).map_err(BenchError::msg)?;
        pages.push(body);
        token = list.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(pages);
        }
    }
}

/// Decodes `pages` into `Arc<ConfigMap>`s (stripped or not); the floor.
pub async fn floor(pages: &[String], objects: usize, strip: bool) -> Result<Sample, BenchError> {
    crate::heap::settle().await;
    let heap = Window::start();
    let start = Instant::now();
    let mut all: Vec<Arc<ConfigMap>> = Vec::with_capacity(objects);
    for page in pages {
        let list: ObjectList<ConfigMap> = serde_json::from_str(page).map_err(BenchError::msg)?;
        all.extend(list.items.into_iter().map(|mut cm| {
            if strip {
                cm.metadata.managed_fields = None;
            }
            Arc::new(cm)
        }));
    }
    let elapsed = start.elapsed();
    let (peak, retained) = (heap.peak(), heap.retained());
    BenchError::expect_len("floor", all.len(), objects)?;
    drop(all);
    Ok(Sample {
        elapsed,
        peak,
        retained,
        indexer: 0,
    })
}

/// Runs the scenario for every size of `plan`.
pub async fn run(client: &Client, plan: &Plan, out: &mut Records) -> Result<(), BenchError> {
    for &objects in &plan.sync_sizes {
        let namespace = format!("sync-{objects}");
        fixtures::seed(client, &namespace, objects)
            .await
            .map_err(BenchError::msg)?;
        let pages = fetch_pages(client, &namespace).await?;
        for strip in [false, true] {
            let case = format!(
                "{objects} objects, managedFields {}",
                if strip { "stripped" } else { "kept" }
            );
            // One unmeasured warm-up each: connections, lazy statics.
            ours(client, &namespace, objects, strip).await?;
            kube(client, &namespace, objects, strip).await?;
            for run in 0..plan.runs {
                let (a, b) = if run % 2 == 0 {
                    let a = ours(client, &namespace, objects, strip).await?;
                    (a, kube(client, &namespace, objects, strip).await?)
                } else {
                    let b = kube(client, &namespace, objects, strip).await?;
                    (ours(client, &namespace, objects, strip).await?, b)
                };
                let f = floor(&pages, objects, strip).await?;
                for (side, s) in [(OURS, a), (KUBE, b), (FLOOR, f)] {
                    push(out, &case, side, s, objects);
                }
                // The other half of a sync: the server rendering the pages
                // and sending them, one request after the other, with no
                // decoding at all.
                let fetch_started = Instant::now();
                drop(fetch_pages(client, &namespace).await?);
                let fetch = fetch_started.elapsed();
                out.push(
                    &Metric {
                        scenario: "sync",
                        case: &case,
                        metric: "fetching the pages alone, no decoding",
                        unit: "ms",
                        higher_is_better: false,
                    },
                    FLOOR,
                    ms(fetch),
                );
                eprintln!(
                    "sync {case} run {run}: informer-rs {:.1} ms, kube-runtime {:.1} ms, floor {:.1} ms, fetch alone {:.1} ms",
                    ms(a.elapsed),
                    ms(b.elapsed),
                    ms(f.elapsed),
                    ms(fetch)
                );
            }
        }
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn push(out: &mut Records, case: &str, side: &str, s: Sample, objects: usize) {
    let n = objects.max(1) as f64;
    let metric = |metric, unit| Metric {
        scenario: "sync",
        case,
        metric,
        unit,
        higher_is_better: false,
    };
    out.push(&metric("time to synced", "ms"), side, ms(s.elapsed));
    out.push(
        &metric("peak heap while syncing", "B/object"),
        side,
        s.peak as f64 / n,
    );
    out.push(
        &metric("retained heap once synced", "B/object"),
        side,
        s.retained as f64 / n,
    );
    if side == OURS {
        out.push(
            &metric("of which the Indexer's bookkeeping", "B/object"),
            side,
            s.indexer as f64 / n,
        );
    }
}
