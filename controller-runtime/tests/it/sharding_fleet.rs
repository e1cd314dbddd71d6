//! Fixtures for sharded controllers: a fleet of replicas (each a manager
//! with its own client, fault gate and shard membership) running a sharded
//! ConfigMap controller whose reconciles are recorded on one shared
//! timeline, and the checks made from that timeline.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use controller_runtime::__test_support::Ring;
use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::sharding::config::ShardMode;
use controller_runtime::sharding::controller::ShardedExt;
use controller_runtime::sharding::membership::Membership;
use controller_runtime::{Action, Request};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::PostParams;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::chaos::gate::{GateLayer, GateState};
use crate::sharding::{ring_config, steady_ring_config};

pub const NS: &str = "default";
/// What a reconcile records when its GET finds no object.
pub const GONE: &str = "<gone>";

/// One reconcile: who, which key, the `v` it read, when it started and
/// ended (`None` while running).
#[derive(Debug, Clone)]
pub struct Span {
    pub replica: String,
    pub key: String,
    pub seen: Option<String>,
    pub start: Instant,
    pub end: Option<Instant>,
}

/// Every replica's reconciles.
#[derive(Default)]
pub struct Timeline {
    pub spans: Mutex<Vec<Span>>,
}

struct Ends(Arc<Timeline>, usize);
impl Drop for Ends {
    fn drop(&mut self) {
        // Also on abort (a killed or fenced replica's reconcile).
        self.0.spans.lock()[self.1].end = Some(Instant::now());
    }
}

/// Reads the ConfigMap (a real GET) and records what it saw.
struct Recorder {
    replica: String,
    api: Api<ConfigMap>,
    timeline: Arc<Timeline>,
    work: Duration,
}

#[derive(Debug, thiserror::Error)]
#[error("read failed: {0}")]
pub struct ReadFailed(String);

impl controller_runtime::Terminal for ReadFailed {}

impl Reconciler for Recorder {
    type Error = ReadFailed;
    async fn reconcile(&self, req: Request, _: CallInfo) -> Result<Action, ReadFailed> {
        let index = {
            let mut spans = self.timeline.spans.lock();
            spans.push(Span {
                replica: self.replica.clone(),
                key: req.to_string(),
                seen: None,
                start: Instant::now(),
                end: None,
            });
            spans.len() - 1
        };
        let _end = Ends(Arc::clone(&self.timeline), index);
        let cm = self
            .api
            .get_opt(&req.name)
            .await
            .map_err(|e| ReadFailed(e.to_string()))?;
        tokio::time::sleep(self.work).await;
        let seen = cm.map_or_else(
            || GONE.to_string(),
            |cm| {
                cm.data
                    .and_then(|d| d.get("v").cloned())
                    .unwrap_or_default()
            },
        );
        self.timeline.spans.lock()[index].seen = Some(seen);
        Ok(Action::done())
    }
}

/// One replica.
pub struct Replica {
    pub id: String,
    pub mgr: Manager,
    pub membership: Membership,
    pub gate: Arc<GateState>,
    pub stop: CancellationToken,
    pub run: JoinHandle<Result<(), ManagerError>>,
}

impl Replica {
    /// Kills it: no more requests leave it, its tasks are dropped, its
    /// shard Lease is not deleted.
    pub fn kill(&self) {
        self.gate.partitioned.store(true, Ordering::SeqCst);
        self.run.abort();
    }
}

/// Starts replica `id` of ring `ring` in `mode`, with two workers and
/// `work` per reconcile, on the steady ring timings
/// ([`steady_ring_config`]): for tests that need a ring to keep running,
/// not to time a Lease's expiry.
pub async fn start_steady(
    env: &TestEnv,
    ring: &str,
    id: &str,
    timeline: &Arc<Timeline>,
    work: Duration,
    mode: ShardMode,
) -> Replica {
    let setup = Setup {
        mode,
        steady: true,
        ..Setup::default()
    };
    start_replica_with(env, ring, id, timeline, 2, work, setup).await
}

/// Starts replica `id` of ring `ring` in `mode`; in label mode its
/// ConfigMap cache selects its own shard label.
pub async fn start_replica_in(
    env: &TestEnv,
    ring: &str,
    id: &str,
    timeline: &Arc<Timeline>,
    workers: usize,
    work: Duration,
    mode: ShardMode,
) -> Replica {
    let setup = Setup {
        mode,
        ..Setup::default()
    };
    start_replica_with(env, ring, id, timeline, workers, work, setup).await
}

/// How [`start_replica_with`] starts a replica.
#[derive(Clone, Default)]
pub struct Setup {
    pub mode: ShardMode,
    /// Serve `/readyz` and `/metrics` on free local ports
    /// (`Manager::health_addr`, `Manager::metrics_addr`).
    pub serve: bool,
    /// Talk through this client instead of the admin one behind a fault
    /// gate (then [`Replica::kill`] only aborts the manager).
    pub client: Option<kube_client::Client>,
    /// The manager's graceful shutdown timeout (default 5 s).
    pub graceful: Option<Duration>,
    /// The ring timings of [`steady_ring_config`] (a killed replica is
    /// dropped after [`STEADY_LEASE`](crate::sharding::STEADY_LEASE))
    /// instead of [`ring_config`]'s short ones.
    pub steady: bool,
}

