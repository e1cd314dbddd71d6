//! Scenarios 3 and 4, after the initial sync:
//!
//! - watch throughput: writes go to the server as fast as it takes them (32
//!   in flight) and every resulting event must reach a handler; measured:
//!   events per second reaching the handler and the lag from the moment the
//!   write was sent to the handler (p50, p99). Both sides.
//! - fan-out (informer-rs only: kube-runtime has no shared informer with
//!   several handlers in its default build): one informer, 1 / 10 / 100
//!   handlers, notifications delivered per second; and the heap held per
//!   pending notification while one handler is stuck.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::{SharedIndexInformer, handler_fn};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::{Api, Client};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::fixtures::{self, now_nanos, round_of, sent_of};
use crate::heap::Window;
use crate::record::{KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan};

const NAMESPACE: &str = "watch";
const LIMIT: Duration = Duration::from_secs(300);

/// What handlers saw in one run.
#[derive(Default)]
struct Seen {
    round: AtomicU32,
    count: AtomicUsize,
    lags_us: Mutex<Vec<u64>>,
}

impl Seen {
    fn record(&self, cm: &ConfigMap) {
        if round_of(cm) != self.round.load(Ordering::Acquire) {
            return;
        }
        if let Some(sent) = sent_of(cm) {
            self.lags_us
                .lock()
                .push(now_nanos().saturating_sub(sent) / 1_000);
        }
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    async fn wait_for(&self, n: usize) -> Result<(), BenchError> {
        let deadline = Instant::now() + LIMIT;
        while self.count.load(Ordering::Acquire) < n {
            if Instant::now() > deadline {
                return Err(BenchError(format!(
                    "only {} of {n} events reached the handlers",
                    self.count.load(Ordering::Acquire)
                )));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(())
    }
}

/// Result of one throughput run.
struct Throughput {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1e3
}

async fn write_and_wait(
    client: &Client,
    plan: &Plan,
    seen: &Seen,
    writes: usize,
    expect: usize,
) -> Result<Throughput, BenchError> {
    let start = Instant::now();
    fixtures::bump(
        client,
        NAMESPACE,
        plan.watch_objects,
        writes,
        seen.round.load(Ordering::Acquire),
    )
    .await
    .map_err(BenchError::msg)?;
    seen.wait_for(expect).await?;
    let elapsed = start.elapsed();
    let mut lags = std::mem::take(&mut *seen.lags_us.lock());
    lags.sort_unstable();
    Ok(Throughput {
        per_second: expect as f64 / elapsed.as_secs_f64(),
        p50_ms: percentile(&lags, 0.5),
        p99_ms: percentile(&lags, 0.99),
    })
}

fn informer(client: &Client) -> SharedIndexInformer<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    SharedIndexInformer::new(
        ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(false),
        Duration::ZERO,
    )
}

/// Starts `informer` and waits until it synced; cancel the token to stop it.
async fn start(
    informer: &SharedIndexInformer<ConfigMap>,
) -> Result<(CancellationToken, tokio::task::JoinHandle<()>), BenchError> {
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, stop) = (informer.clone(), stop.clone());
        async move {
            let _ = informer.run(stop).await;
        }
    });
    informer
        .wait_for_cache_sync(LIMIT)
        .await
        .map_err(BenchError::msg)?;
    Ok((stop, task))
}

/// Registers `handlers` handlers that record every update into `seen`.
fn add_handlers(
    informer: &SharedIndexInformer<ConfigMap>,
    seen: &Arc<Seen>,
    handlers: usize,
) -> Result<(), BenchError> {
    for _ in 0..handlers {
        let seen = Arc::clone(seen);
        informer
            .add_event_handler(handler_fn::<ConfigMap>().on_update(move |_, new| seen.record(&new)))
            .map_err(BenchError::msg)?;
    }
    Ok(())
}

async fn ours(
    client: &Client,
    plan: &Plan,
    round: u32,
    handlers: usize,
    writes: usize,
) -> Result<Throughput, BenchError> {
    let seen = Arc::new(Seen::default());
    seen.round.store(round, Ordering::Release);
    let informer = informer(client);
    add_handlers(&informer, &seen, handlers)?;
    let (stop, task) = start(&informer).await?;
    let result = write_and_wait(client, plan, &seen, writes, writes * handlers).await;
    stop.cancel();
    let _ = task.await;
    result
}

