//! Scenario 12, fleets: one manager reconciling ConfigMaps in 1, 10 and 50
//! clusters of `fleet_objects` each (every cluster its own `envtest-server`
//! process), against the same total in one cluster. Measured from the
//! manager's start until every object of every cluster was reconciled once:
//! the rate (objects/s) and the heap the bench process retains then, per
//! object. The reconcile reads the object from that cluster's cache and
//! records it; it writes nothing, so the rate is the list, decode, cache and
//! queue path, not the servers' writes.
//!
//! The peer is what a kube-rs user writes for a fleet today: one
//! kube-runtime `Controller` per cluster, each with its own client, run
//! together. The single-cluster cases run a plain controller (ours) and one
//! `Controller` (kube-runtime) on one server holding every object, spread
//! over one namespace per would-be cluster.
//!
//! Ours reaches every server, the members and the one cluster alike,
//! through a member client (`MemberClientOptions::client_from_config`:
//! capped HTTP/1 read buffer, timeouts, no retry), so the fleet and the
//! one-cluster case compare the same clients; kube-runtime's are plain
//! kube-client `Client`s, as its users make them.
//!
//! The difference between a fleet case's retained heap and the one-cluster
//! case's with the same total, divided by the clusters, is the fixed cost
//! of an engaged cluster (clients, informer, queue share, metrics); the
//! report states it next to the target.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use controller_runtime::cluster::{MemberClientOptions, StaticProvider};
use controller_runtime::manager::Manager;
use controller_runtime::prelude::*;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::{Api, Client, Config};
use tokio_util::sync::CancellationToken;

use crate::fixtures;
use crate::heap::Window;
use crate::record::{KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan};

/// Longest wait for one run to reconcile every object.
const LIMIT: Duration = Duration::from_secs(600);
/// A member cluster's namespace.
const MEMBER_NS: &str = "fleet";
/// Servers seeded at once.
const SEEDING: usize = 4;

/// A running `envtest-server` process, killed when dropped.
struct Server {
    child: Child,
    /// A plain kube-client `Client`: seeding, and kube-runtime's side.
    client: Client,
    /// A member client (ours): our side, fleet and one cluster alike.
    member: Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `bin` on a free port and connects a client to it.
    fn start(bin: &std::path::Path) -> Result<Self, BenchError> {
        let mut child = Command::new(bin)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| BenchError(format!("cannot start {}: {e}", bin.display())))?;
        match listening_url(&mut child).and_then(|url| connect(&url)) {
            Ok((client, member)) => Ok(Server {
                child,
                client,
                member,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }
}

/// A plain client and a member client of the server at `url`.
fn connect(url: &str) -> Result<(Client, Client), BenchError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| BenchError(format!("envtest-server printed a bad URL {url}: {e}")))?;
    let plain = Client::try_from(Config::new(uri.clone())).map_err(BenchError::msg)?;
    let member = MemberClientOptions::new()
        .client_from_config(url, Config::new(uri))
        .map_err(BenchError::msg)?;
    Ok((plain, member))
}

/// Reads the server's stdout until it names its URL; a thread drains the rest.
fn listening_url(child: &mut Child) -> Result<String, BenchError> {
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| BenchError("envtest-server has no stdout".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line.map_err(BenchError::msg)?;
        if let Some(url) = line.strip_prefix("envtest-server listening on ") {
            let url = url.trim().to_owned();
            std::thread::spawn(move || lines.for_each(drop));
            return Ok(url);
        }
    }
    Err(BenchError(
        "envtest-server exited before it was listening".into(),
    ))
}

/// Which objects were reconciled in this run: one flag per object of the
/// largest case, allocated before any heap window so it is not counted.
struct Seen {
    per_cluster: usize,
    flags: Vec<AtomicBool>,
    count: AtomicUsize,
}

impl Seen {
    fn new(clusters: usize, per_cluster: usize) -> Arc<Self> {
        Arc::new(Seen {
            per_cluster,
            flags: (0..clusters * per_cluster)
                .map(|_| AtomicBool::new(false))
                .collect(),
            count: AtomicUsize::new(0),
        })
    }

    fn reset(&self) {
        self.flags
            .iter()
            .for_each(|f| f.store(false, Ordering::Relaxed));
        self.count.store(0, Ordering::Release);
    }