/// Starts replica `id` of ring `ring` as `setup` says.
pub async fn start_replica_with(
    env: &TestEnv,
    ring: &str,
    id: &str,
    timeline: &Arc<Timeline>,
    workers: usize,
    work: Duration,
    setup: Setup,
) -> Replica {
    let gate = Arc::new(GateState::default());
    let client = setup.client.unwrap_or_else(|| {
        kube_client::client::ClientBuilder::try_from(env.client_config())
            .unwrap()
            .with_layer(&GateLayer(Arc::clone(&gate)))
            .build()
    });
    let config = if setup.steady {
        steady_ring_config(ring, id)
    } else {
        ring_config(ring, id)
    };
    let config = config.mode(setup.mode);
    let mut builder = Manager::builder(client.clone())
        .graceful_shutdown_timeout(setup.graceful.unwrap_or(Duration::from_secs(5)))
        .cache_options::<ConfigMap>(config.informer_options());
    if setup.serve {
        let local: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
        builder = builder.health_addr(local).metrics_addr(local);
    }
    let mgr = builder.build().await.unwrap();
    let membership = Membership::new(client.clone(), config).unwrap();
    mgr.controller::<ConfigMap>()
        .named("sharded-cm")
        .max_concurrent_reconciles(workers)
        .sharded(&membership)
        .complete(Recorder {
            replica: id.to_string(),
            api: Api::namespaced(client, NS),
            timeline: Arc::clone(timeline),
            work,
        })
        .unwrap();
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    Replica {
        id: id.to_string(),
        mgr,
        membership,
        gate,
        stop,
        run,
    }
}

/// ConfigMap `name` with `v`.
pub fn object(name: &str, v: &str) -> ConfigMap {
    let mut cm = crate::config_map(NS, name);
    cm.data = Some(BTreeMap::from([("v".to_string(), v.to_string())]));
    cm
}

/// Sets `v` on every named ConfigMap (creating it when missing; a write
/// that meets a concurrent one, such as a sharder's relabelling, is retried
/// on the fresh object).
pub async fn write_all(api: &Api<ConfigMap>, names: &[String], v: &str) {
    for name in names {
        let cm = object(name, v);
        for attempt in 0.. {
            let result = match api.get_opt(name).await.unwrap() {
                Some(mut current) => {
                    current.data = cm.data.clone();
                    api.replace(name, &PostParams::default(), &current).await
                }
                None => api.create(&PostParams::default(), &cm).await,
            };
            match result {
                Ok(_) => break,
                Err(kube_client::Error::Api(s)) if s.code == 409 && attempt < 20 => {}
                Err(e) => panic!("writing {name}: {e}"),
            }
        }
    }
}

/// The `v` each key's last finished reconcile saw.
pub fn last_seen(timeline: &Timeline) -> BTreeMap<String, (String, String)> {
    let mut last: BTreeMap<String, (Instant, String, String)> = BTreeMap::new();
    for s in timeline.spans.lock().iter() {
        if let (Some(end), Some(seen)) = (s.end, &s.seen)
            && last.get(&s.key).is_none_or(|(e, _, _)| *e <= end)
        {
            last.insert(s.key.clone(), (end, s.replica.clone(), seen.clone()));
        }
    }
    last.into_iter().map(|(k, (_, r, v))| (k, (r, v))).collect()
}

/// `Err` names a key two replicas reconciled at once.
pub fn check_no_overlap(timeline: &Timeline) -> Result<(), String> {
    let mut by_key: BTreeMap<String, Vec<(Instant, Instant, String)>> = BTreeMap::new();
    let now = Instant::now();
    for s in timeline.spans.lock().iter() {
        by_key.entry(s.key.clone()).or_default().push((
            s.start,
            s.end.unwrap_or(now),
            s.replica.clone(),
        ));
    }
    for (key, mut spans) in by_key {
        spans.sort();
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                if b.0 >= a.1 {
                    break;
                }
                if a.2 != b.2 {
                    return Err(format!(
                        "{key} reconciled by {} ({:?}..{:?}) and {} (from {:?}) at once",
                        a.2, a.0, a.1, b.2, b.0
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The owner of each key on a ring of `members`.
pub fn owners(members: &[&str], names: &[String]) -> BTreeMap<String, String> {
    let ring = Ring::new(members.iter().copied());
    names
        .iter()
        .map(|n| {
            let key = format!("{NS}/{n}");
            let owner = ring.owner(&key).unwrap_or_default().to_string();
            (key, owner)
        })
        .collect()
}

/// Waits until every named key's last reconcile saw `v`; returns how long
/// it took.
pub async fn all_reconciled(
    timeline: &Timeline,
    names: &[String],
    v: &str,
    within: Duration,
) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        let last = last_seen(timeline);
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| {
                last.get(&format!("{NS}/{n}"))
                    .is_none_or(|(_, seen)| seen != v)
            })
            .collect();
        if missing.is_empty() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > within {
            return Err(format!(
                "not reconciled at v={v} within {within:?}: {missing:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
