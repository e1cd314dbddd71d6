//! Scenario `protobuf`: the initial sync of N ConfigMaps and of N Pods (a
//! deep schema), by informer-rs in protobuf, by informer-rs in JSON, and by
//! kube-runtime (JSON), managedFields stripped as the manager does (and,
//! for ConfigMaps, informer-rs with them kept); then watch events of
//! ConfigMaps on a synced cache.
//! Measured: the bench process's CPU time per object (user + system of
//! every thread, read from the process CPU clock to the nanosecond;
//! envtest-server is another process, so its cost is not counted), the
//! wall-clock time to synced, the heap the synced cache retains per object,
//! the bytes of the list pages on the wire per object (see `wire`) and the
//! CPU per watch event (the writes made by another process). The protobuf and JSON rows
//! share the kube-runtime column (one kube-runtime sync per run).
//!
//! The protobuf rows' floor column is the same list pages decoded in
//! memory by the same decoder (see [`floor`]): CPU, time and heap, so that
//! the report gives the sync's ratio to its decoding alone.

mod floor;
mod wire;

pub use wire::{Writer, write_all};

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

use crate::heap::Window;
use crate::record::{FLOOR, KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan, fixtures};

const LIMIT: Duration = Duration::from_secs(300);
const PAGE: u32 = 500;
/// Watch events measured per run (fewer when there are fewer objects).
const EVENTS: usize = 5_000;
/// CPU time used by this process so far (all threads, user + system), to
/// the nanosecond.
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// One sync: CPU time, wall-clock time and the heap retained once synced.
#[derive(Debug, Clone, Copy)]
struct Sample {
    cpu: Duration,
    elapsed: Duration,
    retained: i64,
}

/// How informer-rs reads.
#[derive(Debug, Clone, Copy)]
struct Read {
    protobuf: bool,
    strip: bool,
}

async fn ours<K>(api: Api<K>, objects: usize, read: Read) -> Result<Sample, BenchError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    crate::heap::settle().await;
    let heap = Window::start();
    let cpu = cpu_time();
    let start = Instant::now();
    let lw = ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(read.protobuf);
    let informer = SharedIndexInformer::builder(lw)
        .streaming_list(false)
        .strip_managed_fields(read.strip)
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
    let mut sample = Sample {
        cpu: cpu_time().saturating_sub(cpu),
        elapsed: start.elapsed(),
        retained: 0,
    };
    crate::heap::settle().await;
    sample.retained = heap.retained();
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
    crate::heap::settle().await;
    let heap = Window::start();
    let cpu = cpu_time();
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
    let mut sample = Sample {
        cpu: cpu_time().saturating_sub(cpu),
        elapsed: start.elapsed(),
        retained: 0,
    };
    crate::heap::settle().await;
    sample.retained = heap.retained();
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

pub(crate) async fn seed_pods(
    client: &Client,
    namespace: &str,
    objects: usize,
) -> Result<(), BenchError> {
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
    out.push(
        &m("retained heap per object", "B/object"),
        side,
        s.retained as f64 / objects as f64,
    );
}

/// One kind in one namespace, and what is measured of it.
struct Kind<'a, K> {
    api: Api<K>,
    client: &'a Client,
    namespace: &'a str,
    name: &'a str,
    objects: usize,
}

/// One kind: the three syncs alternating in order and the protobuf floor,
/// `runs` times; then the bytes of its list on the wire in both encodings.
async fn measure<K>(kind: &Kind<'_, K>, runs: usize, out: &mut Records) -> Result<(), BenchError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (api, objects) = (&kind.api, kind.objects);
    let pb_case = format!("{objects} {}, protobuf", kind.name);
    let json_case = format!("{objects} {}, JSON", kind.name);
    let (pb_read, json_read) = (
        Read {
            protobuf: true,
            strip: true,
        },
        Read {
            protobuf: false,
            strip: true,
        },
    );
    let pb_pages = wire::pages::<K>(kind.client, kind.namespace, true).await?;
    // One unmeasured warm-up each: connections, lazy statics, and the
    // server's encoded forms.
    floor::floor::<K>(&pb_pages, objects, true).await?;
    ours(api.clone(), objects, pb_read).await?;
    ours(api.clone(), objects, json_read).await?;
    kube(api.clone(), objects).await?;
    for run in 0..runs {
        let (pb, json, k) = if run % 2 == 0 {
            let pb = ours(api.clone(), objects, pb_read).await?;
            let json = ours(api.clone(), objects, json_read).await?;
            (pb, json, kube(api.clone(), objects).await?)
        } else {
            let k = kube(api.clone(), objects).await?;
            let json = ours(api.clone(), objects, json_read).await?;
            (ours(api.clone(), objects, pb_read).await?, json, k)
        };
        let f = floor::floor::<K>(&pb_pages, objects, true).await?;
        push(out, &pb_case, OURS, pb, objects);
        push(out, &pb_case, KUBE, k, objects);
        push(out, &pb_case, FLOOR, f, objects);
        push(out, &json_case, OURS, json, objects);
        push(out, &json_case, KUBE, k, objects);
        eprintln!(
            "protobuf {objects} {} run {run}: CPU/object protobuf {:.1} µs, JSON {:.1} µs, kube-runtime {:.1} µs, protobuf floor {:.1} µs; sync {:.0} / {:.0} / {:.0} ms",
            kind.name,
            pb.cpu.as_secs_f64() * 1e6 / objects as f64,
            json.cpu.as_secs_f64() * 1e6 / objects as f64,
            k.cpu.as_secs_f64() * 1e6 / objects as f64,
            f.cpu.as_secs_f64() * 1e6 / objects as f64,
            pb.elapsed.as_secs_f64() * 1e3,
            json.elapsed.as_secs_f64() * 1e3,
            k.elapsed.as_secs_f64() * 1e3,
        );
    }
    let pb = wire::bytes_per_object(&pb_pages, objects);
    let json_pages = wire::pages::<K>(kind.client, kind.namespace, false).await?;
    let json = wire::bytes_per_object(&json_pages, objects);
    // kube-runtime reads JSON.
    for (case, ours) in [(&pb_case, pb), (&json_case, json)] {
        let m = Metric {
            scenario: "protobuf",
            case,
            metric: "bytes on the wire per object",
            unit: "B/object",
            higher_is_better: false,
        };
        out.push(&m, OURS, ours);
        out.push(&m, KUBE, json);
    }
    Ok(())
}

