//! Initial sync of 10,000 ConfigMaps against one in-process envtest server,
//! side by side: this crate's `SharedIndexInformer` and kube-runtime's
//! reflector (`watcher` + `reflector::store`). For each it prints the time
//! from start until the cache reports synced and the heap retained at that
//! point (bytes allocated minus freed in between, counted by a wrapping
//! global allocator), plus the process CPU time spent meanwhile (client and
//! server together, so less sensitive to a busy machine than wall time). Several rounds, alternating; medians are printed.
//!
//! Run: `cargo bench -p informer-core --bench informer`
//! (`INFORMER_BENCH_OBJECTS` and `INFORMER_BENCH_ROUNDS` override the sizes).
//! Nothing here asserts on timing.

use std::alloc::System;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use informer_core::delta_fifo::DeltaFifo;
use informer_core::key::object_key;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::{SharedIndexInformer, handler_fn};
use informer_core::store::Indexer;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
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
    /// CPU time of the whole process (client and in-process server) meanwhile.
    cpu: Duration,
    retained_bytes: i64,
}

/// User + system CPU time of this process so far, from `/proc/self/stat`
/// (clock ticks, assumed 100 per second); zero where unavailable.
fn process_cpu() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// Bytes allocated and not freed since `region` began. stats_alloc already
/// adds a `realloc`'s growth to `bytes_allocated` (and its shrinkage to
/// `bytes_deallocated`); `bytes_reallocated` is the same delta again, so it
/// must not be added (doing so charged every vector that grew by `realloc`
/// and was later freed, such as a list being collected, as retained).
fn retained(region: &Region<'_, System>) -> i64 {
    let s = region.change();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
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
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces.create(&PostParams::default(), &ns).await?;
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

/// With `with_handler`, one no-op handler is registered before start and
/// the time runs until its registration has synced (every initial add
/// delivered through its buffer).
async fn sync_informer(client: &Client, objects: usize, with_handler: bool) -> Sample {
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    let cpu_start = process_cpu();
    let api: Api<ConfigMap> = Api::all(client.clone());
    let informer = SharedIndexInformer::new(
        ApiListerWatcher::new(api, ListWatchOptions::default()),
        Duration::ZERO,
    );
    let registration = with_handler.then(|| {
        match informer.add_event_handler(handler_fn::<ConfigMap>().on_add(|obj, _| {
            std::hint::black_box(obj);
        })) {
            Ok(reg) => reg,
            Err(err) => panic!("adding the handler failed: {err}"),
        }
    });
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let token = token.clone();
        async move { informer.run(token).await }
    });
    if let Err(err) = informer.wait_for_cache_sync(SYNC_LIMIT).await {
        panic!("informer did not sync: {err}");
    }
    if let Some(reg) = &registration {
        assert!(reg.wait_for_sync(SYNC_LIMIT).await, "handler did not sync");
    }
    let elapsed = start.elapsed();
    let cpu = process_cpu().saturating_sub(cpu_start);
    assert_eq!(informer.indexer().len(), objects, "informer cache size");
    let retained_bytes = retained(&region);
    if !with_handler {
        report_bookkeeping(&informer).await;
    }
    token.cancel();
    let _ = task.await;
    drop(informer);
    report_left("informer-rs", retained(&region), objects);
    Sample {
        elapsed,
        cpu,
        retained_bytes,
    }
}

/// Prints, once per cache, what stays allocated after the cache was stopped
/// and dropped: what the server (same process) or the client kept.
fn report_left(cache: &str, bytes: i64, objects: usize) {
    static DONE: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut done = DONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if done.iter().any(|c| c == cache) {
        return;
    }
    done.push(cache.to_owned());
    println!(
        "{cache}: still allocated after stop and drop (server and client): {:.0} B per object",
        bytes as f64 / objects.max(1) as f64
    );
}

