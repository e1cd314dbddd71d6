//! Scenario 10, sharding in label mode: N ConfigMaps (1 KiB of data each)
//! spread over 1, 2 and 4 replicas of one sharded controller, each replica
//! a manager in this process with its own shard membership, its cache
//! selecting its own shard label.
//!
//! Measured per replica count, once every object carries its owner's label
//! and each replica's cache holds exactly its share (and the initial
//! reconcile of every object ended):
//!
//! - retained heap per replica: the process's heap growth since before the
//!   replicas started, divided by their number. It includes each manager's
//!   fixed cost and the sharder's metadata-only cache of all N objects (on
//!   one replica), so it falls more slowly than 1/N;
//! - throughput: every object is changed once (32 writes in flight) and
//!   reconciled by its owner with a reconcile that waits 20 ms, 4 workers
//!   per replica: objects per second until the last one was reconciled.
//!
//! kube-runtime has no sharding: its row is one `Controller` (concurrency
//! 4, the same reconcile) over all N objects, next to the 1-replica case.

mod recovery;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use controller_runtime::__test_support::Ring;
use controller_runtime::cache::ScopedInformer;
use controller_runtime::manager::Manager;
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::sharding::config::{ShardMode, ShardingConfig};
use controller_runtime::sharding::controller::ShardedExt;
use controller_runtime::sharding::membership::Membership;
use controller_runtime::{Action, Request};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::ListParams;
use kube_client::{Api, Client};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fixtures::{self, round_of};
use crate::heap::Window;
use crate::record::{KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan};

const NAMESPACE: &str = "sharding";
const LIMIT: Duration = Duration::from_secs(300);
const WORK: Duration = Duration::from_millis(20);
const WORKERS: usize = 4;

/// The objects reconciled at the current round.
struct Done {
    min_round: AtomicU32,
    names: Mutex<HashSet<String>>,
    /// How long one reconcile waits.
    work: Duration,
}

impl Done {
    fn new() -> Arc<Done> {
        Done::with_work(WORK)
    }

    fn with_work(work: Duration) -> Arc<Done> {
        Arc::new(Done {
            min_round: AtomicU32::new(0),
            names: Mutex::new(HashSet::new()),
            work,
        })
    }

    fn reset(&self, round: u32) {
        self.min_round.store(round, Ordering::Release);
        self.names.lock().clear();
    }

