//! Two candidates competing for one Lease on a real (in-process) server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_runtime::leaderelection::{
    LeaderElectionConfig, LeaderElectionError, LeaderElector,
};
use envtest::{FailureRule, TestEnv};
use k8s_openapi::api::coordination::v1::Lease;
use kube_client::Api;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::eventually;

// Chosen so that every bound asserted below is at least 5x the time the
// event takes (a retry of 200 ms + 20% jitter against a lease of 4 s), so
// that a loaded machine cannot turn a verdict. The exact timing (to the
// millisecond) is pinned by the paused-clock unit tests of the elector.
const LEASE: Duration = Duration::from_secs(4);
const RENEW: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(200);

type Timeline = Arc<Mutex<Vec<(&'static str, bool, Instant)>>>;

struct Candidate {
    elector: LeaderElector,
    cancel: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), LeaderElectionError>>,
}

impl Candidate {
    /// Cancels the candidate and waits for its run to end cleanly.
    async fn stop(self) {
        self.cancel.cancel();
        self.run.await.unwrap().unwrap();
    }
}

fn start(env: &TestEnv, id: &'static str, release: bool, timeline: &Timeline) -> Candidate {
    let config = LeaderElectionConfig::new(env.namespace(), "it-lock", id)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
        .release_on_cancel(release);
    let (t1, t2) = (timeline.clone(), timeline.clone());
    let elector = LeaderElector::builder(env.client(), config)
        .on_started_leading(move || t1.lock().push((id, true, Instant::now())))
        .on_stopped_leading(move || t2.lock().push((id, false, Instant::now())))
        .build()
        .unwrap();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (e, c) = (elector.clone(), cancel.clone());
        async move { e.run(c).await }
    });
    Candidate {
        elector,
        cancel,
        run,
    }
}

fn assert_never_two_leaders(timeline: &Timeline) {
    let mut leader: Option<&str> = None;
    for (id, started, _) in timeline.lock().iter() {
        if *started {
            assert!(
                leader.is_none(),
                "{id} started leading while {leader:?} led"
            );
            leader = Some(id);
        } else {
            assert_eq!(leader, Some(*id));
            leader = None;
        }
    }
}

fn started_at(timeline: &Timeline, id: &str) -> Option<Instant> {
    timeline
        .lock()
        .iter()
        .find(|(i, s, _)| *i == id && *s)
        .map(|(_, _, t)| *t)
}

fn stopped_at(timeline: &Timeline, id: &str) -> Option<Instant> {
    timeline
        .lock()
        .iter()
        .find(|(i, s, _)| *i == id && !*s)
        .map(|(_, _, t)| *t)
}

async fn lease(env: &TestEnv) -> Lease {
    Api::<Lease>::namespaced(env.client(), env.namespace())
        .get("it-lock")
        .await
        .unwrap()
}

async fn first_leader(a: &Candidate, b: &Candidate) -> &'static str {
    eventually(Duration::from_secs(10), "a leader", || async {
        match (a.elector.is_leader(), b.elector.is_leader()) {
            (true, false) => Some("a"),
            (false, true) => Some("b"),
            (true, true) => panic!("both lead"),
            (false, false) => None,
        }
    })
    .await
}

/// Starts candidates "a" and "b" and waits for one to lead: (its id, the
/// leader, the follower).
async fn leader_and_follower(
    env: &TestEnv,
    release: bool,
    timeline: &Timeline,
) -> (&'static str, Candidate, Candidate) {
    let a = start(env, "a", release, timeline);
    let b = start(env, "b", release, timeline);
    let first = first_leader(&a, &b).await;
    if first == "a" {
        (first, a, b)
    } else {
        (first, b, a)
    }
}

