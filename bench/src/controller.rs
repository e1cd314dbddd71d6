//! Scenario 7, a controller end to end: N ConfigMaps; the reconcile reads
//! the object from the cache and, unless it already carries the run's mark,
//! patches an annotation onto it (a write per object, as a status update
//! would be). 1 and 8 workers. "initial": start over the existing objects
//! until each was reconciled and marked; "update": with the controller
//! running, relabel every object (32 writes in flight) until each new
//! version was reconciled and marked. Both include the API server's write
//! time. Next to kube-runtime's `Controller` with the same reconcile.
//!
//! ConfigMaps stand in for a custom resource (no status subresource): the
//! patch goes to an annotation instead of `status`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use controller_runtime::cache::Cache;
use controller_runtime::manager::Manager;
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::{Action, Request};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Patch, PatchParams};
use kube_client::{Api, Client};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::fixtures::{self, round_of};
use crate::record::{KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan};

const NAMESPACE: &str = "ctrl";
const LIMIT: Duration = Duration::from_secs(600);

/// The run's mark and the names reconciled with it.
struct Marks {
    client: Client,
    min_round: AtomicU32,
    mark: Mutex<String>,
    done: Mutex<HashSet<String>>,
}

impl Marks {
    fn new(client: &Client) -> Arc<Self> {
        Arc::new(Marks {
            client: client.clone(),
            min_round: AtomicU32::new(0),
            mark: Mutex::new(String::new()),
            done: Mutex::new(HashSet::new()),
        })
    }

    fn reset(&self, min_round: u32, mark: String) {
        self.min_round.store(min_round, Ordering::Release);
        *self.mark.lock() = mark;
        self.done.lock().clear();
    }

    /// The shared reconcile: mark the object once its round is current.
    async fn reconcile(&self, cm: &ConfigMap) -> Result<(), kube_client::Error> {
        let Some(name) = cm.metadata.name.as_deref() else {
            return Ok(());
        };
        if cm.metadata.namespace.as_deref() != Some(NAMESPACE)
            || round_of(cm) < self.min_round.load(Ordering::Acquire)
        {
            return Ok(());
        }
        let mark = self.mark.lock().clone();
        let current = cm.metadata.annotations.as_ref().and_then(|a| a.get("mark"));
        if current != Some(&mark) {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), NAMESPACE);
            let patch = serde_json::json!({"metadata": {"annotations": {"mark": mark}}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        self.done.lock().insert(name.to_owned());
        Ok(())
    }

    async fn wait_all(&self, objects: usize) -> Result<(), BenchError> {
        let deadline = Instant::now() + LIMIT;
        while self.done.lock().len() < objects {
            if Instant::now() > deadline {
                return Err(BenchError(format!(
                    "only {} of {objects} reconciled",
                    self.done.lock().len()
                )));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(())
    }
}

struct OurReconciler {
    cache: Cache,
    marks: Arc<Marks>,
}

impl Reconciler for OurReconciler {
    type Error = kube_client::Error;
    async fn reconcile(&self, req: Request, _: CallInfo) -> Result<Action, Self::Error> {
        if let Ok(Some(cm)) = self
            .cache
            .get::<ConfigMap>(req.namespace.as_deref(), &req.name)
            .await
        {
            self.marks.reconcile(&cm).await?;
        }
        Ok(Action::done())
    }
}

/// Times of one run: initial, update.
type Times = (Duration, Duration);

async fn update(
    client: &Client,
    marks: &Marks,
    objects: usize,
    run: &str,
    round: u32,
) -> Result<Duration, BenchError> {
    marks.reset(round, format!("{run}-update"));
    let started = Instant::now();
    fixtures::bump(client, NAMESPACE, objects, objects, round)
        .await
        .map_err(BenchError::msg)?;
    marks.wait_all(objects).await?;
    Ok(started.elapsed())
}

async fn ours(
    client: &Client,
    objects: usize,
    workers: usize,
    run: &str,
    round: u32,
) -> Result<Times, BenchError> {
    let marks = Marks::new(client);
    marks.reset(0, format!("{run}-initial"));
    let started = Instant::now();
    let mgr = Manager::builder(client.clone())
        .build()
        .await
        .map_err(BenchError::msg)?;
    mgr.controller::<ConfigMap>()
        .max_concurrent_reconciles(workers)
        .complete(OurReconciler {
            cache: mgr.cache().clone(),
            marks: Arc::clone(&marks),
        })
        .map_err(BenchError::msg)?;
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    let result = async {
        marks.wait_all(objects).await?;
        let initial = started.elapsed();
        Ok((initial, update(client, &marks, objects, run, round).await?))
    }
    .await;
    stop.cancel();
    task.await
        .map_err(BenchError::msg)?
        .map_err(BenchError::msg)?;
    result
}

async fn kube(
    client: &Client,
    objects: usize,
    workers: usize,
    run: &str,
    round: u32,
) -> Result<Times, BenchError> {
    use kube_runtime::controller::{Action as KAction, Config, Controller};
    use kube_runtime::watcher;
    let marks = Marks::new(client);
    marks.reset(0, format!("{run}-initial"));
    let started = Instant::now();
    let api: Api<ConfigMap> = Api::all(client.clone());
    let stop = CancellationToken::new();
    let controller = Controller::new(api, watcher::Config::default())
        .with_config(Config::default().concurrency(workers as u16))
        .graceful_shutdown_on({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        })
        .run(
            |cm: Arc<ConfigMap>, marks: Arc<Marks>| async move {
                marks.reconcile(&cm).await?;
                Ok::<_, kube_client::Error>(KAction::await_change())
            },
            |_, _, _| KAction::await_change(),
            Arc::clone(&marks),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    let result = async {
        marks.wait_all(objects).await?;
        let initial = started.elapsed();
        Ok((initial, update(client, &marks, objects, run, round).await?))
    }
    .await;
    stop.cancel();
    task.await.map_err(BenchError::msg)?;
    result
}

/// Runs the scenario.
pub async fn run(client: &Client, plan: &Plan, out: &mut Records) -> Result<(), BenchError> {
    let objects = plan.controller_objects;
    fixtures::seed(client, NAMESPACE, objects)
        .await
        .map_err(BenchError::msg)?;
    let mut round = 0u32;
    for workers in [1usize, 8] {
        let case = format!("{objects} objects, {workers} workers");
        let m = |metric| Metric {
            scenario: "controller",
            case: &case,
            metric,
            unit: "reconciles/s",
            higher_is_better: true,
        };
        let (initial, updated) = (m("initial reconciles/s"), m("update reconciles/s"));
        for run in 0..plan.runs {
            let id = format!("w{workers}r{run}");
            let mut one = async |side: &str| -> Result<Times, BenchError> {
                round += 1;
                if side == OURS {
                    ours(client, objects, workers, &format!("{id}-ours"), round).await
                } else {
                    kube(client, objects, workers, &format!("{id}-kube"), round).await
                }
            };
            let order = if run % 2 == 0 {
                [OURS, KUBE]
            } else {
                [KUBE, OURS]
            };
            for side in order {
                let (i, u) = one(side).await?;
                out.push(&initial, side, objects as f64 / i.as_secs_f64());
                out.push(&updated, side, objects as f64 / u.as_secs_f64());
                eprintln!("controller {case} run {run} {side}: initial {i:?}, update {u:?}");
            }
        }
    }
    Ok(())
}
