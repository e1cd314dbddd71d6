//! Leader election under faults with three managers on one server: freeze
//! the leader's lease writes, slow every replica's lease reads, partition
//! the leader, kill it mid-reconcile, stop it gracefully. After each fault
//! a new leader must lead within the lease duration plus a retry period,
//! and at no instant may two replicas reconcile (checked from a shared
//! timeline of reconcile starts and ends) or two hold leadership (checked
//! from the replicas' leadership flags and the Lease's holder history).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::{Action, Request};
use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::{PostParams, WatchEvent, WatchParams};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::gate::{GateLayer, GateState};
use crate::widget::{
    Journal, NS, Widget, WidgetError, WidgetReconciler, env_with_crd, wait_until, widget, widgets,
};

// A retry far shorter than the lease, so that "the successor starts at its
// next attempt, far sooner than the lease duration" has a margin over 5x
// (240 ms against 4 s), and a scheduling slack of 5x the 700 ms seen on a
// loaded 2-core machine.
const LEASE: Duration = Duration::from_secs(4);
const RENEW: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(200);
const LEASE_NAME: &str = "chaos-leader";
/// Scheduling slack on a loaded 2-core machine (5x the worst seen).
const SLACK: Duration = Duration::from_millis(3500);

/// Reconcile starts and ends and leadership changes of every replica.
#[derive(Default)]
struct Timeline {
    reconciles: Mutex<Vec<(String, Instant, Option<Instant>)>>,
    leading: Mutex<Vec<(String, bool, Instant)>>,
}

struct Tagged {
    id: String,
    timeline: Arc<Timeline>,
    inner: WidgetReconciler,
}

struct Ends(Arc<Timeline>, usize);
impl Drop for Ends {
    fn drop(&mut self) {
        self.0.reconciles.lock()[self.1].2 = Some(Instant::now());
    }
}

impl Reconciler for Tagged {
    type Error = WidgetError;
    async fn reconcile(&self, req: Request, ctx: CallInfo) -> Result<Action, WidgetError> {
        let index = {
            let mut r = self.timeline.reconciles.lock();
            r.push((self.id.clone(), Instant::now(), None));
            r.len() - 1
        };
        // Ends on return, on error, and when the reconcile is dropped
        // (aborted on lost leadership).
        let _end = Ends(Arc::clone(&self.timeline), index);
        self.inner.reconcile(req, ctx).await
    }
}

struct Replica {
    id: String,
    mgr: Manager,
    gate: Arc<GateState>,
    stop: CancellationToken,
    run: JoinHandle<Result<(), ManagerError>>,
}

async fn start_replica(env: &TestEnv, id: &str, timeline: &Arc<Timeline>) -> Replica {
    let gate = Arc::new(GateState::default());
    let client = kube_client::client::ClientBuilder::try_from(env.client_config())
        .unwrap()
        .with_layer(&GateLayer(Arc::clone(&gate)))
        .build();
    let config = LeaderElectionConfig::new(NS, LEASE_NAME, id)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY);
    let mgr = Manager::builder(client)
        .leader_election(config)
        .graceful_shutdown_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let mut inner = WidgetReconciler::new(&mgr, Arc::new(Journal::default()));
    inner.work = Duration::from_millis(150);
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .complete(Tagged {
            id: id.to_string(),
            timeline: Arc::clone(timeline),
            inner,
        })
        .unwrap();
    let mut leading = mgr.leader_elector().unwrap().subscribe();
    tokio::spawn({
        let (timeline, id) = (Arc::clone(timeline), id.to_string());
        async move {
            while leading.changed().await.is_ok() {
                let now = *leading.borrow();
                timeline
                    .leading
                    .lock()
                    .push((id.clone(), now, Instant::now()));
            }
        }
    });
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    Replica {
        id: id.to_string(),
        mgr,
        gate,
        stop,
        run,
    }
}