async fn kube(client: &Client, plan: &Plan, round: u32) -> Result<Throughput, BenchError> {
    use kube_runtime::{reflector, watcher};
    let seen = Arc::new(Seen::default());
    seen.round.store(round, Ordering::Release);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let (store, writer) = reflector::store::<ConfigMap>();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (stop, seen) = (stop.clone(), Arc::clone(&seen));
        async move {
            let drive = reflector(writer, watcher(api, watcher::Config::default())).for_each(
                move |event| {
                    if let Ok(watcher::Event::Apply(cm)) = &event {
                        seen.record(cm);
                    }
                    futures::future::ready(())
                },
            );
            tokio::select! {
                () = drive => {}
                () = stop.cancelled() => {}
            }
        }
    });
    crate::fixtures::kube_store_ready(&store, LIMIT).await?;
    let result = write_and_wait(client, plan, &seen, plan.watch_writes, plan.watch_writes).await;
    stop.cancel();
    let _ = task.await;
    result
}

/// Heap held per pending notification while one of two handlers is stuck.
async fn stuck(client: &Client, plan: &Plan, round: u32) -> Result<f64, BenchError> {
    let seen = Arc::new(Seen::default());
    seen.round.store(round, Ordering::Release);
    let informer = informer(client);
    add_handlers(&informer, &seen, 1)?;
    let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let registration = informer
        .add_event_handler(handler_fn::<ConfigMap>().on_update({
            let released = Arc::clone(&released);
            move |_, _| {
                while !released.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }))
        .map_err(BenchError::msg)?;
    let (stop, task) = start(&informer).await?;
    crate::heap::settle().await;
    let heap = Window::start();
    let writes = plan.fanout_writes;
    let result = async {
        write_and_wait(client, plan, &seen, writes, writes).await?;
        let pending = registration.pending();
        let held = heap.retained();
        released.store(true, Ordering::Release);
        let deadline = Instant::now() + LIMIT;
        while registration.pending() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let after = heap.retained();
        if pending == 0 {
            return Err(BenchError("the stuck handler had nothing pending".into()));
        }
        Ok((held - after) as f64 / pending as f64)
    }
    .await;
    released.store(true, Ordering::Release);
    stop.cancel();
    let _ = task.await;
    result
}

/// Runs the watch-throughput and / or fan-out scenarios.
pub async fn run(
    client: &Client,
    plan: &Plan,
    throughput: bool,
    fanout: bool,
    out: &mut Records,
) -> Result<(), BenchError> {
    fixtures::seed(client, NAMESPACE, plan.watch_objects)
        .await
        .map_err(BenchError::msg)?;
    let mut round = 0u32;
    let mut next = || {
        round += 1;
        round
    };
    if throughput {
        let case = format!(
            "{} writes over {} objects",
            plan.watch_writes, plan.watch_objects
        );
        let m = |metric, unit, higher_is_better| Metric {
            scenario: "watch",
            case: &case,
            metric,
            unit,
            higher_is_better,
        };
        let (rate, p50, p99) = (
            m("events/s reaching a handler", "events/s", true),
            m("lag write -> handler, p50", "ms", false),
            m("lag write -> handler, p99", "ms", false),
        );
        for run in 0..plan.runs {
            let (a, b) = if run % 2 == 0 {
                let a = ours(client, plan, next(), 1, plan.watch_writes).await?;
                (a, kube(client, plan, next()).await?)
            } else {
                let b = kube(client, plan, next()).await?;
                (ours(client, plan, next(), 1, plan.watch_writes).await?, b)
            };
            for (side, t) in [(OURS, a), (KUBE, b)] {
                out.push(&rate, side, t.per_second);
                out.push(&p50, side, t.p50_ms);
                out.push(&p99, side, t.p99_ms);
            }
            eprintln!("watch run {run} done");
        }
    }
    if fanout {
        for &handlers in &plan.fanout_handlers {
            let case = format!("{handlers} handlers, {} writes", plan.fanout_writes);
            let m = Metric {
                scenario: "fanout",
                case: &case,
                metric: "notifications delivered/s",
                unit: "notifications/s",
                higher_is_better: true,
            };
            for _ in 0..plan.runs {
                let t = ours(client, plan, next(), handlers, plan.fanout_writes).await?;
                out.push(&m, OURS, t.per_second);
            }
            eprintln!("fanout {case} done");
        }
        let case = format!("1 of 2 handlers stuck, {} writes", plan.fanout_writes);
        let m = Metric {
            scenario: "fanout",
            case: &case,
            metric: "heap per pending notification (with the old object it keeps alive)",
            unit: "B",
            higher_is_better: false,
        };
        for _ in 0..plan.runs {
            let bytes = stuck(client, plan, next()).await?;
            out.push(&m, OURS, bytes);
        }
    }
    Ok(())
}
