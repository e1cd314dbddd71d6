//! Scenario 6, workqueue: add -> get -> done cycles per second with 1, 2 and
//! 8 worker tasks while one task adds every item (all distinct), next to a
//! tokio mpsc channel shared by the same workers (the floor: it moves items
//! but neither deduplicates nor keeps two workers off one item). kube-runtime
//! has no standalone queue, so there is no kube-runtime side here.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_runtime::workqueue::Queue;
use tokio::sync::{Mutex, mpsc};

use crate::record::{FLOOR, Metric, OURS, Records};
use crate::{BenchError, Plan};

async fn queue(items: u64, workers: usize) -> Result<Duration, BenchError> {
    let queue: Queue<u64> = Queue::new();
    let start = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while let Some(item) = queue.get().await {
                    black_box(item);
                    queue.done(&item);
                    n += 1;
                }
                n
            })
        })
        .collect();
    for i in 0..items {
        queue.add(i);
    }
    // Wait until every item went through, then stop the workers.
    while !queue.is_empty() || queue.processing() > 0 {
        tokio::task::yield_now().await;
    }
    let elapsed = start.elapsed();
    queue.shut_down();
    let mut done = 0;
    for h in handles {
        done += h.await.map_err(BenchError::msg)?;
    }
    if done != items {
        return Err(BenchError(format!("queue processed {done} of {items}")));
    }
    Ok(elapsed)
}

async fn channel(items: u64, workers: usize) -> Result<Duration, BenchError> {
    let (tx, rx) = mpsc::unbounded_channel::<u64>();
    let rx = Arc::new(Mutex::new(rx));
    let start = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let rx = Arc::clone(&rx);
            tokio::spawn(async move {
                let mut n = 0u64;
                loop {
                    let item = rx.lock().await.recv().await;
                    match item {
                        Some(item) => {
                            black_box(item);
                            n += 1;
                        }
                        None => return n,
                    }
                }
            })
        })
        .collect();
    for i in 0..items {
        tx.send(i).map_err(BenchError::msg)?;
    }
    drop(tx);
    let mut done = 0;
    for h in handles {
        done += h.await.map_err(BenchError::msg)?;
    }
    let elapsed = start.elapsed();
    if done != items {
        return Err(BenchError(format!("channel moved {done} of {items}")));
    }
    Ok(elapsed)
}

/// Runs the scenario.
pub async fn run(plan: &Plan, out: &mut Records) -> Result<(), BenchError> {
    let items = plan.queue_items as u64;
    for workers in [1usize, 2, 8] {
        let case = format!("{workers} workers, {items} items");
        let metric = Metric {
            scenario: "workqueue",
            case: &case,
            metric: "add+get+done cycles/s",
            unit: "items/s",
            higher_is_better: true,
        };
        for run in 0..plan.runs {
            let (q, c) = if run % 2 == 0 {
                let q = queue(items, workers).await?;
                (q, channel(items, workers).await?)
            } else {
                let c = channel(items, workers).await?;
                (queue(items, workers).await?, c)
            };
            out.push(&metric, OURS, items as f64 / q.as_secs_f64());
            out.push(&metric, FLOOR, items as f64 / c.as_secs_f64());
        }
        eprintln!("workqueue {case} done");
    }
    Ok(())
}