#[tokio::test]
async fn one_leads_and_successor_takes_over_at_once_after_release() {
    let env = TestEnv::start().await.unwrap();
    let timeline = Timeline::default();
    let (first, leader, follower) = leader_and_follower(&env, true, &timeline).await;
    // Several renewals later the follower still waits.
    tokio::time::sleep(LEASE * 2).await;
    assert!(leader.elector.is_leader() && !follower.elector.is_leader());
    assert_eq!(follower.elector.observed_leader().as_deref(), Some(first));
    let before = lease(&env).await.spec.unwrap();
    assert_eq!(before.holder_identity.as_deref(), Some(first));

    let released = Instant::now();
    leader.cancel.cancel();
    leader.run.await.unwrap().unwrap();
    assert!(!leader.elector.is_leader());
    eventually(LEASE, "the follower to lead after the release", || async {
        follower.elector.is_leader().then_some(())
    })
    .await;
    // Released: no need to wait out the lease duration.
    assert!(released.elapsed() < LEASE, "took {:?}", released.elapsed());
    let after = lease(&env).await.spec.unwrap();
    assert_ne!(after.holder_identity, before.holder_identity);
    assert_eq!(
        after.lease_transitions,
        Some(before.lease_transitions.unwrap() + 1)
    );
    assert_never_two_leaders(&timeline);
    follower.stop().await;
    assert_eq!(
        lease(&env).await.spec.unwrap().holder_identity.as_deref(),
        Some("")
    );
}

#[tokio::test]
async fn successor_waits_out_the_lease_when_the_leader_vanishes() {
    let env = TestEnv::start().await.unwrap();
    let timeline = Timeline::default();
    let (first, leader, follower) = leader_and_follower(&env, false, &timeline).await;
    tokio::time::sleep(RETRY * 3).await;
    // The leader disappears without releasing (a crashed pod).
    let vanished = Instant::now();
    leader.stop().await;
    let abandoned = lease(&env).await.spec.unwrap();
    assert_eq!(abandoned.holder_identity.as_deref(), Some(first));
    eventually(LEASE * 3, "the follower to take over", || async {
        follower.elector.is_leader().then_some(())
    })
    .await;
    let took = vanished.elapsed();
    // The successor's acquireTime is at least one lease duration after the
    // leader's last renewTime (both stamped by the writers, so this holds
    // however slowly the machine runs) ...
    let taken = lease(&env).await.spec.unwrap();
    let gap = taken
        .acquire_time
        .unwrap()
        .0
        .duration_since(abandoned.renew_time.unwrap().0);
    assert!(
        gap >= jiff::SignedDuration::try_from(LEASE).unwrap(),
        "taken over {gap:?} after the last renewal"
    );
    assert_eq!(
        taken.lease_transitions,
        Some(abandoned.lease_transitions.unwrap() + 1)
    );
    // ... and within the lease duration plus a couple of retries.
    assert!(
        took <= LEASE + RETRY * 2 + Duration::from_secs(1),
        "took over too late: {took:?}"
    );
    assert_never_two_leaders(&timeline);
    follower.stop().await;
}

#[tokio::test]
async fn leader_that_cannot_renew_stops_before_the_other_starts() {
    if envtest::skip_on_existing_cluster("faults") {
        return;
    }
    let env = TestEnv::start().await.unwrap();
    let timeline = Timeline::default();
    let (first, leader, follower) = leader_and_follower(&env, true, &timeline).await;
    let second = if first == "a" { "b" } else { "a" };
    tokio::time::sleep(RETRY * 2).await;
    // Every lease request fails: the leader cannot renew.
    env.faults()
        .fail_next(FailureRule::new(10_000, 500).path_contains("/leases/it-lock"));
    let cut = Instant::now();
    let err = leader.run.await.unwrap().unwrap_err();
    assert!(
        matches!(err, LeaderElectionError::LostLease { .. }),
        "{err}"
    );
    let stopped = stopped_at(&timeline, first).unwrap();
    // Within the renew deadline of the last renewal (at most RENEW after
    // the cut), with 2 s (10 retries) for scheduling.
    assert!(
        stopped.duration_since(cut) <= RENEW + Duration::from_secs(2),
        "stopped {:?} after the cut",
        stopped.duration_since(cut)
    );
    env.faults().clear_failures();
    eventually(LEASE * 3, "the other candidate to lead", || async {
        follower.elector.is_leader().then_some(())
    })
    .await;
    assert!(started_at(&timeline, second).unwrap() > stopped);
    assert_never_two_leaders(&timeline);
    follower.stop().await;
}

