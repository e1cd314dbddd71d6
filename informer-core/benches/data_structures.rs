//! Throughput of the informer's data structures: the DeltaFIFO (push, pop,
//! relist) and the Indexer (add, update, by_index, replace) over 10,000
//! ConfigMaps. Prints a table; nothing is asserted.
//!
//! Run with `cargo bench -p informer-core --bench data_structures`. Under
//! `cargo test` (no `--bench` argument) it runs a small smoke pass only.

// A benchmark over its own fixed data: a failure should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use informer_core::delta_fifo::DeltaFifo;
use informer_core::store::{IndexFn, Indexer, NAMESPACE_INDEX};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;

const NAMESPACES: usize = 10;
const APPS: usize = 100;

fn config_map(i: usize, version: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:05}")),
            namespace: Some(format!("ns-{}", i % NAMESPACES)),
            resource_version: Some(version.to_string()),
            labels: Some(BTreeMap::from([(
                "app".to_string(),
                format!("app-{}", i % APPS),
            )])),
            ..Default::default()
        },
        data: Some(
            (0..4)
                .map(|k| (format!("key-{k}"), format!("value-{i}-{k}")))
                .collect(),
        ),
        ..Default::default()
    }
}

fn objects(n: usize, version: usize) -> Vec<ConfigMap> {
    (0..n).map(|i| config_map(i, version)).collect()
}

fn app_index() -> (String, IndexFn<ConfigMap>) {
    let f: IndexFn<ConfigMap> = Arc::new(|c: &ConfigMap| {
        Ok(c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .cloned()
            .into_iter()
            .collect())
    });
    ("app".to_string(), f)
}

struct Row {
    name: &'static str,
    ops: usize,
    best: Duration,
    median: Duration,
}

/// Runs `run` (which returns how many operations it did and how long they
/// took, excluding setup) `reps` times; keeps the best and the median.
fn measure(name: &'static str, reps: usize, mut run: impl FnMut() -> (usize, Duration)) -> Row {
    let mut times = Vec::with_capacity(reps);
    let mut ops = 0;
    for _ in 0..reps {
        let (n, t) = run();
        ops = n;
        times.push(t);
    }
    times.sort();
    Row {
        name,
        ops,
        best: times[0],
        median: times[times.len() / 2],
    }
}

fn fifo_push(n: usize) -> (usize, Duration) {
    let objs = objects(n, 1);
    let fifo = DeltaFifo::new(None);
    let start = Instant::now();
    for o in objs {
        fifo.add(o);
    }
    (n, start.elapsed())
}

fn fifo_pop(n: usize) -> (usize, Duration) {
    let fifo = DeltaFifo::new(None);
    for o in objects(n, 1) {
        fifo.add(o);
    }
    // Popped items are kept (as the informer's cache keeps them), so the
    // time excludes freeing the objects.
    let mut kept = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        kept.push(fifo.pop(|d| d).now_or_never());
    }
    let elapsed = start.elapsed();
    black_box(kept);
    (n, elapsed)
}

/// Updates to keys already queued: each coalesces into the key's deltas.
fn fifo_coalesce(n: usize) -> (usize, Duration) {
    let fifo = DeltaFifo::new(None);
    for o in objects(n, 1) {
        fifo.add(o);
    }
    let updates = objects(n, 2);
    let start = Instant::now();
    for o in updates {
        fifo.update(o);
    }
    (n, start.elapsed())
}

/// The informer's initial sync: replace(list) then pop everything into an
/// indexer (the informer's work minus handler notification).
fn fifo_relist_into_indexer(n: usize) -> (usize, Duration) {
    let indexer = Indexer::new();
    let fifo = DeltaFifo::new(Some(Arc::new(indexer.clone())));
    let list = objects(n, 1);
    let start = Instant::now();
    fifo.replace(list, "1");
    while let Some(Ok(())) = fifo
        .pop(|d| {
            for delta in d.deltas {
                let _ = indexer.update(delta.object.into_object());
            }
        })
        .now_or_never()
    {
        if fifo.is_empty() {
            break;
        }
    }
    (n, start.elapsed())
}

/// A producer thread and a consumer task on a 2-worker tokio runtime; the
/// consumer waits in `pop` whenever the queue runs dry.
fn fifo_concurrent(n: usize) -> (usize, Duration) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let fifo = Arc::new(DeltaFifo::new(None));
    let objs = objects(n, 1);
    let start = Instant::now();
    let consumer = rt.spawn({
        let fifo = fifo.clone();
        async move {
            let mut seen = 0;
            while seen < n {
                seen += fifo.pop(|d| d.deltas.len()).await.unwrap();
            }
        }
    });
    let producer = std::thread::spawn({
        let fifo = fifo.clone();
        move || {
            for o in objs {
                fifo.add(o);
            }
        }
    });
    producer.join().unwrap();
    rt.block_on(consumer).unwrap();
    (n, start.elapsed())
}

fn filled_indexer(n: usize) -> Indexer<ConfigMap> {
    let indexer = Indexer::new();
    indexer.add_indexers([app_index()]).unwrap();
    for o in objects(n, 1) {
        indexer.add(Arc::new(o)).unwrap();
    }
    indexer
}

fn indexer_add(n: usize) -> (usize, Duration) {
    let indexer = Indexer::new();
    indexer.add_indexers([app_index()]).unwrap();
    let objs: Vec<_> = objects(n, 1).into_iter().map(Arc::new).collect();
    let start = Instant::now();
    for o in objs {
        indexer.add(o).unwrap();
    }
    (n, start.elapsed())
}

