//! Scenario `protobuf`: the initial sync of N ConfigMaps and of N Pods (a
//! deep schema), by informer-rs in protobuf, by informer-rs in JSON, and by
//! kube-runtime (JSON), managedFields stripped as the manager does.
//! Measured: the bench process's CPU time per object (user + system of
//! every thread, the counters `getrusage(RUSAGE_SELF)` reports, read from
//! `/proc/self/stat`; envtest-server is another process, so its cost is not
//! counted) and the wall-clock time to synced. The protobuf and JSON rows
//! share the kube-runtime column (one kube-runtime sync per run).

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvVar, Pod, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_client::api::PostParams;
use kube_client::{Api, Client};
use kube_core::{ObjectMeta, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::record::{KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan, fixtures};

const LIMIT: Duration = Duration::from_secs(300);
const PAGE: u32 = 500;
/// Clock ticks per second of `/proc/self/stat` (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// CPU time used by this process so far (all threads, user + system).
fn cpu_time() -> Result<Duration, BenchError> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(BenchError::msg)?;
    // The fields after the command name (which may hold spaces) in parentheses.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| BenchError::msg("/proc/self/stat has no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> Result<f64, BenchError> {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .ok_or_else(|| BenchError::msg("/proc/self/stat: no utime/stime"))
    };
    // utime and stime are fields 14 and 15; field 3 is the first after ')'.
    Ok(Duration::from_secs_f64((tick(11)? + tick(12)?) / TICKS))
}

/// One sync: CPU time and wall-clock time.
#[derive(Debug, Clone, Copy)]
struct Sample {
    cpu: Duration,
    elapsed: Duration,
}

async fn ours<K>(api: Api<K>, objects: usize, protobuf: bool) -> Result<Sample, BenchError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let cpu = cpu_time()?;
    let start = Instant::now();
    let lw = ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(protobuf);
    let informer = SharedIndexInformer::builder(lw)
        .streaming_list(false)
        .strip_managed_fields(true)
        .build()
        .map_err(BenchError::msg)?;
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, stop) = (informer.clone(), stop.clone());
        async move { informer.run(stop).await }
    });
    informer
        .wait_for_cache_sync(LIMIT)
        .await
        .map_err(BenchError::msg)?;
    let sample = Sample {
        cpu: cpu_time()?.saturating_sub(cpu),
        elapsed: start.elapsed(),
    };
    let len = informer.indexer().len();
    stop.cancel();
    let _ = task.await;
    BenchError::expect_len("informer-rs cache", len, objects)?;
    Ok(sample)
}

async fn kube<K>(api: Api<K>, objects: usize) -> Result<Sample, BenchError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    use kube_runtime::{WatchStreamExt, reflector, watcher};
    let cpu = cpu_time()?;
    let start = Instant::now();
    let (store, writer) = reflector::store::<K>();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let events = watcher(api, watcher::Config::default().page_size(PAGE))
                .modify(|o| o.managed_fields_mut().clear())
                .reflect(writer)
                .applied_objects();
            let mut events = std::pin::pin!(events);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    ev = events.next() => if ev.is_none() { break },
                }
            }
        }
    });
    tokio::time::timeout(LIMIT, store.wait_until_ready())
        .await
        .map_err(BenchError::msg)?
        .map_err(BenchError::msg)?;
    let sample = Sample {
        cpu: cpu_time()?.saturating_sub(cpu),
        elapsed: start.elapsed(),
    };
    let len = store.state().len();
    stop.cancel();
    let _ = task.await;
    BenchError::expect_len("kube-runtime store", len, objects)?;
    Ok(sample)
}

