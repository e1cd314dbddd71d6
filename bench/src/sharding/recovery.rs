//! The sharding scenario's recovery case: three replicas share N objects;
//! the one holding the sharder Lease is killed (every request it makes
//! fails from then on and its manager is dropped, so its shard Lease is
//! left to expire, as after `kill -9`), and the survivors are timed until
//! the ring dropped it and until every object it owned was reconciled by one
//! of them, with no change made to any object. Label mode (the new sharder
//! relabels the objects; each lands in its new owner's cache as an add) and
//! filter mode (keys that moved in are queued from the survivors' caches).
//! The reconcile does no work, so the times are the framework's: lease
//! expiry, the new sharder's election and look, relabelling, the caches.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use controller_runtime::sharding::config::ShardMode;
use futures::future::BoxFuture;
use kube_client::Client;
use tower::{Layer, Service};

use super::{Done, NAMESPACE, Replica, config, settled, start_with};
use crate::fixtures;
use crate::record::{Metric, OURS, Records};
use crate::{BenchError, Plan};

const REPLICAS: usize = 3;
const LIMIT: Duration = Duration::from_secs(300);
/// How often the survivors' progress is sampled.
const POLL: Duration = Duration::from_millis(10);

/// Fails every request once its switch is on: the killed replica's
/// network.
#[derive(Clone)]
struct Cut(Arc<AtomicBool>);

impl<S> Layer<S> for Cut {
    type Service = CutService<S>;
    fn layer(&self, inner: S) -> CutService<S> {
        CutService {
            inner,
            cut: Arc::clone(&self.0),
        }
    }
}

#[derive(Clone)]
struct CutService<S> {
    inner: S,
    cut: Arc<AtomicBool>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> Service<http::Request<B>> for CutService<S>
where
    S: Service<http::Request<B>> + Send,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if self.cut.load(Ordering::SeqCst) {
            return Box::pin(async { Err("killed: the replica's network is cut".into()) });
        }
        let answer = self.inner.call(req);
        Box::pin(async move { answer.await.map_err(Into::into) })
    }
}

/// One replica and its kill switch.
struct Member {
    replica: Replica,
    done: Arc<Done>,
    cut: Arc<AtomicBool>,
}

/// What one kill took, from the kill.
struct Recovery {
    /// Until no survivor's ring held the killed replica.
    dropped: Duration,
    /// Until every object it owned was reconciled by a survivor.
    reconciled: Duration,
    /// How many objects it owned.
    moved: usize,
}

/// Every object of the namespace reconciled by some member.
fn reconciled(members: &[&Member]) -> HashSet<String> {
    members
        .iter()
        .flat_map(|m| m.done.names.lock().iter().cloned().collect::<Vec<_>>())
        .collect()
}

