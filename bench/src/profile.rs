//! `informer-bench --profile SIDE:PHASE:N:REPS`: one phase of the protobuf
//! scenario run alone and repeated, for a profiler attached to this process
//! (`perf record -g -p PID`, or `perf record -- informer-bench ...`). Not a
//! measurement of record: it prints the client CPU per object or event of
//! each repetition, and the profile says where it went.
//!
//! - `SIDE`: `ours` (informer-rs in protobuf), `ours-json` or `kube`
//!   (kube-runtime's watcher and reflector), managedFields stripped, pages
//!   of 500, as the protobuf scenario reads.
//! - `PHASE`: `configmaps` (an initial sync of N ConfigMaps), `pods` (of N
//!   Pods) or `watch` (a synced cache of N ConfigMaps, then N changes made
//!   by another process, as the scenario's watch events are).
//! - `REPS` 0 only creates the objects (in namespace `profile-PHASE-N`,
//!   once; later runs find them), so that a profiled run does no seeding.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use informer_core::key::ObjectOrTombstone;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::{ResourceEventHandler, SharedIndexInformer};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube_client::{Api, Client};
use kube_core::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{BenchError, fixtures, protobuf};

const LIMIT: Duration = Duration::from_secs(300);
const PAGE: u32 = 500;

/// Who reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours { protobuf: bool },
    Kube,
}

/// CPU time used by this process so far (all threads).
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// Counts `on_update` calls (or kube-runtime's applied objects).
#[derive(Default)]
struct Seen {
    count: AtomicUsize,
    changed: Notify,
}

impl Seen {
    fn one(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    async fn until(&self, n: usize) -> Result<(), BenchError> {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            let notified = self.changed.notified();
            if self.count.load(Ordering::SeqCst) >= n {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(BenchError("the watch did not see every change".into()));
            }
        }
    }
}

struct Counting(Arc<Seen>);

impl<K> ResourceEventHandler<K> for Counting {
    fn on_add(&self, _: Arc<K>, _: bool) {}
    fn on_update(&self, _: Arc<K>, _: Arc<K>) {
        self.0.one();
    }
    fn on_delete(&self, _: ObjectOrTombstone<K>) {}
}

/// A cache of `api` that runs until `stop`, synced when this returns.
async fn synced_cache<K>(
    api: Api<K>,
    side: Side,
    seen: Arc<Seen>,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, BenchError>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    match side {
        Side::Ours { protobuf } => {
            let lw = ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(protobuf);
            let informer = SharedIndexInformer::builder(lw)
                .streaming_list(false)
                .strip_managed_fields(true)
                .build()
                .map_err(BenchError::msg)?;
            informer
                .add_event_handler(Counting(seen))
                .map_err(BenchError::msg)?;
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
            Ok(task)
        }
        Side::Kube => {
            use kube_runtime::{WatchStreamExt, reflector, watcher};
            let (store, writer) = reflector::store::<K>();
            let task = tokio::spawn(async move {
                let events = watcher(api, watcher::Config::default().page_size(PAGE))
                    .modify(|o| o.managed_fields_mut().clear())
                    .reflect(writer);
                let mut events = std::pin::pin!(events);
                loop {
                    tokio::select! {
                        () = stop.cancelled() => break,
                        ev = events.next() => match ev {
                            None => break,
                            Some(Ok(watcher::Event::Apply(_))) => seen.one(),
                            Some(_) => {}
                        },
                    }
                }
            });
            fixtures::kube_store_ready(&store, LIMIT).await?;
            Ok(task)
        }
    }
}

/// Creates `namespace` with `objects` objects made by `seed`, unless it exists.
async fn ensure(
    client: &Client,
    namespace: &str,
    pods: bool,
    objects: usize,
) -> Result<(), BenchError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(namespace)
        .await
        .map_err(BenchError::msg)?
        .is_some()
    {
        return Ok(());
    }
    eprintln!("profile: creating {objects} objects in {namespace}");
    if pods {
        protobuf::seed_pods(client, namespace, objects).await
    } else {
        fixtures::seed(client, namespace, objects)
            .await
            .map_err(BenchError::msg)
    }
}

/// Runs `spec` (see the module docs).
pub async fn run(client: &Client, server: &str, spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(':').collect();
    let [side, phase, n, reps] = parts[..] else {
        return Err(BenchError(format!(
            "--profile wants SIDE:PHASE:N:REPS, got {spec:?}"
        )));
    };
    let side = match side {
        "ours" => Side::Ours { protobuf: true },
        "ours-json" => Side::Ours { protobuf: false },
        "kube" => Side::Kube,
        other => return Err(BenchError(format!("unknown side {other:?}"))),
    };
    let n: usize = n.parse().map_err(BenchError::msg)?;
    let reps: usize = reps.parse().map_err(BenchError::msg)?;
    let namespace = format!("profile-{phase}-{n}");
    match phase {
        "configmaps" | "watch" => ensure(client, &namespace, false, n).await?,
        "pods" => ensure(client, &namespace, true, n).await?,
        other => return Err(BenchError(format!("unknown phase {other:?}"))),
    }
    eprintln!("profile: pid {} ready", std::process::id());
    for rep in 0..reps {
        let seen = Arc::new(Seen::default());
        let stop = CancellationToken::new();
        let (task, cpu, what) = if phase == "watch" {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
            let task = synced_cache(api, side, Arc::clone(&seen), stop.clone()).await?;
            let cpu = cpu_time();
            let started = Instant::now();
            // (the writes come from this program started again with
            // `--touch`, so their CPU is not this process's)
            let round = (fixtures::now_nanos() % 1_000_000_000) as usize + rep;
            let writer = protobuf::Writer {
                server: server.to_string(),
            };
            tokio::try_join!(writer.write(&namespace, n, round), seen.until(n))?;
            eprintln!("profile: {n} events in {:?}", started.elapsed());
            (task, cpu_time().saturating_sub(cpu), "event")
        } else {
            let cpu = cpu_time();
            let task = if phase == "pods" {
                let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                synced_cache(api, side, seen, stop.clone()).await?
            } else {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
                synced_cache(api, side, seen, stop.clone()).await?
            };
            (task, cpu_time().saturating_sub(cpu), "object")
        };
        stop.cancel();
        let _ = task.await;
        eprintln!(
            "profile {spec} rep {rep}: {:.2} µs of client CPU per {what}",
            cpu.as_secs_f64() * 1e6 / n.max(1) as f64
        );
    }
    Ok(())
}