    /// The shared reconcile: wait `work` for an object of the current round.
    async fn reconcile(&self, cm: &ConfigMap) {
        let seeded = cm
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("cm-"));
        if !seeded || round_of(cm) < self.min_round.load(Ordering::Acquire) {
            return;
        }
        if !self.work.is_zero() {
            tokio::time::sleep(self.work).await;
        }
        if let Some(name) = cm.metadata.name.clone() {
            self.names.lock().insert(name);
        }
    }

    async fn wait_all(&self, objects: usize) -> Result<(), BenchError> {
        let deadline = Instant::now() + LIMIT;
        while self.names.lock().len() < objects {
            if Instant::now() > deadline {
                return Err(BenchError(format!(
                    "only {} of {objects} reconciled",
                    self.names.lock().len()
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }
}

struct Sharded {
    cache: controller_runtime::cache::Cache,
    done: Arc<Done>,
}

impl Reconciler for Sharded {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, req: Request, _: CallInfo) -> Result<Action, Self::Error> {
        if let Ok(Some(cm)) = self
            .cache
            .get::<ConfigMap>(req.namespace.as_deref(), &req.name)
            .await
        {
            self.done.reconcile(&cm).await;
        }
        Ok(Action::done())
    }
}

struct Replica {
    id: String,
    informer: ScopedInformer<ConfigMap>,
    membership: Membership,
    stop: CancellationToken,
    task: JoinHandle<Result<(), controller_runtime::manager::ManagerError>>,
}

fn config(ring: &str, id: &str) -> ShardingConfig {
    ShardingConfig::new(NAMESPACE, ring)
        .identity(id)
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_millis(1_500))
        .retry_period(Duration::from_millis(250))
        .mode(ShardMode::Label)
}

/// Starts a replica in label mode.
async fn start(
    client: &Client,
    ring: &str,
    id: &str,
    done: &Arc<Done>,
) -> Result<Replica, BenchError> {
    start_with(client, config(ring, id), done).await
}

/// Starts a replica as `cfg` says (its cache selecting its shard label in
/// label mode), talking through `client`.
async fn start_with(
    client: &Client,
    cfg: ShardingConfig,
    done: &Arc<Done>,
) -> Result<Replica, BenchError> {
    let id = cfg.identity.clone();
    let mgr = Manager::builder(client.clone())
        .namespace(NAMESPACE)
        .cache_options::<ConfigMap>(cfg.informer_options())
        .build()
        .await
        .map_err(BenchError::msg)?;
    let membership = Membership::new(client.clone(), cfg).map_err(BenchError::msg)?;
    mgr.controller::<ConfigMap>()
        .max_concurrent_reconciles(WORKERS)
        .sharded(&membership)
        .complete(Sharded {
            cache: mgr.cache().clone(),
            done: Arc::clone(done),
        })
        .map_err(BenchError::msg)?;
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    Ok(Replica {
        id,
        informer: mgr.cache().informer(),
        membership,
        stop,
        task,
    })
}

/// Waits until every object carries its owner's label and each replica's
/// cache holds exactly its share.
async fn settled(
    client: &Client,
    ring: &str,
    replicas: &[&Replica],
    objects: usize,
) -> Result<(), BenchError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let label = format!("sharding.informer-rs.io/{ring}");
    let members = Ring::new(replicas.iter().map(|r| r.id.clone()));
    let deadline = Instant::now() + LIMIT;
    loop {
        let listed = api
            .list(&ListParams::default())
            .await
            .map_err(BenchError::msg)?
            .items;
        let labelled = listed.iter().all(|c| {
            let key = format!(
                "{NAMESPACE}/{}",
                c.metadata.name.as_deref().unwrap_or_default()
            );
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(&label))
                .map(String::as_str)
                == members.owner(&key)
        });
        let cached: usize = replicas.iter().map(|r| r.informer.list().len()).sum();
        let seeded = listed
            .iter()
            .filter(|c| {
                c.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("cm-"))
            })
            .count();
        if labelled && seeded == objects && cached == listed.len() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError(format!(
                "{ring}: not settled ({cached} of {objects} cached)"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One run of `n` replicas: retained heap per replica, throughput.
async fn ours(
    client: &Client,
    n: usize,
    objects: usize,
    round: u32,
) -> Result<(f64, f64), BenchError> {
    let ring = format!("bench-{n}");
    let done = Done::new();
    crate::heap::settle().await;
    let heap = Window::start();
    let mut replicas = Vec::new();
    for i in 0..n {
        replicas.push(start(client, &ring, &format!("{ring}-{round}-{i}"), &done).await?);
    }
    let result = async {
        let all: Vec<&Replica> = replicas.iter().collect();
        settled(client, &ring, &all, objects).await?;
        done.wait_all(objects).await?;
        crate::heap::settle().await;
        let per_replica = heap.retained() as f64 / n as f64;
        done.reset(round);
        let started = Instant::now();
        fixtures::bump(client, NAMESPACE, objects, objects, round)
            .await
            .map_err(BenchError::msg)?;
        done.wait_all(objects).await?;
        Ok((
            per_replica,
            objects as f64 / started.elapsed().as_secs_f64(),
        ))
    }
    .await;
    for r in &replicas {
        r.stop.cancel();
    }
    for r in replicas {
        let _ = tokio::time::timeout(Duration::from_secs(30), r.task).await;
    }
    result
}

/// kube-runtime: one controller over every object.
async fn kube(client: &Client, objects: usize, round: u32) -> Result<(f64, f64), BenchError> {
    use kube_runtime::controller::{Action as KAction, Config, Controller};
    use kube_runtime::watcher;
    let done = Done::new();
    crate::heap::settle().await;
    let heap = Window::start();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let stop = CancellationToken::new();
    let controller = Controller::new(api, watcher::Config::default())
        .with_config(Config::default().concurrency(WORKERS as u16))
        .graceful_shutdown_on({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        })
        .run(
            |cm: Arc<ConfigMap>, done: Arc<Done>| async move {
                done.reconcile(&cm).await;
                Ok::<_, kube_client::Error>(KAction::await_change())
            },
            |_, _, _| KAction::await_change(),
            Arc::clone(&done),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    let result = async {
        done.wait_all(objects).await?;
        crate::heap::settle().await;
        let retained = heap.retained() as f64;
        done.reset(round);
        let started = Instant::now();
        fixtures::bump(client, NAMESPACE, objects, objects, round)
            .await
            .map_err(BenchError::msg)?;
        done.wait_all(objects).await?;
        Ok((retained, objects as f64 / started.elapsed().as_secs_f64()))
    }
    .await;
    stop.cancel();
    task.await.map_err(BenchError::msg)?;
    result
}

/// Runs the scenario; the recovery case's replicas reach the server that
/// `server` describes through clients of their own.
pub async fn run(
    client: &Client,
    server: &kube_client::Config,
    plan: &Plan,
    out: &mut Records,
) -> Result<(), BenchError> {
    let objects = plan.sharding_objects;
    fixtures::seed(client, NAMESPACE, objects)
        .await
        .map_err(BenchError::msg)?;
    // Every run caches the same objects: each run's throughput phase
    // annotates every object (`sent`), so without this the first run would
    // be the only one caching objects without an annotations map (a B-tree
    // leaf of eleven slots, in the labelled cache and in the sharder's
    // metadata cache), and would look lighter than the takeovers after it.
    fixtures::bump(client, NAMESPACE, objects, objects, 0)
        .await
        .map_err(BenchError::msg)?;
    let mut round = 0u32;
    for n in [1usize, 2, 4] {
        let case = format!(
            "{objects} objects, {n} replicas, label mode, 20 ms reconciles, 4 workers each"
        );
        let m = |metric, unit, higher_is_better| Metric {
            scenario: "sharding",
            case: &case,
            metric,
            unit,
            higher_is_better,
        };
        let heap = m("retained heap per replica", "KiB", false);
        let rate = m("throughput", "reconciles/s", true);
        for run in 0..plan.runs {
            let mut sides = vec![OURS];
            if n == 1 {
                sides.push(KUBE);
                if run % 2 == 1 {
                    sides.reverse();
                }
            }
            for side in sides {
                round += 1;
                let (bytes, per_s) = if side == OURS {
                    ours(client, n, objects, round).await?
                } else {
                    kube(client, objects, round).await?
                };
                out.push(&heap, side, bytes / 1024.0);
                out.push(&rate, side, per_s);
                eprintln!(
                    "sharding {case} run {run} {side}: {:.0} KiB per replica, {per_s:.0} reconciles/s",
                    bytes / 1024.0
                );
            }
        }
    }
    recovery::run(client, server, plan, out).await
}

/// Only the recovery case (`--only sharding-recovery`): its rows, the
/// rest of the scenario not run.
pub async fn recovery_only(
    client: &Client,
    server: &kube_client::Config,
    plan: &Plan,
    out: &mut Records,
) -> Result<(), BenchError> {
    fixtures::seed(client, NAMESPACE, plan.sharding_objects)
        .await
        .map_err(BenchError::msg)?;
    recovery::run(client, server, plan, out).await
}