#[tokio::test]
async fn candidates_sampled_continuously_never_lead_together() {
    let env = TestEnv::start().await.unwrap();
    let timeline = Timeline::default();
    let mut candidates = vec![
        start(&env, "a", true, &timeline),
        start(&env, "b", true, &timeline),
    ];
    let watchers: Vec<_> = candidates.iter().map(|c| c.elector.subscribe()).collect();
    let overlap = Arc::new(Mutex::new(0usize));
    let sampler = tokio::spawn({
        let overlap = overlap.clone();
        async move {
            for _ in 0..250 {
                if watchers.iter().filter(|w| *w.borrow()).count() > 1 {
                    *overlap.lock() += 1;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    // Hand leadership over twice: cancel the leader, start a fresh candidate.
    for (round, id) in ["c", "d"].into_iter().enumerate() {
        let idx = eventually(Duration::from_secs(10), "a leader", || async {
            candidates.iter().position(|c| c.elector.is_leader())
        })
        .await;
        let old = candidates.remove(idx);
        old.stop().await;
        candidates.push(start(&env, id, true, &timeline));
        let _ = round;
    }
    eventually(Duration::from_secs(10), "a leader", || async {
        candidates
            .iter()
            .any(|c| c.elector.is_leader())
            .then_some(())
    })
    .await;
    sampler.await.unwrap();
    assert_eq!(*overlap.lock(), 0);
    assert_never_two_leaders(&timeline);
    assert!(lease(&env).await.spec.unwrap().lease_transitions.unwrap() >= 2);
    for c in candidates {
        c.stop().await;
    }
}

/// The Lease lock itself against the server: each operation, its answers
/// and how each failure is typed (409 is a lost race, anything else an API
/// error naming the operation and the lease).
#[tokio::test]
async fn the_api_lease_lock_reads_writes_and_types_its_failures() {
    use controller_runtime::leaderelection::{ApiLeaseLock, LeaseLock};
    if envtest::skip_on_existing_cluster("faults") {
        return;
    }
    let env = TestEnv::start().await.unwrap();
    let lock = ApiLeaseLock::new(env.client(), "default", "lock-test");
    assert_eq!(lock.describe(), "default/lock-test");
    assert!(lock.get().await.unwrap().is_none(), "no lease yet");

    let mut lease = Lease::default();
    lease.metadata.name = Some("lock-test".into());
    lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some("a".into()),
        ..Default::default()
    });
    // Updating a lease that does not exist: a 404, typed as an API error.
    match lock.update(lease.clone()).await {
        Err(LeaderElectionError::Api { op, lease, source }) => {
            assert_eq!((op, lease.as_str()), ("update", "default/lock-test"));
            assert!(matches!(source, kube_client::Error::Api(s) if s.code == 404));
        }
        other => panic!("expected an API error, got {other:?}"),
    }
    let created = lock.create(lease.clone()).await.unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some("lock-test"));
    let got = lock.get().await.unwrap().expect("the lease");
    assert_eq!(
        got.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("a")
    );
    // Creating it again: AlreadyExists, a lost race.
    assert!(matches!(
        lock.create(lease.clone()).await,
        Err(LeaderElectionError::Conflict { lease }) if lease == "default/lock-test"
    ));
    // An update from the version read succeeds; a stale one conflicts.
    let mut next = created.clone();
    next.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let updated = lock.update(next.clone()).await.unwrap();
    assert_eq!(
        updated.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("b")
    );
    assert!(matches!(
        lock.update(next).await,
        Err(LeaderElectionError::Conflict { .. })
    ));
    // A failing read is an API error naming the operation.
    env.faults()
        .fail_next(FailureRule::new(1, 500).path_contains("/leases/lock-test"));
    assert!(matches!(
        lock.get().await,
        Err(LeaderElectionError::Api { op: "get", .. })
    ));
}