/// Heap the cache's bookkeeping costs beyond the objects themselves: the
/// cached `Arc`s are re-inserted (shared, not copied) into a fresh `Indexer`
/// and, for reference, into a plain `HashMap<String, Arc<K>>`.
async fn report_bookkeeping(informer: &SharedIndexInformer<ConfigMap>) {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if DONE.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let objects = informer.indexer().list();
    let n = objects.len().max(1) as f64;
    let region = Region::new(GLOBAL);
    let indexer = Indexer::new();
    for obj in &objects {
        if let Err(err) = indexer.add(Arc::clone(obj)) {
            panic!("indexer add failed: {err}");
        }
    }
    let indexer_bytes = retained(&region) as f64;
    let region = Region::new(GLOBAL);
    let mut map: HashMap<String, Arc<ConfigMap>> = HashMap::new();
    for obj in &objects {
        map.insert(object_key(obj.as_ref()), Arc::clone(obj));
    }
    let map_bytes = retained(&region) as f64;
    // The objects themselves, as fresh deep copies.
    let region = Region::new(GLOBAL);
    let copies: Vec<Arc<ConfigMap>> = objects.iter().map(|o| Arc::new((**o).clone())).collect();
    let object_bytes = (retained(&region) as f64) - (copies.capacity() * 8) as f64;
    drop(copies);
    // What a DeltaFifo keeps after a full list went through it and was popped.
    let region = Region::new(GLOBAL);
    let copies: Vec<ConfigMap> = objects.iter().map(|o| (**o).clone()).collect();
    let fifo = DeltaFifo::<ConfigMap>::new(None);
    fifo.replace(copies, "1");
    while !fifo.is_empty() {
        if fifo.pop(drop).await.is_err() {
            break;
        }
    }
    // The copies were freed as they were popped, so this is what the FIFO kept.
    let fifo_bytes = retained(&region) as f64;
    println!(
        "per object: the object itself (deep copy) {:.0} B; bookkeeping: Indexer (with namespace index) {:.0} B, plain HashMap<String, Arc<K>> {:.0} B, drained DeltaFifo {:.0} B",
        object_bytes / n,
        indexer_bytes / n,
        map_bytes / n,
        fifo_bytes / n
    );
    drop((indexer, map, fifo));
}

async fn sync_kube_runtime(client: &Client, objects: usize) -> Sample {
    use kube_runtime::{reflector, watcher};
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    let cpu_start = process_cpu();
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
    let cpu = process_cpu().saturating_sub(cpu_start);
    assert_eq!(store.state().len(), objects, "kube-runtime store size");
    let retained_bytes = retained(&region);
    token.cancel();
    let _ = task.await;
    drop(store);
    report_left("kube-runtime", retained(&region), objects);
    Sample {
        elapsed,
        cpu,
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
    let cpu = median(samples.iter().map(|s| s.cpu.as_secs_f64() * 1e3).collect());
    let bytes = median(samples.iter().map(|s| s.retained_bytes as f64).collect());
    println!(
        "| {name:<34} | {ms:>10.1} | {cpu:>8.0} | {:>12.2} | {:>13.0} |",
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
        let _ = sync_informer(&client, objects, false).await;
        let _ = sync_kube_runtime(&client, objects).await;

        let mut ours = Vec::new();
        let mut ours_handler = Vec::new();
        let mut theirs = Vec::new();
        for round in 0..rounds {
            let (a, h, b) = if round % 2 == 0 {
                let a = sync_informer(&client, objects, false).await;
                let h = sync_informer(&client, objects, true).await;
                (a, h, sync_kube_runtime(&client, objects).await)
            } else {
                let b = sync_kube_runtime(&client, objects).await;
                let h = sync_informer(&client, objects, true).await;
                (sync_informer(&client, objects, false).await, h, b)
            };
            println!(
                "round {round}: informer-rs {:.1} ms / {:.2} MiB, with handler {:.1} ms / {:.2} MiB, kube-runtime {:.1} ms / {:.2} MiB",
                a.elapsed.as_secs_f64() * 1e3,
                a.retained_bytes as f64 / 1048576.0,
                h.elapsed.as_secs_f64() * 1e3,
                h.retained_bytes as f64 / 1048576.0,
                b.elapsed.as_secs_f64() * 1e3,
                b.retained_bytes as f64 / 1048576.0
            );
            ours.push(a);
            ours_handler.push(h);
            theirs.push(b);
        }
        println!();
        println!("initial sync of {objects} ConfigMaps (median of {rounds}):");
        println!(
            "| {:<34} | {:>10} | {:>8} | {:>12} | {:>13} |",
            "cache", "sync ms", "cpu ms", "retained MiB", "bytes/object"
        );
        println!("|{:-<36}|{:-<12}|{:-<10}|{:-<14}|{:-<15}|", "", "", "", "", "");
        summarize("informer-rs SharedIndexInformer", &ours, objects);
        summarize("  + 1 handler, until it synced", &ours_handler, objects);
        summarize("kube-runtime 5 reflector + store", &theirs, objects);
        drop(env);
    });
}