/// Pod `i`: two containers with images, arguments, environment and
/// resources, labels and a node selector (a deep schema).
fn pod(namespace: &str, i: usize) -> Pod {
    let container = |name: &str| Container {
        name: name.into(),
        image: Some(format!("registry.example.com/{name}:1.{}", i % 10)),
        args: Some(vec!["--port=8080".into(), format!("--id={i}")]),
        env: Some(
            (0..4)
                .map(|e| EnvVar {
                    name: format!("VAR_{e}"),
                    value: Some(format!("value-{i}-{e}")),
                    value_from: None,
                })
                .collect(),
        ),
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity("100m".into()))].into()),
            limits: Some([("memory".to_string(), Quantity("256Mi".into()))].into()),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{i:06}")),
            namespace: Some(namespace.into()),
            labels: Some([("app".to_string(), format!("app-{}", i % 100))].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![container("main"), container("sidecar")],
            node_selector: Some([("zone".to_string(), "a".to_string())].into()),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

async fn seed_pods(client: &Client, namespace: &str, objects: usize) -> Result<(), BenchError> {
    // An empty namespace first (the ConfigMap fixture creates it).
    fixtures::seed(client, namespace, 0)
        .await
        .map_err(BenchError::msg)?;
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &pod(namespace, i)).await }
        })
        .buffer_unordered(fixtures::IN_FLIGHT)
        .try_for_each(|_| async { Ok(()) })
        .await
        .map_err(BenchError::msg)
}

fn push(out: &mut Records, case: &str, side: &str, s: Sample, objects: usize) {
    let per_object = s.cpu.as_secs_f64() * 1e6 / objects as f64;
    let m = |metric: &'static str, unit: &'static str| Metric {
        scenario: "protobuf",
        case,
        metric,
        unit,
        higher_is_better: false,
    };
    out.push(&m("client CPU per object", "µs/object"), side, per_object);
    out.push(
        &m("time to synced", "ms"),
        side,
        s.elapsed.as_secs_f64() * 1e3,
    );
}

/// One kind: the three syncs alternating in order, `runs` times.
async fn measure<K>(
    api: &Api<K>,
    kind: &str,
    objects: usize,
    runs: usize,
    out: &mut Records,
) -> Result<(), BenchError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let pb_case = format!("{objects} {kind}, protobuf");
    let json_case = format!("{objects} {kind}, JSON");
    // One unmeasured warm-up each: connections, lazy statics.
    ours(api.clone(), objects, true).await?;
    ours(api.clone(), objects, false).await?;
    kube(api.clone(), objects).await?;
    for run in 0..runs {
        let (pb, json, k) = if run % 2 == 0 {
            let pb = ours(api.clone(), objects, true).await?;
            let json = ours(api.clone(), objects, false).await?;
            (pb, json, kube(api.clone(), objects).await?)
        } else {
            let k = kube(api.clone(), objects).await?;
            let json = ours(api.clone(), objects, false).await?;
            (ours(api.clone(), objects, true).await?, json, k)
        };
        push(out, &pb_case, OURS, pb, objects);
        push(out, &pb_case, KUBE, k, objects);
        push(out, &json_case, OURS, json, objects);
        push(out, &json_case, KUBE, k, objects);
        eprintln!(
            "protobuf {objects} {kind} run {run}: CPU/object protobuf {:.1} µs, JSON {:.1} µs, kube-runtime {:.1} µs",
            pb.cpu.as_secs_f64() * 1e6 / objects as f64,
            json.cpu.as_secs_f64() * 1e6 / objects as f64,
            k.cpu.as_secs_f64() * 1e6 / objects as f64,
        );
    }
    Ok(())
}

/// Runs the scenario at every initial-sync size of `plan`.
pub async fn run(client: &Client, plan: &Plan, out: &mut Records) -> Result<(), BenchError> {
    for &objects in &plan.sync_sizes {
        let ns = format!("protobuf-cm-{objects}");
        fixtures::seed(client, &ns, objects)
            .await
            .map_err(BenchError::msg)?;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        measure(&cms, "ConfigMaps", objects, plan.runs, out).await?;
        let ns = format!("protobuf-pod-{objects}");
        seed_pods(client, &ns, objects).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        measure(&pods, "Pods", objects, plan.runs, out).await?;
    }
    Ok(())
}