/// The client CPU per object of `case`.
fn cpu(case: &str) -> Metric<'_> {
    Metric {
        scenario: "protobuf",
        case,
        metric: "client CPU per object",
        unit: "µs/object",
        higher_is_better: false,
    }
}

/// ConfigMaps with managedFields kept: informer-rs in protobuf and in JSON,
/// and the protobuf floor keeping them too.
async fn kept(
    kind: &Kind<'_, ConfigMap>,
    runs: usize,
    out: &mut Records,
) -> Result<(), BenchError> {
    let (api, objects) = (&kind.api, kind.objects);
    let pages = wire::pages::<ConfigMap>(kind.client, kind.namespace, true).await?;
    for run in 0..runs {
        let f = floor::floor::<ConfigMap>(&pages, objects, false).await?;
        out.push(
            &cpu(&format!(
                "{objects} ConfigMaps, managedFields kept, protobuf"
            )),
            FLOOR,
            f.cpu.as_secs_f64() * 1e6 / objects as f64,
        );
        for protobuf in [run % 2 == 0, run % 2 != 0] {
            let s = ours(
                api.clone(),
                objects,
                Read {
                    protobuf,
                    strip: false,
                },
            )
            .await?;
            let enc = if protobuf { "protobuf" } else { "JSON" };
            let case = format!("{objects} ConfigMaps, managedFields kept, {enc}");
            out.push(
                &cpu(&case),
                OURS,
                s.cpu.as_secs_f64() * 1e6 / objects as f64,
            );
        }
    }
    Ok(())
}

/// Watch events of ConfigMaps: CPU per event of the three clients.
async fn watch_events(
    client: &Client,
    writer: &Writer,
    namespace: &str,
    objects: usize,
    runs: usize,
    out: &mut Records,
) -> Result<(), BenchError> {
    use wire::Watcher;
    let events = objects.min(EVENTS);
    let mut round = 1;
    let mut next = || {
        round += 1;
        round
    };
    for run in 0..runs {
        let order = if run % 2 == 0 {
            [
                Watcher::Ours(true),
                Watcher::Ours(false),
                Watcher::Kube,
                Watcher::Floor,
            ]
        } else {
            [
                Watcher::Floor,
                Watcher::Kube,
                Watcher::Ours(false),
                Watcher::Ours(true),
            ]
        };
        let mut per = [0.0; 4];
        for w in order {
            let cpu = wire::cpu_per_event(client, writer, namespace, events, next(), w).await?;
            let at = match w {
                Watcher::Ours(true) => 0,
                Watcher::Ours(false) => 1,
                Watcher::Kube => 2,
                Watcher::Floor => 3,
            };
            per[at] = cpu;
        }
        for (case, ours) in [
            (format!("{events} ConfigMap watch events, protobuf"), per[0]),
            (format!("{events} ConfigMap watch events, JSON"), per[1]),
        ] {
            let metric = Metric {
                scenario: "protobuf",
                case: &case,
                metric: "client CPU per event",
                unit: "µs/event",
                higher_is_better: false,
            };
            out.push(&metric, OURS, ours);
            out.push(&metric, KUBE, per[2]);
            out.push(&metric, FLOOR, per[3]);
        }
        eprintln!(
            "protobuf {events} watch events run {run}: CPU/event protobuf {:.1} µs, JSON {:.1} µs, kube-runtime {:.1} µs, transport alone {:.1} µs",
            per[0], per[1], per[2], per[3]
        );
    }
    Ok(())
}

/// Runs the scenario at every initial-sync size of `plan`; `writer` makes
/// the writes of the watch-event figures.
pub async fn run(
    client: &Client,
    writer: &Writer,
    plan: &Plan,
    out: &mut Records,
) -> Result<(), BenchError> {
    for &objects in &plan.sync_sizes {
        let ns = format!("protobuf-cm-{objects}");
        fixtures::seed(client, &ns, objects)
            .await
            .map_err(BenchError::msg)?;
        let kind = Kind {
            api: Api::<ConfigMap>::namespaced(client.clone(), &ns),
            client,
            namespace: &ns,
            name: "ConfigMaps",
            objects,
        };
        measure(&kind, plan.runs, out).await?;
        kept(&kind, plan.runs, out).await?;
        watch_events(client, writer, &ns, objects, plan.runs, out).await?;
        let ns = format!("protobuf-pod-{objects}");
        seed_pods(client, &ns, objects).await?;
        let kind = Kind {
            api: Api::<Pod>::namespaced(client.clone(), &ns),
            client,
            namespace: &ns,
            name: "Pods",
            objects,
        };
        measure(&kind, plan.runs, out).await?;
    }
    Ok(())
}
