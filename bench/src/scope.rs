//! Scenario 8, cache scope: what a cache of Secrets costs with full objects
//! and with metadata only, and how long a sync takes by streaming list and
//! by LIST.
//!
//! Memory: N Secrets with 4 KiB of data each. informer-rs caches them with
//! a `SharedIndexInformer<Secret>` and with a `SharedIndexInformer<
//! PartialObjectMeta<Secret>>` (metadata-only requests), managedFields
//! stripped in both; kube-runtime with `watcher` and its metadata watcher
//! into a reflector store (its metadata watcher is a `watcher` over
//! `PartialObjectMeta<Secret>`), managedFields cleared likewise. Measured: the
//! heap retained once synced and the peak while syncing, per object, and the
//! time to synced.
//!
//! Sync time: the same N Secrets, metadata only, listed by LIST (pages of
//! 500) and by streaming list (`sendInitialEvents`), on both sides.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt, TryStreamExt, stream};
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube_client::api::PostParams;
use kube_client::{Api, Client};
use kube_core::metadata::PartialObjectMeta;
use kube_core::{NamespaceScope, ObjectMeta, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::fixtures::IN_FLIGHT;
use crate::heap::Window;
use crate::record::{KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan};

const LIMIT: Duration = Duration::from_secs(300);
const PAGE: u32 = 500;
const NAMESPACE: &str = "scope-secrets";

/// One measured sync.
#[derive(Debug, Clone, Copy)]
struct Sample {
    elapsed: Duration,
    peak: i64,
    retained: i64,
}

/// How a cache gets its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Initial {
    List,
    Streaming,
}

/// Creates the namespace and `objects` Secrets of 4 KiB of data.
async fn seed(client: &Client, objects: usize) -> Result<(), kube_client::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces.create(&PostParams::default(), &ns).await?;
    let api: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(format!("secret-{i:06}")),
                    labels: Some([("app".to_owned(), format!("app-{}", i % 100))].into()),
                    ..ObjectMeta::default()
                },
                data: Some([("payload".to_owned(), ByteString(vec![b'x'; 4096]))].into()),
                ..Secret::default()
            };
            async move { api.create(&PostParams::default(), &secret).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// informer-rs: an informer of `K` (a `Secret` or its metadata) over the
/// namespace, managedFields stripped.
async fn ours<K>(client: &Client, objects: usize, initial: Initial) -> Result<Sample, BenchError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::Scope: NamespaceScope,
{
    crate::heap::settle().await;
    let heap = Window::start();
    let start = Instant::now();
    let api = Api::<K>::all(client.clone()).constrain(NAMESPACE);
    let informer = SharedIndexInformer::builder(
        ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(false),
    )
    .strip_managed_fields(true)
    .streaming_list(initial == Initial::Streaming)
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
    let sample = Sample {
        elapsed: start.elapsed(),
        peak: heap.peak(),
        retained: heap.retained(),
    };
    let len = informer.indexer().len();
    stop.cancel();
    let _ = task.await;
    BenchError::expect_len("informer-rs cache", len, objects)?;
    Ok(sample)
}

/// kube-runtime: a reflector store fed by `events` (managedFields cleared).
async fn kube<K, S>(objects: usize, events: S) -> Result<Sample, BenchError>
where
    K: kube_runtime::reflector::Lookup<DynamicType = ()> + Resource + Clone + Send + Sync + 'static,
    S: Stream<Item = Result<kube_runtime::watcher::Event<K>, kube_runtime::watcher::Error>>
        + Send
        + 'static,
{
    use kube_runtime::{WatchStreamExt, reflector};
    crate::heap::settle().await;
    let heap = Window::start();
    let start = Instant::now();
    let (store, writer) = reflector::store::<K>();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let events = events.modify(|o: &mut K| o.meta_mut().managed_fields = None);
            let drive = reflector(writer, events).for_each(|_| async {});
            tokio::select! {
                () = drive => {}
                () = stop.cancelled() => {}
            }
        }
    });
    crate::fixtures::kube_store_ready(&store, LIMIT).await?;
    let sample = Sample {
        elapsed: start.elapsed(),
        peak: heap.peak(),
        retained: heap.retained(),
    };
    let len = store.state().len();
    stop.cancel();
    let _ = task.await;
    BenchError::expect_len("kube-runtime store", len, objects)?;
    Ok(sample)
}

