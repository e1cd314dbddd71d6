//! Initial sync of 10,000 ConfigMaps against one in-process envtest server,
//! side by side: this crate's `SharedIndexInformer` and kube-runtime's
//! reflector (`watcher` + `reflector::store`). For each it prints the time
//! from start until the cache reports synced and the heap retained at that
//! point (bytes allocated minus freed in between, counted by a wrapping
//! global allocator). Several rounds, alternating; medians are printed.
//!
//! Run: `cargo bench -p informer-core --bench informer`
//! (`INFORMER_BENCH_OBJECTS` and `INFORMER_BENCH_ROUNDS` override the sizes).
//! Nothing here asserts on timing.

use std::alloc::System;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::PostParams;
use kube_client::{Api, Client};
use kube_core::ObjectMeta;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const NAMESPACE: &str = "bench";
const SYNC_LIMIT: Duration = Duration::from_secs(300);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One measured initial sync.
#[derive(Debug, Clone, Copy)]
struct Sample {
    elapsed: Duration,
    retained_bytes: i64,
}

fn retained(region: &Region<'_, System>) -> i64 {
    let s = region.change();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64 + s.bytes_reallocated as i64
}

fn config_map(i: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:05}")),
            namespace: Some(NAMESPACE.into()),
            labels: Some(
                [
                    ("app".to_string(), format!("app-{}", i % 50)),
                    ("tier".to_string(), "bench".to_string()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                ("index".to_string(), i.to_string()),
                ("payload".to_string(), "x".repeat(200)),
            ]
            .into(),
        ),
        ..ConfigMap::default()
    }
}

async fn seed(client: &Client, objects: usize) -> Result<(), kube_client::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &config_map(i)).await }
        })
        .buffer_unordered(32)
        .try_for_each(|_| async { Ok(()) })
        .await
}

async fn sync_informer(client: &Client, objects: usize) -> Sample {
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    let api: Api<ConfigMap> = Api::all(client.clone());
    let informer = SharedIndexInformer::new(
        ApiListerWatcher::new(api, ListWatchOptions::default()),
        Duration::ZERO,
    );
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let token = token.clone();
        async move { informer.run(token).await }
    });
    if let Err(err) = informer.wait_for_cache_sync(SYNC_LIMIT).await {
        panic!("informer did not sync: {err}");
    }
    let elapsed = start.elapsed();
    assert_eq!(informer.indexer().len(), objects, "informer cache size");
    let retained_bytes = retained(&region);
    token.cancel();
    let _ = task.await;
    drop(informer);
    Sample {
        elapsed,
        retained_bytes,
    }
}

async fn sync_kube_runtime(client: &Client, objects: usize) -> Sample {
    use kube_runtime::{reflector, watcher};
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    let api: Api<ConfigMap> = Api::all(client.clone());
    let (store, writer) = reflector::store::<ConfigMap>();
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let token = token.clone();
        async move {
            let events = reflector(writer, watcher(api, watcher::Config::default()));
            let drive = events.for_each(|_| async {});
            tokio::select! {
                () = drive => {}
                () = token.cancelled() => {}
            }
        }
    });
    match tokio::time::timeout(SYNC_LIMIT, store.wait_until_ready()).await {
        Ok(Ok(())) => {}
        other => panic!("kube-runtime reflector did not sync: {other:?}"),
    }
    let elapsed = start.elapsed();
    assert_eq!(store.state().len(), objects, "kube-runtime store size");
    let retained_bytes = retained(&region);
    token.cancel();
    let _ = task.await;
    drop(store);
    Sample {
        elapsed,
        retained_bytes,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn summarize(name: &str, samples: &[Sample], objects: usize) {
    let ms = median(
        samples
            .iter()
            .map(|s| s.elapsed.as_secs_f64() * 1e3)
            .collect(),
    );
    let bytes = median(samples.iter().map(|s| s.retained_bytes as f64).collect());
    println!(
        "| {name:<34} | {ms:>10.1} | {:>12.2} | {:>13.0} |",
        bytes / (1024.0 * 1024.0),
        bytes / objects as f64
    );
}

fn main() {
    let objects = env_usize("INFORMER_BENCH_OBJECTS", 10_000);
    let rounds = env_usize("INFORMER_BENCH_ROUNDS", 3).max(1);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => panic!("cannot build the tokio runtime: {err}"),
    };
    runtime.block_on(async move {
        let env = match envtest::TestEnv::start().await {
            Ok(env) => env,
            Err(err) => panic!("cannot start envtest: {err}"),
        };
        let client = env.client();
        let seeding = Instant::now();
        if let Err(err) = seed(&client, objects).await {
            panic!("seeding ConfigMaps failed: {err}");
        }
        println!(
            "seeded {objects} ConfigMaps in {:.1} s; {rounds} rounds, alternating",
            seeding.elapsed().as_secs_f64()
        );

        // One unmeasured warm-up of each so connection setup and lazy
        // statics are not charged to whichever runs first.
        let _ = sync_informer(&client, objects).await;
        let _ = sync_kube_runtime(&client, objects).await;

        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for round in 0..rounds {
            let (a, b) = if round % 2 == 0 {
                let a = sync_informer(&client, objects).await;
                (a, sync_kube_runtime(&client, objects).await)
            } else {
                let b = sync_kube_runtime(&client, objects).await;
                (sync_informer(&client, objects).await, b)
            };
            println!(
                "round {round}: informer-rs {:.1} ms / {:.2} MiB, kube-runtime {:.1} ms / {:.2} MiB",
                a.elapsed.as_secs_f64() * 1e3,
                a.retained_bytes as f64 / 1048576.0,
                b.elapsed.as_secs_f64() * 1e3,
                b.retained_bytes as f64 / 1048576.0
            );
            ours.push(a);
            theirs.push(b);
        }
        println!();
        println!("initial sync of {objects} ConfigMaps (median of {rounds}):");
        println!(
            "| {:<34} | {:>10} | {:>12} | {:>13} |",
            "cache", "sync ms", "retained MiB", "bytes/object"
        );
        println!("|{:-<36}|{:-<12}|{:-<14}|{:-<15}|", "", "", "", "");
        summarize("informer-rs SharedIndexInformer", &ours, objects);
        summarize("kube-runtime 5 reflector + store", &theirs, objects);
        drop(env);
    });
}
