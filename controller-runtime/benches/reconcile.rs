//! End-to-end reconciles per second for 10,000 ConfigMaps on one in-process
//! envtest server, side by side: this crate's controller (manager, shared
//! informer, workqueue, workers reading the cache) and kube-runtime's
//! `Controller`. Two scenarios, each timed from start to the moment every
//! object was reconciled:
//!
//! - `initial`: the controller starts over 10,000 existing objects (list,
//!   watch, queue, reconcile each once);
//! - `update`: with the controller running, every object gets a new label
//!   value (32 concurrent writes) and each new version must be reconciled;
//!   this includes the API server's write and watch fan-out time.
//!
//! Both controllers use 8 concurrent reconciles and a reconciler that only
//! records what it saw. Rounds alternate between the two; medians are
//! printed. Nothing here asserts on timing.
//!
//! Run: `cargo bench -p controller-runtime --bench reconcile`
//! (`RECONCILE_BENCH_OBJECTS` and `RECONCILE_BENCH_ROUNDS` override sizes).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use controller_runtime::cache::Cache;
use controller_runtime::manager::Manager;
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::{Action, Request};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_client::{Api, Client};
use kube_core::ObjectMeta;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "default";
const WORKERS: usize = 8;
const LIMIT: Duration = Duration::from_secs(600);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The names whose `round` label reached the target round.
#[derive(Default)]
struct Seen {
    target: AtomicU32,
    names: Mutex<HashSet<String>>,
}

impl Seen {
    fn record(&self, cm: &ConfigMap) {
        let round: u32 = cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("round"))
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        if round >= self.target.load(Ordering::Acquire)
            && let Some(name) = &cm.metadata.name
        {
            self.names.lock().insert(name.clone());
        }
    }

    fn reset(&self, target: u32) {
        self.target.store(target, Ordering::Release);
        self.names.lock().clear();
    }

    fn count(&self) -> usize {
        self.names.lock().len()
    }
}

async fn wait_all(seen: &Seen, objects: usize) -> Result<(), String> {
    let deadline = Instant::now() + LIMIT;
    while seen.count() < objects {
        if Instant::now() > deadline {
            return Err(format!("only {} of {objects} reconciled", seen.count()));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

fn config_map(i: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:05}")),
            namespace: Some(NAMESPACE.into()),
            labels: Some(BTreeMap::from([("round".into(), "0".into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("key".into(), "value".repeat(8))])),
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

/// Sets label `round` on every object (32 writes in flight).
async fn bump(client: &Client, objects: usize, round: u32) -> Result<(), kube_client::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let patch = serde_json::json!({"metadata": {"labels": {"round": round.to_string()}}});
    stream::iter(0..objects)
        .map(|i| {
            let (api, patch) = (api.clone(), patch.clone());
            async move {
                api.patch(
                    &format!("cm-{i:05}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            }
        })
        .buffer_unordered(32)
        .try_for_each(|_| async { Ok(()) })
        .await
}

struct Record {
    cache: Cache,
    seen: Arc<Seen>,
}

impl Reconciler for Record {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, req: Request, _: CallInfo) -> Result<Action, Self::Error> {
        if let Ok(Some(cm)) = self
            .cache
            .get::<ConfigMap>(req.namespace.as_deref(), &req.name)
            .await
        {
            self.seen.record(&cm);
        }
        Ok(Action::done())
    }
}

/// One round of both scenarios with this crate's controller.
async fn ours(client: &Client, objects: usize, round: u32) -> Result<(Duration, Duration), String> {
    let seen = Arc::new(Seen::default());
    seen.reset(round - 1);
    let started = Instant::now();
    let mgr = Manager::builder(client.clone())
        .build()
        .await
        .map_err(|e| e.to_string())?;
    mgr.controller::<ConfigMap>()
        .max_concurrent_reconciles(WORKERS)
        .complete(Record {
            cache: mgr.cache().clone(),
            seen: Arc::clone(&seen),
        })
        .map_err(|e| e.to_string())?;
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    wait_all(&seen, objects).await?;
    let initial = started.elapsed();

    seen.reset(round);
    let started = Instant::now();
    bump(client, objects, round)
        .await
        .map_err(|e| e.to_string())?;
    wait_all(&seen, objects).await?;
    let update = started.elapsed();

    stop.cancel();
    run.await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok((initial, update))
}

/// One round of both scenarios with kube-runtime's `Controller`.
async fn kube_rs(
    client: &Client,
    objects: usize,
    round: u32,
) -> Result<(Duration, Duration), String> {
    use kube_runtime::controller::{Action as KAction, Config, Controller};
    use kube_runtime::watcher;

    let seen = Arc::new(Seen::default());
    seen.reset(round - 1);
    let started = Instant::now();
    let api: Api<ConfigMap> = Api::all(client.clone());
    let stop = CancellationToken::new();
    let controller = Controller::new(api, watcher::Config::default())
        .with_config(Config::default().concurrency(WORKERS as u16))
        .graceful_shutdown_on({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        })
        .run(
            |cm: Arc<ConfigMap>, seen: Arc<Seen>| async move {
                seen.record(&cm);
                Ok::<_, std::convert::Infallible>(KAction::await_change())
            },
            |_, _, _| KAction::await_change(),
            Arc::clone(&seen),
        )
        .for_each(|_| async {});
    let run = tokio::spawn(controller);
    wait_all(&seen, objects).await?;
    let initial = started.elapsed();

    seen.reset(round);
    let started = Instant::now();
    bump(client, objects, round)
        .await
        .map_err(|e| e.to_string())?;
    wait_all(&seen, objects).await?;
    let update = started.elapsed();

    stop.cancel();
    run.await.map_err(|e| e.to_string())?;
    Ok((initial, update))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let objects = env_usize("RECONCILE_BENCH_OBJECTS", 10_000);
    let rounds = env_usize("RECONCILE_BENCH_ROUNDS", 3).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let env = envtest::TestEnv::builder()
            .history_window(4 * objects)
            .start()
            .await?;
        let client = env.client();
        let seeding = Instant::now();
        seed(&client, objects).await?;
        eprintln!("seeded {objects} ConfigMaps in {:?}", seeding.elapsed());

        let mut results: Vec<(&str, Vec<Duration>, Vec<Duration>)> = vec![
            ("controller-runtime (this crate)", Vec::new(), Vec::new()),
            ("kube-runtime 5 Controller", Vec::new(), Vec::new()),
        ];
        let mut label_round = 0u32;
        for r in 0..rounds {
            for (i, entry) in results.iter_mut().enumerate() {
                label_round += 1;
                let (initial, update) = if i == 0 {
                    ours(&client, objects, label_round).await?
                } else {
                    kube_rs(&client, objects, label_round).await?
                };
                eprintln!("round {r}: {}: initial {initial:?}, update {update:?}", entry.0);
                entry.1.push(initial);
                entry.2.push(update);
            }
        }

        println!();
        println!("End-to-end reconciles of {objects} ConfigMaps, {WORKERS} workers, median of {rounds} rounds");
        println!();
        println!("| controller | initial: time | initial: reconciles/s | update: time | update: reconciles/s |");
        println!("|---|---:|---:|---:|---:|");
        for (name, initial, update) in results {
            let (i, u) = (median(initial), median(update));
            println!(
                "| {name} | {:.2} s | {:.0} | {:.2} s | {:.0} |",
                i.as_secs_f64(),
                objects as f64 / i.as_secs_f64(),
                u.as_secs_f64(),
                objects as f64 / u.as_secs_f64()
            );
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