/// Updates that keep every index value (the common case). The replaced
/// objects stay alive until after the timing, as the informer hands them to
/// handlers (`on_update(old, new)`) rather than freeing them in place.
fn indexer_update_same(n: usize) -> (usize, Duration) {
    let indexer = filled_indexer(n);
    let old = indexer.list();
    let objs: Vec<_> = objects(n, 2).into_iter().map(Arc::new).collect();
    let start = Instant::now();
    for o in objs {
        indexer.update(o).unwrap();
    }
    let elapsed = start.elapsed();
    drop(old);
    (n, elapsed)
}

/// Updates that move every object to another `app` value.
fn indexer_update_moving(n: usize) -> (usize, Duration) {
    let indexer = filled_indexer(n);
    let old = indexer.list();
    let objs: Vec<_> = objects(n, 2)
        .into_iter()
        .map(|mut o| {
            let labels = o.metadata.labels.get_or_insert_default();
            let app = labels["app"].clone();
            labels.insert("app".into(), format!("{app}-moved"));
            Arc::new(o)
        })
        .collect();
    let start = Instant::now();
    for o in objs {
        indexer.update(o).unwrap();
    }
    let elapsed = start.elapsed();
    drop(old);
    (n, elapsed)
}

fn indexer_by_index(
    n: usize,
    index: &'static str,
    values: usize,
    prefix: &'static str,
) -> impl FnMut() -> (usize, Duration) {
    let indexer = filled_indexer(n);
    move || {
        let lookups = 1_000;
        let start = Instant::now();
        for i in 0..lookups {
            black_box(
                indexer
                    .by_index(index, &format!("{prefix}{}", i % values))
                    .unwrap(),
            );
        }
        (lookups, start.elapsed())
    }
}

fn indexer_get(n: usize) -> impl FnMut() -> (usize, Duration) {
    let indexer = filled_indexer(n);
    let keys: Vec<String> = (0..n)
        .map(|i| format!("ns-{}/cm-{i:05}", i % NAMESPACES))
        .collect();
    move || {
        let start = Instant::now();
        for k in &keys {
            black_box(indexer.get_by_key(k));
        }
        (keys.len(), start.elapsed())
    }
}

fn indexer_replace(n: usize) -> (usize, Duration) {
    let indexer = filled_indexer(n);
    let old = indexer.list(); // freed after the timing, as for updates
    let objs: Vec<_> = objects(n, 2).into_iter().map(Arc::new).collect();
    let start = Instant::now();
    indexer.replace(objs).unwrap();
    let elapsed = start.elapsed();
    drop(old);
    (n, elapsed)
}

/// One writer updating in a loop while one reader runs by_index("app"):
/// returns the writer's count; the reader's count is reported separately.
fn indexer_update_under_reads(n: usize, reader_ops: &AtomicUsize) -> (usize, Duration) {
    let indexer = filled_indexer(n);
    let objs: Vec<_> = objects(n, 2).into_iter().map(Arc::new).collect();
    let stop = AtomicBool::new(false);
    let mut elapsed = Duration::ZERO;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                black_box(
                    indexer
                        .by_index("app", &format!("app-{}", i % APPS))
                        .unwrap(),
                );
                i += 1;
            }
            reader_ops.store(i, Ordering::Relaxed);
        });
        let start = Instant::now();
        for o in &objs {
            indexer.update(o.clone()).unwrap();
        }
        elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
    });
    (n, elapsed)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (n, reps) = if full { (10_000, 7) } else { (200, 1) };
    let reader_ops = AtomicUsize::new(0);
    let rows = vec![
        measure("fifo add (new keys)", reps, || fifo_push(n)),
        measure("fifo pop", reps, || fifo_pop(n)),
        measure("fifo update (key already queued)", reps, || {
            fifo_coalesce(n)
        }),
        measure("fifo replace + pop into indexer", reps, || {
            fifo_relist_into_indexer(n)
        }),
        measure("fifo add/pop, producer + async consumer", reps, || {
            fifo_concurrent(n)
        }),
        measure("indexer add", reps, || indexer_add(n)),
        measure("indexer update (same index values)", reps, || {
            indexer_update_same(n)
        }),
        measure("indexer update (index value moves)", reps, || {
            indexer_update_moving(n)
        }),
        measure("indexer update with a concurrent reader", reps, || {
            indexer_update_under_reads(n, &reader_ops)
        }),
        measure("indexer replace (whole list)", reps, || indexer_replace(n)),
        measure("indexer get_by_key", reps, indexer_get(n)),
        measure(
            "indexer by_index app (100 objs/value)",
            reps,
            indexer_by_index(n, "app", APPS, "app-"),
        ),
        measure(
            "indexer by_index namespace (1000 objs/value)",
            reps,
            indexer_by_index(n, NAMESPACE_INDEX, NAMESPACES, "ns-"),
        ),
    ];
    println!("informer-core data structures, {n} ConfigMaps, {reps} runs each (best and median)");
    println!(
        "{:<46} {:>7} {:>12} {:>14} {:>14}",
        "operation", "ops", "best", "ops/s (best)", "ops/s (median)"
    );
    for r in &rows {
        let rate = |d: Duration| r.ops as f64 / d.as_secs_f64().max(1e-9);
        println!(
            "{:<46} {:>7} {:>12} {:>14.0} {:>14.0}",
            r.name,
            r.ops,
            format!("{:.2?}", r.best),
            rate(r.best),
            rate(r.median)
        );
    }
    println!(
        "(concurrent reader ran {} by_index(app) lookups during the last update run)",
        reader_ops.load(Ordering::Relaxed)
    );
}
