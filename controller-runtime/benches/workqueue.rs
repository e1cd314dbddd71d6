//! Workqueue throughput: items per second through add -> get -> done with 1,
//! 2 and 8 worker tasks, next to a plain tokio mpsc channel (the floor: a
//! queue that neither deduplicates nor tracks processing) in the same run.
//!
//! Two shapes: a *flood* (the producer adds every item as fast as it can, so
//! up to all of them wait at once, as after a controller restart) and a
//! *steady* state (at most 1,000 items outstanding, which a semaphore
//! enforces on both sides alike).
//!
//! Run with `cargo bench -p controller-runtime --bench workqueue`; set
//! `WORKQUEUE_BENCH_ITEMS` to change the number of items per run. Run any
//! other way (`cargo test --all-targets` builds and runs it too), it does a
//! small smoke run that only checks the benchmark still works.
#![expect(
    clippy::unwrap_used,
    reason = "a benchmark program: any failure should stop it loudly"
)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_runtime::workqueue::Queue;
use tokio::sync::{Mutex, Semaphore, mpsc};

const WORKERS: [usize; 3] = [1, 2, 8];
/// Runs per configuration under `cargo bench`; the median is reported.
const RUNS: usize = 5;
/// Items outstanding at most in the steady shape.
const STEADY_BACKLOG: usize = 1_000;

/// What a controller queues: an object's namespace and name.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Request {
    namespace: String,
    name: String,
}

/// Limits how many items are outstanding (`None`: no limit).
#[derive(Clone)]
struct Backlog(Option<Arc<Semaphore>>);

impl Backlog {
    fn new(limit: Option<usize>) -> Self {
        Backlog(limit.map(|n| Arc::new(Semaphore::new(n))))
    }
    async fn reserve(&self) {
        if let Some(sem) = &self.0 {
            sem.acquire().await.unwrap().forget();
        }
    }
    fn release(&self) {
        if let Some(sem) = &self.0 {
            sem.add_permits(1);
        }
    }
}

/// Adds `items` (all distinct) from one task while `workers` tasks get and
/// done them; returns the time until every item was done.
async fn run_queue<T>(items: Vec<T>, workers: usize, backlog: Option<usize>) -> Duration
where
    T: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    let queue: Queue<T> = Queue::new();
    let backlog = Backlog::new(backlog);
    let start = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (queue, backlog) = (queue.clone(), backlog.clone());
            tokio::spawn(async move {
                let mut n = 0usize;
                while let Some(item) = queue.get().await {
                    black_box(&item);
                    queue.done(&item);
                    backlog.release();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let producer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for item in items {
                backlog.reserve().await;
                queue.add(item);
            }
            queue.shut_down();
        })
    };
    producer.await.unwrap();
    let mut done = 0;
    for h in handles {
        done += h.await.unwrap();
    }
    let elapsed = start.elapsed();
    assert!(done > 0);
    elapsed
}

/// The same shape through an unbounded mpsc channel; with several workers
/// they share the receiver behind an async mutex.
async fn run_mpsc(items: Vec<u64>, workers: usize, backlog: Option<usize>) -> Duration {
    let (tx, rx) = mpsc::unbounded_channel::<u64>();
    let backlog = Backlog::new(backlog);
    let start = Instant::now();
    let handles: Vec<_> = if workers == 1 {
        let (mut rx, backlog) = (rx, backlog.clone());
        vec![tokio::spawn(async move {
            let mut n = 0usize;
            while let Some(item) = rx.recv().await {
                black_box(item);
                backlog.release();
                n += 1;
            }
            n
        })]
    } else {
        let rx = Arc::new(Mutex::new(rx));
        (0..workers)
            .map(|_| {
                let (rx, backlog) = (Arc::clone(&rx), backlog.clone());
                tokio::spawn(async move {
                    let mut n = 0usize;
                    loop {
                        let item = rx.lock().await.recv().await;
                        let Some(item) = item else { break };
                        black_box(item);
                        backlog.release();
                        n += 1;
                    }
                    n
                })
            })
            .collect()
    };
    let producer = tokio::spawn(async move {
        for item in items {
            backlog.reserve().await;
            let _ = tx.send(item);
        }
    });
    producer.await.unwrap();
    let mut done = 0;
    for h in handles {
        done += h.await.unwrap();
    }
    let elapsed = start.elapsed();
    assert!(done > 0);
    elapsed
}