    /// Records object `name` of group `group` (a member's index, or a
    /// namespace's in the one-cluster cases).
    fn record(&self, group: Option<usize>, name: &str) {
        let index = name
            .strip_prefix("cm-")
            .and_then(|i| i.parse::<usize>().ok());
        let (Some(group), Some(index)) = (group, index) else {
            return;
        };
        if index >= self.per_cluster {
            return;
        }
        if let Some(flag) = self.flags.get(group * self.per_cluster + index)
            && !flag.swap(true, Ordering::AcqRel)
        {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
    }

    async fn wait(&self, objects: usize) -> Result<(), BenchError> {
        let deadline = Instant::now() + LIMIT;
        while self.count.load(Ordering::Acquire) < objects {
            if Instant::now() > deadline {
                return Err(BenchError(format!(
                    "only {} of {objects} reconciled",
                    self.count.load(Ordering::Acquire)
                )));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(())
    }
}

/// The index in `s` after `prefix` (`m7` -> 7, `fleet-7` -> 7).
fn group_of(s: Option<&str>, prefix: &str) -> Option<usize> {
    s?.strip_prefix(prefix)?.parse().ok()
}

/// Our reconcile: read the object from its cluster's cache, record it.
struct Record(Arc<Seen>);

impl ObjectReconciler<ConfigMap> for Record {
    type Error = kube_client::Error;
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let group = match ctx.cluster() {
            "" => group_of(cm.metadata.namespace.as_deref(), "fleet-"),
            cluster => group_of(Some(cluster), "m"),
        };
        self.0
            .record(group, cm.metadata.name.as_deref().unwrap_or(""));
        Ok(Action::done())
    }
}

/// One measurement: until every object was reconciled; the heap retained then.
struct Outcome {
    elapsed: Duration,
    retained: i64,
}

/// Ours: a fleet manager over `members` (hub: `hub`), or a plain manager
/// on `single` when `members` is empty.
async fn ours(
    hub: &Client,
    members: &[Client],
    single: Option<&Client>,
    seen: &Arc<Seen>,
    objects: usize,
) -> Result<Outcome, BenchError> {
    seen.reset();
    crate::heap::settle().await;
    let heap = Window::start();
    let started = Instant::now();
    let mgr = match single {
        Some(client) => Manager::builder(client.clone()).build().await,
        None => {
            let provider = members
                .iter()
                .enumerate()
                .fold(StaticProvider::new(), |p, (i, c)| {
                    p.client(format!("m{i}"), c.clone())
                });
            Manager::builder(hub.clone())
                .provider(provider)
                .build()
                .await
        }
    }
    .map_err(BenchError::msg)?;
    if single.is_some() {
        mgr.controller::<ConfigMap>()
            .max_concurrent_reconciles(8)
            .complete(Record(Arc::clone(seen)))
            .map_err(BenchError::msg)?;
    } else {
        mgr.fleet_controller::<ConfigMap>()
            .max_concurrent_reconciles(8)
            .complete(Record(Arc::clone(seen)))
            .map_err(BenchError::msg)?;
    }
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    let waited = seen.wait(objects).await;
    let outcome = Outcome {
        elapsed: started.elapsed(),
        retained: heap.retained(),
    };
    stop.cancel();
    task.await
        .map_err(BenchError::msg)?
        .map_err(BenchError::msg)?;
    drop(mgr);
    waited.map(|()| outcome)
}

/// kube-runtime: one `Controller` per cluster (or one on `single`).
async fn kube(
    members: &[Client],
    single: Option<&Client>,
    seen: &Arc<Seen>,
    objects: usize,
) -> Result<Outcome, BenchError> {
    use kube_runtime::controller::{Action as KAction, Config as KConfig, Controller};
    use kube_runtime::watcher;
    seen.reset();
    crate::heap::settle().await;
    let heap = Window::start();
    let started = Instant::now();
    let stop = CancellationToken::new();
    let targets: Vec<(Client, Option<usize>)> = match single {
        Some(client) => vec![(client.clone(), None)],
        None => members
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), Some(i)))
            .collect(),
    };
    let tasks: Vec<_> = targets
        .into_iter()
        .map(|(client, member)| {
            let seen = Arc::clone(seen);
            let stop = stop.clone();
            let controller =
                Controller::new(Api::<ConfigMap>::all(client), watcher::Config::default())
                    .with_config(KConfig::default().concurrency(8))
                    .graceful_shutdown_on(async move { stop.cancelled().await })
                    .run(
                        move |cm: Arc<ConfigMap>, seen: Arc<Seen>| async move {
                            let group = match member {
                                Some(i) => Some(i),
                                None => group_of(cm.metadata.namespace.as_deref(), "fleet-"),
                            };
                            seen.record(group, cm.metadata.name.as_deref().unwrap_or(""));
                            Ok::<_, kube_client::Error>(KAction::await_change())
                        },
                        |_, _, _| KAction::await_change(),
                        seen,
                    )
                    .for_each(|_| async {});
            tokio::spawn(controller)
        })
        .collect();
    let waited = seen.wait(objects).await;
    let outcome = Outcome {
        elapsed: started.elapsed(),
        retained: heap.retained(),
    };
    stop.cancel();
    for task in tasks {
        task.await.map_err(BenchError::msg)?;
    }
    waited.map(|()| outcome)
}