/// Waits for exactly one live replica to lead; returns its index and when
/// it was first seen leading.
async fn leader(replicas: &[Replica], within: Duration, what: &str) -> (usize, Instant) {
    let deadline = Instant::now() + within;
    loop {
        let leaders: Vec<usize> = (0..replicas.len())
            .filter(|i| !replicas[*i].run.is_finished() && replicas[*i].mgr.is_leader())
            .collect();
        assert!(leaders.len() <= 1, "{what}: two replicas lead: {leaders:?}");
        if let [one] = leaders[..] {
            return (one, Instant::now());
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no leader within {within:?}; replicas: {:?}",
            replicas
                .iter()
                .map(|r| (
                    &r.id,
                    r.run.is_finished(),
                    r.mgr.is_leader(),
                    r.mgr.leader_elector().and_then(|e| e.observed_leader())
                ))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// No two replicas' reconciles overlap in time.
fn assert_reconciles_never_overlap(timeline: &Timeline) {
    let mut spans: Vec<(String, Instant, Instant)> = timeline
        .reconciles
        .lock()
        .iter()
        .map(|(id, s, e)| (id.clone(), *s, e.unwrap_or_else(Instant::now)))
        .collect();
    spans.sort_by_key(|s| s.1);
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if b.1 >= a.2 {
                break;
            }
            assert!(
                a.0 == b.0,
                "{} reconciled {:?}..{:?} while {} reconciled from {:?}",
                a.0,
                a.1,
                a.2,
                b.0,
                b.1
            );
        }
    }
}

/// From the leadership flags: a replica starts leading only after the
/// previous one stopped.
fn assert_leadership_never_overlaps(timeline: &Timeline) {
    let mut current: Option<String> = None;
    for (id, leading, at) in timeline.leading.lock().iter() {
        if *leading {
            assert!(
                current.is_none(),
                "{id} led from {at:?} while {current:?} led"
            );
            current = Some(id.clone());
        } else if current.as_deref() == Some(id.as_str()) {
            current = None;
        }
    }
}

/// Drops replicas whose manager ended (each must have ended because it
/// lost the lease) and starts new ones until three run.
async fn top_up(
    env: &TestEnv,
    replicas: &mut Vec<Replica>,
    next_id: &mut usize,
    timeline: &Arc<Timeline>,
) {
    let mut live = Vec::new();
    for r in replicas.drain(..) {
        if r.run.is_finished() {
            let ended = r.run.await.unwrap();
            assert!(
                matches!(ended, Err(ManagerError::LeadershipLost(_))),
                "{} ended with {ended:?}",
                r.id
            );
        } else {
            live.push(r);
        }
    }
    *replicas = live;
    while replicas.len() < 3 {
        *next_id += 1;
        replicas.push(start_replica(env, &format!("r{next_id}"), timeline).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_election_under_faults_with_three_managers() {
    let env = env_with_crd().await;
    let client = env.client();
    let timeline = Arc::new(Timeline::default());
    // The Lease's holder history, polled.
    let holders: Arc<Mutex<Vec<(String, i32)>>> = Arc::default();
    let poll_stop = CancellationToken::new();
    // Every write of the Lease, from a watch (polling could miss a holder
    // that led only for a moment).
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let mut events = leases
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    let poller = tokio::spawn({
        let (holders, stop) = (Arc::clone(&holders), poll_stop.clone());
        async move {
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => return,
                    e = events.next() => e,
                };
                let lease = match event {
                    Some(Ok(WatchEvent::Added(l) | WatchEvent::Modified(l))) => l,
                    Some(Ok(_)) => continue,
                    other => panic!("lease watch ended: {other:?}"),
                };
                if lease.metadata.name.as_deref() != Some(LEASE_NAME) {
                    continue;
                }
                if let Some(spec) = lease.spec {
                    let h = spec.holder_identity.unwrap_or_default();
                    let t = spec.lease_transitions.unwrap_or(0);
                    let mut hs = holders.lock();
                    if hs.last().is_none_or(|(lh, lt)| *lh != h || *lt != t) {
                        hs.push((h, t));
                    }
                }
            }
        }
    });
    // Work on offer all the time: widgets touched every 50 ms.
    let names: Vec<String> = (0..4).map(|i| format!("le{i}")).collect();
    for name in &names {
        widgets(&client)
            .create(&PostParams::default(), &widget(name, &[("round", "0")]))
            .await
            .unwrap();
    }
    let churn_stop = CancellationToken::new();
    let churn = tokio::spawn({
        let (api, stop, names) = (widgets(&client), churn_stop.clone(), names.clone());
        async move {
            let mut round = 0u32;
            while !stop.is_cancelled() {
                round += 1;
                for name in &names {
                    if let Ok(mut w) = api.get(name).await {
                        w.spec.data = BTreeMap::from([("round".into(), round.to_string())]);
                        let _ = api.replace(name, &PostParams::default(), &w).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });

    let mut next_id = 0;
    let mut replicas = Vec::new();
    for _ in 0..3 {
        next_id += 1;
        replicas.push(start_replica(&env, &format!("r{next_id}"), &timeline).await);
    }
    let (mut current, _) = leader(&replicas, Duration::from_secs(20), "start").await;
    let takeover_limit = LEASE + RETRY + RETRY.mul_f64(0.2) + SLACK;
    let mut takeovers = Vec::new();

    // 1. Freeze the leader's renewals.
    replicas[current]
        .gate
        .freeze_lease_writes
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let cut = Instant::now();
    let old = replicas.remove(current);
    let err = tokio::time::timeout(RENEW + RETRY + SLACK, old.run)
        .await
        .expect("the frozen leader stops within the renew deadline")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ManagerError::LeadershipLost(_)), "{err}");
    leader(&replicas, takeover_limit, "after freezing renewals").await;
    takeovers.push(("frozen renewals", cut.elapsed()));
    top_up(&env, &mut replicas, &mut next_id, &timeline).await;
    (current, _) = leader(&replicas, takeover_limit, "after topping up").await;

    // 2. For two lease durations every replica's lease reads are answered
    // 600 ms late, with the state of when they were sent. Followers must
    // not take over early on such stale answers; the leader renews within
    // its deadline (a read slower than half the renew deadline would make
    // it step down, which is also allowed: then a successor must follow).
    for r in &replicas {
        r.gate
            .lease_read_delay_ms
            .store(600, std::sync::atomic::Ordering::SeqCst);
    }
    let slow_leader = replicas[current].id.clone();
    tokio::time::sleep(LEASE * 2).await;
    for r in &replicas {
        r.gate
            .lease_read_delay_ms
            .store(0, std::sync::atomic::Ordering::SeqCst);
    }
    top_up(&env, &mut replicas, &mut next_id, &timeline).await;
    (current, _) = leader(&replicas, takeover_limit, "after slow reads").await;
    let kept = replicas[current].id == slow_leader;
    takeovers.push((
        if kept {
            "slow reads (leader kept)"
        } else {
            "slow reads (leader changed)"
        },
        Duration::ZERO,
    ));

    // 3. Partition the leader from the server.
    replicas[current]
        .gate
        .partitioned
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let cut = Instant::now();
    let old = replicas.remove(current);
    let err = tokio::time::timeout(RENEW + RETRY + SLACK, old.run)
        .await
        .expect("the partitioned leader stops within the renew deadline")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ManagerError::LeadershipLost(_)), "{err}");
    leader(&replicas, takeover_limit, "after a partition").await;
    takeovers.push(("partition", cut.elapsed()));
    top_up(&env, &mut replicas, &mut next_id, &timeline).await;
    // top_up may drop replicas that ended: find the leader's index again.
    (current, _) = leader(&replicas, takeover_limit, "after topping up").await;

    // 4. Kill the leader mid-reconcile: no more requests from it, its
    // tasks dropped, the lease not released.
    let leader_id = replicas[current].id.clone();
    let killed = leader_id.clone();
    wait_until(
        Duration::from_secs(10),
        "the leader is mid-reconcile",
        || async {
            timeline
                .reconciles
                .lock()
                .iter()
                .any(|(id, _, end)| *id == leader_id && end.is_none())
        },
    )
    .await;
    let old = replicas.remove(current);
    old.gate
        .partitioned
        .store(true, std::sync::atomic::Ordering::SeqCst);
    old.run.abort();
    let cut = Instant::now();
    (current, _) = leader(&replicas, takeover_limit, "after killing the leader").await;
    takeovers.push(("kill", cut.elapsed()));

    // 5. A graceful stop releases the lease: the next leader starts at
    // its next attempt, far sooner than the lease duration.
    let old = replicas.remove(current);
    old.stop.cancel();
    let cut = Instant::now();
    let stopped = tokio::time::timeout(Duration::from_secs(10), old.run).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
    // Half the lease: 8x the next attempt (240 ms), and still short of
    // the lease, which a successor of an unreleased lease waits out.
    (_, _) = leader(&replicas, LEASE / 2, "after a graceful stop").await;
    takeovers.push(("graceful stop", cut.elapsed()));

    churn_stop.cancel();
    churn.await.unwrap();
    for r in replicas {
        r.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), r.run).await;
    }
    poll_stop.cancel();
    poller.await.unwrap();

    assert_reconciles_never_overlap(&timeline);
    assert_leadership_never_overlaps(&timeline);
    // The Lease: every change of holder (ignoring the empty holder of a
    // release) increments leaseTransitions.
    let history = holders.lock().clone();
    let held: Vec<&(String, i32)> = history.iter().filter(|(h, _)| !h.is_empty()).collect();
    for pair in held.windows(2) {
        if pair[0].0 != pair[1].0 {
            assert!(
                pair[1].1 > pair[0].1,
                "a new holder without a transition: {history:?}"
            );
        }
    }
    // The killed leader did not release: the next holder after it is a
    // successor, not the empty holder.
    let after_kill = history
        .iter()
        .skip_while(|(h, _)| *h != killed)
        .find(|(h, _)| *h != killed);
    assert!(
        after_kill.is_some_and(|(h, _)| !h.is_empty()),
        "the killed leader {killed} released the lease: {history:?}"
    );
    let distinct_changes = held.windows(2).filter(|p| p[0].0 != p[1].0).count();
    assert!(
        distinct_changes >= 4,
        "four handovers seen in the Lease: {history:?}"
    );
    let reconciles = timeline.reconciles.lock().len();
    eprintln!(
        "leader election under faults: takeovers {takeovers:?}; {reconciles} reconciles; \
         lease holders {history:?}"
    );
}