/// One task: add everything, then get and done everything (no waiting, no
/// contention): the cost of the bookkeeping alone.
async fn run_queue_sequential(items: Vec<u64>) -> Duration {
    let queue: Queue<u64> = Queue::new();
    let start = Instant::now();
    for item in items {
        queue.add(item);
    }
    while let Some(item) = queue.try_get() {
        queue.done(&item);
    }
    start.elapsed()
}

/// The floor for the same: send everything, then receive everything.
async fn run_mpsc_sequential(items: Vec<u64>) -> Duration {
    let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
    let start = Instant::now();
    for item in items {
        let _ = tx.send(item);
    }
    while let Ok(item) = rx.try_recv() {
        black_box(item);
    }
    start.elapsed()
}

fn median_rate(items: usize, mut times: Vec<Duration>) -> f64 {
    times.sort();
    items as f64 / times[times.len() / 2].as_secs_f64()
}

fn fmt_rate(rate: f64) -> String {
    format!("{:.2} M", rate / 1e6)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not.
    let measuring = std::env::args().any(|arg| arg == "--bench");
    let runs = if measuring { RUNS } else { 1 };
    let items: usize = std::env::var("WORKQUEUE_BENCH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if measuring { 200_000 } else { 2_000 });
    if !measuring {
        println!("smoke run (not under `cargo bench`): these numbers are not measurements");
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap();
    let numbers: Vec<u64> = (0..items as u64).collect();
    let requests: Vec<Request> = (0..items)
        .map(|i| Request {
            namespace: format!("ns-{}", i % 16),
            name: format!("object-{i}"),
        })
        .collect();

    println!(
        "workqueue throughput: {items} distinct items, one producer task, \
         median of {runs} runs, tokio multi-thread runtime with {threads} threads"
    );
    println!(
        "| shape | workers | Queue<u64> add+get+done/s | Queue<Request> add+get+done/s | mpsc<u64> send+recv/s (floor) | Queue<u64> / mpsc |"
    );
    println!("|---|---|---|---|---|---|");
    for (shape, backlog) in [
        ("flood", None),
        ("steady (<= 1,000 outstanding)", Some(STEADY_BACKLOG)),
    ] {
        for workers in WORKERS {
            let mut q_u64 = Vec::new();
            let mut q_req = Vec::new();
            let mut chan = Vec::new();
            for _ in 0..runs {
                q_u64.push(runtime.block_on(run_queue(numbers.clone(), workers, backlog)));
                q_req.push(runtime.block_on(run_queue(requests.clone(), workers, backlog)));
                chan.push(runtime.block_on(run_mpsc(numbers.clone(), workers, backlog)));
            }
            let (a, b, c) = (
                median_rate(items, q_u64),
                median_rate(items, q_req),
                median_rate(items, chan),
            );
            println!(
                "| {shape} | {workers} | {} | {} | {} | {:.2} |",
                fmt_rate(a),
                fmt_rate(b),
                fmt_rate(c),
                a / c
            );
        }
    }

    let mut q_seq = Vec::new();
    let mut chan_seq = Vec::new();
    for _ in 0..runs {
        q_seq.push(runtime.block_on(run_queue_sequential(numbers.clone())));
        chan_seq.push(runtime.block_on(run_mpsc_sequential(numbers.clone())));
    }
    let (a, c) = (median_rate(items, q_seq), median_rate(items, chan_seq));
    println!(
        "| one task adds all, then takes all (bookkeeping alone) | 0 | {} | - | {} | {:.2} |",
        fmt_rate(a),
        fmt_rate(c),
        a / c
    );
}