/// Seeds `per` ConfigMaps in namespace `ns` of each client, a few servers at once.
async fn seed_all(clients: &[(Client, String)], per: usize) -> Result<(), BenchError> {
    stream::iter(clients.iter().cloned())
        .map(|(client, ns)| async move { fixtures::seed(&client, &ns, per).await })
        .buffer_unordered(SEEDING)
        .try_for_each(|()| async { Ok(()) })
        .await
        .map_err(BenchError::msg)
}

/// Runs the scenario: `server_bin` is the `envtest-server` to start the
/// members and the one-cluster server from; `hub` is the bench's server.
pub async fn run(
    hub: &Client,
    server_bin: &std::path::Path,
    plan: &Plan,
    out: &mut Records,
) -> Result<(), BenchError> {
    let per = plan.fleet_objects;
    let largest = plan.fleet_clusters.iter().copied().max().unwrap_or(0);
    eprintln!("fleet: starting {largest} member servers and one for the one-cluster cases");
    let members = (0..largest)
        .map(|_| Server::start(server_bin))
        .collect::<Result<Vec<_>, _>>()?;
    let single = Server::start(server_bin)?;
    let seeds: Vec<_> = members
        .iter()
        .map(|s| (s.client.clone(), MEMBER_NS.to_owned()))
        .collect();
    seed_all(&seeds, per).await?;
    let clients: Vec<Client> = members.iter().map(|s| s.client.clone()).collect();
    let member_clients: Vec<Client> = members.iter().map(|s| s.member.clone()).collect();
    let seen = Seen::new(largest, per);
    let mut in_single = 0;
    for &clusters in &plan.fleet_clusters {
        // The one-cluster server gains namespaces up to this case's total.
        let more: Vec<_> = (in_single..clusters)
            .map(|k| (single.client.clone(), format!("fleet-{k}")))
            .collect();
        seed_all(&more, per).await?;
        in_single = in_single.max(clusters);
        let total = clusters * per;
        for (case, fleet) in [
            (format!("fleet: {clusters} × {per} objects"), true),
            (format!("one cluster: {total} objects"), false),
        ] {
            let m = |metric, unit, higher_is_better| Metric {
                scenario: "fleet",
                case: &case,
                metric,
                unit,
                higher_is_better,
            };
            let rate = m("reconciled once, all objects", "objects/s", true);
            let heap = m("retained heap once reconciled", "B/object", false);
            for run in 0..plan.runs {
                let order = if run % 2 == 0 {
                    [OURS, KUBE]
                } else {
                    [KUBE, OURS]
                };
                for side in order {
                    let (plain, member, one) = if fleet {
                        (&clients[..clusters], &member_clients[..clusters], None)
                    } else {
                        (&clients[..0], &member_clients[..0], Some(&single))
                    };
                    let o = if side == OURS {
                        ours(hub, member, one.map(|s| &s.member), &seen, total).await?
                    } else {
                        kube(plain, one.map(|s| &s.client), &seen, total).await?
                    };
                    out.push(&rate, side, total as f64 / o.elapsed.as_secs_f64());
                    out.push(&heap, side, o.retained as f64 / total as f64);
                    eprintln!(
                        "fleet {case} run {run} {side}: {:?}, retained {} B",
                        o.elapsed, o.retained
                    );
                }
            }
        }
    }
    Ok(())
}