async fn wait_until(what: &str, mut ok: impl FnMut() -> bool) -> Result<(), BenchError> {
    let deadline = Instant::now() + LIMIT;
    while !ok() {
        if Instant::now() > deadline {
            return Err(BenchError(format!("recovery: {what} within {LIMIT:?}")));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// Starts three replicas of a new ring in `mode` (each with its own client
/// to `server`), waits until they share every object and reconciled each
/// once, kills the sharder's replica and times the survivors.
async fn once(
    client: &Client,
    server: &kube_client::Config,
    mode: ShardMode,
    objects: usize,
    run: usize,
) -> Result<Recovery, BenchError> {
    let ring = format!("recovery-{}-{run}", mode_name(mode));
    let mut members = Vec::new();
    for i in 0..REPLICAS {
        let cut = Arc::new(AtomicBool::new(false));
        let own = kube_client::client::ClientBuilder::try_from(server.clone())
            .map_err(BenchError::msg)?
            .with_layer(&Cut(Arc::clone(&cut)))
            .build();
        let done = Done::with_work(Duration::ZERO);
        let cfg = config(&ring, &format!("{ring}-{i}")).mode(mode);
        let replica = start_with(&own, cfg, &done).await?;
        members.push(Member { replica, done, cut });
    }
    let result = measure(client, mode, &ring, &members, objects).await;
    for m in &members {
        m.cut.store(true, Ordering::SeqCst);
        m.replica.stop.cancel();
    }
    for m in members {
        let _ = tokio::time::timeout(Duration::from_secs(30), m.replica.task).await;
    }
    result
}

async fn measure(
    client: &Client,
    mode: ShardMode,
    ring: &str,
    members: &[Member],
    objects: usize,
) -> Result<Recovery, BenchError> {
    let all: Vec<&Member> = members.iter().collect();
    wait_until("the ring did not settle", || {
        members.iter().all(|m| {
            let view = m.replica.membership.view();
            view.settled() && view.members().len() == REPLICAS
        })
    })
    .await?;
    if mode == ShardMode::Label {
        let replicas: Vec<&Replica> = members.iter().map(|m| &m.replica).collect();
        settled(client, ring, &replicas, objects).await?;
    }
    wait_until("not every object was reconciled", || {
        reconciled(&all).len() >= objects
    })
    .await?;
    wait_until("no replica holds the sharder Lease", || {
        members.iter().any(|m| m.replica.membership.is_sharder())
    })
    .await?;
    let (victim, survivors): (Vec<&Member>, Vec<&Member>) = members
        .iter()
        .partition(|m| m.replica.membership.is_sharder());
    let victim = victim
        .first()
        .ok_or_else(|| BenchError::msg("recovery: no sharder"))?;
    let view = victim.replica.membership.view();
    let owned: Vec<String> = (0..objects)
        .map(fixtures::name)
        .filter(|n| view.owner(&format!("{NAMESPACE}/{n}")) == Some(victim.replica.id.as_str()))
        .collect();
    for s in &survivors {
        s.done.reset(0);
    }
    victim.cut.store(true, Ordering::SeqCst);
    victim.replica.task.abort();
    let killed = Instant::now();
    let mut dropped = None;
    wait_until("the survivors did not take every object over", || {
        if dropped.is_none()
            && survivors.iter().all(|s| {
                !s.replica
                    .membership
                    .view()
                    .members()
                    .contains(&victim.replica.id)
            })
        {
            dropped = Some(killed.elapsed());
        }
        let seen = reconciled(&survivors);
        dropped.is_some() && owned.iter().all(|n| seen.contains(n))
    })
    .await?;
    Ok(Recovery {
        dropped: dropped.unwrap_or_default(),
        reconciled: killed.elapsed(),
        moved: owned.len(),
    })
}

fn mode_name(mode: ShardMode) -> &'static str {
    match mode {
        ShardMode::Label => "label",
        ShardMode::Filter => "filter",
    }
}

/// Runs the case in both modes; each replica talks to the server `server`
/// describes through a client of its own.
pub async fn run(
    client: &Client,
    server: &kube_client::Config,
    plan: &Plan,
    out: &mut Records,
) -> Result<(), BenchError> {
    let objects = plan.sharding_objects;
    for mode in [ShardMode::Label, ShardMode::Filter] {
        let case = format!(
            "{objects} objects, {REPLICAS} replicas, the sharder's replica killed, {} mode, 2 s lease",
            mode_name(mode)
        );
        let m = |metric| Metric {
            scenario: "sharding",
            case: &case,
            metric,
            unit: "s",
            higher_is_better: false,
        };
        let dropped = m("killed replica dropped from the ring");
        let reconciled = m("its objects all reconciled elsewhere");
        for run in 0..plan.runs {
            let r = once(client, server, mode, objects, run).await?;
            out.push(&dropped, OURS, r.dropped.as_secs_f64());
            out.push(&reconciled, OURS, r.reconciled.as_secs_f64());
            eprintln!(
                "sharding {case} run {run}: dropped after {:.2} s, its {} objects reconciled elsewhere after {:.2} s",
                r.dropped.as_secs_f64(),
                r.moved,
                r.reconciled.as_secs_f64()
            );
        }
    }
    Ok(())
}