fn kube_config(initial: Initial) -> kube_runtime::watcher::Config {
    let config = kube_runtime::watcher::Config::default().page_size(PAGE);
    match initial {
        Initial::List => config,
        Initial::Streaming => config.streaming_lists(),
    }
}

async fn kube_full(client: &Client, objects: usize) -> Result<Sample, BenchError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    kube(
        objects,
        kube_runtime::watcher(api, kube_config(Initial::List)),
    )
    .await
}

async fn kube_metadata(
    client: &Client,
    objects: usize,
    initial: Initial,
) -> Result<Sample, BenchError> {
    // kube-runtime's metadata watcher: a watcher over `PartialObjectMeta`
    // (what its deprecated `metadata_watcher` now does).
    let api: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.clone(), NAMESPACE);
    kube(objects, kube_runtime::watcher(api, kube_config(initial))).await
}

/// Runs the scenario.
pub async fn run(client: &Client, plan: &Plan, out: &mut Records) -> Result<(), BenchError> {
    let n = plan.scope_objects;
    seed(client, n).await.map_err(BenchError::msg)?;
    let full_case = format!("{n} Secrets of 4 KiB, full objects (LIST)");
    let meta_case = format!("{n} Secrets of 4 KiB, metadata only (LIST)");
    let stream_case = format!("{n} Secrets, metadata only, streaming list");
    // Unmeasured warm-up: connections, lazy statics.
    ours::<Secret>(client, n, Initial::List).await?;
    kube_full(client, n).await?;
    for run in 0..plan.runs {
        let cases: [(&str, Sample, Sample); 3] = if run % 2 == 0 {
            [
                (
                    &full_case,
                    ours::<Secret>(client, n, Initial::List).await?,
                    kube_full(client, n).await?,
                ),
                (
                    &meta_case,
                    ours::<PartialObjectMeta<Secret>>(client, n, Initial::List).await?,
                    kube_metadata(client, n, Initial::List).await?,
                ),
                (
                    &stream_case,
                    ours::<PartialObjectMeta<Secret>>(client, n, Initial::Streaming).await?,
                    kube_metadata(client, n, Initial::Streaming).await?,
                ),
            ]
        } else {
            let kf = kube_full(client, n).await?;
            let km = kube_metadata(client, n, Initial::List).await?;
            let ks = kube_metadata(client, n, Initial::Streaming).await?;
            [
                (
                    &full_case,
                    ours::<Secret>(client, n, Initial::List).await?,
                    kf,
                ),
                (
                    &meta_case,
                    ours::<PartialObjectMeta<Secret>>(client, n, Initial::List).await?,
                    km,
                ),
                (
                    &stream_case,
                    ours::<PartialObjectMeta<Secret>>(client, n, Initial::Streaming).await?,
                    ks,
                ),
            ]
        };
        for (case, a, b) in cases {
            for (side, s) in [(OURS, a), (KUBE, b)] {
                push(out, case, side, s, n);
            }
            eprintln!(
                "scope {case} run {run}: informer-rs {:.0} B/object in {:.1} ms, kube-runtime {:.0} B/object in {:.1} ms",
                a.retained as f64 / n.max(1) as f64,
                ms(a.elapsed),
                b.retained as f64 / n.max(1) as f64,
                ms(b.elapsed)
            );
        }
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn push(out: &mut Records, case: &str, side: &str, s: Sample, objects: usize) {
    let metric = |metric, unit| Metric {
        scenario: "scope",
        case,
        metric,
        unit,
        higher_is_better: false,
    };
    let n = objects.max(1) as f64;
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
}
